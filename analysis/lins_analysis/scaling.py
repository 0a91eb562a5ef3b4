"""Shared drawing of the scaling figures (Fig. 11 MFU, Fig. 12 TGS, Fig. 13 peak memory): one panel per model,
x = GPU count, one series per system, out-of-memory points marked "oom". By default every preset in the data is a
series (each on its own system's engine: a strategy's rows on another engine belong to Fig. 16/17), and the rows of
the real systems (python/lins_peers: FSDP2, DeepSpeed, DDP) are drawn beside them, dotted, in the colour of the
preset they stand for. SERIES = "paper" keeps the paper's five (ZeRO-1, ZeRO-3, ZeRO++, MiCS, Lins); a list keeps
the strategies named (make_figures --series). TITLES = "plain" drops the paper's figure numbers from the titles."""

import lins_schema

from . import NoData
from . import style
from .load import pick_model_order, summarise_steps

# The paper's series (its Fig. 11-13).
PAPER_SERIES = ["zero1", "zero3", "zeropp", "mics", "lins"]
SERIES = "all"     # "all", "paper", or a list of strategy names
TITLES = "paper"   # "paper": "Fig. 11: MFU versus GPU count"; "plain": "MFU versus GPU count"


def own_engine(strategy):
    """The engine a preset runs on by itself (the preset table of `lins schema`), "lins" for the planner's choice;
    None for a 6-tuple or an unknown name."""
    if strategy == "lins":
        return "lins"
    # "mics:16", and ZeRO++'s quantized variants "zeropp+qwz+qgz", on the preset's engine
    row = lins_schema.PRESETS.get(str(strategy).partition(":")[0].partition("+")[0])
    return row["engine"] if row else None


def wanted_series():
    """The strategy names SERIES keeps (None: every preset)."""
    if SERIES == "all":
        return None
    return list(PAPER_SERIES) if SERIES == "paper" else list(SERIES)


def scaling_rows(data):
    """One row per (source, backend, model, strategy, world size) with the paper's series and full overlap.

    Where one scale has several configurations (for example a micro-batch sweep), the one with the most tokens per
    step is kept: it is the closest to the paper's fixed 4M-token global batch."""
    if data.steps.empty:
        raise NoData("no step CSV (lins step or lins simulate) found")
    s = summarise_steps(data.steps)
    if (s["overlap"] == "all").any():
        s = s[s["overlap"].isin(["all", ""])]
    wanted = wanted_series()
    # a preset on its own engine, a 6-tuple on the Lins engine (drawn only where named)
    on_own = s.apply(lambda r: r["engine"] == (own_engine(r["strategy"]) or "lins"), axis=1)
    chosen = s["strategy"].map(lambda n: own_engine(n) is not None if wanted is None else n in wanted)
    # a real system whose preset is drawn (HSDP stands in for MiCS where DeepSpeed has none)
    drawn_presets = None if wanted is None else set(wanted) | ({"hsdp"} if "mics" in wanted else set())
    peer = s["strategy"].map(lambda n: style.peer_preset(n) is not None and
                             (drawn_presets is None or style.peer_preset(n) in drawn_presets))
    s = s[(on_own & chosen) | (peer & (s["source"] == "measured"))]
    if s.empty:
        raise NoData("no rows of the chosen series (" + ("every preset" if wanted is None else ", ".join(wanted)) +
                     ", each on its own engine)")
    s = s.sort_values("tokens", ascending=False)
    s = s.drop_duplicates(["source", "backend", "label", "model", "strategy", "world_size"])
    return s.sort_values(["model", "strategy", "world_size"])


def draw_metric(data, out_dir, name, value_of, ylabel, title, formats=("png", "pdf")):
    """value_of(rows) -> array of y values (NaN where unknown). Returns the written paths."""
    rows = scaling_rows(data)
    models = pick_model_order(rows["model"])
    fig, axes = style.panel_grid(len(models))
    # a backend suffix only where one source mixes backends (measured on CPU and on GPU, say)
    mixed_backends = rows.groupby("source")["backend"].nunique().max() > 1
    # which projection the projected rows are (lins simulate's label): in the title when there is one, else per series
    if TITLES == "plain":
        title = title.partition(": ")[2] or title
    labels = sorted(set(rows.loc[rows["source"] == "projected", "label"]) - {""})
    if len(labels) == 1:
        title += f" (projection: {labels[0]})"
    for ax, model in zip(axes, models):
        m = rows[rows["model"] == model]
        for strategy in style.sort_strategies(m["strategy"]):
            colour, marker = style.strategy_style(strategy)
            for (source, backend, projection), series in m[m["strategy"] == strategy].groupby(
                    ["source", "backend", "label"]):
                label = style.strategy_label(strategy)
                if mixed_backends:
                    label += f" [{backend}]"
                if source == "projected":
                    label += f" (proj. {projection})" if len(labels) > 1 and projection else " (proj.)"
                style.plot_scaling_series(ax, series, value_of, label, colour, marker, source,
                                          peer=style.is_peer(strategy))
        style.gpu_axis(ax, m["world_size"])
        ax.set_title(model)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    notes = style.source_legend_handles(set(rows["source"]), peers=rows["strategy"].map(style.is_peer).any())
    fig.legend(handles + notes, labels + [h.get_label() for h in notes], loc="upper center",
               ncol=min(6, len(handles) + len(notes)), bbox_to_anchor=(0.5, 1.12), fontsize=8, frameon=False)
    fig.suptitle(title, y=1.16)
    return style.save_figure(fig, out_dir, name, formats)
