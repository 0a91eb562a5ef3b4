"""Table V: overlap ablation of Lins at 64 GPUs, M = 1, 2, 4, 8: TGS and MFU with every overlap, without the
Broadcast overlap, also without the AllReduce overlap, and with no overlap (the step CSV's `overlap` column)."""

import pandas as pd

from . import NoData
from . import schema
from .load import summarise_steps
from . import style
from .fig11 import mfu_percent

MODE_LABELS = {"all": "all overlaps", "no_bcast": "w/o Broadcast ovl.", "no_allreduce": "w/o Bcast+AllReduce ovl.",
               "none": "no overlap"}


def ablation_rows(data):
    if data.steps.empty:
        raise NoData("no step CSV found")
    s = summarise_steps(data.steps)
    s = s[(s["strategy"] == "lins") & s["overlap"].isin(schema.OVERLAP_MODES) & (s["feasible"] != 0)]
    if s.empty or s["overlap"].nunique() < 2:
        raise NoData("needs Lins rows with at least two overlap modes (lins step --overlap ...)")
    # the paper's scale is 64 GPUs; otherwise the (source, model, scale) with the most ablation points
    counts = s.groupby(["source", "backend", "model", "world_size"]).size().reset_index(name="n")
    counts["is64"] = counts["world_size"] == 64
    best = counts.sort_values(["is64", "n"], ascending=False).iloc[0]
    sel = s[(s["source"] == best["source"]) & (s["backend"] == best["backend"]) & (s["model"] == best["model"])
            & (s["world_size"] == best["world_size"])]
    return sel, best


def draw(data, out_dir, formats=("png", "pdf")):
    sel, best = ablation_rows(data)
    sel = sel.assign(mfu_pct=mfu_percent(sel))
    modes = [m for m in schema.OVERLAP_MODES if m in set(sel["overlap"])]
    rows = []
    for mb in sorted(set(sel["micro_batches"])):
        row = {"M": int(mb)}
        for mode in modes:
            r = sel[(sel["micro_batches"] == mb) & (sel["overlap"] == mode)]
            row[f"TGS {MODE_LABELS[mode]}"] = f"{r['tgs'].iloc[0]:.4g}" if len(r) else "-"
        for mode in modes:
            r = sel[(sel["micro_batches"] == mb) & (sel["overlap"] == mode)]
            row[f"MFU % {MODE_LABELS[mode]}"] = f"{r['mfu_pct'].iloc[0]:.3g}" if len(r) else "-"
        rows.append(row)
    title = (f"Table V: overlap ablation, {best['model']}, {int(best['world_size'])} ranks, "
             f"{best['source']} ({best['backend']})")
    return style.write_table(pd.DataFrame(rows), out_dir, "table5_overlap", title, formats)
