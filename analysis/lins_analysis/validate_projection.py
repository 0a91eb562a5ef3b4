"""Projected against measured step times of the same configurations: reads the measured `lins step` CSVs and the
`lins simulate` CSVs made for their exact configurations (scripts/validate-projection.sh) and prints, per run and
strategy, the measured step time (mean over timed steps of the slowest rank), the projected one and the error, and the
same for its two parts: compute (forward + backward + optimizer, and in projected rows the compute's contention
slowdown, contention_compute_s) and exposed communication. A run may be projected twice, without contention (--before)
and with it (--pair): both are compared. The summary gives the worst |error| per strategy and node count, before and
after; --csv writes the rows, --summary the summary as Markdown.
Run as python3 -m lins_analysis.validate_projection, or analysis/validate_projection.py."""

import argparse
import re
import sys

import pandas as pd

GOAL = 0.15  # |error| of the step time every row should stay within


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


def nodes_of(label):
    """The node count of a run labelled nN_mM_OVERLAP (scripts/validate-projection.sh), else None."""
    m = re.match(r"n(\d+)_", label)
    return int(m.group(1)) if m else None


def projected_parts(p):
    """Step, compute (with its contention slowdown) and exposed communication of one projected row."""
    row = p.iloc[0]
    contention = float(row["contention_compute_s"]) if "contention_compute_s" in p.columns else 0.0
    compute = float(row["forward_s"] + row["backward_s"] + row["optimizer_s"]) + contention
    return float(row["step_time_s"]), compute, float(row["exposed_comm_s"])


def compare(pairs, before, aliases):
    rows = []
    for label, measured_path, projected_path in pairs:
        meas = pd.read_csv(measured_path)
        meas = meas[meas["source"] == "measured"]
        proj = pd.read_csv(projected_path)
        proj_before = pd.read_csv(before[label]) if label in before else None
        for strategy, g in meas.groupby("strategy", sort=False):
            name = alias_for(aliases, label, strategy)
            p = proj[proj["strategy"] == name]
            if p.empty:
                continue
            m = g["step_time_s"].mean()
            mc = (g["forward_s"] + g["backward_s"] + g["optimizer_s"]).mean()
            me = g["exposed_comm_s"].mean()
            q, qc, qe = projected_parts(p)
            # Compute and exposed communication are compared as shares of the measured step (exposed communication
            # alone can be near 0, where its own relative error means little).
            r = {"run": label, "nodes": nodes_of(label), "strategy": strategy, "measured_s": m, "projected_s": q,
                 "error": (q - m) / m, "measured_compute_s": mc, "projected_compute_s": qc,
                 "compute_error": (qc - mc) / m, "measured_exposed_s": me, "projected_exposed_s": qe,
                 "exposed_error": (qe - me) / m}
            if proj_before is not None:
                pb = proj_before[proj_before["strategy"] == name]
                if not pb.empty:
                    b, bc, be = projected_parts(pb)
                    r.update({"projected_before_s": b, "error_before": (b - m) / m,
                              "compute_error_before": (bc - mc) / m, "exposed_error_before": (be - me) / m})
            rows.append(r)
    return pd.DataFrame(rows)


def summary(df):
    """Worst |error| per strategy (rows) and node count, before and after contention (columns), step, compute and
    exposed communication."""
    cols = {}
    for nodes, g in df.groupby("nodes", sort=True, dropna=False):
        where = f"{int(nodes)} nodes" if pd.notna(nodes) else "all"
        for what, col in (("step", "error"), ("compute", "compute_error"), ("exposed", "exposed_error")):
            for when, suffix in (("before", "_before"), ("after", "")):
                c = col + suffix
                if c in g.columns:
                    cols[f"{where} {what} {when}"] = g.groupby("strategy", sort=False)[c].apply(
                        lambda e: e.abs().max())
    table = pd.DataFrame(cols)
    table = table.reindex(df["strategy"].drop_duplicates())
    return table


def markdown(table):
    head = "| strategy | " + " | ".join(table.columns) + " |"
    lines = [head, "|---" * (len(table.columns) + 1) + "|"]
    for s, row in table.iterrows():
        lines.append(f"| {s} | " + " | ".join("-" if pd.isna(v) else f"{v:.1%}" for v in row) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pair", action="append", nargs=3, metavar=("LABEL", "MEASURED_CSV", "PROJECTED_CSV"),
                    required=True, help="a measured step CSV and the projection of its configuration")
    ap.add_argument("--before", action="append", nargs=2, default=[], metavar=("LABEL", "PROJECTED_CSV"),
                    help="the same run's projection without contention (lins simulate --contention off)")
    ap.add_argument("--alias", action="append", default=[], metavar="[RUN:]MEASURED=PROJECTED",
                    help="a measured strategy projected under another name (lins=p=1x1,g=1x1,os=2x2), in every run "
                         "or in the run labelled RUN only (m2:lins=p=2x1,g=2x1,os=2x2)")
    ap.add_argument("--csv", help="write the rows here")
    ap.add_argument("--summary", help="write the summary table here (Markdown)")
    args = ap.parse_args(argv)
    aliases = parse_aliases(args.alias)
    before = dict((label, path) for label, path in args.before)
    unknown = set(before) - {label for label, _, _ in args.pair}
    if unknown:
        print(f"--before names runs no --pair has: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    df = compare(args.pair, before, aliases)
    if df.empty:
        print("no strategy of the measured CSVs was projected", file=sys.stderr)
        return 1
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_rows", 1000)
    print("Errors are (projected - measured) / measured step time; compute = forward + backward + optimizer "
          "(+ contention_compute_s projected); *_before: projected with --contention off.")
    print(df.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    worst = df.groupby("run", sort=False)["error"].apply(lambda e: e.abs().max())
    print("largest |error| per run: " + ", ".join(f"{k} {v:.1%}" for k, v in worst.items()))
    table = summary(df)
    print("\nworst |error| per strategy (share of the measured step):")
    print(markdown(table))
    miss = df[df["error"].abs() > GOAL]
    print(f"\nrows beyond {GOAL:.0%} (with contention where projected): {len(miss)} of {len(df)}")
    if not miss.empty:
        print(miss[["run", "strategy", "measured_s", "projected_s", "error", "compute_error", "exposed_error"]]
              .to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    if "error_before" in df.columns:
        miss_b = df[df["error_before"].abs() > GOAL]
        print(f"rows beyond {GOAL:.0%} without contention: {len(miss_b)} of {int(df['error_before'].notna().sum())}")
    if args.csv:
        df.to_csv(args.csv, index=False)
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(markdown(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
