"""Fig. 16/17: where Lins's gain comes from. MFU (Fig. 16) and TGS (Fig. 17) of three series per model and scale:
the baseline system with the MiCS plan, Lins's engine with the same MiCS plan, and Lins's engine with its own
planned strategy; beside them, when measured, the real systems with that plan (python/lins_peers: DeepSpeed's
MiCS, FSDP2's HSDP), dotted."""

import pandas as pd

from . import NoData
from . import schema
from . import style
from .fig11 import mfu_percent
from .load import pick_model_order, summarise_steps

SERIES = [("baseline", "MiCS plan, baseline engine", "tab:red", "D"),
          ("lins_engine_mics_plan", "MiCS plan, Lins engine", "tab:pink", "o"),
          ("lins", "Lins planned strategy", "tab:purple", "*")]


def series_rows(data):
    """Rows labelled with their Fig. 16/17 series (column `series`); raises NoData when none can be drawn."""
    if data.steps.empty:
        raise NoData("no step CSV found")
    s = summarise_steps(data.steps)
    if (s["overlap"] == "all").any():
        s = s[s["overlap"].isin(["all", ""])]
    s = s.sort_values("tokens", ascending=False)
    keys = ["source", "backend", "model", "world_size"]
    base = s[(s["strategy"] == "mics") & (s["engine"] == "mics")].drop_duplicates(keys)
    if base.empty:
        raise NoData("no MiCS rows on the baseline engine (strategy mics, engine mics)")
    parts = [base.assign(series="baseline")]
    lins = s[(s["strategy"] == "lins") & (s["engine"] == "lins")].drop_duplicates(keys)
    parts.append(lins.assign(series="lins"))
    # the Lins engine running exactly the MiCS 6-tuple of the same model and scale
    on_lins = s[s["engine"] == "lins"].merge(base[keys + schema.PLAN_FACTORS], on=keys + schema.PLAN_FACTORS)
    on_lins = on_lins.sort_values("strategy", key=lambda c: c == "lins").drop_duplicates(keys)
    parts.append(on_lins.assign(series="lins_engine_mics_plan"))
    # the real systems with the MiCS plan (sharded in a node, replicated across): DeepSpeed's MiCS, FSDP2's HSDP
    peers = s[s["strategy"].map(lambda n: style.peer_preset(n) in ("mics", "hsdp")) & (s["source"] == "measured")]
    peers = peers.drop_duplicates(keys + ["strategy"])
    parts.append(peers.assign(series=peers["strategy"]))
    rows = pd.concat(parts, ignore_index=True)
    if set(rows["series"]) == {"baseline"}:
        raise NoData("MiCS baseline rows found but no Lins-engine rows to compare them with")
    return rows


def _draw(data, out_dir, name, value_of, ylabel, title, formats):
    rows = series_rows(data)
    models = pick_model_order(rows["model"])
    fig, axes = style.panel_grid(len(models))
    for ax, model in zip(axes, models):
        m = rows[rows["model"] == model]
        for key, label, colour, marker in SERIES:
            for source, series in m[m["series"] == key].groupby("source"):
                style.plot_scaling_series(ax, series, value_of, label + (" (proj.)" if source == "projected" else ""),
                                          colour, marker, source)
        for key in sorted(k for k in set(m["series"]) if style.is_peer(k)):
            colour, marker = style.strategy_style(key)
            style.plot_scaling_series(ax, m[m["series"] == key], value_of, "MiCS plan, " + style.peer_label(key),
                                      colour, marker, "measured", peer=True)
        style.gpu_axis(ax, m["world_size"])
        ax.set_title(model)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    notes = style.source_legend_handles(set(rows["source"]), peers=rows["series"].map(style.is_peer).any())
    fig.legend(handles=notes, loc="lower center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize=8, frameon=False)
    fig.suptitle(title)
    return style.save_figure(fig, out_dir, name, formats)


def draw(data, out_dir, formats=("png", "pdf")):
    paths = _draw(data, out_dir, "fig16_mfu_engine_vs_plan", mfu_percent, "MFU (%)",
                  "Fig. 16: MFU, engine versus plan", formats)
    paths += _draw(data, out_dir, "fig17_tgs_engine_vs_plan", lambda r: r["tgs"].to_numpy(dtype=float),
                   "TGS (tokens / GPU / s)", "Fig. 17: TGS, engine versus plan", formats)
    return paths
