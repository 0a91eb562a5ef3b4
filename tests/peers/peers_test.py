"""The real systems beside lins's engines (label peers): runs `lins step` and one peer system (FSDP2, DeepSpeed
ZeRO or torch DDP) on 4 CPU ranks as 2 nodes x 2, on the same model, weights and data, and checks

1. the peer's files: lins's step CSV columns (source measured, an engine naming the system and its version), a
   provenance file with the versions, and a collective log whose byte totals are the CSV's byte columns;
2. the loss of every timed step equals lins's within the dtype's rounding: relative 2^-20 (8 fp32 ulps) with
   --precision fp32, 2^-8 (bf16's unit roundoff) with bf16 -- the peers compute in bf16 where lins's CPU backend
   keeps fp32 activations, and reductions run in another order;
3. the collectives against lins's engine for the same system (`lins step` with the preset and engine options
   lins_peers.expectations pairs with the peer): the bytes per kind and inside/across nodes per rank per step
   (lins's CSV; the peer's log with bookkeeping set aside) differ exactly where the expectations say, and the
   sequences (`lins step --collective-log`) match up to padding and granularity or differ where the expectations
   give the reason. An unlisted difference fails, and so does a listed one that is gone.
2 and 3 are lins_peers.check, which checks a cluster run's folder the same way.

Exit 77 (skipped) when the peers' Python (scripts/install-peers.sh) is missing.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lins_peers import check, expectations
from lins_peers.recorder import read_log
from peers_python import found, peers_python, torchrun  # beside this file

SYSTEMS = {"fsdp2": "lins_peers.fsdp2", "deepspeed": "lins_peers.deepspeed_zero", "ddp": "lins_peers.ddp"}
DEFAULT_STRATEGIES = {"fsdp2": "full,zero2,hpz,hsdp", "deepspeed": "zero1,zero2,zero3,zeropp", "ddp": "ddp"}


def _peer_strategies(system):
    def names(args):
        out = (args.strategies or DEFAULT_STRATEGIES[system]).split(",")
        if system == "deepspeed" and args.zero3 == "default":
            out = [f"{s}-defaults" if s in ("zero3", "zeropp") else s for s in out]
        if system == "deepspeed" and args.overlap_comm:
            out = [f"{s}-overlap_comm-{args.overlap_comm}" for s in out]
        return out
    return names


PEER_STRATEGIES = {s: _peer_strategies(s) for s in SYSTEMS}
ENGINES = {"fsdp2": "fsdp2-", "deepspeed": "deepspeed-", "ddp": "torch-ddp-"}  # + the version
RANKS, GPUS_PER_NODE = 4, 2

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


def run(cmd, env, what, timeout):
    t0 = time.time()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    print(f"[{time.time() - t0:5.1f} s] {what}", flush=True)
    if p.returncode != 0:
        print(p.stdout[-6000:])
        raise SystemExit(f"{what} failed with exit code {p.returncode}")
    return p.stdout


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def lins_supports_collective_log(lins):
    out = subprocess.run([lins, "step", "--help"], capture_output=True, text=True).stdout
    return "--collective-log" in out


def check_files(out, stem, system, precision):
    from lins_peers import results

    rows = read_csv(out / f"{stem}.csv")
    with open(out / f"{stem}.csv", newline="") as f:
        header = next(csv.reader(f))
    if header != results.STEP_COLUMNS:
        fail(f"{stem}.csv: columns differ from the step schema")
    for r in rows:
        if r["source"] != "measured" or not r["engine"].startswith(ENGINES[system]) or r["precision"] != precision:
            fail(f"{stem}.csv: row {r['strategy']} step {r['step']}: source {r['source']}, engine {r['engine']}, "
                 f"precision {r['precision']}")
    prov = json.loads((out / f"{stem}.provenance.json").read_text())
    if prov["world_size"] != RANKS or not prov["versions"].get("torch") or not prov["run"]["strategies"]:
        fail(f"{stem}.provenance.json lacks the world size, torch's version or the strategies")
    if system == "deepspeed" and not prov["versions"].get("deepspeed"):
        fail("deepspeed.provenance.json lacks deepspeed's version")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="", help="the peers' Python (default: the one scripts/install-peers.sh "
                                                   "makes, under LINS_PEERS_VENV or the user's cache)")
    ap.add_argument("--lins", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--system", required=True, choices=sorted(SYSTEMS))
    ap.add_argument("--strategies", default=None)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--precision", default="bf16", choices=sorted(check.TOLERANCE))
    ap.add_argument("--micro-batches", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--launcher", default="torchrun", choices=["torchrun", "mpirun"])
    ap.add_argument("--zero3", choices=["comparison", "default"], help="deepspeed: its ZeRO-3 settings")
    ap.add_argument("--overlap-comm", choices=["on", "off"], help="deepspeed: its overlap_comm")
    ap.add_argument("--port", type=int, default=29531)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    args.python = args.python or peers_python()
    if not found(args.python):
        return 77
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # The ranks inherit PYTHONPATH (ctest sets it to this checkout's packages; mpirun passes it on with -x).
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(args.port), PYTHONDONTWRITEBYTECODE="1")
    common = ["--model", args.model, "--gpus-per-node", str(GPUS_PER_NODE), "--precision", args.precision,
              "--micro-batches", str(args.micro_batches), "--warmup", "1", "--steps", str(args.steps)]

    # lins, every preset the peers stand for, once per set of engine options (DeepSpeed ZeRO-3 settings)
    runs = {}  # lins options -> presets
    for name in PEER_STRATEGIES[args.system](args):
        p = expectations.pairing(args.system, name)
        if p is not None:
            runs.setdefault(p.lins_options, set()).add(p.lins_preset(GPUS_PER_NODE))
    with_log = lins_supports_collective_log(args.lins)
    lins = {}
    for n, (options, presets) in enumerate(sorted(runs.items())):
        folder = out / f"lins{n}"
        cmd = [args.mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", str(RANKS),
               "-x", "OPENBLAS_NUM_THREADS=1", args.lins, "step", "--strategies", ",".join(sorted(presets)),
               "--out", str(folder)] + common + list(options)
        if with_log:
            cmd += ["--collective-log", str(folder / "collectives.csv")]
        run(cmd, env, f"lins step --model {args.model} {' '.join(options)} ({RANKS} ranks)", 300)
        lins[options] = check.lins_run(folder / "step.csv", folder / "collectives.csv" if with_log else None)

    # the peer
    module = SYSTEMS[args.system]
    peer_args = ["-m", module, "--out", str(out)] + common
    if args.strategies:
        peer_args += ["--strategies", args.strategies]
    if args.zero3:
        peer_args += ["--zero3", args.zero3]
    if args.overlap_comm:
        peer_args += ["--overlap-comm", args.overlap_comm]
    with tempfile.TemporaryDirectory(prefix="lins-torchrun-") as logs:  # torchrun's own logs, removed after the run
        if args.launcher == "torchrun":
            cmd = torchrun(args.python, RANKS, args.port, logs) + peer_args
        else:
            cmd = [args.mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", str(RANKS),
                   "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", "-x", "MASTER_ADDR", "-x", "MASTER_PORT",
                   args.python] + peer_args
        run(cmd, env, f"{module} under {args.launcher} ({RANKS} ranks)", 600)
    stem = args.system
    peer_rows = check_files(out, stem, args.system, args.precision)
    log = read_log(str(out / f"{stem}.collectives.csv"))

    # 2 and 3: the loss and the collectives against lins (lins_peers.check)
    report = check.check_peer(peer_rows, log, lins)
    print("\n".join(report.lines))
    failures.extend(report.failures)
    if not with_log:
        print("lins step has no --collective-log: sequences not compared (byte totals only)")

    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
