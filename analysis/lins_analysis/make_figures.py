"""Draws every figure and table of the paper that the data allows, and says which ones lacked data and why.

usage: python3 -m lins_analysis.make_figures --data DIR [--data DIR ...] --out DIR [--only fig11,fig3]
       (or, from a checkout, python3 analysis/make_figures.py with the same arguments)
DIR is searched recursively for step CSVs (lins step / lins simulate), bandwidth profiles (lins comm --profile),
plan tables (lins plan --csv) and traces (lins step --trace). Exit status: 0 when at least one figure was drawn,
1 when none could be, 2 on bad arguments.
"""

import argparse
import os
import sys
import warnings

from lins_analysis import NoData
from lins_analysis import (comm_model, fig2, fig3, fig11, fig12, fig13, fig16_17, scaling, table4, table5, timeline,
                           zeropp_quant)
from lins_analysis.load import load

# name -> (module, what it shows); the paper's order (docs/method.md, "Figures and tables"), then the figure the
# paper lacks
FIGURES = {
    "fig2": (fig2, "ZeRO memory, compute and collective latency vs GPUs"),
    "fig3": (fig3, "bandwidth profile vs message size"),
    "fig11": (fig11, "MFU vs GPUs"),
    "fig12": (fig12, "TGS vs GPUs"),
    "fig13": (fig13, "peak memory vs GPUs"),
    "timeline": (timeline, "step timeline from traces (Fig. 14/15 style)"),
    "fig16_17": (fig16_17, "engine vs plan (MFU, TGS)"),
    "table4": (table4, "plans per model and system"),
    "table5": (table5, "overlap ablation"),
    "comm_model": (comm_model, "predicted vs measured communication time, with the error"),
    "zeropp_quant": (zeropp_quant, "ZeRO++'s quantized communication: loss difference and bytes per variant"),
}


def make_all(data_dirs, out_dir, only=None, formats=("png", "pdf"), log=print):
    """Draws the selected figures; returns {name: list of paths} and {name: reason it lacked data}."""
    data = load(data_dirs)
    log(f"read {len(data.steps)} step rows, {len(data.profiles)} profile rows, {len(data.plans)} plan rows, "
        f"{len(data.traces)} traces, {len(data.provenance)} provenance files from {', '.join(data_dirs)}"
        + (f" ({len(data.other)} other tables no figure draws: action logs, replay and collective tables)"
           if data.other else ""))
    for path, why in data.skipped:
        log(f"  skipped {path}: {why}")
    drawn, missing = {}, {}
    for name, (module, what) in FIGURES.items():
        if only and name not in only:
            continue
        try:
            drawn[name] = module.draw(data, out_dir, formats)
            log(f"{name:10s} drawn ({what}): {', '.join(os.path.basename(p) for p in drawn[name])}")
        except NoData as e:
            missing[name] = str(e)
            log(f"{name:10s} NOT drawn ({what}): {e}")
    if "comm_model" in drawn:
        table = comm_model.error_table(data)
        path = os.path.join(out_dir, "comm_model_error.csv")
        table.to_csv(path, index=False)
        drawn["comm_model"].append(path)
    return drawn, missing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", action="append", required=True, help="folder or file of results (repeatable)")
    parser.add_argument("--out", required=True, help="folder for the figures")
    parser.add_argument("--only", default="", help="comma-separated subset of: " + ", ".join(FIGURES))
    parser.add_argument("--formats", default="png,pdf", help="image formats (default png,pdf)")
    parser.add_argument("--series", default="all",
                        help="the series of Fig. 11-13: all (every preset in the data, the default), paper (ZeRO-1, "
                             "ZeRO-3, ZeRO++, MiCS, Lins), or comma-separated strategy names")
    parser.add_argument("--titles", choices=["paper", "plain"], default="paper",
                        help="paper: titles name the paper's figure (Fig. 11: ...); plain: without it")
    args = parser.parse_args(argv)
    scaling.SERIES = args.series if args.series in ("all", "paper") else [s for s in args.series.split(",") if s]
    scaling.TITLES = args.titles
    only = [s for s in args.only.split(",") if s]
    unknown = [s for s in only if s not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; valid: {', '.join(FIGURES)}")
    for d in args.data:
        if not os.path.exists(d):
            parser.error(f"--data {d}: no such file or folder")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        drawn, missing = make_all(args.data, args.out, only, tuple(args.formats.split(",")))
    print(f"{len(drawn)} figure(s)/table(s) drawn into {args.out}; {len(missing)} lacked data")
    return 0 if drawn else 1


if __name__ == "__main__":
    sys.exit(main())
