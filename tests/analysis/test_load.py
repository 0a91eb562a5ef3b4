"""Loading runs: recursive folders, files recognised by header, unfinished files ignored, steps summarised."""

import os

import pandas as pd
import pytest

import fixtures
from lins_analysis import schema
from lins_analysis.load import find_files, load, read_step_csv, summarise_steps


def test_recursive_load_finds_every_kind(fixture_dir):
    data = load(fixture_dir)
    assert set(data.steps["source"]) == {"measured", "projected"}  # one of them sits in a nested folder
    assert len(data.steps) == len(fixtures.measured_rows()) + len(fixtures.projected_rows())
    assert set(data.profiles["op"]) == set(schema.OPS)  # "AllGather" -> "all_gather"
    assert len(data.plans) == len(fixtures.plan_rows())
    assert len(data.traces) == 2
    assert any(p.endswith("fixture_step.json") for p in data.provenance)
    # the profile's leading '#' lines are skipped, and its provenance line is kept
    assert len(data.profiles) == len(fixtures.profile_rows())
    assert any(p.endswith("fixture_profile.csv") and v == {"tool": "fixture"} for p, v in data.provenance.items())


def test_unfinished_partial_files_are_never_read(fixture_dir):
    files = find_files([fixture_dir])
    assert not any(f.endswith(".partial") for f in files)
    assert os.path.exists(os.path.join(fixture_dir, "fixture_run_measured", "fixture_killed.csv.partial"))


def test_single_file_and_missing_path(fixture_dir):
    one = os.path.join(fixture_dir, "fixture_run_measured", "fixture_step.csv")
    assert len(load(one).steps) == len(fixtures.measured_rows())
    with pytest.raises(FileNotFoundError):
        load(os.path.join(fixture_dir, "does_not_exist"))


def test_summary_is_one_row_per_configuration_with_median(fixture_dir):
    steps = load(fixture_dir).steps
    s = summarise_steps(steps)
    z3 = s[(s["strategy"] == "zero3") & (s["world_size"] == 4) & (s["source"] == "measured")]
    assert len(z3) == 1 and int(z3["steps"].iloc[0]) == 3
    raw = steps[(steps["strategy"] == "zero3") & (steps["world_size"] == 4) & (steps["source"] == "measured")]
    assert z3["step_time_s"].iloc[0] == pytest.approx(raw["step_time_s"].median())
    oom = s[(s["model"] == "llama-13b") & (s["strategy"] == "zero1") & (s["world_size"] == 8)]
    assert oom["feasible"].iloc[0] == 0


def test_missing_column_warns_and_bad_source_fails(tmp_path):
    row = fixtures.step_row("measured", "zero1", "small", 4, 2)
    df = pd.DataFrame([row], columns=schema.STEP_COLUMNS).drop(columns=["loss"])
    df.to_csv(tmp_path / "a.csv", index=False)
    with pytest.warns(UserWarning, match="loss"):
        got = read_step_csv(tmp_path / "a.csv")
    assert list(got.columns[:len(schema.STEP_COLUMNS)]) != [] and got["loss"].isna().all()
    df = pd.DataFrame([dict(row, source="guessed")], columns=schema.STEP_COLUMNS)
    df.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match="measured or projected"):
        read_step_csv(tmp_path / "b.csv")


def test_unrecognised_files_are_reported(tmp_path):
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    (tmp_path / "broken.json").write_text("{not json")
    data = load(tmp_path)
    assert data.steps.empty
    assert {os.path.basename(p) for p, _ in data.skipped} == {"other.csv", "broken.json"}


def test_comm_per_size_csv_is_read_as_profile_rows_without_wrong_results(tmp_path):
    rows = []
    for wrong in (0, 3):
        row = {c: 0 for c in schema.COMM_CSV_COLUMNS}
        row.update(op="all_reduce", mesh_intra=2, mesh_inter=2, message_bytes=2 ** 20, time_median_s=0.01 + wrong,
                   wrong_elems=wrong)
        rows.append(row)
    pd.DataFrame(rows, columns=schema.COMM_CSV_COLUMNS).to_csv(tmp_path / "comm.csv", index=False)
    with pytest.warns(UserWarning, match="wrong results"):
        data = load(tmp_path)
    assert len(data.profiles) == 1 and data.profiles["time_s"].iloc[0] == pytest.approx(0.01)
