"""How every figure looks: one colour and marker per strategy, measured solid and filled, projected dashed and
hollow (with a note in the legend), out-of-memory points marked "oom", and saving to PNG and PDF."""

import os

import numpy as np

import lins_schema

import matplotlib

matplotlib.use("Agg")  # headless: no display is ever needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

STRATEGY_STYLE = {
    "ddp": ("tab:gray", "X"),
    "zero1": ("tab:blue", "o"),
    "zero2": ("tab:cyan", "v"),
    "zero3": ("tab:orange", "s"),
    "zeropp": ("tab:green", "^"),
    "mics": ("tab:red", "D"),
    "hsdp": ("tab:brown", "P"),
    "lins": ("tab:purple", "*"),
    # ZeRO++ with its quantized communication (zeropp+qwz: int8 weights, +qgz: int4 gradients).
    "zeropp+qwz": ("yellowgreen", "<"),
    "zeropp+qgz": ("darkgreen", ">"),
    "zeropp+qwz+qgz": ("lime", "d"),
}
# How figures name each preset: the preset table's labels (`lins schema`), and the planner's choice.
STRATEGY_LABELS = {**{name: row["label"] for name, row in lins_schema.PRESETS.items()}, "lins": "Lins"}
# The paper's order of series in Fig. 11-13.
STRATEGY_ORDER = ["ddp", "zero1", "zero2", "zero3", "zeropp", "zeropp+qwz", "zeropp+qgz", "zeropp+qwz+qgz", "mics",
                  "hsdp", "lins"]
QUANT_LABELS = {"qwz": "qwZ", "qgz": "qgZ"}
_EXTRA_COLOURS = ["tab:pink", "tab:olive", "black", "gold", "teal"]

PROJECTED_NOTE = "hollow markers, dashed: projected (lins simulate)"
MEASURED_NOTE = "filled markers, solid: measured (lins step)"
PEER_NOTE = "dotted, black-edged markers: the real system (python/lins_peers)"

# Rows of the real systems that python/lins_peers runs beside lins: strategy "<system>-<version>:<strategy>" (e.g.
# fsdp2-2.15.0:full, deepspeed-0.19.8:zero3), drawn in the colour and marker of the lins preset they stand for.
PEER_PRESETS = {"full": "zero3", "zero2": "zero2", "hpz": "zeropp", "hsdp": "hsdp", "ddp": "ddp", "zero1": "zero1",
                "zero3": "zero3", "zeropp": "zeropp", "mics": "mics"}
PEER_SYSTEM_LABELS = {"fsdp2": "FSDP2", "deepspeed": "DeepSpeed", "torch-ddp": "PyTorch DDP"}


def _peer_parts(name):
    """(system, version, strategy) of a peer row's strategy, or None for lins's own strategies."""
    head, sep, strategy = str(name).partition(":")
    system, dash, version = head.rpartition("-")
    if not sep or not dash or not version[:1].isdigit() or not system:
        return None
    return system, version, strategy


def is_peer(name):
    """Whether a strategy names a real system's run (lins_peers), not one of lins's presets, plans or 6-tuples."""
    return _peer_parts(name) is not None


def peer_preset(name):
    """The lins preset a peer strategy stands for (fsdp2-2.15.0:full -> zero3); None when unknown."""
    parts = _peer_parts(name)
    return PEER_PRESETS.get(parts[2].replace("-defaults", "")) if parts else None


def peer_label(name):
    system, version, strategy = _peer_parts(name)
    return f"{PEER_SYSTEM_LABELS.get(system, system)} {version} {strategy}"


def strategy_label(name):
    if is_peer(name):
        return peer_label(name)
    base, *quantized = str(name).split("+")  # ZeRO++'s quantized communication: "zeropp+qwz+qgz"
    if quantized and all(q in QUANT_LABELS for q in quantized):
        return STRATEGY_LABELS.get(base, base) + " " + "+".join(QUANT_LABELS[q] for q in quantized)
    return STRATEGY_LABELS.get(name, name)


def strategy_style(name):
    """(colour, marker) of a strategy; a peer takes its preset's; strategies outside the presets (a 6-tuple) get a
    stable extra colour."""
    if is_peer(name) and peer_preset(name) in STRATEGY_STYLE:
        return STRATEGY_STYLE[peer_preset(name)]
    if name in STRATEGY_STYLE:
        return STRATEGY_STYLE[name]
    return _EXTRA_COLOURS[sum(map(ord, name)) % len(_EXTRA_COLOURS)], "h"


def sort_strategies(names):
    """lins's presets in the paper's order, then other strategies, then the peers (each after its preset's order)."""
    names = list(dict.fromkeys(names))
    peers = sorted((s for s in names if is_peer(s)),
                   key=lambda s: (STRATEGY_ORDER.index(peer_preset(s)) if peer_preset(s) in STRATEGY_ORDER
                                  else len(STRATEGY_ORDER), s))
    others = sorted(s for s in names if s not in STRATEGY_ORDER and not is_peer(s))
    return [s for s in STRATEGY_ORDER if s in names] + others + peers


def line_kwargs(colour, marker, source, peer=False):
    """Keyword arguments of ax.plot for one series: measured filled/solid, projected hollow/dashed, a real system's
    (peer) measured run dotted with black-edged markers."""
    projected = source == "projected"
    if peer:
        return dict(color=colour, marker=marker, markersize=7, linewidth=1.6, linestyle=":",
                    markerfacecolor=colour, markeredgecolor="black", markeredgewidth=1.2)
    return dict(color=colour, marker=marker, markersize=7, linewidth=1.6,
                linestyle="--" if projected else "-",
                markerfacecolor="white" if projected else colour, markeredgecolor=colour)


def source_legend_handles(sources, peers=False):
    """Legend entries that explain the looks; only for the sources (and peers) actually drawn."""
    handles = []
    if peers:
        handles.append(Line2D([], [], color="black", marker="o", linestyle=":", markerfacecolor="gray",
                              markeredgecolor="black", label=PEER_NOTE))
    if "measured" in sources:
        handles.append(Line2D([], [], color="black", marker="o", linestyle="-", label=MEASURED_NOTE))
    if "projected" in sources:
        handles.append(Line2D([], [], color="black", marker="o", linestyle="--", markerfacecolor="white",
                              label=PROJECTED_NOTE))
    return handles


def mark_oom(ax, xs, colour):
    """Writes "oom" at the bottom of the panel above each x whose run did not fit in memory."""
    for x in xs:
        ax.annotate("oom", xy=(x, 0), xycoords=("data", "axes fraction"), xytext=(0, 4),
                    textcoords="offset points", ha="center", va="bottom", color=colour, fontsize=8,
                    fontweight="bold")


def plot_scaling_series(ax, series, value_of, label, colour, marker, source, peer=False):
    """One curve over GPU counts: the value where the run fit in memory, a gap and an "oom" mark where it did not."""
    series = series.sort_values("world_size")
    feasible = series["feasible"] != 0
    ax.plot(series["world_size"], np.where(feasible, value_of(series), np.nan), label=label,
            **line_kwargs(colour, marker, source, peer))
    mark_oom(ax, series.loc[~feasible, "world_size"], colour)


def panel_grid(n, width=4.2, height=3.4):
    """One row of n panels (the paper's layout for per-model figures)."""
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])


def save_figure(fig, out_dir, name, formats=("png", "pdf")):
    """Saves the figure as out_dir/name.<fmt> for every format and closes it; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for fmt in formats:
        path = os.path.join(out_dir, f"{name}.{fmt}")
        fig.savefig(path, dpi=150, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


def gpu_axis(ax, values):
    """x axis of GPU counts on a log2 scale with the counts themselves as ticks."""
    values = sorted({int(v) for v in values if v == v})
    ax.set_xscale("log", base=2)
    ax.set_xticks(values)
    ax.set_xticklabels([str(v) for v in values])
    ax.minorticks_off()
    ax.set_xlabel("GPUs (ranks)")


def markdown_table(df, float_format=None):
    """A DataFrame as a Markdown table (cells as str(), or floats through float_format such as "{:.3f}")."""
    def cell(v):
        text = float_format.format(v) if float_format and isinstance(v, float) else str(v)
        return text.replace("|", "\\|")
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write_table(df, out_dir, name, title, formats=("png", "pdf")):
    """A table as CSV, Markdown and a rendered image (PNG/PDF); returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, f"{name}.csv")
    md_path = os.path.join(out_dir, f"{name}.md")
    df.to_csv(csv_path, index=False)
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(f"# {title}\n\n")
        f.write(markdown_table(df))
    ncols = max(len(df.columns), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.45 * ncols), 0.9 + 0.32 * (len(df) + 1)))
    ax.axis("off")
    ax.set_title(title, fontsize=10)
    table = ax.table(cellText=df.astype(str).values.tolist(), colLabels=[str(c) for c in df.columns],
                     loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1.0, 1.25)
    return [csv_path, md_path] + save_figure(fig, out_dir, name, formats)
