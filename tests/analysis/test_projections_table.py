"""lins_analysis.projections_table (the 1024-GPU table under labelled projections), on synthetic step CSVs (fixtures:
made-up numbers): one row per (model, projection) in the files' order, MFU per strategy or oom, the paper's row last."""

import pandas as pd

from fixtures import step_row
from lins_analysis import projections_table, schema


def write(path, label, mfu_by_strategy, infeasible=()):
    rows = []
    for model in ["llama-7b", "llama-13b"]:
        for strategy, mfu in mfu_by_strategy.items():
            r = step_row("projected", strategy, model, 1024, 8, feasible=0 if strategy in infeasible else 1)
            r.update(label=label, mfu=mfu)
            rows.append(r)
        r = step_row("projected", "zero3", model, 512, 8)  # another size: left out
        r.update(label=label, mfu=0.99)
        rows.append(r)
    pd.DataFrame(rows, columns=schema.STEP_COLUMNS).to_csv(path, index=False)


def test_one_row_per_model_and_projection_with_the_papers_last(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write(a, "device", {"lins": 0.588, "mics": 0.574, "zero1": 0.39})
    write(b, "device contention=priors", {"lins": 0.581, "mics": 0.549, "zero1": 0.39}, infeasible=("zero1",))
    t = projections_table.table([a, b], 1024)
    assert list(zip(t["model"], t["projection"])) == [
        ("llama-7b", "device"), ("llama-7b", "device contention=priors"), ("llama-7b", "paper (Fig. 11)"),
        ("llama-13b", "device"), ("llama-13b", "device contention=priors")]
    first = t.iloc[0]
    assert (first["lins"], first["mics"], first["zero1"], first["zero3"]) == ("58.8%", "57.4%", "39.0%", "")
    assert t.iloc[1]["zero1"] == "oom"
    assert t.iloc[2]["lins"] == "about 51%"
