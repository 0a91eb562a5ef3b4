"""The analysis reads the schema `lins schema` prints (analysis/lins_analysis/schema.json): its tables, units, and the sample."""

import glob
import os

import pandas as pd

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
