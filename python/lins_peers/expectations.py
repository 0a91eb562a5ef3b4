"""Which lins preset each peer stands for, and every known way the real system's collectives differ from lins's
engine for it, with the reason. tests/peers fails on a difference that is not listed here -- and on a listed one
that has gone away, so the list stays true. docs/peers.md shows the same table.

Byte columns are compared per rank per step (lins's step CSV against the peer's collective log with bookkeeping
set aside, see compare.is_bookkeeping); sequences with `python -m lins_peers.compare` against
`lins step --collective-log`. A difference of granularity alone (the same collectives after merging consecutive
ones of one kind and group: DeepSpeed gathers per leaf module and per optimizer parameter group where lins gathers
per lins module and one flat partition) is not listed. Keys are "system:strategy" without the version.
"""

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

BYTE_COLUMNS = ("all_gather_bytes", "reduce_scatter_bytes", "all_reduce_bytes", "broadcast_bytes", "intra_bytes",
                "inter_bytes")


@dataclass(frozen=True)
class Pairing:
    peer: str                                    # system:strategy, e.g. fsdp2:full
    preset: str                                  # lins's preset run the same way (R: ranks per node)
    lins_options: Tuple[str, ...] = ()           # `lins step` options that set the system up as the peer is
    bytes_differ: Dict[str, str] = field(default_factory=dict)  # column -> why; any M unless said
    bytes_differ_multi: Dict[str, str] = field(default_factory=dict)  # column -> why; only with M > 1
    sequence: Optional[str] = None               # why the sequences differ beyond granularity (None: they match)

    def lins_preset(self, gpus_per_node: int) -> str:
        return self.preset.replace(":R", f":{gpus_per_node}")


# DeepSpeed ZeRO-3 with every module gathered in forward and again in backward, no prefetch (the peer's
# --zero3 comparison settings), as `lins step` options.
DS_COMPARISON = ("--ds-prefetch-bucket", "0", "--ds-max-reuse-distance", "0", "--ds-persistence-threshold", "0")

PAIRINGS = {
    p.peer: p for p in [
        Pairing("ddp:ddp", "ddp"),
        Pairing("fsdp2:full", "fsdp"),
        Pairing("fsdp2:zero2", "fsdp:noreshard"),
        Pairing("fsdp2:hpz", "fsdp:R"),
        Pairing("fsdp2:hsdp", "hsdp"),
        Pairing("deepspeed:zero1", "zero1"),
        Pairing("deepspeed:zero2", "zero2"),
        Pairing("deepspeed:zero3", "zero3", DS_COMPARISON),
        Pairing("deepspeed:zeropp", "zeropp", DS_COMPARISON),
        Pairing("deepspeed:mics", "mics", DS_COMPARISON),
        Pairing("deepspeed:zero3-defaults", "zero3"),
        Pairing("deepspeed:zeropp-defaults", "zeropp"),
        Pairing("deepspeed:mics-defaults", "mics"),
        # overlap_comm set against DeepSpeed's default for the stage (peer --overlap-comm, lins --ds-overlap-comm)
        Pairing("deepspeed:zero1-overlap_comm-on", "zero1", ("--ds-overlap-comm", "on")),
        Pairing("deepspeed:zero2-overlap_comm-on", "zero2", ("--ds-overlap-comm", "on")),
        Pairing("deepspeed:zero3-overlap_comm-off", "zero3", DS_COMPARISON + ("--ds-overlap-comm", "off")),
        Pairing("deepspeed:zeropp-overlap_comm-off", "zeropp", DS_COMPARISON + ("--ds-overlap-comm", "off")),
        Pairing("deepspeed:mics-overlap_comm-off", "mics", DS_COMPARISON + ("--ds-overlap-comm", "off")),
    ]
}


def pairing(system: str, strategy: str) -> Optional[Pairing]:
    """The pairing of a peer row (system with or without its version, e.g. fsdp2-2.15.0)."""
    name = system.rsplit("-", 1)[0] if system[-1:].isdigit() else system
    name = {"torch-ddp": "ddp"}.get(name, name)
    return PAIRINGS.get(f"{name}:{strategy}")


def expected_byte_differences(p: Pairing, micro_batches: int) -> Dict[str, str]:
    out = dict(p.bytes_differ)
    if micro_batches > 1:
        out.update(p.bytes_differ_multi)
    return out
