"""Fig. 2: why ZeRO stops scaling, LLaMA-7B at 8..512 GPUs with a fixed global batch.
(a) model-state memory per GPU for ZeRO-1/2/3, (b) forward+backward compute time per step,
(c) latency of AllReduce / AllGather / ReduceScatter of a 256 MB message versus GPU count (from the profile)."""

import numpy as np

from . import NoData
from . import schema
from . import style
from .load import pick_model_order, summarise_steps

GIB = 2.0 ** 30
TARGET_BYTES = 256 * 2 ** 20  # the paper's 256 MB message
ZERO_SERIES = ["zero1", "zero2", "zero3"]


def _model_rows(data):
    """Summarised ZeRO-1/2/3 rows of one model (LLaMA-7B when present), full overlap; empty when none."""
    if data.steps.empty:
        return None, None
    s = summarise_steps(data.steps)
    s = s[s["strategy"].isin(ZERO_SERIES)]
    if (s["overlap"] == "all").any():
        s = s[s["overlap"].isin(["all", ""])]
    if s.empty:
        return None, None
    models = pick_model_order(s["model"])
    model = models[0] if models[0].startswith("llama") else s["model"].value_counts().index[0]
    s = s[s["model"] == model].sort_values("tokens", ascending=False)
    return model, s.drop_duplicates(["source", "backend", "strategy", "world_size"])


def time_at_size(group, target=TARGET_BYTES):
    """Time of one (op, mesh) at `target` bytes: log-log interpolation inside the measured sizes, else the
    nearest measured size. Returns (seconds, bytes actually used)."""
    g = group.groupby("message_bytes")["time_s"].median().sort_index()
    sizes, times = g.index.to_numpy(dtype=float), g.to_numpy(dtype=float)
    if sizes[0] <= target <= sizes[-1]:
        return float(np.exp(np.interp(np.log(target), np.log(sizes), np.log(times)))), target
    nearest = sizes[0] if target < sizes[0] else sizes[-1]
    return float(times[sizes == nearest][0]), nearest


def _no_data(ax, why):
    ax.text(0.5, 0.5, f"no data:\n{why}", ha="center", va="center", transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def _draw_steps(ax, rows, value_of, ylabel):
    for strategy in style.sort_strategies(rows["strategy"]):
        colour, marker = style.strategy_style(strategy)
        for source, series in rows[rows["strategy"] == strategy].groupby("source"):
            label = style.strategy_label(strategy) + (" (proj.)" if source == "projected" else "")
            style.plot_scaling_series(ax, series, value_of, label, colour, marker, source)
    style.gpu_axis(ax, rows["world_size"])
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def draw(data, out_dir, formats=("png", "pdf")):
    model, rows = _model_rows(data)
    have_profile = not data.profiles.empty and data.profiles["op"].isin(["all_reduce", "all_gather",
                                                                         "reduce_scatter"]).any()
    if rows is None and not have_profile:
        raise NoData("no ZeRO-1/2/3 step rows and no bandwidth profile")
    fig, (ax_a, ax_b, ax_c) = style.panel_grid(3)
    if rows is None:
        _no_data(ax_a, "no zero1/zero2/zero3 step rows")
        _no_data(ax_b, "no zero1/zero2/zero3 step rows")
    else:
        state = rows["model_state_bytes"].where(rows["model_state_bytes"] > 0, rows["state_bytes"])
        rows = rows.assign(state_gib=state / GIB, compute_s=rows["forward_s"] + rows["backward_s"])
        _draw_steps(ax_a, rows, lambda r: r["state_gib"], "Model states per GPU (GiB)")
        ax_a.set_title(f"(a) model-state memory, {model}")
        _draw_steps(ax_b, rows, lambda r: r["compute_s"], "Fwd + bwd time per step (s)")
        ax_b.set_title(f"(b) compute time per step, {model}")
    if not have_profile:
        _no_data(ax_c, "no bandwidth profile (lins comm --profile)")
    else:
        used_sizes = set()
        prof = data.profiles
        for op in ["all_reduce", "all_gather", "reduce_scatter"]:
            pts = []
            for (intra, inter), g in prof[prof["op"] == op].groupby(["mesh_intra", "mesh_inter"]):
                t, used = time_at_size(g)
                used_sizes.add(used)
                pts.append((intra * inter, -intra, t * 1e3))
            if not pts:
                continue
            # several meshes can have the same GPU count (8x1 and 4x2): keep the node-first one (largest intra)
            xs, ys = [], []
            for x, _, y in sorted(pts):
                if xs and xs[-1] == x:
                    continue
                xs.append(x)
                ys.append(y)
            ax_c.plot(xs, ys, marker="o", label=schema.OP_LABELS[op])
        style.gpu_axis(ax_c, prof["mesh_intra"] * prof["mesh_inter"])
        size_note = "256 MiB" if used_sizes == {TARGET_BYTES} else \
            "largest measured size: " + ", ".join(f"{s / 2 ** 20:g} MiB" for s in sorted(used_sizes))
        ax_c.set_title(f"(c) collective latency ({size_note})", fontsize=9)
        ax_c.set_ylabel("Latency (ms)")
        ax_c.set_ylim(bottom=0)
        ax_c.grid(alpha=0.3)
        ax_c.legend(fontsize=8)
    fig.tight_layout()
    fig.suptitle("Fig. 2: memory, compute and communication of ZeRO as the GPU count grows", y=1.03)
    return style.save_figure(fig, out_dir, "fig2_zero_scaling", formats)
