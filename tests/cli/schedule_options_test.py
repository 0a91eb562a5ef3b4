#!/usr/bin/env python3
"""One plan, one size: `lins plan` under both objectives and `lins simulate` build a plan's schedule with the same
options (schedule_options, src/core/schedule/schedule.h), so they report the same memory and the same bytes for it,
and every engine option (--ds-*, --ddp-*) changes what it should in each of them; `lins step` predicts its memory with
the engine options too, and every command takes the same default gradient bucket. (Under the paper's objective the
planner once built its schedules without the engines' options: ZeRO-3 on 8 x 16 had 1.35 GB of buffers there and
7.95 GB under the step objective; `lins step`'s bucket was 1 MiB where plan and simulate took 25 MiB.)
Usage: schedule_options_test.py LINS MPIEXEC WORK"""
import csv
import json
import os
import subprocess
import sys

LINS, MPIEXEC, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
# (options both commands take, nodes for plan, GPUs for simulate); a limit every plan fits under: the test is about
# sizes, not about which plans fit.
CLUSTERS = {
    "7b": (["--model", "llama-7b", "--gpus-per-node", "8", "--gpu-mem", "1024GiB"], "16", "128"),
    "small": (["--model", "small", "--seq", "128", "--micro-batch", "1", "--global-batch-tokens", "4096",
               "--gpus-per-node", "2", "--network", "cpu-local", "--gpu-mem", "80GiB"], "2", "4"),
}
failures = []


def run(args):
    out = subprocess.run(args, capture_output=True, text=True, timeout=240)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")


def plan_row(cluster, plan, objective, extra, tag):
    path = os.path.join(WORK, f"plan-{tag}-{objective}.csv")
    common, nodes, _ = CLUSTERS[cluster]
    run([LINS, "plan", *common, "--nodes", nodes, "--plan", plan, "--objective", objective, "--csv", path, *extra])
    return next(csv.DictReader(open(path)))


def simulate_row(cluster, plan, extra, tag):
    path = os.path.join(WORK, f"simulate-{tag}.csv")
    common, _, gpus = CLUSTERS[cluster]
    run([LINS, "simulate", *common, "--gpus", gpus, "--strategies", plan, "--out", path, *extra])
    return next(csv.DictReader(open(path)))


def check(cond, what):
    if not cond:
        failures.append(what)


def views(cluster, plan, extra, tag):
    """The plan's memory and bytes as each command reports them, checked equal; returns them."""
    comm = plan_row(cluster, plan, "comm", extra, tag)
    step = plan_row(cluster, plan, "step", extra, tag)
    sim = simulate_row(cluster, plan, extra, tag)
    where = f"{plan} {' '.join(extra)}"
    for col in ["state_bytes", "activation_bytes", "buffer_bytes", "total_bytes", "reserve_bytes", "intra_bytes",
                "inter_bytes", "comm_s"]:
        check(float(comm[col]) == float(step[col]),
              f"{where}: {col} is {comm[col]} under --objective comm and {step[col]} under --objective step")
    check(float(sim["model_mem_bytes"]) == float(step["total_bytes"]),
          f"{where}: simulate's model_mem_bytes {sim['model_mem_bytes']} against plan's total_bytes {step['total_bytes']}")
    check(float(sim["pred_inter_bytes"]) == float(step["inter_bytes"]),
          f"{where}: simulate's pred_inter_bytes {sim['pred_inter_bytes']} against plan's inter_bytes "
          f"{step['inter_bytes']}")
    return {"buffer": float(step["buffer_bytes"]), "total": float(step["total_bytes"]),
            "inter": float(step["inter_bytes"]), "comm_s": float(comm["comm_s"]),
            "step_s": float(sim["step_time_s"])}


# (cluster, plan, option, value, what it must change, what it must leave)
CASES = [
    ("7b", "zero3", "--ds-reduce-bucket", "5000000", ["buffer"], ["inter"]),
    ("7b", "zero3", "--ds-prefetch-bucket", "200000000", ["buffer"], ["inter"]),
    ("7b", "zero3", "--ds-max-reuse-distance", "0", ["buffer", "inter"], []),  # released and gathered again
    ("7b", "zero3", "--ds-persistence-threshold", "100000000", ["buffer", "inter"], []),  # attention kept whole
    ("7b", "zero1", "--ds-overlap-comm", "on", ["step_s"], ["buffer", "inter", "comm_s"]),
    ("small", "ddp", "--ddp-first-bucket", "512M", ["step_s"], ["buffer", "inter"]),
]
base = {}
for cluster, plan, option, value, changes, keeps in CASES:
    if (cluster, plan) not in base:
        base[cluster, plan] = views(cluster, plan, [], f"{cluster}-{plan}-default")
    was = base[cluster, plan]
    got = views(cluster, plan, [option, value], f"{cluster}-{plan}{option}")
    for key in changes:
        check(got[key] != was[key], f"{plan} {option} {value}: {key} stayed {got[key]}")
    for key in keeps:
        check(got[key] == was[key], f"{plan} {option} {value}: {key} went {was[key]} -> {got[key]}")

# lins step (4 ranks as 2 x 2, the small model) predicts a plan's memory from its engine options too.
def step_memory(extra, tag):
    path = os.path.join(WORK, f"step-{tag}")
    mpi = [MPIEXEC, "--oversubscribe", "-np", "4", "-x", "OPENBLAS_NUM_THREADS=1"]
    if os.geteuid() == 0:
        mpi.insert(1, "--allow-run-as-root")
    run([*mpi, LINS, "step", "--model", "small", "--gpus-per-node", "2", "--strategies", "zero3", "--warmup", "0",
         "--steps", "1", "--device-rate", "off", "--out", path, *extra])
    return float(next(csv.DictReader(open(os.path.join(path, "step.csv"))))["model_mem_bytes"])


small = step_memory([], "default")
smaller = step_memory(["--ds-reduce-bucket", "1000", "--ds-prefetch-bucket", "1000"], "small-buckets")
check(smaller != small, f"lins step: --ds-reduce-bucket and --ds-prefetch-bucket left model_mem_bytes at {small}")

# One default gradient bucket (--bucket) in every command: 25 MiB, DDP's bucket_cap_mb (kDefaultBucketBytes).
DEFAULT_BUCKET = 25 << 20
plan_bucket = int(float(plan_row("small", "ddp", "comm", [], "small-ddp-bucket")["bucket_bytes"]))
step_bucket = json.load(open(os.path.join(WORK, "step-default", "step.provenance.json")))["run"]["bucket_bytes"]
check(plan_bucket == step_bucket == DEFAULT_BUCKET,
      f"default --bucket: lins plan {plan_bucket}, lins step {step_bucket}; expected {DEFAULT_BUCKET} in both")
for command in ("plan", "simulate", "step"):
    help_text = subprocess.run([LINS, command, "--help"], capture_output=True, text=True, timeout=60).stdout
    line = help_text.split("--bucket SIZE")[1].split("\n")[0] if "--bucket SIZE" in help_text else ""
    check("[default: 25MiB]" in line, f"lins {command} --help does not show --bucket's default as 25MiB: {line}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"every command sizes and prices each plan alike; {len(CASES)} engine options change what they should")
