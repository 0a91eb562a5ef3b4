"""Where a real DeepSpeed ZeRO-3 step spends its time: lins_peers.deepspeed_zero run with timers around DeepSpeed's
own functions, per rank and timed step. Launched as the runner is, with the same options:

    torchrun --nproc-per-node 4 -m lins_peers.host_breakdown --model small --gpus-per-node 2 --strategies zero3

Timed (perf_counter, inclusive), DeepSpeed 0.19.8:

    fwd_hooks      DeepSpeedZeRoOffload.pre_sub_module_forward_function + post_sub_module_forward_function
                   (parameter_offload.py: the trace, fetch_sub_module, release_sub_module), per module hooked
    bwd_hooks      pre_sub_module_backward_function + post_sub_module_backward_function, likewise
    gather_wait    the collective's own wait inside AllGatherCoalescedHandle.wait / AllGatherHandle.wait
                   (partition_parameters.py): the all-gather's time on the wire as the host sees it
    gathers        all-gathers issued (one per fetched module with parameters)
    rs_call        stage3.py's reduce_scatter_coalesced (coalesced_collectives.py), whole call
    rs_wire        its _torch_reduce_scatter_fn (the reduce-scatter itself, synchronous)
    modules_fwd / modules_fwd_with_params: pre_sub_module_forward_function calls, all and those of modules with
                   parameters of their own (parameters(recurse=False)); likewise modules_bwd*
    engine_forward DeepSpeedEngine.forward (engine.py), whole call: the forward's compute, its hooks and gathers
    engine_backward DeepSpeedEngine.backward, whole call: autograd, the backward hooks, gathers and reduce-scatters
    engine_step    DeepSpeedEngine.step, whole calls: at the accumulation boundary ZeRO-3's optimizer step (the
                   gradient norm and overflow check, the partitioned AdamW, the parameters' release)

Writes OUT/NAME.host_breakdown.csv (rank, step, counter, value) beside the runner's files.
"""

import csv
import sys
import time
from collections import defaultdict
from pathlib import Path

from . import recorder as _recorder

_totals = defaultdict(float)
_rows = []
_step = [None]


def _timed(owner, name, counter, count=None):
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _totals[counter] += time.perf_counter() - t0
            if count:
                count(args)

    setattr(owner, name, wrapper)


def _has_own_params(module) -> bool:
    return next(iter(module.parameters(recurse=False)), None) is not None


class _TimedWork:
    def __init__(self, work):
        self._work = work

    def wait(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self._work.wait(*args, **kwargs)
        finally:
            _totals["gather_wait"] += time.perf_counter() - t0

    def __getattr__(self, name):
        return getattr(self._work, name)


def _patch_deepspeed():
    from deepspeed.runtime.comm import coalesced_collectives as cc
    from deepspeed.runtime.zero import parameter_offload as po
    from deepspeed.runtime.zero import partition_parameters as pp
    from deepspeed.runtime.zero import stage3

    def counter(kind):
        def count(args):
            _totals[f"modules_{kind}"] += 1
            if _has_own_params(args[1]):
                _totals[f"modules_{kind}_with_params"] += 1
        return count

    z = po.DeepSpeedZeRoOffload
    _timed(z, "pre_sub_module_forward_function", "fwd_hooks", counter("fwd"))
    _timed(z, "post_sub_module_forward_function", "fwd_hooks")
    _timed(z, "pre_sub_module_backward_function", "bwd_hooks", counter("bwd"))
    _timed(z, "post_sub_module_backward_function", "bwd_hooks")
    handles = ((pp.AllGatherCoalescedHandle, "allgather_handle"), (pp.AllGatherHandle, "_AllGatherHandle__handle"))
    for cls, attr in handles:
        init = cls.__init__

        def patched(self, *args, __init=init, __attr=attr, **kwargs):
            __init(self, *args, **kwargs)
            setattr(self, __attr, _TimedWork(getattr(self, __attr)))
            _totals["gathers"] += 1

        cls.__init__ = patched
    _timed(stage3, "reduce_scatter_coalesced", "rs_call")
    _timed(cc, "_torch_reduce_scatter_fn", "rs_wire")
    from deepspeed.runtime.engine import DeepSpeedEngine
    for name in ("forward", "backward", "step"):
        _timed(DeepSpeedEngine, name, f"engine_{name}")


_install = _recorder.CollectiveRecorder.install
_begin = _recorder.CollectiveRecorder.begin_step
_end = _recorder.CollectiveRecorder.end_step


def _install_and_patch(self):
    out = _install(self)
    _patch_deepspeed()
    return out


def _begin_step(self, step):
    _totals.clear()
    _step[0] = (self.strategy, step)
    return _begin(self, step)


def _end_step(self):
    if _step[0] is not None:
        strategy, step = _step[0]
        _rows.extend([strategy, step, k, f"{v:.6g}"] for k, v in sorted(_totals.items()))
        _step[0] = None
    return _end(self)


def main(argv=None) -> int:
    import torch.distributed as dist

    from . import deepspeed_zero

    _recorder.CollectiveRecorder.install = _install_and_patch
    _recorder.CollectiveRecorder.begin_step = _begin_step
    _recorder.CollectiveRecorder.end_step = _end_step
    args_out, name = "results/peers", "deepspeed"
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(argv):
        if a == "--out" and i + 1 < len(argv):
            args_out = argv[i + 1]
        if a == "--name" and i + 1 < len(argv):
            name = argv[i + 1]
    destroy = dist.destroy_process_group

    def write_then_destroy(*a, **k):
        rank = dist.get_rank()
        path = Path(args_out) / f"{name}.host_breakdown.rank{rank}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["rank", "strategy", "step", "counter", "value"])
            w.writerows([rank] + r for r in _rows)
        return destroy(*a, **k)

    dist.destroy_process_group = write_then_destroy
    return deepspeed_zero.main(argv)


if __name__ == "__main__":
    sys.exit(main())
