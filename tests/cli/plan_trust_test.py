#!/usr/bin/env python3
"""What an engineer acts on in `lins plan` and `lins simulate` (docs/cost-model.md, "What a projection rests on"):
plans within --tie of the fastest form tier 1, and the recommendation is the fastest plan of tier 1 that a framework
runs, printed beside the fastest plan; one line says which inputs are assumed, given and measured; both commands
project the real systems' host side by default (--host-model today) and say so, off says the device schedule alone;
--explain's parts add up to the step under every host model and overlap mode, and name the setting behind a loss;
the memory reserve is a column of both CSVs, and model_mem_bytes + reserve_bytes is simulate's need and its oom
verdict. Usage: plan_trust_test.py LINS WORK"""
import csv
import os
import re
import subprocess
import sys

LINS, WORK = sys.argv[1:3]
os.makedirs(WORK, exist_ok=True)
failures = []


def run(args, codes=(0,)):
    p = subprocess.run([LINS] + args, capture_output=True, text=True, timeout=300)
    if p.returncode not in codes:
        sys.exit(f"lins {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def check(cond, what):
    if not cond:
        failures.append(what)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# Tiers and the recommendation: LLaMA-13B on 16 x 8 H100, where the top plans differ by fractions of a percent (at
# one micro-batch size, where a Lins 6-tuple is the fastest and the recommendation a framework's plan beside it).
h100 = ["--model", "llama-13b", "--nodes", "16", "--network", "h100-ndr", "--global-batch-tokens", "2M",
        "--micro-batch", "1"]
plans_csv = os.path.join(WORK, "h100.csv")
out = run(["plan", *h100, "--top", "3", "--csv", plans_csv])
check(re.search(r"^rank +plan +\(s0_p.*\) +tier +step", out, re.M), "plan: the step table has a tier column")
plans = rows(plans_csv)
fit = [r for r in plans if r["feasible"] == "1"]
best = float(fit[0]["projected_step_s"])
for r in plans:
    step = float(r["projected_step_s"])
    if r["feasible"] == "1" and step <= best * 1.2 * (1 + 1e-9):
        check(r["tier"] == "1", f"plan: {r['name']} is within 20% of the fastest but in tier {r['tier']}")
    elif r["feasible"] == "1":
        check(int(r["tier"]) > 1, f"plan: {r['name']} is {step / best - 1:.1%} slower but in tier 1")
    else:
        check(r["tier"] == "0", f"plan: {r['name']} does not fit but has tier {r['tier']}")
tiers = [int(r["tier"]) for r in fit]
check(tiers == sorted(tiers), "plan: tiers do not grow with the rank")
chosen = [r for r in plans if r["why"] == "chosen"]
recommended = [r for r in plans if r["recommended"] == "1"]
check(len(chosen) == 1 and chosen[0] is fit[0], "plan: the chosen plan is not the fastest that fits")
check(len(recommended) == 1, f"plan: {len(recommended)} recommended plans")
tier1_baselines = [r for r in fit if r["tier"] == "1" and r["baseline"] == "1"]
if recommended and tier1_baselines:
    check(recommended[0] is tier1_baselines[0],
          f"plan: recommended {recommended[0]['name']}, the fastest framework plan of tier 1 is "
          f"{tier1_baselines[0]['name']}")
    rec = recommended[0]
    slower = 100 * (float(rec["projected_step_s"]) / best - 1)
    line = re.search(r"^recommended: (\S+) on (.*) \(tier 1: (\d+) plans within 20% of the fastest, --tie; "
                     r"([0-9.]+)% slower than the fastest, (\S+) on (.*)\)$", out, re.M)
    check(line is not None, "plan: no recommendation line beside the fastest plan:\n" + out[:3000])
    if line:
        check(line.group(1) == rec["name"], f"plan: the line recommends {line.group(1)}, the CSV {rec['name']}")
        check(int(line.group(3)) == len([r for r in fit if r["tier"] == "1"]), "plan: tier 1's size")
        check(abs(float(line.group(4)) - slower) <= 0.051, f"plan: {line.group(4)}% slower, the CSV says {slower:.2f}%")
        check(line.group(5) == chosen[0]["name"], "plan: the fastest plan is not printed beside the recommendation")
        if chosen[0]["baseline"] == "0":
            check("the Lins engine, which no framework runs today" in line.group(6), "plan: the Lins engine's words")
elif recommended:
    check(recommended[0] is chosen[0], "plan: with no framework plan in tier 1 the fastest plan is recommended")
    check("no plan a framework runs is in tier 1" in out, "plan: the recommendation says no framework plan is tier 1")
# A tie of 0 makes every distinct step its own tier; the recommendation is then the fastest plan.
out0 = run(["plan", *h100, "--top", "3", "--tie", "0", "--csv", plans_csv])
plans0 = rows(plans_csv)
check([r for r in plans0 if r["recommended"] == "1"][0]["why"] == "chosen", "--tie 0: the fastest is recommended")
check("within 0% of the fastest" in out0, "--tie 0 is printed")

# The inputs line: every default assumed; given options and measured files each under their word.
check("assumed: collectives priced by the nccl model of network h100-ndr, contention priors of network h100-ndr, "
      "memory reserve, GPU numbers of the network h100-ndr's gpu preset h100-sxm, host costs built in (today" in out
      and "given: -; measured: compute by roofline, kernel rates of sm90, measured on an H200" in out,
      "plan: the inputs line by default")
small = ["--model", "small", "--seq", "128", "--micro-batch", "1", "--global-batch-tokens", "1024", "--gpus-per-node",
         "2", "--network", "cpu-local"]
validation = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "validation",
                          "cpu-2core-4ranks")
out = run(["plan", *small, "--nodes", "2", "--plan", "zero3", "--gpu-mem", "1GiB", "--reserve-nccl", "0B",
           "--contention", "off", "--profile", os.path.join(validation, "profile.csv"), "--calibrate",
           os.path.join(validation, "m2", "step.csv")])
m = re.search(r"^ +assumed: (.*); given: (.*); measured: (.*)$", out, re.M)
check(m is not None, "plan: no inputs line:\n" + out[:2000])
check("measured: contention of network cpu-local" in run(["plan", *small, "--nodes", "2", "--plan", "zero3",
                                                           "--gpu-mem", "4GiB"]),
      "inputs: cpu-local's contention table is measured")
if m:
    check("contention off (overlap free)" in m.group(1), "inputs: contention off is an assumption")
    check("the rest of the memory reserve" in m.group(1) and "memory reserve (--reserve-nccl)" in m.group(2),
          "inputs: a reserve option is given, the rest assumed")
    check("GPU --gpu-mem" in m.group(2), "inputs: --gpu-mem is given")
    check("compute calibrated from" in m.group(3) and "bandwidth " in m.group(3), "inputs: calibration and profile "
          "are measured")
    check("compute efficiency" not in m.group(1), "inputs: a calibrated compute is not assumed")

# The default host model, in both commands; off says the device schedule alone.
check("host side: today" in out, "plan: the header says the host model (today by default)")
out = run(["plan", *small, "--nodes", "2", "--plan", "zero3", "--gpu-mem", "4GiB", "--host-model", "off"])
check("host side: off, the device schedule alone" in out and "host side off (the device schedule alone)" in out,
      "plan --host-model off says the device schedule alone")
sim_csv = os.path.join(WORK, "sim.csv")
out = run(["simulate", *small, "--gpus", "4", "--strategies", "zero3,ddp", "--out", sim_csv])
check("lins simulate: host side today (--host-model); assumed:" in out, "simulate: the host model and inputs line")
check({r["host_model"] for r in rows(sim_csv)} == {"today"}, "simulate: host model today by default")
# Tiers after each cluster's rows: the strategies that fit, a tier within --tie of its fastest.
tiers = [line for line in out.splitlines() if line.strip().startswith("tiers (within 20%")]
check(len(tiers) == 1 and "tier 1:" in tiers[0] and "zero3" in tiers[0] and "ddp" in tiers[0],
      f"simulate: one tiers line naming both strategies, got {tiers}")
out0 = run(["simulate", *small, "--gpus", "4", "--strategies", "zero3,ddp", "--tie", "0", "--out", sim_csv])
check(any("tier 2:" in line for line in out0.splitlines()), "simulate --tie 0: every strategy a tier of its own")
# The CSV's tier column says the same: at --tie 0 the faster strategy is tier 1, the other tier 2.
sim = sorted(rows(sim_csv), key=lambda r: float(r["step_time_s"]))
check([r["tier"] for r in sim] == ["1", "2"], f"simulate --tie 0: CSV tiers {[r['tier'] for r in sim]}, expected 1, 2")
out = run(["simulate", *small, "--gpus", "4", "--strategies", "zero3", "--host-model", "off", "--out", sim_csv])
r = rows(sim_csv)[0]
check(r["host_model"] == "off" and r["label"].startswith("device"), "simulate --host-model off: label device")
check("host side off, the device schedule alone" in out, "simulate --host-model off: the console says so")

# --explain adds up: compute + contention + exposed communication + host stall + host fixed = step, under every host
# model and overlap mode, on the table's rows and on the sum line.
parts = re.compile(r"^ +(compute: \w+|exposed [a-z-]+s|compute lost beside collectives \(contention\)|"
                   r"host: the device idle for the host|host \(fixed per step\)|step) +(-?[0-9.]+)\s*$", re.M)
for host in ["today", "paper", "off"]:
    for overlap in ["all", "no_bcast", "no_allreduce", "none"]:
        for plan in ["zero3", "zero2"]:
            where = f"--host-model {host} --overlap {overlap} --plan {plan}"
            out = run(["plan", "--model", "llama-13b", "--nodes", "4", "--plan", plan, "--explain", "--host-model",
                       host, "--overlap", overlap], codes=(0, 1))
            terms = {name: float(v) for name, v in parts.findall(out)}
            step = terms.pop("step", None)
            check(step is not None and len(terms) >= 8, f"{where}: --explain's parts not found:\n{out[:3000]}")
            if step is None:
                continue
            check(abs(sum(terms.values()) - step) <= 0.00006 * (len(terms) + 1),
                  f"{where}: the parts add up to {sum(terms.values()):.4f}, the step is {step:.4f}: {terms}")
            line = re.search(r"compute ([0-9.]+) \+ contention ([0-9.]+) \+ exposed communication ([0-9.]+) \+ host "
                             r"stall ([0-9.]+) \+ host fixed ([0-9.]+) = ([0-9.]+) \(step ([0-9.]+)\)", out)
            check(line is not None, f"{where}: no sum line")
            if line:
                v = [float(x) for x in line.groups()]
                check(abs(sum(v[:5]) - v[6]) <= 0.0003 and abs(v[5] - v[6]) <= 0.00011,
                      f"{where}: the sum line does not add up: {line.group(0)}")
            if host == "off":
                check(terms["host: the device idle for the host"] == 0, f"{where}: host stall without a host model")
# The setting behind a loss: ZeRO-2's exposed reduction is decided by overlap_comm, off by default for stage 2.
out = run(["plan", "--model", "llama-13b", "--nodes", "4", "--plan", "zero2", "--explain"], codes=(0, 1))
check("overlap_comm is off by default for ZeRO stage 2: --ds-overlap-comm on overlaps it" in out,
      "--explain names overlap_comm behind ZeRO-2's exposed reduction:\n" + out[-1500:])
out = run(["plan", "--model", "llama-13b", "--nodes", "4", "--plan", "zero2", "--explain", "--ds-overlap-comm", "on"],
          codes=(0, 1))
check("overlap_comm is off by default" not in out, "--ds-overlap-comm on: the default is not named")

# The reserve beside the tensors, in both CSVs: simulate's model_mem_bytes + reserve_bytes is its need and its verdict.
out = run(["simulate", "--model", "llama-13b", "--gpus", "64", "--strategies", "zero1,zero3", "--out", sim_csv])
for r in rows(sim_csv):
    need = float(r["model_mem_bytes"]) + float(r["reserve_bytes"])
    check(float(r["reserve_bytes"]) > 0, f"simulate {r['strategy']}: no reserve")
    check((r["tier"] == "0") == (r["feasible"] == "0"), f"simulate {r['strategy']}: tier {r['tier']} but feasible "
          f"{r['feasible']} (0 is the tier of a row that does not fit)")
    check((need <= 80 * 2**30) == (r["feasible"] == "1"), f"simulate {r['strategy']}: feasible={r['feasible']} but "
          f"tensors + reserve = {need / 2**30:.2f} GiB against 80 GiB")
    shown = re.search(rf"^llama-13b +64 +{r['strategy']} .* ([0-9.]+) GiB", out, re.M)
    check(shown and abs(float(shown.group(1)) - need / 2**30) < 0.01,
          f"simulate {r['strategy']}: the console's need differs from the CSV's {need / 2**30:.2f} GiB")
run(["plan", "--model", "llama-13b", "--nodes", "8", "--plan", "zero3", "--csv", plans_csv])
r = rows(plans_csv)[0]
check(float(r["reserve_bytes"]) > 0 and (float(r["total_bytes"]) + float(r["reserve_bytes"]) <= 80 * 2**30) ==
      (r["feasible"] == "1"), "plan: reserve_bytes and the verdict")

if failures:
    sys.exit("\n".join(failures))
print("ok")
