"""Summarises data/cluster/device-rate/runs/*/step.csv (written by measure.sh) into summary.csv and the README's
tables: per run and strategy, the mean over the timed steps of forward + backward compute (the same FLOPs under every
strategy), the optimizer, the tasks that overran the device and MFU; per run, the spread across strategies."""
import csv
import glob
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
rows = []
for path in sorted(glob.glob(os.path.join(here, "runs", "*", "step.csv"))):
    run = os.path.basename(os.path.dirname(path))
    got = list(csv.DictReader(l for l in open(path) if not l.startswith("#")))
    for s in dict.fromkeys(r["strategy"] for r in got):
        mine = [r for r in got if r["strategy"] == s]
        mean = lambda k: statistics.mean(float(r[k]) for r in mine)
        rows.append({
            "run": run, "strategy": s, "world_size": mine[0]["world_size"], "fabric": mine[0]["fabric"],
            "steps": len(mine), "fwd_bwd_s": mean("forward_s") + mean("backward_s"), "optimizer_s": mean("optimizer_s"),
            "step_time_s": mean("step_time_s"), "exposed_comm_s": mean("exposed_comm_s"),
            "overrun_tasks": sum(int(float(r["overrun_tasks"])) for r in mine if r["overrun_tasks"] != ""),
            "mfu": mean("mfu"), "mfu_max": max(float(r["mfu"]) for r in mine), "peak_source": mine[0]["peak_source"],
            "peak_tflops": mine[0]["peak_tflops"],
        })
with open(os.path.join(here, "summary.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()})

runs = list(dict.fromkeys(r["run"] for r in rows))
out = sys.stdout
for run in runs:
    mine = [r for r in rows if r["run"] == run]
    fb = [r["fwd_bwd_s"] for r in mine]
    out.write(f"| {run} | " + " | ".join(f"{r['strategy']} {1e3 * r['fwd_bwd_s']:.1f} ({r['overrun_tasks']})"
                                         for r in mine) + f" | {max(fb) / min(fb):.2f} |\n")
