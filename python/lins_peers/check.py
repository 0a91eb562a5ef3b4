"""Checks a peer's run against `lins step` on the same workload: the loss of every step, the bytes per kind and
inside/across nodes, and the collective sequences, allowing only the differences lins_peers.expectations explains.

    python -m lins_peers.check DIR            DIR holds step.csv (+ lins.collectives.csv) from lins step and the
                                              peers' NAME.csv + NAME.collectives.csv (jobs/peers.sbatch's layout)

The loss tolerance is relative: 2^-20 with fp32 (8 fp32 ulps: reductions in another order, carried over steps by
AdamW) and 2^-8 with bf16 (bf16's unit roundoff: the peers compute activations in bf16, and accumulate gradients in
another dtype). Standard library only.
"""

import argparse
import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from . import compare, expectations
from .recorder import read_log

TOLERANCE = {"fp32": 2.0 ** -20, "bf16": 2.0 ** -8}
LinsRun = Tuple[Dict[Tuple[str, int], dict], Optional[list]]  # (preset, step) -> step-CSV row; its collective log


@dataclass
class Report:
    lines: List[str] = field(default_factory=list)
    failures: List[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.lines.append(line)

    def fail(self, line: str) -> None:
        self.failures.append(line)
        self.lines.append(f"FAIL: {line}")


def read_csv(path) -> List[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def lins_run(step_csv, log=None) -> LinsRun:
    rows = {(r["strategy"], int(r["step"])): r for r in read_csv(step_csv)}
    return rows, (read_log(str(log)) if log is not None and Path(log).exists() else None)


def log_totals(rows, bookkeeping: bool) -> Dict[Tuple[str, int], Dict[str, float]]:
    """Per (strategy, step): the max over ranks of each byte column (and all_bytes), from a collective log."""
    per = {}
    for r in rows:
        op = compare.Op(r["kind"], r["group_size"], r["dtype"], r["elems"], r["message_bytes"])
        if not bookkeeping and compare.is_bookkeeping(op, 8):
            continue
        t = per.setdefault((r["strategy"], r["step"], r["rank"]), dict.fromkeys(expectations.BYTE_COLUMNS, 0))
        if f"{r['kind']}_bytes" in t:
            t[f"{r['kind']}_bytes"] += r["message_bytes"]
        t["all_bytes"] = t.get("all_bytes", 0) + r["message_bytes"]
    out: Dict[Tuple[str, int], Dict[str, float]] = {}
    for (strategy, step, _), t in per.items():
        o = out.setdefault((strategy, step), {})
        for k, v in t.items():
            o[k] = max(o.get(k, 0), v)
    return out


def check_peer(peer_rows: Sequence[dict], peer_log: list, lins: Dict[Tuple[str, ...], LinsRun],
               report: Optional[Report] = None) -> Report:
    """peer_rows: the peer's step CSV; peer_log: its collective log; lins: lins step's runs by their engine
    options (expectations.Pairing.lins_options)."""
    report = report or Report()
    # the CSV's byte columns are the log's totals (bookkeeping included: it is real traffic)
    full = log_totals(peer_log, bookkeeping=True)
    data = log_totals(peer_log, bookkeeping=False)
    for r in peer_rows:
        key = (r["strategy"].split(":", 1)[1], int(r["step"]))
        t = full.get(key)
        if t is None:
            report.fail(f"{r['strategy']} step {r['step']}: no collectives in the log")
            continue
        for c in ("all_gather_bytes", "reduce_scatter_bytes", "all_reduce_bytes", "broadcast_bytes"):
            if float(r[c]) != t[c]:
                report.fail(f"{r['strategy']} step {r['step']}: {c} {r[c]} in the CSV, {t[c]} in the log")
        if float(r["intra_bytes"]) + float(r["inter_bytes"]) < t["all_bytes"] - 0.5:
            report.fail(f"{r['strategy']} step {r['step']}: intra + inter bytes below the log's total")

    sequences = {}
    for r in peer_rows:
        system, strategy = r["strategy"].split(":", 1)
        step, r_nodes = int(r["step"]), int(r["gpus_per_node"])
        p = expectations.pairing(system, strategy)
        if p is None:
            report.fail(f"{r['strategy']}: no pairing in lins_peers.expectations")
            continue
        preset = p.lins_preset(r_nodes)
        if p.lins_options not in lins:
            report.say(f"{r['strategy']}: no lins step run with {' '.join(p.lins_options) or 'its defaults'}; "
                       "not compared")
            continue
        ref = lins[p.lins_options][0].get((preset, step))
        if ref is None:
            report.fail(f"lins step wrote no row for {preset} step {step}")
            continue
        # the loss
        tol = TOLERANCE[r["precision"]]
        lp, ll = float(r["loss"]), float(ref["loss"])
        rel = abs(lp - ll) / abs(ll)
        report.say(f"loss {r['strategy']:<28} step {step}: {lp:.8f} vs lins {preset} {ll:.8f}: relative "
                   f"{rel:.2e} (tolerance {tol:.2e}) {'ok' if rel <= tol else 'FAIL'}")
        if rel > tol:
            report.fail(f"{r['strategy']} step {step}: loss {lp} vs lins {ll}")
        # the bytes
        if (strategy, step) not in data:
            continue  # reported above: no collectives
        expected = expectations.expected_byte_differences(p, int(r["micro_batches"]))
        t = data[(strategy, step)]
        # inside/across nodes of the data collectives: the peer's CSV (the log has no groups' ranks) less its
        # bookkeeping, all of which spans the whole world, so across nodes
        aside = full[(strategy, step)]["all_bytes"] - t["all_bytes"]
        t = dict(t, intra_bytes=float(r["intra_bytes"]), inter_bytes=float(r["inter_bytes"]) - aside)
        for c in expectations.BYTE_COLUMNS:
            differs = float(t[c]) != float(ref[c])
            if differs and c not in expected:
                report.fail(f"{r['strategy']} step {step}: {c} {t[c]:.0f} vs lins {preset} {float(ref[c]):.0f}, "
                            "a difference lins_peers.expectations does not explain")
            elif not differs and c in expected:
                report.fail(f"{r['strategy']} step {step}: {c} now equals lins {preset}'s ({t[c]:.0f}); remove "
                            "the explanation from lins_peers.expectations")
            elif differs:
                report.say(f"  explained: {c} {t[c]:.0f} vs {float(ref[c]):.0f}: {expected[c]}")
        sequences[(system, strategy)] = (p, preset)

    # the sequences, where lins logged them
    for (system, strategy), (p, preset) in sorted(sequences.items()):
        lins_log = lins[p.lins_options][1]
        if lins_log is None:
            report.say(f"{system}:{strategy}: no lins collective log: sequences not compared (bytes only)")
            continue
        results = compare.compare_logs(lins_log, peer_log, preset, strategy, names=("lins", "peer"))
        bad = [x for x in results if x.verdict == "different"]
        report.say(f"sequence {system}:{strategy} vs lins {preset} {' '.join(p.lins_options)}: "
                   + ", ".join(sorted({x.verdict for x in results})))
        for line in (bad or results)[0].lines:
            report.say(f"    {line}")
        if bad and p.sequence is None:
            report.fail(f"{system}:{strategy}: collective sequence differs from lins {preset} (unexplained)")
        elif bad:
            report.say(f"  explained: {p.sequence}")
        elif p.sequence is not None:
            report.fail(f"{system}:{strategy}: the sequence now matches lins {preset}; remove the explanation")
    return report


def _is_step_csv(path: Path) -> bool:
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    return "strategy" in header and "step_time_s" in header


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lins_peers.check", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("folder", help="lins step's step.csv (and lins.collectives.csv) beside the peers' files")
    ap.add_argument("--lins-csv", default="step.csv", help="lins step's CSV in the folder (default step.csv)")
    ap.add_argument("--lins-log", default="lins.collectives.csv", help="lins's collective log in the folder")
    args = ap.parse_args(argv)
    d = Path(args.folder)
    lins = {(): lins_run(d / args.lins_csv, d / args.lins_log)}
    report = Report()
    peers = [p for p in sorted(d.glob("*.csv")) if p.name != args.lins_csv and not p.name.endswith(".collectives.csv")
             and p.name != args.lins_log and _is_step_csv(p)]
    if not peers:
        print(f"check: no peer CSV in {d}", file=sys.stderr)
        return 2
    for path in peers:
        log_path = path.with_name(path.stem + ".collectives.csv")
        if not log_path.exists():
            report.fail(f"{path.name}: no {log_path.name} beside it")
            continue
        report.say(f"== {path.name}")
        check_peer(read_csv(path), read_log(str(log_path)), lins, report)
    print("\n".join(report.lines))
    print(f"{len(report.failures)} failed" if report.failures else "all checks passed")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
