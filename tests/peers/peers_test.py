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

Exit 77 (skipped) when the peers' Python (scripts/install-peers.sh) is missing.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from lins_peers import compare, expectations  # noqa: E402
from lins_peers.recorder import read_log  # noqa: E402

SYSTEMS = {"fsdp2": "lins_peers.fsdp2", "deepspeed": "lins_peers.deepspeed_zero", "ddp": "lins_peers.ddp"}
DEFAULT_STRATEGIES = {"fsdp2": "full,zero2,hpz,hsdp", "deepspeed": "zero1,zero2,zero3,zeropp", "ddp": "ddp"}


def _peer_strategies(system):
    def names(args):
        out = (args.strategies or DEFAULT_STRATEGIES[system]).split(",")
        if system == "deepspeed" and args.zero3 == "default":
            out = [f"{s}-defaults" if s in ("zero3", "zeropp") else s for s in out]
        return out
    return names


PEER_STRATEGIES = {s: _peer_strategies(s) for s in SYSTEMS}
ENGINES = {"fsdp2": "fsdp2-", "deepspeed": "deepspeed-", "ddp": "torch-ddp-"}  # + the version
TOLERANCE = {"fp32": 2.0 ** -20, "bf16": 2.0 ** -8}
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


def log_totals(rows, bookkeeping):
    """Per (strategy, step): max over ranks of each byte column, from a collective log."""
    per = {}
    for r in rows:
        op = compare.Op(r["kind"], r["group_size"], r["dtype"], r["elems"], r["message_bytes"])
        if not bookkeeping and compare.is_bookkeeping(op, 8):
            continue
        t = per.setdefault((r["strategy"], r["step"], r["rank"]), dict.fromkeys(expectations.BYTE_COLUMNS, 0))
        if f"{r['kind']}_bytes" in t:
            t[f"{r['kind']}_bytes"] += r["message_bytes"]
        # the log has group sizes, not the groups' ranks: the split inside/across nodes comes from the peer's CSV
        t["all_bytes"] = t.get("all_bytes", 0) + r["message_bytes"]
    out = {}
    for (strategy, step, _), t in per.items():
        o = out.setdefault((strategy, step), {})
        for k, v in t.items():
            o[k] = max(o.get(k, 0), v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="", help="the peers' Python (default: the one scripts/install-peers.sh "
                                                   "makes, under LINS_PEERS_VENV or the user's cache)")
    ap.add_argument("--lins", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--system", required=True, choices=sorted(SYSTEMS))
    ap.add_argument("--strategies", default=None)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--precision", default="bf16", choices=sorted(TOLERANCE))
    ap.add_argument("--micro-batches", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--launcher", default="torchrun", choices=["torchrun", "mpirun"])
    ap.add_argument("--zero3", choices=["comparison", "default"], help="deepspeed: its ZeRO-3 settings")
    ap.add_argument("--port", type=int, default=29531)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    if not args.python:
        venv = os.environ.get("LINS_PEERS_VENV") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "lins", "peers-venv")
        args.python = os.path.join(venv, "bin", "python")
    if not Path(args.python).exists():
        print(f"skipped: no peers' Python at {args.python} (run scripts/install-peers.sh)")
        return 77
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port), PYTHONDONTWRITEBYTECODE="1")
    common = ["--model", args.model, "--gpus-per-node", str(GPUS_PER_NODE), "--precision", args.precision,
              "--micro-batches", str(args.micro_batches), "--warmup", "1", "--steps", str(args.steps)]

    # lins, every preset the peers stand for, once per set of engine options (DeepSpeed ZeRO-3 settings)
    runs = {}  # lins options -> presets
    for name in PEER_STRATEGIES[args.system](args):
        p = expectations.pairing(args.system, name)
        if p is not None:
            runs.setdefault(p.lins_options, set()).add(p.lins_preset(GPUS_PER_NODE))
    with_log = lins_supports_collective_log(args.lins)
    lins, lins_logs = {}, {}
    for n, (options, presets) in enumerate(sorted(runs.items())):
        folder = out / f"lins{n}"
        cmd = [args.mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", str(RANKS),
               "-x", "OPENBLAS_NUM_THREADS=1", args.lins, "step", "--strategies", ",".join(sorted(presets)),
               "--out", str(folder)] + common + list(options)
        if with_log:
            cmd += ["--collective-log", str(folder / "collectives.csv")]
        run(cmd, env, f"lins step --model {args.model} {' '.join(options)} ({RANKS} ranks)", 300)
        for r in read_csv(folder / "step.csv"):
            lins[(options, r["strategy"], int(r["step"]))] = r
        if with_log:
            lins_logs[options] = read_log(str(folder / "collectives.csv"))

    # the peer
    module = SYSTEMS[args.system]
    peer_args = ["-m", module, "--out", str(out)] + common
    if args.strategies:
        peer_args += ["--strategies", args.strategies]
    if args.zero3:
        peer_args += ["--zero3", args.zero3]
    if args.launcher == "torchrun":
        cmd = [args.python, "-m", "torch.distributed.run", "--nproc-per-node", str(RANKS),
               "--master-port", str(args.port)] + peer_args
    else:
        cmd = [args.mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", str(RANKS),
               "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", "-x", "MASTER_ADDR", "-x", "MASTER_PORT",
               args.python] + peer_args
    run(cmd, env, f"{module} under {args.launcher} ({RANKS} ranks)", 600)
    stem = args.system
    peer_rows = check_files(out, stem, args.system, args.precision)
    log = read_log(str(out / f"{stem}.collectives.csv"))

    # the CSV's byte columns are the log's totals (bookkeeping included: it is real traffic)
    full = log_totals(log, bookkeeping=True)
    for r in peer_rows:
        key = (r["strategy"].split(":", 1)[1], int(r["step"]))
        t = full.get(key)
        if t is None:
            fail(f"{r['strategy']} step {r['step']}: no collectives in the log")
            continue
        for c in ("all_gather_bytes", "reduce_scatter_bytes", "all_reduce_bytes", "broadcast_bytes"):
            if float(r[c]) != t[c]:
                fail(f"{r['strategy']} step {r['step']}: {c} {r[c]} in the CSV, {t[c]} in the log")
        if float(r["intra_bytes"]) + float(r["inter_bytes"]) < t["all_bytes"] - 0.5:
            fail(f"{r['strategy']} step {r['step']}: intra + inter bytes below the log's total")

    tol = TOLERANCE[args.precision]
    data = log_totals(log, bookkeeping=False)
    for r in peer_rows:
        system, strategy = r["strategy"].split(":", 1)
        step = int(r["step"])
        p = expectations.pairing(system, strategy)
        if p is None:
            fail(f"{r['strategy']}: no pairing in lins_peers.expectations")
            continue
        preset = p.lins_preset(GPUS_PER_NODE)
        ref = lins.get((p.lins_options, preset, step))
        if ref is None:
            fail(f"lins step wrote no row for {preset} step {step}")
            continue
        # 2. loss
        lp, ll = float(r["loss"]), float(ref["loss"])
        rel = abs(lp - ll) / abs(ll)
        verdict = "ok" if rel <= tol else "FAIL"
        print(f"loss {r['strategy']:<28} step {step}: {lp:.8f} vs lins {preset} {ll:.8f}: relative "
              f"{rel:.2e} (tolerance {tol:.2e}) {verdict}")
        if rel > tol:
            fail(f"{r['strategy']} step {step}: loss {lp} vs lins {ll}")
        # 3. bytes against lins's engine
        expected = expectations.expected_byte_differences(p, args.micro_batches)
        if (strategy, step) not in data:
            continue  # reported above: no collectives
        t = data[(strategy, step)]
        # the split inside/across nodes of the data collectives: the peer's CSV minus its bookkeeping (all of
        # which spans the whole world, so across nodes)
        aside = full[(strategy, step)]["all_bytes"] - t["all_bytes"]
        t = dict(t, intra_bytes=float(r["intra_bytes"]), inter_bytes=float(r["inter_bytes"]) - aside)
        for c in expectations.BYTE_COLUMNS:
            differs = float(t[c]) != float(ref[c])
            if differs and c not in expected:
                fail(f"{r['strategy']} step {step}: {c} {t[c]:.0f} vs lins {preset} {float(ref[c]):.0f}, "
                     "a difference lins_peers.expectations does not explain")
            elif not differs and c in expected:
                fail(f"{r['strategy']} step {step}: {c} now equals lins {preset}'s ({t[c]:.0f}); remove the "
                     "explanation from lins_peers.expectations")
            elif differs:
                print(f"  explained: {c} {t[c]:.0f} vs {float(ref[c]):.0f}: {expected[c]}")

    # 3b. sequences, when lins logs them
    if with_log:
        for strategy in sorted({r["strategy"].split(":", 1)[1] for r in peer_rows}):
            system = peer_rows[0]["strategy"].split(":", 1)[0]
            p = expectations.pairing(system, strategy)
            if p is None:
                continue  # reported above
            preset = p.lins_preset(GPUS_PER_NODE)
            results = compare.compare_logs(lins_logs[p.lins_options], log, preset, strategy, names=("lins", "peer"))
            bad = [x for x in results if x.verdict == "different"]
            print(f"sequence {system}:{strategy} vs lins {preset} {' '.join(p.lins_options)}: "
                  + ", ".join(sorted({x.verdict for x in results})))
            for line in (bad or results)[0].lines:
                print(f"    {line}")
            if bad and p.sequence is None:
                fail(f"{system}:{strategy}: collective sequence differs from lins {preset} (unexplained)")
            elif bad:
                print(f"  explained: {p.sequence}")
            elif p.sequence is not None:
                fail(f"{system}:{strategy}: the sequence now matches lins {preset}; remove the explanation")
    else:
        print("lins step has no --collective-log: sequences not compared (byte totals only)")

    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
