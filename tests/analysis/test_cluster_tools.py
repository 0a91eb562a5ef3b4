"""lins_analysis.compare_plans (Table IV on the emulated cluster) and the per-run aliases of
lins_analysis.validate_projection, on synthetic step CSVs (fixtures: made-up numbers)."""

import pandas as pd

from fixtures import step_row
from lins_analysis import compare_plans, schema, validate_projection


def write_steps(path, rows):
    pd.DataFrame(rows, columns=schema.STEP_COLUMNS).to_csv(path, index=False)


def plan_rows(times):
    """One measured row per (strategy, engine, plan, step time)."""
    rows = []
    for strategy, engine, factors, t in times:
        r = step_row("measured", strategy, "small", 4, 2, engine=engine, factors=factors)
        r["step_time_s"] = t
        rows.append(r)
    return rows


def test_planner_choice_that_is_fastest_is_said_so(tmp_path):
    p = tmp_path / "fixture_plans.csv"
    write_steps(p, plan_rows([("lins", "lins", (2, 1, 2, 1, 2, 2), 0.05),
                              ("p=2x1,g=2x1,os=2x2", "lins", (2, 1, 2, 1, 2, 2), 0.051),
                              ("p=1x1,g=1x1,os=2x2", "lins", (1, 1, 1, 1, 2, 2), 0.06),
                              ("zero3", "zero", (2, 2, 2, 2, 2, 2), 0.09)]))
    table = compare_plans.compare(str(p))
    assert list(table["strategy"])[:2] == ["lins", "p=2x1,g=2x1,os=2x2"]
    assert "the fastest measured plan on the Lins engine; the fastest of everything measured" in compare_plans.verdict(table)


def test_planner_choice_that_loses_names_the_gap_and_the_winner(tmp_path):
    p = tmp_path / "fixture_plans.csv"
    write_steps(p, plan_rows([("lins", "lins", (2, 1, 2, 1, 2, 2), 0.055),
                              ("p=1x1,g=1x1,os=2x2", "lins", (1, 1, 1, 1, 2, 2), 0.05),
                              ("ddp", "ddp", (1, 1, 1, 1, 1, 1), 0.04)]))
    v = compare_plans.verdict(compare_plans.compare(str(p)))
    assert "+10.0% against the fastest plan on the Lins engine, p=1x1,g=1x1,os=2x2" in v
    assert "against the fastest of everything measured that fits, ddp" in v


def test_validate_projection_aliases_per_run_before_global():
    aliases = validate_projection.parse_aliases(["lins=p=1x1,g=1x1,os=2x2", "n4_m2_all:lins=p=2x1,g=2x1,os=2x2"])
    assert validate_projection.alias_for(aliases, "n4_m2_all", "lins") == "p=2x1,g=2x1,os=2x2"
    assert validate_projection.alias_for(aliases, "n2_m2_none", "lins") == "p=1x1,g=1x1,os=2x2"
    assert validate_projection.alias_for(aliases, "n2_m2_none", "ddp") == "ddp"


def test_a_choice_is_judged_against_the_plans_that_fit(tmp_path):
    steps = tmp_path / "fixture_plans.csv"
    write_steps(steps, plan_rows([("p=2x1,g=2x1,os=2x1", "lins", (2, 1, 2, 1, 2, 1), 0.05),
                                  ("p=1x1,g=1x1,os=1x1", "lins", (1, 1, 1, 1, 1, 1), 0.04)]))
    plans = tmp_path / "fixture_plan_table.csv"
    pd.DataFrame([{"name": "p=2x1,g=2x1,os=2x1", "rank": 1, "feasible": 1},
                  {"name": "p=1x1,g=1x1,os=1x1", "rank": 0, "feasible": 0}]).to_csv(plans, index=False)
    table = compare_plans.compare(str(steps), str(plans))
    assert list(table["fits"]) == [False, True]  # sorted by measured time: the faster plan does not fit
    v = compare_plans.verdict(table, "comm objective", "p=2x1,g=2x1,os=2x1")
    assert "the fastest measured plan on the Lins engine; the fastest of everything measured that fits" in v


def test_validate_projection_compares_parts_before_and_after(tmp_path):
    meas = tmp_path / "step.csv"
    r = step_row("measured", "ddp", "small", 4, 2)
    r.update({"step_time_s": 1.0, "forward_s": 0.3, "backward_s": 0.5, "optimizer_s": 0.1, "exposed_comm_s": 0.1})
    write_steps(meas, [r])
    after, before = tmp_path / "after.csv", tmp_path / "before.csv"
    pd.DataFrame([{"strategy": "ddp", "step_time_s": 1.1, "forward_s": 0.3, "backward_s": 0.5, "optimizer_s": 0.1,
                   "contention_compute_s": 0.05, "exposed_comm_s": 0.15}]).to_csv(after, index=False)
    pd.DataFrame([{"strategy": "ddp", "step_time_s": 0.8, "forward_s": 0.3, "backward_s": 0.5, "optimizer_s": 0.1,
                   "contention_compute_s": 0.0, "exposed_comm_s": 0.0}]).to_csv(before, index=False)
    df = validate_projection.compare([("n2_m2_none", str(meas), str(after))], {"n2_m2_none": str(before)}, {})
    row = df.iloc[0]
    assert row["nodes"] == 2
    assert abs(row["error"] - 0.1) < 1e-9 and abs(row["error_before"] + 0.2) < 1e-9
    assert abs(row["compute_error"] - 0.05) < 1e-9 and abs(row["exposed_error"] - 0.05) < 1e-9
    table = validate_projection.summary(df)
    assert abs(table.loc["ddp", "2 nodes step before"] - 0.2) < 1e-9
    assert abs(table.loc["ddp", "2 nodes step after"] - 0.1) < 1e-9
