#!/usr/bin/env python3
"""Projected against measured step times of the same configurations: reads the measured `lins step` CSVs and the
`lins simulate` CSVs made for their exact configurations (scripts/validate-projection.sh) and prints, per micro-batch
count and strategy, the measured step time (mean over timed steps of the slowest rank), the projected one and the
error, with the compute and exposed communication of each; --csv writes the table."""

import argparse
import sys

import pandas as pd


def alias_for(aliases, run, strategy):
    """The projected name of a measured strategy: a run's own alias ("RUN:lins=PLAN") first, then one for all runs."""
    return aliases.get((run, strategy), aliases.get((None, strategy), strategy))


def parse_aliases(texts):
    aliases = {}
    for a in texts:
        name, projected = a.split("=", 1)
        run, _, strategy = name.rpartition(":")
        aliases[(run or None, strategy)] = projected
    return aliases


def compare(pairs, aliases):
    rows = []
    for label, measured_path, projected_path in pairs:
        meas = pd.read_csv(measured_path)
        meas = meas[meas["source"] == "measured"]
        proj = pd.read_csv(projected_path)
        for strategy, g in meas.groupby("strategy", sort=False):
            p = proj[proj["strategy"] == alias_for(aliases, label, strategy)]
            if p.empty:
                continue
            m, q = g["step_time_s"].mean(), float(p["step_time_s"].iloc[0])
            rows.append({"run": label, "strategy": strategy, "measured_s": m, "projected_s": q, "error": (q - m) / m,
                         "measured_compute_s": (g["forward_s"] + g["backward_s"]).mean(),
                         "projected_compute_s": float(p["forward_s"].iloc[0] + p["backward_s"].iloc[0]),
                         "measured_exposed_s": g["exposed_comm_s"].mean(),
                         "projected_exposed_s": float(p["exposed_comm_s"].iloc[0])})
    return pd.DataFrame(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pair", action="append", nargs=3, metavar=("LABEL", "MEASURED_CSV", "PROJECTED_CSV"),
                    required=True, help="a measured step CSV and the projection of its configuration")
    ap.add_argument("--alias", action="append", default=[], metavar="[RUN:]MEASURED=PROJECTED",
                    help="a measured strategy projected under another name (lins=p=1x1,g=1x1,os=2x2), in every run "
                         "or in the run labelled RUN only (m2:lins=p=2x1,g=2x1,os=2x2)")
    ap.add_argument("--csv", help="write the table here")
    args = ap.parse_args(argv)
    aliases = parse_aliases(args.alias)
    df = compare(args.pair, aliases)
    if df.empty:
        print("no strategy of the measured CSVs was projected", file=sys.stderr)
        return 1
    pd.set_option("display.width", 200)
    print(df.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    worst = df.groupby("run")["error"].apply(lambda e: e.abs().max())
    print("largest |error| per run: " + ", ".join(f"{k} {v:.1%}" for k, v in worst.items()))
    per_strategy = df.groupby("strategy", sort=False)["error"].apply(lambda e: e.abs().max())
    print("largest |error| per strategy: " + ", ".join(f"{k} {v:.1%}" for k, v in per_strategy.items()))
    if args.csv:
        df.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
