"""Lines up the collectives of two runs -- lins's engine (`lins step --collective-log`) and a real system (a peer's
NAME.collectives.csv), or two configurations of one system -- per step and rank, and says how they differ.

    python -m lins_peers.compare LINS_LOG PEER_LOG --system zero3 --peer-strategy full
    python -m lins_peers.compare --show PEER_LOG [--strategy full] [--rank 0] [--step 0]

For each (rank, step) present in both logs, the verdict is the first of these that holds:

    identical      same sequence: kind, group size, dtype and message bytes of every collective, in order
    padding        the same, with element counts that differ by no more than the padding rule: per collective,
                   |elems_a - elems_b| <= group_size x pad (--pad, default 2 elements per rank: ZeRO-3 pads each
                   tensor to a multiple of the group, ZeRO-1/2 align each rank's partition to 2 elements)
    granularity    the same after merging consecutive collectives of one kind, group size and dtype on each side
                   (one coalesced/bucketed call on one side, one call per tensor or module on the other); the
                   padding rule then allows pad x (number of merged calls)
    different      anything else: the report shows both merged sequences side by side and the totals per
                   (kind, group size, dtype) that differ

Bookkeeping -- barriers, collectives of integer data (DeepSpeed's module-trace broadcasts, overflow flags) and
all-reduces of at most --bookkeeping-elems elements (a gradient norm) -- is set aside first and listed, not
compared, unless --strict. The exit status is 0 when every (rank,
step) is identical, padding or granularity (or a difference allowed with --allow), 1 otherwise, 2 on bad input.
"""

import argparse
import sys
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .recorder import read_log

VERDICTS = ("identical", "padding", "granularity", "different")


@dataclass
class Op:
    kind: str
    group_size: int
    dtype: str
    elems: int
    message_bytes: int
    count: int = 1  # calls merged into this one

    def key(self) -> Tuple[str, int, str]:
        return (self.kind, self.group_size, self.dtype)

    def text(self) -> str:
        merged = f" x{self.count}" if self.count > 1 else ""
        return f"{self.kind}[g={self.group_size}] {self.elems} {self.dtype} ({self.message_bytes} B){merged}"


@dataclass
class Sequence_:
    ops: List[Op]
    set_aside: List[Op] = field(default_factory=list)


def _ops(rows) -> List[Op]:
    return [Op(r["kind"], r["group_size"], r["dtype"], r["elems"], r["message_bytes"])
            for r in sorted(rows, key=lambda r: r["index"])]


FLOAT_DTYPES = ("fp32", "bf16", "fp16", "fp64", "fp8")


def is_bookkeeping(op: Op, max_elems: int) -> bool:
    """Barriers, collectives of integer data (DeepSpeed's module-trace broadcasts, overflow flags) and all-reduces of
    at most max_elems elements (a gradient norm): control traffic, not the model's parameters or gradients."""
    return (op.kind == "barrier" or op.dtype not in FLOAT_DTYPES
            or (op.kind == "all_reduce" and op.elems <= max_elems))


def split_bookkeeping(ops: List[Op], max_elems: int) -> Sequence_:
    kept, aside = [], []
    for op in ops:
        if is_bookkeeping(op, max_elems):
            aside.append(op)
        else:
            kept.append(op)
    return Sequence_(kept, aside)


def merge_runs(ops: List[Op]) -> List[Op]:
    """Consecutive collectives of one (kind, group size, dtype) merged into one."""
    out: List[Op] = []
    for op in ops:
        if out and out[-1].key() == op.key():
            last = out[-1]
            out[-1] = Op(last.kind, last.group_size, last.dtype, last.elems + op.elems,
                         last.message_bytes + op.message_bytes, last.count + op.count)
        else:
            out.append(Op(op.kind, op.group_size, op.dtype, op.elems, op.message_bytes, op.count))
    return out


def _same(a: Op, b: Op, pad: int) -> Optional[str]:
    """None if a and b differ in kind, group or dtype or beyond padding; else 'identical' or 'padding'."""
    if a.key() != b.key():
        return None
    if a.elems == b.elems:
        return "identical"
    if abs(a.elems - b.elems) <= a.group_size * pad * max(a.count, b.count):
        return "padding"
    return None


def _match(a: List[Op], b: List[Op], pad: int) -> Optional[str]:
    if len(a) != len(b):
        return None
    verdict = "identical"
    for x, y in zip(a, b):
        v = _same(x, y, pad)
        if v is None:
            return None
        if v == "padding":
            verdict = "padding"
    return verdict


def totals(ops: List[Op]) -> Dict[Tuple[str, int, str], Tuple[int, int]]:
    """(calls, message bytes) per (kind, group size, dtype)."""
    out: Dict[Tuple[str, int, str], List[int]] = OrderedDict()
    for op in ops:
        t = out.setdefault(op.key(), [0, 0])
        t[0] += op.count
        t[1] += op.message_bytes
    return {k: (v[0], v[1]) for k, v in out.items()}


@dataclass
class Result:
    rank: int
    step: int
    verdict: str
    lines: List[str]


def compare_one(a_ops: List[Op], b_ops: List[Op], pad: int, bookkeeping: int, strict: bool,
                names: Tuple[str, str]) -> Tuple[str, List[str]]:
    lines: List[str] = []
    if strict:
        a, b = Sequence_(a_ops), Sequence_(b_ops)
    else:
        a, b = split_bookkeeping(a_ops, bookkeeping), split_bookkeeping(b_ops, bookkeeping)
        for name, s in zip(names, (a, b)):
            if s.set_aside:
                lines.append(f"set aside in {name} (scalar bookkeeping, not compared): "
                             + "; ".join(op.text() for op in s.set_aside))
    v = _match(a.ops, b.ops, pad)
    if v is not None:
        return v, lines
    ma, mb = merge_runs(a.ops), merge_runs(b.ops)
    if _match(ma, mb, pad) is not None:
        lines.append(f"granularity: {len(a.ops)} calls in {names[0]} and {len(b.ops)} in {names[1]} become the "
                     f"same {len(ma)} after merging consecutive calls of one kind, group and dtype:")
        for x, y in zip(ma, mb):
            if x.count != y.count:
                lines.append(f"    {x.kind}[g={x.group_size}] {x.elems} elems: {x.count} call(s) in {names[0]}, "
                             f"{y.count} in {names[1]}")
        return "granularity", lines
    lines.append(f"merged sequences ({names[0]} | {names[1]}):")
    width = max([len(op.text()) for op in ma] + [len(names[0])])
    for i in range(max(len(ma), len(mb))):
        x = ma[i].text() if i < len(ma) else ""
        y = mb[i].text() if i < len(mb) else ""
        mark = "  " if i < len(ma) and i < len(mb) and _same(ma[i], mb[i], pad) else "! "
        lines.append(f"  {mark}{i:3d} {x:<{width}} | {y}")
    ta, tb = totals(a.ops), totals(b.ops)
    for k in list(OrderedDict.fromkeys(list(ta) + list(tb))):
        ca, cb = ta.get(k, (0, 0)), tb.get(k, (0, 0))
        if ca[1] != cb[1] or ca[0] != cb[0]:
            lines.append(f"  totals {k[0]}[g={k[1]}] {k[2]}: {names[0]} {ca[0]} call(s) {ca[1]} B, "
                         f"{names[1]} {cb[0]} call(s) {cb[1]} B")
    if all(ta.get(k, (0, 0))[1] == tb.get(k, (0, 0))[1] for k in set(ta) | set(tb)):
        lines.append("  the bytes per (kind, group size, dtype) agree: the order differs")
    return "different", lines


def group_log(rows, strategy: Optional[str]) -> Dict[Tuple[int, int], List[Op]]:
    strategies = sorted({r["strategy"] for r in rows})
    if strategy is None:
        if len(strategies) != 1:
            raise ValueError(f"the log holds strategies {', '.join(strategies)}: choose one")
        strategy = strategies[0]
    chosen = [r for r in rows if r["strategy"] == strategy]
    if not chosen:
        raise ValueError(f"no strategy '{strategy}' in the log (it has {', '.join(strategies)})")
    by: Dict[Tuple[int, int], list] = {}
    for r in chosen:
        by.setdefault((r["rank"], r["step"]), []).append(r)
    return {k: _ops(v) for k, v in by.items()}


def compare_logs(a_rows, b_rows, a_strategy, b_strategy, pad=2, bookkeeping=8, strict=False,
                 names=("lins", "peer")) -> List[Result]:
    a, b = group_log(a_rows, a_strategy), group_log(b_rows, b_strategy)
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            where = names[1] if key not in b else names[0]
            out.append(Result(key[0], key[1], "different", [f"rank {key[0]} step {key[1]} missing in {where}"]))
            continue
        v, lines = compare_one(a[key], b[key], pad, bookkeeping, strict, names)
        out.append(Result(key[0], key[1], v, lines))
    return out


def show(rows, strategy, rank, step, out=sys.stdout) -> None:
    seqs = group_log(rows, strategy)
    for (r, s), ops in sorted(seqs.items()):
        if (rank is not None and r != rank) or (step is not None and s != step):
            continue
        print(f"rank {r} step {s}: {len(ops)} collectives, "
              f"{sum(op.message_bytes for op in ops)} B", file=out)
        for i, op in enumerate(ops):
            print(f"  {i:3d} {op.text()}", file=out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lins_peers.compare", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("logs", nargs="+", help="LINS_LOG PEER_LOG, or one log with --show")
    p.add_argument("--system", help="the strategy in the first log (lins's preset name)")
    p.add_argument("--peer-strategy", help="the strategy in the second log (default: its only one)")
    p.add_argument("--names", default="lins,peer", help="names of the two sides in the report")
    p.add_argument("--pad", type=int, default=2, help="padding allowed per rank per tensor, in elements")
    p.add_argument("--bookkeeping-elems", type=int, default=8,
                   help="all-reduces of at most this many elements are scalar bookkeeping (default 8)")
    p.add_argument("--strict", action="store_true", help="compare bookkeeping collectives and barriers too")
    p.add_argument("--allow", default="", help="comma-separated verdicts that do not fail (e.g. different)")
    p.add_argument("--show", action="store_true", help="print one log's sequences")
    p.add_argument("--strategy", help="with --show: the strategy")
    p.add_argument("--rank", type=int, help="with --show: only this rank")
    p.add_argument("--step", type=int, help="with --show: only this step")
    p.add_argument("--quiet", action="store_true", help="only the summary line per (rank, step)")
    args = p.parse_args(argv)
    try:
        if args.show:
            for path in args.logs:
                show(read_log(path), args.strategy, args.rank, args.step)
            return 0
        if len(args.logs) != 2:
            p.error("give two logs: LINS_LOG PEER_LOG")
        names = tuple(args.names.split(",", 1)) if "," in args.names else ("lins", "peer")
        results = compare_logs(read_log(args.logs[0]), read_log(args.logs[1]), args.system, args.peer_strategy,
                               args.pad, args.bookkeeping_elems, args.strict, names)
    except (OSError, ValueError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    allowed = {"identical", "padding", "granularity"} | {x for x in args.allow.split(",") if x}
    verdicts = Counter(r.verdict for r in results)
    for r in results:
        print(f"rank {r.rank} step {r.step}: {r.verdict}")
        if not args.quiet:
            for line in r.lines:
                print(f"  {line}")
    bad = sum(n for v, n in verdicts.items() if v not in allowed)
    print(f"{len(results)} (rank, step) compared: " + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
          + (f"; {bad} unexplained" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
