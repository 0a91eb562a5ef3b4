"""ZeRO++ with its quantized communication (beyond the paper, which ran it off): for each variant of zeropp measured
from one seed (zeropp, zeropp+qwz, zeropp+qgz, zeropp+qwz+qgz; jobs/zeropp_quant.sh), the loss difference from plain
zeropp at every step, and the bytes each rank sends inside and across nodes per step with the step time. Writes
zeropp_quant.{png,pdf} and zeropp_quant.csv (one row per variant)."""

import os

import pandas as pd

from . import NoData
from . import style

VARIANTS = ["zeropp", "zeropp+qwz", "zeropp+qgz", "zeropp+qwz+qgz"]


def variant_rows(data):
    """The measured step rows of the ZeRO++ variants of one run (the (fabric, model, world) with most of them)."""
    if data.steps.empty:
        raise NoData("no step CSV found")
    s = data.steps[(data.steps["source"] == "measured") & data.steps["strategy"].isin(VARIANTS)]
    if s.empty or "zeropp" not in set(s["strategy"]) or s["strategy"].nunique() < 2:
        raise NoData("needs measured zeropp rows and at least one quantized variant (jobs/zeropp_quant.sh)")
    keys = ["fabric", "model", "world_size", "seq", "micro_batches"]
    best = s.groupby(keys).size().sort_values().index[-1]
    for k, v in zip(keys, best):
        s = s[s[k] == v]
    return s


def per_step(rows):
    """One value per (variant, step): the loss (the same on every rank) and the slowest rank's time and bytes."""
    return (rows.groupby(["strategy", "step"], as_index=False)
            .agg(loss=("loss", "mean"), step_time_s=("step_time_s", "max"), intra_bytes=("intra_bytes", "max"),
                 inter_bytes=("inter_bytes", "max")))


def summary(steps):
    """One row per variant: its loss at the last step and the difference from zeropp's, the largest difference over
    the run, bytes per step inside and across nodes, and the median step time with its spread."""
    base = steps[steps["strategy"] == "zeropp"].set_index("step")["loss"]
    out = []
    for v in [v for v in VARIANTS if v in set(steps["strategy"])]:
        g = steps[steps["strategy"] == v].set_index("step").sort_index()
        diff = (g["loss"] - base.reindex(g.index)).dropna()
        last = g.index.max()
        out.append({"strategy": v, "steps": len(g), "final_loss": g.loc[last, "loss"],
                    "final_loss_minus_zeropp": diff.get(last, float("nan")),
                    "max_abs_loss_difference": diff.abs().max() if not diff.empty else float("nan"),
                    "intra_bytes_per_step": g["intra_bytes"].median(), "inter_bytes_per_step": g["inter_bytes"].median(),
                    "step_time_median_s": g["step_time_s"].median(),
                    "step_time_p10_s": g["step_time_s"].quantile(0.1),
                    "step_time_p90_s": g["step_time_s"].quantile(0.9)})
    return pd.DataFrame(out)


def draw(data, out_dir, formats=("png", "pdf")):
    rows = variant_rows(data)
    steps = per_step(rows)
    table = summary(steps)
    fig, (ax_curve, ax_loss, ax_bytes) = style.plt.subplots(1, 3, figsize=(15, 4))
    base = steps[steps["strategy"] == "zeropp"].set_index("step")["loss"]
    for v in table["strategy"]:
        g = steps[steps["strategy"] == v].set_index("step").sort_index()
        colour, _ = style.strategy_style(v)
        ax_curve.plot(g.index, g["loss"], color=colour, linewidth=1.2, label=style.strategy_label(v))
    ax_curve.set_yscale("log")
    ax_curve.set_xlabel("step")
    ax_curve.set_ylabel("training loss")
    ax_curve.set_title("Loss curves")
    ax_curve.legend(fontsize=8)
    for v in table["strategy"]:
        if v == "zeropp":
            continue
        g = steps[steps["strategy"] == v].set_index("step").sort_index()
        colour, _ = style.strategy_style(v)
        ax_loss.plot(g.index, g["loss"] - base.reindex(g.index), color=colour, linewidth=1.2,
                     label=style.strategy_label(v))
    ax_loss.axhline(0, color="black", linewidth=0.6)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss minus ZeRO++'s (same seed)")
    ax_loss.set_title("Loss difference from unquantized ZeRO++")
    ax_loss.legend(fontsize=8)
    xs = range(len(table))
    width = 0.38
    ax_bytes.bar([x - width / 2 for x in xs], table["intra_bytes_per_step"] / 2**20, width, label="inside nodes",
                 color="tab:blue")
    ax_bytes.bar([x + width / 2 for x in xs], table["inter_bytes_per_step"] / 2**20, width, label="across nodes",
                 color="tab:orange")
    for x, (_, r) in zip(xs, table.iterrows()):
        top = max(r["intra_bytes_per_step"], r["inter_bytes_per_step"]) / 2**20
        ax_bytes.annotate(f"{r['step_time_median_s'] * 1e3:.0f} ms/step", (x, top), ha="center", va="bottom",
                          fontsize=8)
    ax_bytes.set_xticks(list(xs))
    ax_bytes.set_xticklabels([style.strategy_label(v) for v in table["strategy"]], fontsize=8)
    ax_bytes.set_ylabel("MiB per rank per step (message bytes)")
    ax_bytes.set_title("Bytes per step, and median step time")
    ax_bytes.legend(fontsize=8)
    r0 = rows.iloc[0]
    fig.suptitle(f"ZeRO++ quantized communication, measured: {r0['model']} on {int(r0['world_size'])} ranks "
                 f"({r0['fabric']}), {int(table['steps'].max())} steps from one seed", fontsize=9)
    fig.tight_layout()
    os.makedirs(out_dir, exist_ok=True)
    paths = style.save_figure(fig, out_dir, "zeropp_quant", formats)
    path = os.path.join(out_dir, "zeropp_quant.csv")
    table.to_csv(path, index=False)
    return list(paths) + [path]
