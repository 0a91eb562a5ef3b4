"""Which lins preset each peer stands for, and every known way the real system's collectives differ from lins's
engine for it, with the reason. tests/peers fails on a difference that is not listed here -- and on a listed one
that has gone away, so the list stays true. docs/peers.md shows the same table.

Byte columns are compared per rank per step (lins's step CSV against the peer's collective log with bookkeeping
set aside, see compare.is_bookkeeping); sequences with `python -m lins_peers.compare` when lins writes
--collective-log. Keys are "system:strategy" without the version.
"""

from dataclasses import dataclass, field
from typing import Dict, Optional

BYTE_COLUMNS = ("all_gather_bytes", "reduce_scatter_bytes", "all_reduce_bytes", "broadcast_bytes", "intra_bytes",
                "inter_bytes")


@dataclass(frozen=True)
class Pairing:
    peer: str                                    # system:strategy, e.g. fsdp2:full
    preset: str                                  # lins's preset with the same sharding
    bytes_differ: Dict[str, str] = field(default_factory=dict)  # column -> why; any M unless said
    bytes_differ_multi: Dict[str, str] = field(default_factory=dict)  # column -> why; only with M > 1
    sequence: Optional[str] = None               # why the sequences differ beyond granularity (None: they match)


PAIRINGS = {
    p.peer: p for p in [
        Pairing("ddp:ddp", "ddp"),
        Pairing("fsdp2:full", "zero3",
                sequence="FSDP2 prefetches in backward: module m-1's all-gather is issued before module m's "
                         "reduce-scatter; the head is gathered again at the start of backward and the embedding "
                         "is gathered in backward"),
        Pairing("fsdp2:zero2", "zero2",
                bytes_differ_multi={
                    "all_gather_bytes": "reshard_after_forward=False keeps parameters from forward to backward of "
                                        "one micro-batch, but reshards after every backward and gathers again in "
                                        "the next micro-batch's forward; lins zero2 keeps P replicated and gathers "
                                        "once, after the optimizer",
                    "inter_bytes": "the same extra gathers (they span the nodes)"},
                sequence="FSDP2 gathers P per module at the start of every forward (not after the optimizer) and "
                         "reduce-scatters per module in backward"),
        Pairing("fsdp2:hpz", "zeropp",
                sequence="as fsdp2:full (prefetch order), with the backward gathers in the node group"),
        Pairing("fsdp2:hsdp", "hsdp",
                bytes_differ_multi={
                    "all_reduce_bytes": "HSDP all-reduces each module's node shard across nodes after every "
                                        "micro-batch's reduce-scatter; lins all-reduces once per step",
                    "inter_bytes": "the same per-micro-batch all-reduces (they span the nodes)"},
                sequence="per module in backward: reduce-scatter in the node, then all-reduce of the shard across "
                         "nodes, every micro-batch; with FSDP2's backward prefetch order"),
        Pairing("deepspeed:zero1", "zero1",
                bytes_differ={
                    "all_reduce_bytes": "DeepSpeed ZeRO-1 all-reduces the whole gradient (in reduce_bucket_size "
                                        "buckets) at the accumulation boundary and each rank keeps its partition",
                    "reduce_scatter_bytes": "no reduce-scatter: see all_reduce_bytes"},
                sequence="one all-reduce of all gradients during the last backward, then after the optimizer one "
                         "all-gather per optimizer parameter group (decay, no decay)"),
        Pairing("deepspeed:zero2", "zero2",
                bytes_differ={
                    "all_reduce_bytes": "DeepSpeed ZeRO-2 all-reduces each micro-batch's gradient bucket "
                                        "(use_multi_rank_bucket_allreduce, on by default) instead of "
                                        "reduce-scattering it; each rank keeps its partition",
                    "reduce_scatter_bytes": "no reduce-scatter: see all_reduce_bytes"},
                sequence="one bucketed all-reduce at the end of every backward, then one all-gather per optimizer "
                         "parameter group after the optimizer"),
        Pairing("deepspeed:zero3", "zero3",
                sequence="DeepSpeed gathers per leaf module (each Linear and RMSNorm) and reduce-scatters all "
                         "gradients in one reduce_bucket_size bucket at the end of backward, not per module"),
        Pairing("deepspeed:zeropp", "zeropp",
                bytes_differ_multi={
                    "intra_bytes": "hpZ serves micro-batches 2..M's forward gathers from the secondary (node) "
                                   "partition too, which stays valid until the optimizer step; lins gathers "
                                   "every forward across nodes",
                    "inter_bytes": "the same: only the first micro-batch's forward gathers across nodes"},
                sequence="as deepspeed:zero3, with the backward gathers (and the forward gathers of micro-batches "
                         "2..M) in the node group"),
    ]
}


def pairing(system: str, strategy: str) -> Optional[Pairing]:
    """The pairing of a peer row (system with or without its version, e.g. fsdp2-2.15.0)."""
    name = system.rsplit("-", 1)[0] if system[-1:].isdigit() else system
    name = {"torch-ddp": "ddp"}.get(name, name)
    return PAIRINGS.get(f"{name}:{strategy.split('-defaults')[0]}")


def expected_byte_differences(p: Pairing, micro_batches: int) -> Dict[str, str]:
    out = dict(p.bytes_differ)
    if micro_batches > 1:
        out.update(p.bytes_differ_multi)
    return out
