"""How every figure looks: one colour and marker per strategy, measured solid and filled, projected dashed and
hollow (with a note in the legend), out-of-memory points marked "oom", and saving to PNG and PDF."""

import os

import numpy as np

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
}
STRATEGY_LABELS = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3", "zeropp": "ZeRO++",
                   "mics": "MiCS", "hsdp": "HSDP", "lins": "Lins"}
# The paper's order of series in Fig. 11-13.
STRATEGY_ORDER = ["ddp", "zero1", "zero2", "zero3", "zeropp", "mics", "hsdp", "lins"]
_EXTRA_COLOURS = ["tab:pink", "tab:olive", "black", "gold", "teal"]

PROJECTED_NOTE = "hollow markers, dashed: projected (lins simulate)"
MEASURED_NOTE = "filled markers, solid: measured (lins step)"


def strategy_label(name):
    return STRATEGY_LABELS.get(name, name)


def strategy_style(name):
    """(colour, marker) of a strategy; strategies outside the presets (a 6-tuple) get a stable extra colour."""
    if name in STRATEGY_STYLE:
        return STRATEGY_STYLE[name]
    return _EXTRA_COLOURS[sum(map(ord, name)) % len(_EXTRA_COLOURS)], "h"


def sort_strategies(names):
    names = list(dict.fromkeys(names))
    return [s for s in STRATEGY_ORDER if s in names] + sorted(s for s in names if s not in STRATEGY_ORDER)


def line_kwargs(colour, marker, source):
    """Keyword arguments of ax.plot for one series: measured filled/solid, projected hollow/dashed."""
    projected = source == "projected"
    return dict(color=colour, marker=marker, markersize=7, linewidth=1.6,
                linestyle="--" if projected else "-",
                markerfacecolor="white" if projected else colour, markeredgecolor=colour)


def source_legend_handles(sources):
    """Legend entries that explain the two looks; only for the sources actually drawn."""
    handles = []
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


def plot_scaling_series(ax, series, value_of, label, colour, marker, source):
    """One curve over GPU counts: the value where the run fit in memory, a gap and an "oom" mark where it did not."""
    series = series.sort_values("world_size")
    feasible = series["feasible"] != 0
    ax.plot(series["world_size"], np.where(feasible, value_of(series), np.nan), label=label,
            **line_kwargs(colour, marker, source))
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


def write_table(df, out_dir, name, title, formats=("png", "pdf")):
    """A table as CSV, Markdown and a rendered image (PNG/PDF); returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, f"{name}.csv")
    md_path = os.path.join(out_dir, f"{name}.md")
    df.to_csv(csv_path, index=False)
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(f"# {title}\n\n")
        f.write("| " + " | ".join(map(str, df.columns)) + " |\n")
        f.write("|" + "---|" * len(df.columns) + "\n")
        for row in df.itertuples(index=False):
            f.write("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |\n")
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
