"""Fig. 3: effective bandwidth (Gb/s, message bytes / time) versus message size for AllGather, ReduceScatter,
AllReduce and Broadcast; one series per mesh (GPUs per node x nodes). This is the planner's bandwidth profile."""

from matplotlib.ticker import FuncFormatter

from . import NoData
from . import schema
from . import style


def _size_label(nbytes):
    """1024 -> '1K', 4194304 -> '4M': short tick labels that never overlap on a log axis."""
    for unit, scale in (("G", 2 ** 30), ("M", 2 ** 20), ("K", 2 ** 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}"


def draw(data, out_dir, formats=("png", "pdf")):
    prof = data.profiles
    if prof.empty:
        raise NoData("no bandwidth profile CSV (lins comm --profile)")
    prof = prof[prof["time_s"] > 0].copy()
    # the paper's effective bandwidth w = v / t, in Gb/s; computed here so the unit is never in doubt
    prof["eff_gbit_s"] = prof["message_bytes"] * 8 / prof["time_s"] / 1e9
    ops = [op for op in schema.OPS if (prof["op"] == op).any()]  # one panel per collective the profile measured
    fig, axes = style.panel_grid(len(ops), width=3.8)
    meshes = sorted({(int(a), int(b)) for a, b in zip(prof["mesh_intra"], prof["mesh_inter"])},
                    key=lambda m: (m[1], m[0]))
    cmap = style.plt.get_cmap("viridis", max(len(meshes), 2))
    for ax, op in zip(axes, ops):
        p = prof[prof["op"] == op]
        for i, (intra, inter) in enumerate(meshes):
            g = p[(p["mesh_intra"] == intra) & (p["mesh_inter"] == inter)]
            if g.empty:
                continue
            g = g.groupby("message_bytes")["eff_gbit_s"].median()
            ax.plot(g.index, g.values, marker=".", color=cmap(i), label=f"{intra}x{inter}")
        ax.set_xscale("log", base=4)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _size_label(x)))
        ax.set_xlabel("Message size")
        ax.set_ylabel("Effective bandwidth (Gb/s)")
        ax.set_title(schema.OP_LABELS[op])
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if p.empty:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.tight_layout()
    fig.legend(handles, labels, title="mesh (GPUs/node x nodes)", loc="center left", bbox_to_anchor=(1.0, 0.5),
               fontsize=8)
    fig.suptitle("Fig. 3: effective bandwidth of collectives versus message size", y=1.04)
    return style.save_figure(fig, out_dir, "fig3_bandwidth", formats)
