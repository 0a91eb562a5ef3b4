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
    """Per `lins plan --csv` file: the planner's choice (the best-ranked feasible plan) and every baseline preset,
    with memory and predicted communication. Files without the `baseline` column: their first `top` rows."""
    out = []
    plans = data.plans
    if "model" in plans.columns:
        order = {m: i for i, m in enumerate(pick_model_order(plans["model"].astype(str)))}
        plans = plans.assign(_order=plans["model"].astype(str).map(order)).sort_values("_order", kind="stable")
    for path, df in plans.groupby("file", sort=False):
        if "rank" in df.columns:
            df = df.sort_values("rank", key=lambda r: r.where(r > 0, 10 ** 9))  # rank 0: does not fit, last
        if "baseline" in df.columns:
            chosen = df[df["why"] == "chosen"] if "why" in df.columns else df.iloc[0:0]
            if chosen.empty:
                feasible = df[df["feasible"] != 0] if "feasible" in df.columns else df
                chosen = (feasible if not feasible.empty else df).head(1)
            chosen = chosen.head(1)
            rows = pd.concat([chosen, df[(df["baseline"] == 1) & ~df.index.isin(chosen.index)]])
        else:
            chosen = df.head(1)
            rows = df.head(top)
        for _, r in rows.iterrows():
            row = {"model": r.get("model", ""),
                   "GPUs (R x N)": f"{int(r['gpus_per_node'] * r['nodes'])} ({int(r['gpus_per_node'])}x"
                                   f"{int(r['nodes'])})" if {"gpus_per_node", "nodes"} <= set(r.index) else "",
                   "system": ("planner's choice" if r.name in chosen.index else "") +
                             (" = " if r.name in chosen.index and r.get("baseline", 0) == 1 else "") +
                             (str(r.get("name", "")) if r.get("baseline", 0) == 1 else ""),
                   "plan": plan_text(r)}
            if "rank" in r.index:
                row["rank"] = int(r["rank"]) if r["rank"] > 0 else "-"
            if "total_bytes" in r.index:
                row["memory GiB"] = f"{r['total_bytes'] / 2 ** 30:.1f}"
            for c, label in (("comm_s", "comm s (paper pricing)"), ("shared_comm_s", "comm s (shared links)")):
                if c in r.index:
                    row[label] = f"{float(r[c]):.4g}"
            if "feasible" in r.index:
                row["fits"] = "yes" if r["feasible"] != 0 else f"no: {r.get('why', '')}"
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
                                   "Table IV (lins plan): the planner's choice and the baselines, per model", formats)
    if not paths:
        raise NoData("no step CSV with preset strategies and no lins plan --csv file")
    return paths
