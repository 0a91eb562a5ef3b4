"""The planner's choice against every plan measured: reads a `lins step` CSV in which the strategies are `lins` (the
planner's choice) and every legal plan as a 6-tuple (and, optionally, the baselines), and the `lins plan --csv` table
of the same setup; prints each plan's measured step time (mean over timed steps of the slowest rank), its rank by
measurement and in the plan table, and whether each planner's choice is the fastest measured plan that fits the
planner's memory limit, or how far from it. Used for Table IV on the emulated cluster (jobs/cluster_experiments.sh).
Run as python3 -m lins_analysis.compare_plans, or analysis/compare_plans.py."""

import argparse
import sys

import pandas as pd

from lins_analysis.load import read_csv, read_step_csv
from lins_analysis.style import markdown_table


def compare(step_csv, plan_csv=None):
    steps = read_step_csv(step_csv)
    steps = steps[steps["source"] == "measured"]
    table = steps.groupby(["strategy", "engine", "plan"], sort=False).agg(
        step_s=("step_time_s", "mean"), exposed_s=("exposed_comm_s", "mean"),
        inter_bytes=("inter_bytes", "mean")).reset_index()
    table["measured_rank"] = table["step_s"].rank(method="min").astype(int)
    if plan_csv:
        plans = read_csv(plan_csv)
        ranks = {r["name"]: (str(int(r["rank"])) if int(r["feasible"]) else "does not fit")
                 for _, r in plans.iterrows()}
        table["planner_rank"] = [ranks.get(s, "") for s in table["strategy"]]
        table["fits"] = table["planner_rank"] != "does not fit"
    return table.sort_values("step_s").reset_index(drop=True)


def verdict(table, label="the planner's choice", strategy="lins"):
    """Where the plan measured as `strategy` (by default 'lins', the planner's choice run by name) stands."""
    chosen = table[table["strategy"] == strategy]
    if chosen.empty:
        return f"{label} ({strategy}) was not measured"
    c = chosen.iloc[0]
    # Against the plans the planner could choose: those that fit its memory limit, where the plan table says so.
    if "fits" in table.columns:
        table = table[table["fits"] | (table["strategy"] == strategy)]
    lins_engine = table[table["engine"] == "lins"]
    best = lins_engine.iloc[0]
    gap = c["step_s"] / best["step_s"] - 1
    overall = table.iloc[0]
    where = f"{label}, {strategy} ({c['engine']} engine), measured {c['step_s']:.4f} s"
    if c["engine"] == "lins":
        if best["strategy"] == strategy or best["plan"] == c["plan"]:
            where += ": the fastest measured plan on the Lins engine"
        else:
            where += (f", {gap:+.1%} against the fastest plan on the Lins engine, {best['strategy']} "
                      f"({best['step_s']:.4f} s)")
    if overall["strategy"] == strategy:
        where += "; the fastest of everything measured that fits"
    else:
        where += (f"; {c['step_s'] / overall['step_s'] - 1:+.1%} against the fastest of everything measured that fits, "
                  f"{overall['strategy']} ({overall['engine']} engine, {overall['step_s']:.4f} s)")
    return where


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("step_csv", help="lins step CSV: lins, every legal plan, optionally the baselines")
    ap.add_argument("--plans", help="lins plan --csv of the same setup (adds the planner's rank)")
    ap.add_argument("--choice", action="append", default=[], metavar="LABEL=STRATEGY",
                    help="a planner's choice measured under this strategy name (default: lins)")
    ap.add_argument("--markdown", help="write the table here as Markdown")
    args = ap.parse_args(argv)
    table = compare(args.step_csv, args.plans)
    choices = [c.split("=", 1) for c in args.choice] or [("the planner's choice", "lins")]
    verdicts = [verdict(table, label, strategy) for label, strategy in choices]
    pd.set_option("display.width", 200)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    print("\n".join(verdicts))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown_table(table, "{:.4f}") + "\n" + "\n\n".join(verdicts) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
