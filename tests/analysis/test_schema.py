"""The analysis mirrors the C++ CSV schema: fails when src/core/results_schema.h changes without analysis/."""

import glob
import os
import re

import pandas as pd
import pytest

from lins_analysis import schema


def cpp_step_columns(repo):
    with open(os.path.join(repo, "src", "core", "results_schema.h"), encoding="utf-8") as f:
        text = f.read()
    body = text[text.index("step_csv_columns()"):]
    body = body[:body.index("return cols;")]
    return re.findall(r'\{\s*"([A-Za-z0-9_]+)"\s*,', body)


def test_step_columns_match_cpp_header(repo):
    cpp = cpp_step_columns(repo)
    assert len(cpp) > 40, "could not parse step_csv_columns() in results_schema.h"
    only_cpp = [c for c in cpp if c not in schema.STEP_COLUMNS]
    only_py = [c for c in schema.STEP_COLUMNS if c not in cpp]
    assert not only_cpp and not only_py, f"columns only in C++: {only_cpp}; only in analysis: {only_py}"
    assert cpp == schema.STEP_COLUMNS, "same columns, different order: update analysis/lins_analysis/schema.py"


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


def read_source(repo, *parts):
    path = os.path.join(repo, *parts)
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_profile_columns_match_the_cost_model(repo):
    """The bandwidth profile the planner reads (src/core/cost_model.h) is the one Fig. 3 draws."""
    text = read_source(repo, "src", "core", "cost_model.h")
    m = re.search(r'kProfileHeader\s*=\s*"([^"]+)"', text)
    if not m:
        pytest.skip("src/core/cost_model.h has no kProfileHeader yet")
    assert m.group(1).split(",") == schema.PROFILE_COLUMNS


def test_comm_csv_columns_match_cmd_comm(repo):
    """`lins comm --csv` columns, as src/apps/cmd_comm.cpp writes them."""
    text = read_source(repo, "src", "apps", "cmd_comm.cpp")
    if "csv_columns() {" not in text:
        pytest.skip("lins comm --csv is not built yet (placeholder cmd_comm.cpp)")
    body = text[text.index("csv_columns() {"):]
    body = body[:body.index("}")]
    assert re.findall(r'"([A-Za-z0-9_]+)"', body) == schema.COMM_CSV_COLUMNS


def test_plan_csv_columns_match_cmd_plan(repo):
    """`lins plan --csv` columns, as src/apps/cmd_plan.cpp writes them (Table IV reads them)."""
    text = read_source(repo, "src", "apps", "cmd_plan.cpp")
    if "csv_columns() {" not in text:
        pytest.skip("lins plan --csv is not built yet (placeholder cmd_plan.cpp)")
    body = text[text.index("csv_columns() {"):]
    body = body[:body.index("}")]
    assert re.findall(r'"([A-Za-z0-9_]+)"', body) == schema.PLAN_CSV_COLUMNS
