#!/usr/bin/env python3
"""The planner's step objective agrees with `lins simulate`: for each setup (models, meshes, networks, network models,
measured inputs, memory limits, overlap modes) `lins plan --objective step --csv` ranks every legal plan and baseline;
`lins simulate` then projects every one of them with the same options, and the test checks that each plan's projected
step time and feasibility are the simulator's, and that the chosen plan has the smallest projected step time among the
plans the simulator says fit. The network files are plain TOML: Python's tomllib reads them with no code of ours, and
a plan CSV names the network a file's own `name` gives. Usage: plan_matches_simulate.py LINS REPO WORK"""
import csv
import os
import subprocess
import sys
import tomllib

LINS, REPO, WORK = sys.argv[1:4]
VALIDATION = os.path.join(REPO, "data", "validation", "cpu-2core-4ranks")
NETWORKS = os.path.join(REPO, "data", "networks")
NCCL_TESTS = os.path.join(REPO, "tests", "unit", "core", "data", "all_reduce_perf_h100_8x2.txt")

# (name, gpus per node, nodes, options both commands take, options of `lins plan` only). `lins simulate` projects a
# strategy it is given at the given micro-batch size and recomputation, so the planner is held to the same ones (FIXED:
# it searches them only where they are left open).
FIXED = ["--micro-batch", "1", "--recompute-mode", "none"]
SETUPS = [
    ("llama-7b on the paper's 8 x 128", 8, 128, ["--model", "llama-7b"], FIXED),
    ("llama-13b on 8 x 2 H100, nccl-tests measured, 60 GiB", 8, 2,
     ["--model", "llama-13b", "--network", os.path.join(NETWORKS, "h100-ndr.toml"), "--nccl-tests", NCCL_TESTS,
      "--gpu-mem", "60GiB"], FIXED),
    ("llama-30b recomputed on 8 x 8, alpha-beta, no broadcast overlap", 8, 8,
     ["--model", "llama-30b", "--recompute", "--network-model", "alpha-beta", "--overlap", "no_bcast"],
     ["--micro-batch", "1"]),
    ("llama-7b on 4 x 4 of 100G Ethernet, 30 GiB, shared links", 4, 4,
     ["--model", "llama-7b", "--network", "ethernet-100g", "--gpu-mem", "30GiB", "--pricing", "shared"], FIXED),
    ("small on 2 x 2 measured: profile and calibrated compute", 2, 2,
     ["--model", "small", "--seq", "128", "--micro-batch", "1", "--global-batch-tokens", "1024", "--overlap", "none",
      "--profile", os.path.join(VALIDATION, "profile.csv"), "--network", "cpu-local",
      "--calibrate", os.path.join(VALIDATION, "m2", "step.csv") + "," + os.path.join(VALIDATION, "m4", "step.csv"),
      "--calibrate-as", "ddp", "--bucket", "1M", "--ds-persistence-threshold", "14", "--ds-prefetch-bucket", "7200",
      "--peak-tflops", "1", "--gpu-mem", "10MiB", "--reserve-context", "0B", "--reserve-cublas", "0B",
      "--reserve-nccl", "0B", "--reserve-fragmentation", "0"], ["--recompute-mode", "none"]),
]


def run(args):
    p = subprocess.run([LINS] + args, capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 1):
        sys.exit(f"lins {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)


def network_name(path):
    with open(path, "rb") as f:
        return tomllib.load(f)["name"]


failures = []
for f in sorted(os.listdir(NETWORKS)):
    if os.path.splitext(f)[1] != ".toml" or network_name(os.path.join(NETWORKS, f)) != os.path.splitext(f)[0]:
        failures.append(f"data/networks/{f}: not a TOML file named after the network inside it")
os.makedirs(WORK, exist_ok=True)
for i, (name, R, N, common, plan_only) in enumerate(SETUPS):
    plans_csv = os.path.join(WORK, f"plans{i}.csv")
    proj_csv = os.path.join(WORK, f"projection{i}.csv")
    run(["plan", "--objective", "step", "--gpus-per-node", str(R), "--nodes", str(N), "--csv", plans_csv] + common +
        plan_only)
    plans = read(plans_csv)
    if not plans:
        failures.append(f"{name}: no plans")
        continue
    network = common[common.index("--network") + 1] if "--network" in common else "paper-a800"
    if network.endswith(".toml") and {r["network"] for r in plans} != {network_name(network)}:
        failures.append(f"{name}: the plans name network {sorted({r['network'] for r in plans})}, "
                        f"{network} names {network_name(network)}")
    strategy = {}  # the strategy text lins simulate is given for each plan row
    for r in plans:
        strategy[r["name"] if r["baseline"] == "1" else r["plan"]] = r
    run(["simulate", "--gpus", str(R * N), "--gpus-per-node", str(R), "--strategies", ",".join(strategy),
         "--out", proj_csv] + common)
    rows = {r["strategy"]: r for r in read(proj_csv)}
    if set(rows) != set(strategy):
        failures.append(f"{name}: simulate projected {sorted(set(rows) ^ set(strategy))} differently")
        continue
    for s, r in strategy.items():
        sim = rows[s]
        if not close(float(r["projected_step_s"]), float(sim["step_time_s"])):
            failures.append(f"{name}: {s}: plan says {r['projected_step_s']} s, simulate {sim['step_time_s']} s")
        if r["feasible"] != sim["feasible"]:
            failures.append(f"{name}: {s}: plan says feasible={r['feasible']}, simulate {sim['feasible']}")
    fit = [float(sim["step_time_s"]) for sim in rows.values() if sim["feasible"] == "1"]
    chosen = [r for r in plans if r["why"] == "chosen"]
    if not fit:
        if chosen:
            failures.append(f"{name}: a plan was chosen though the simulator says none fits")
        print(f"{name}: {len(plans)} plans, none fits")
        continue
    if len(chosen) != 1:
        failures.append(f"{name}: {len(chosen)} chosen plans")
        continue
    best = min(fit)
    got = float(rows[chosen[0]["name"] if chosen[0]["baseline"] == "1" else chosen[0]["plan"]]["step_time_s"])
    if not close(got, best):
        failures.append(f"{name}: chosen {chosen[0]['plan']} projects {got} s, the fastest that fits {best} s")
    print(f"{name}: {len(plans)} plans, {len(fit)} fit, chosen {chosen[0]['name']} {chosen[0]['plan']} "
          f"at {got:.6g} s (MFU {float(chosen[0]['projected_mfu']):.1%})")

if failures:
    sys.exit("\n".join(failures))
