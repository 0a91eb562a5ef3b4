"""Records every collective a process issues through torch.distributed, as rows of the collective log that `lins step
--collective-log` writes too:

    system,strategy,rank,step,index,kind,group_size,elems,dtype,message_bytes

How a call is counted (docs/peers.md):
- The public collective functions of torch.distributed (and their old names: all_gather_into_tensor, _all_gather_base,
  reduce_scatter_tensor, _reduce_scatter_base) are wrapped in both torch.distributed and distributed_c10d, before
  FSDP or DeepSpeed is imported, so every caller -- FSDP2's all_gather_single / reduce_scatter_single, DeepSpeed's
  deepspeed.comm, which keeps references to these functions -- goes through a wrapper. A collective that torch
  implements with another one (all_gather_object, the old aliases) is counted once, as the outer call.
- message_bytes follows nccl-tests: the gathered (output) size of an all-gather, the input size of a reduce-scatter,
  the buffer of an all-reduce or a reduce, the payload of a broadcast, the input of an all-to-all.
- A coalesced call (all_reduce_coalesced, all_gather_coalesced, or single calls inside _coalescing_manager) is one
  row per tensor, in order: NCCL runs such a group as one ncclGroupStart/End of one collective per tensor.
- Only calls between begin_step() and end_step() are kept, and none while paused(): set-up collectives before the
  first step and the loss reporting are left out.
"""

import contextlib
import csv
import functools
import inspect
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

LOG_COLUMNS = ["system", "strategy", "rank", "step", "index", "kind", "group_size", "elems", "dtype", "message_bytes"]
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce", "all_to_all", "barrier", "other")

_DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64", "int64": "int64",
                "int32": "int32", "int8": "int8", "uint8": "uint8", "bool": "bool"}


def dtype_name(dtype) -> str:
    name = str(dtype).replace("torch.", "")
    return _DTYPE_NAMES.get(name, name)


@dataclass
class Collective:
    """One recorded collective on this rank. `ranks` (global ranks of the group) is kept for the intra/inter split;
    the log file has only its size."""
    step: int
    index: int
    kind: str
    group_size: int
    elems: int
    dtype: str
    message_bytes: int
    ranks: Tuple[int, ...] = field(default_factory=tuple)
    strategy: str = ""


def _numel_bytes(t) -> Tuple[int, int]:
    return int(t.numel()), int(t.numel()) * int(t.element_size())


def _tensors_of(kind: str, name: str, a: Dict) -> List[Tuple[int, int, str]]:
    """(elems, bytes, dtype) of each tensor the collective moves, by the nccl-tests convention."""
    def one(t):
        n, b = _numel_bytes(t)
        return [(n, b, dtype_name(t.dtype))]

    def total(ts):
        ts = list(ts)
        if not ts:
            return [(0, 0, "")]
        n = sum(int(t.numel()) for t in ts)
        return [(n, sum(_numel_bytes(t)[1] for t in ts), dtype_name(ts[0].dtype))]

    if name == "all_reduce" or name == "reduce" or name == "broadcast":
        return one(a["tensor"])
    if name == "all_reduce_coalesced":
        return [x for t in a["tensors"] for x in one(t)]
    if name in ("all_gather_single", "all_gather_into_tensor", "_all_gather_base"):
        return one(a["output_tensor"])
    if name == "all_gather":
        return total(a["tensor_list"])
    if name == "all_gather_coalesced":
        return [x for lst in a["output_tensor_lists"] for x in total(lst)]
    if name in ("reduce_scatter_single", "reduce_scatter_tensor", "_reduce_scatter_base"):
        return one(a["input"])
    if name == "reduce_scatter":
        return total(a["input_list"])
    if name == "all_to_all_single":
        return one(a["input"])
    if name == "all_to_all":
        return total(a["input_tensor_list"])
    if name in ("gather", "scatter"):
        return one(a["tensor"])
    return [(0, 0, "")]  # barrier, object collectives, point-to-point


# function name in torch.distributed -> kind
WRAPPED: Dict[str, str] = {
    "all_reduce": "all_reduce", "all_reduce_coalesced": "all_reduce", "reduce": "reduce",
    "broadcast": "broadcast", "all_gather": "all_gather", "all_gather_single": "all_gather",
    "all_gather_into_tensor": "all_gather", "_all_gather_base": "all_gather", "all_gather_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_single": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "all_to_all": "all_to_all", "all_to_all_single": "all_to_all", "barrier": "barrier",
    "monitored_barrier": "barrier", "gather": "other", "scatter": "other", "all_gather_object": "other",
    "gather_object": "other", "broadcast_object_list": "other", "scatter_object_list": "other",
    "send": "other", "recv": "other", "isend": "other", "irecv": "other", "batch_isend_irecv": "other",
}


class CollectiveRecorder:
    """Wraps torch.distributed's collectives (install()) and keeps the ones issued inside a step on this rank."""

    def __init__(self, system: str, strategy: str = ""):
        self.system = system
        self.strategy = strategy
        self.rows: List[Collective] = []
        self._step: Optional[int] = None
        self._index = 0
        self._paused = 0
        self._local = threading.local()
        self._installed: List[Tuple[object, str, Callable]] = []

    # --- the step window -------------------------------------------------------------------------------------------
    def begin_step(self, step: int) -> None:
        self._step, self._index = step, 0

    def end_step(self) -> None:
        self._step = None

    @contextlib.contextmanager
    def paused(self):
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def of_step(self, step: int) -> List[Collective]:
        """This rank's collectives of one step of the current strategy."""
        return [r for r in self.rows if r.step == step and r.strategy == self.strategy]

    # --- wrapping --------------------------------------------------------------------------------------------------
    def install(self) -> "CollectiveRecorder":
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d

        for name, kind in WRAPPED.items():
            original = getattr(c10d, name, None)
            if original is None or getattr(original, "_lins_recorded", False):
                continue
            wrapper = self._wrap(name, kind, original)
            for module in (c10d, dist):
                if getattr(module, name, None) is original:
                    self._installed.append((module, name, original))
                    setattr(module, name, wrapper)
        return self

    def uninstall(self) -> None:
        for module, name, original in reversed(self._installed):
            setattr(module, name, original)
        self._installed.clear()

    def _wrap(self, name: str, kind: str, original: Callable) -> Callable:
        sig = inspect.signature(original)

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            depth = getattr(self._local, "depth", 0)
            if depth == 0 and self._step is not None and not self._paused:
                self._record(name, kind, sig, args, kwargs)
            self._local.depth = depth + 1
            try:
                return original(*args, **kwargs)
            finally:
                self._local.depth = depth

        wrapper._lins_recorded = True
        return wrapper

    def _record(self, name: str, kind: str, sig: inspect.Signature, args: Sequence, kwargs: Dict) -> None:
        import torch.distributed as dist

        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        group = a.get("group")
        if name == "batch_isend_irecv":
            group = None
        try:
            ranks = tuple(dist.get_process_group_ranks(group)) if group is not None else tuple(
                range(dist.get_world_size()))
        except (ValueError, RuntimeError):
            ranks = tuple(range(dist.get_world_size()))
        for elems, nbytes, dtype in _tensors_of(kind, name, a):
            self.rows.append(Collective(self._step, self._index, kind, len(ranks), elems, dtype, nbytes, ranks,
                                        self.strategy))
            self._index += 1

    # --- output ----------------------------------------------------------------------------------------------------
    def log_rows(self, rank: int) -> List[List]:
        return [[self.system, r.strategy, rank, r.step, r.index, r.kind, r.group_size, r.elems, r.dtype,
                 r.message_bytes] for r in self.rows]


def write_log(path: str, rows: Sequence[Sequence]) -> None:
    """Writes collective-log rows (any ranks, any strategies) sorted by strategy, rank, step and index."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(LOG_COLUMNS)
        for row in rows:
            w.writerow(row)


def read_log(path: str) -> List[Dict]:
    """The rows of a collective log as dicts with int fields converted."""
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            missing = [c for c in LOG_COLUMNS if c not in row]
            if missing:
                raise ValueError(f"{path}: not a collective log (missing columns {', '.join(missing)})")
            for c in ("rank", "step", "index", "group_size", "elems", "message_bytes"):
                row[c] = int(row[c])
            out.append(row)
    return out
