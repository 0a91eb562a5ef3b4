"""Table IV: the plan each system uses for each model (the 6-tuple s0_p,s1_p | s0_g,s1_g | s0_os,s1_os), from the
step CSVs, and the planner's ranking from `lins plan --csv` files when present."""

import pandas as pd

from . import NoData
from . import schema
from . import style
from .load import pick_model_order, summarise_steps


def plan_text(row):
    f = [int(row[c]) for c in schema.PLAN_FACTORS]
    return f"({f[0]},{f[1]} | {f[2]},{f[3]} | {f[4]},{f[5]})"


def step_plans(data):
    """Per model and scale: the plan of every system that ran (largest scale first)."""
    s = summarise_steps(data.steps)
    s = s[s["strategy"].isin(style.STRATEGY_ORDER)]
    s = s[s.apply(lambda r: r["engine"] == "lins" or r["strategy"] != "lins", axis=1)]
    out = []
    for model in pick_model_order(s["model"]):
        m = s[s["model"] == model]
        for ws in sorted(set(m["world_size"]), reverse=True):
            w = m[m["world_size"] == ws].drop_duplicates(["strategy"])
            r0 = w.iloc[0]
            row = {"model": model, "GPUs (R x N)": f"{int(ws)} ({int(r0['gpus_per_node'])}x{int(r0['nodes'])})",
                   "source": "/".join(sorted(set(w["source"])))}
            for strategy in style.sort_strategies(w["strategy"]):
                row[style.strategy_label(strategy)] = plan_text(w[w["strategy"] == strategy].iloc[0])
            out.append(row)
    return pd.DataFrame(out).fillna("-")


def planner_rankings(data, top=5):
    """The first `top` rows of each `lins plan --csv` file, in the file's order (the planner's ranking)."""
    out = []
    for path, df in data.plans.groupby("file", sort=False):
        df = df.head(top)
        comm_cols = [c for c in df.columns if c.startswith("pred_comm") or c in ("comm_s", "t_comm_s")]
        for rank, (_, r) in enumerate(df.iterrows(), start=1):
            row = {"file": path.split("/")[-2] + "/" + path.split("/")[-1], "rank": rank,
                   "plan": r.get("name", r.get("plan", "")), "factors": plan_text(r)}
            for c in comm_cols[:1]:
                row[c] = f"{float(r[c]):.4g}"
            for c in ("feasible", "why"):
                if c in df.columns:
                    row[c] = r[c]
            out.append(row)
    return pd.DataFrame(out).fillna("")


def draw(data, out_dir, formats=("png", "pdf")):
    paths = []
    if not data.steps.empty:
        t = step_plans(data)
        if not t.empty:
            paths += style.write_table(t, out_dir, "table4_plans", "Table IV: plan of each system "
                                       "(s0_p,s1_p | s0_g,s1_g | s0_os,s1_os)", formats)
    if not data.plans.empty:
        paths += style.write_table(planner_rankings(data), out_dir, "table4_planner",
                                   "Table IV (planner): best plans by predicted communication", formats)
    if not paths:
        raise NoData("no step CSV with preset strategies and no lins plan --csv file")
    return paths
