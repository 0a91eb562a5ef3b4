"""The analysis reads the schema `lins schema` prints (analysis/lins_schema/schema.json, through lins_schema): its
tables, units, the model presets, the FLOPs formula, and the sample."""

import glob
import os
from types import SimpleNamespace

import pandas as pd
import pytest

import lins_schema
from lins_analysis import schema


def test_schema_json_has_every_table_with_units():
    """schema.json (what `lins schema` prints) names each table's columns once, with units the names promise."""
    for table in ("step", "plan", "comm", "profile"):
        cols = schema.columns(table)
        assert cols and len(cols) == len(set(cols)), table
    u = schema.units("step")
    assert u["step_time_s"] == "s" and u["peak_mem_bytes"] == "bytes" and u["mfu"] == "fraction"
    assert u["peak_tflops"] == "TFLOP/s" and u["strategy"] == ""
    assert schema.units("comm")["busbw_gbps"] == "GB/s"
    assert len(schema.STEP_COLUMNS) > 40


def test_text_columns_and_factors_are_step_columns():
    assert set(schema.STEP_TEXT_COLUMNS) <= set(schema.STEP_COLUMNS)
    assert set(schema.PLAN_FACTORS) <= set(schema.STEP_COLUMNS)
    for op in schema.OPS:
        assert f"{op}_bytes" in schema.STEP_COLUMNS and f"pred_{op}_bytes" in schema.STEP_COLUMNS


def test_sample_csv_written_by_the_binary_has_the_schema(sample_dir):
    steps = [p for p in glob.glob(os.path.join(sample_dir, "**", "*.csv"), recursive=True)
             if schema.looks_like_step_csv(pd.read_csv(p, nrows=0).columns)]
    assert steps, "data/sample/ has CSV files but no step CSV"
    for p in steps:
        assert list(pd.read_csv(p, nrows=0).columns) == schema.STEP_COLUMNS, p


def test_op_names_are_normalised():
    assert schema.normalise_op("AllGather") == "all_gather"
    assert schema.normalise_op("reduce-scatter") == "reduce_scatter"
    assert schema.normalise_op("all_reduce") == "all_reduce"
    assert schema.normalise_op("Bcast") == "broadcast"
    assert schema.normalise_op("send") == "send"


def test_the_analysis_reads_the_one_loaded_schema():
    assert schema.SCHEMA is lins_schema.SCHEMA
    assert schema.STEP_COLUMNS == lins_schema.columns("step")


def test_models_are_the_binary_presets():
    assert list(lins_schema.MODELS) == ["tiny", "small", "llama-7b", "llama-13b", "llama-30b"]
    # LLaMA-1 7B: its published shape and parameter count
    assert lins_schema.model("llama-7b") == {"hidden": 4096, "layers": 32, "heads": 32, "ffn": 11008, "vocab": 32000,
                                             "params": 6_738_415_616}
    for name, m in lins_schema.MODELS.items():
        h, f, V, L = m["hidden"], m["ffn"], m["vocab"], m["layers"]
        assert m["params"] == L * (4 * h * h + 3 * h * f + 2 * h) + 2 * V * h + h, name
        assert h % m["heads"] == 0, name
    with pytest.raises(ValueError, match="valid models: tiny, small"):
        lins_schema.model("llama-65b")


def megatron(m, s, causal=False):
    """docs/method.md's formula, written out here as the reference the schema's terms must reproduce."""
    L, h, V = m["layers"], m["hidden"], m["vocab"]
    return 72.0 * L * h * h * (1.0 + s / ((12.0 if causal else 6.0) * h) + V / (12.0 * L * h))


@pytest.mark.parametrize("seq", [1, 128, 2048, 4096])
def test_flops_per_token_from_the_schema_terms(seq):
    for name, m in lins_schema.MODELS.items():
        for causal in (False, True):
            want = megatron(m, seq, causal)
            assert lins_schema.flops_per_token(m, seq, causal=causal) == pytest.approx(want, rel=1e-12), name
    # an object with the attributes (lins_torch.ModelConfig) gives the same as the mapping
    m = lins_schema.model("llama-7b")
    dims = SimpleNamespace(layers=m["layers"], hidden=m["hidden"], vocab=m["vocab"])
    assert lins_schema.flops_per_token(dims, seq) == lins_schema.flops_per_token(m, seq)


def test_presets_come_from_the_binarys_table():
    import lins_schema
    names = [row["name"] for row in lins_schema.SCHEMA["presets"]]
    assert names[:4] == ["ddp", "zero1", "zero2", "zero3"] and {"mics", "zeropp", "fsdp", "hsdp"} <= set(names)
    assert lins_schema.preset_factors("zero1", 8, 16) == {"p": (1, 1), "g": (1, 1), "os": (8, 16), "hpz": 0}
    assert lins_schema.preset_factors("zeropp", 8, 16)["hpz"] == 8
    assert lins_schema.preset_factors("zeropp:4", 8, 16)["hpz"] == 4
    assert lins_schema.preset_factors("mics:16", 8, 16)["p"] == (8, 2)
    assert lins_schema.preset_factors("hsdp:4", 8, 16)["os"] == (4, 1)
    assert lins_schema.preset_factors("fsdp:2", 8, 16) == {"p": (8, 16), "g": (8, 16), "os": (8, 16), "hpz": 2}
    from lins_analysis import style
    assert all(style.STRATEGY_LABELS[n] for n in names)
