"""The figure the paper lacks: the cost model's predicted communication time (pred_comm_s) against the measured
one, per strategy and scale, with the relative error; and the communicator's counted bytes against the schedule's.

Measured communication time: with overlap=none every collective is exposed, so exposed_comm_s is the whole
communication time; rows with overlap are used only when no overlap=none row exists for that configuration, and
are then labelled a lower bound (overlapped communication is hidden from exposed_comm_s)."""

import numpy as np
import pandas as pd

from . import NoData
from . import schema
from . import style
from .load import summarise_steps



def comparison_rows(data):
    """Measured rows with both times: columns strategy, world_size, measured_s, pred_s, error, exact (bool)."""
    if data.steps.empty:
        raise NoData("no step CSV found")
    s = summarise_steps(data.steps)
    s = s[(s["source"] == "measured") & (s["pred_comm_s"] > 0) & s["exposed_comm_s"].notna()]
    if s.empty:
        raise NoData("no measured rows with pred_comm_s > 0 and exposed_comm_s")
    keys = ["backend", "model", "strategy", "engine", "world_size", "gpus_per_node", "micro_batches"]
    s = s.assign(exact=s["overlap"] == "none").sort_values("exact", ascending=False).drop_duplicates(keys)
    s = s.assign(measured_s=s["exposed_comm_s"], pred_s=s["pred_comm_s"])
    s["error"] = (s["pred_s"] - s["measured_s"]) / s["measured_s"].where(s["measured_s"] > 0)
    return s


def bytes_ratio(rows):
    """Counted / scheduled bytes over all op kinds of each row (1.0 when the executor moved what was planned)."""
    counted = sum(rows[f"{k}_bytes"].fillna(0) for k in schema.OPS)
    planned = sum(rows[f"pred_{k}_bytes"].fillna(0) for k in schema.OPS)
    return counted / planned.where(planned > 0)


def draw(data, out_dir, formats=("png", "pdf")):
    rows = comparison_rows(data)
    fig, (ax_s, ax_e, ax_b) = style.panel_grid(3, width=4.4, height=3.8)
    scales = sorted(set(rows["world_size"]))
    strategies = style.sort_strategies(rows["strategy"])
    for strategy in strategies:
        colour, marker = style.strategy_style(strategy)
        r = rows[rows["strategy"] == strategy]
        for exact, part in r.groupby("exact"):
            ax_s.scatter(part["measured_s"], part["pred_s"], color=colour if exact else "white", edgecolor=colour,
                         marker=marker, s=45, label=style.strategy_label(strategy) + ("" if exact else " (lower bd.)"))
            for _, p in part.iterrows():
                ax_s.annotate(str(int(p["world_size"])), (p["measured_s"], p["pred_s"]), fontsize=6,
                              xytext=(3, 3), textcoords="offset points")
    lo = np.nanmin(rows[["measured_s", "pred_s"]].where(rows[["measured_s", "pred_s"]] > 0).to_numpy())
    hi = np.nanmax(rows[["measured_s", "pred_s"]].to_numpy())
    if np.isfinite(lo) and hi > 0:
        ax_s.plot([lo / 2, hi * 2], [lo / 2, hi * 2], color="black", linewidth=0.8, linestyle=":", label="y = x")
        ax_s.set_xscale("log")
        ax_s.set_yscale("log")
    ax_s.set_xlabel("Measured communication per step (s)")
    ax_s.set_ylabel("Predicted by the cost model (s)")
    ax_s.set_title("(a) predicted vs measured (labels: ranks)", fontsize=9)
    ax_s.legend(fontsize=7)
    ax_s.grid(alpha=0.3)

    width = 0.8 / max(len(scales), 1)
    cmap = style.plt.get_cmap("viridis", max(len(scales), 2))
    x = np.arange(len(strategies))
    for i, ws in enumerate(scales):
        err = [rows[(rows["strategy"] == st) & (rows["world_size"] == ws)]["error"].median() * 100
               for st in strategies]
        ax_e.bar(x + (i - (len(scales) - 1) / 2) * width, err, width, color=cmap(i), label=f"{int(ws)} ranks")
        ratio = [bytes_ratio(rows[(rows["strategy"] == st) & (rows["world_size"] == ws)]).median()
                 for st in strategies]
        ax_b.bar(x + (i - (len(scales) - 1) / 2) * width, ratio, width, color=cmap(i), label=f"{int(ws)} ranks")
    for ax in (ax_e, ax_b):
        ax.set_xticks(x)
        ax.set_xticklabels([style.strategy_label(s) for s in strategies], rotation=30, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    ax_e.axhline(0, color="black", linewidth=0.8)
    ax_e.set_ylabel("(predicted - measured) / measured (%)")
    ax_e.set_title("(b) cost-model error per strategy and scale", fontsize=9)
    ax_b.axhline(1, color="black", linewidth=0.8)
    ax_b.set_ylabel("counted bytes / scheduled bytes")
    ax_b.set_title("(c) communicator bytes vs schedule", fontsize=9)
    backends = ", ".join(sorted(set(rows["backend"])))
    fig.suptitle(f"Communication: cost model versus measurement ({backends}; filled = overlap none, exact)")
    return style.save_figure(fig, out_dir, "comm_model_error", formats)


def error_table(data):
    """The numbers behind the figure, for REPRODUCE.md and the console."""
    rows = comparison_rows(data)
    cols = ["backend", "model", "strategy", "world_size", "overlap", "measured_s", "pred_s", "error"]
    return pd.DataFrame(rows[cols]).sort_values(["strategy", "world_size"])
