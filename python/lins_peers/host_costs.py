"""Measures the host (Python) cost of DeepSpeed's ZeRO-3 collective wrappers as a function of the group size, and
fits a + b * group per call kind, and the host work of FSDP2's hooks, DDP's reducer and lins's own executor: the
defaults of lins's host model (src/core/cost/host_model.h, docs/engines.md).

    python -m lins_peers.host_costs [--out data/host] [--groups 2,4,...,1024] [--repeats 200] [--kinds LIST]
                                    [--hook-steps 20] [--fsdp2-group 2] [--ddp-steps 200] [--lins build/lins]

Timed, one process, one thread, on the CPU (DS_ACCELERATOR=cpu), with no collective of more than one rank actually
run (a group of 1024 ranks cannot be launched here; what is timed is the host work that walks the group's ranks),
but for lins_issue, which runs lins itself on 2 ranks:

    collective_issue   torch.distributed.all_reduce(async_op=True) of a small tensor on a one-rank gloo group, up
                       to the call's return: c10d's dispatch of one asynchronous collective (per call; no group
                       term)
    ds_gather_issue    deepspeed.runtime.zero.partition_parameters: the body of _all_gather_dtype (a closure of
                       Init, transcribed line by line: the flat buffer, one narrow per rank, the shards copied in
                       with torch.cat(out=)) and the AllGatherCoalescedHandle it returns (DeepSpeed's own class);
                       per call of one parameter
    ds_gather_wait     AllGatherCoalescedHandle.wait (DeepSpeed's own): per parameter, a narrow per rank, torch.cat,
                       the view; per parameter (on a GPU each piece also gets a record_stream, not timed here)
    ds_reduce_scatter  deepspeed.runtime.comm.coalesced_collectives.reduce_scatter_coalesced (DeepSpeed's own, its
                       module's rank and world-size lookups answering the group's, its reduce-scatter call a no-op):
                       per tensor of a 4-tensor bucket
    ds_module_hooks    ZeRO-3's module hooks (parameter_offload.py: pre_sub_module_forward_function and
                       post_sub_module_forward_function, pre_sub_module_backward_function and
                       post_sub_module_backward_function; the trace, fetch_sub_module's bookkeeping,
                       release_sub_module), DeepSpeed's own, on lins's small model under deepspeed.initialize
                       (stage 3, every threshold 0) on this one-rank group, where DeepSpeed gathers nothing (its
                       no-gather handles): per module and pass (a forward, or a backward), whatever the group.
                       With --ds-hook-group G > 1 on torch's fake process group of G ranks instead: the gather
                       path (all_gather_coalesced, its handle's wait, the release's partition) runs; the time in
                       the torch.distributed collectives and in the gather handles' waits (ds_gather_wait's part)
                       is left out; the gather's issue (ds_gather_issue's part, microseconds) stays inside
    fsdp2_hooks        FSDP2's hooks, PyTorch's own (torch/distributed/fsdp/_fully_shard: FSDPState's
                       _pre_forward, _post_forward, _pre_backward and _root_post_backward_final_callback and
                       FSDPParamGroup.post_backward, timed where outermost; inside them the groups' unshard,
                       wait_for_unshard, reshard, the foreach copy-in and copy-out and the reduce-scatter's
                       chunk_cat), less the torch.distributed collectives they call (all_gather_single,
                       reduce_scatter_single, all_reduce): lins's small model under fully_shard per lins module
                       (lins_peers.fsdp2, full, bf16) on torch's fake process group of --fsdp2-group ranks (2;
                       collectives return at once), so that FSDP2 takes its multi-rank path: on one rank it skips
                       the copies and the collectives. Per parameter group and pass (a forward, or a backward),
                       whatever the group (the same from 2 to 128 ranks); the root's own hook work is spread over
                       the groups
    ddp_bucket         DDP's reducer (C++; its built-in all-reduce, no comm hook), lins's small model at seq 16 on the
                       one-rank gloo group: the backward with DDP's default buckets (2) and with every parameter its
                       own bucket (39), alternated step by step with the plain backward; their difference over the
                       difference of the reducer's bucket counts, less the collective_issue of the same step, is the
                       work per bucket besides the issue (what does not depend on the bucket count, the copies of
                       every gradient into its bucket and back among it, cancels). A few microseconds, near the
                       noise: written as 0, and said in its source, when not above it
    lins_issue         lins's executor issuing one collective: `mpirun -np 2 lins step --model small --strategies
                       lins --gpu-mem 16MiB --trace` (--lins: the binary; mpirun from the PATH), the median of
                       end_s - start_s over the issue actions of the action logs it writes (timeline.*.rank*.csv)

Tensors are small (4 elements per rank) so that copies cost nothing beside the dispatch, as on a GPU, where the
copies are kernels the host only launches; fsdp2_hooks and ddp_bucket run lins's small model, whose copies on a CPU
are the host's own (FSDP2's about a tenth of its hooks' time). fsdp2_hooks, ddp_bucket and lins_issue are one
constant each (b = 0), the median over --hook-steps training steps, --ddp-steps backwards and one traced step; the
provenance says how each was derived. Writes OUT/host_costs.csv (kind, a_s, b_s, max_rel_error, source; with
--kinds, the other kinds' rows kept from it), the measured points OUT/host_cost_points.csv (kind, group, seconds)
and OUT/host_costs.provenance.json.
"""

import argparse
import csv
import functools
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

KINDS = ("collective_issue", "ds_gather_issue", "ds_gather_wait", "ds_reduce_scatter", "ds_module_hooks", "fsdp2_hooks",
         "ddp_bucket", "lins_issue")
REPO = Path(__file__).resolve().parents[2]
PER_RANK = 4  # elements of each rank's piece


def _median_seconds(fn, repeats, per):
    fn()  # warm
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) / per)
    return statistics.median(samples)


class _DoneHandle:
    def wait(self):
        return None


def _gather_params(group, count):
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    params = []
    for _ in range(count):
        p = torch.nn.Parameter(torch.empty(0), requires_grad=False)
        p.ds_numel = PER_RANK * group
        p.ds_shape = (PER_RANK * group,)
        p.ds_tensor = torch.zeros(PER_RANK)
        p.ds_tensor.ds_numel = PER_RANK
        p.ds_secondary_tensor = None
        p.ds_status = ZeroParamStatus.INFLIGHT
        params.append(p)
    return params


def time_gather_wait(group, repeats):
    from deepspeed.runtime.zero.partition_parameters import AllGatherCoalescedHandle, ZeroParamStatus

    count = 4
    flat = torch.zeros(PER_RANK * count * group)
    partitions = [flat.narrow(0, PER_RANK * count * r, PER_RANK * count) for r in range(group)]
    params = _gather_params(group, count)

    def once():
        for p in params:
            p.ds_status = ZeroParamStatus.INFLIGHT
        AllGatherCoalescedHandle(_DoneHandle(), params, partitions, group).wait()

    return _median_seconds(once, repeats, count)


def time_gather_issue(group, repeats):
    from deepspeed.runtime.zero.partition_parameters import AllGatherCoalescedHandle, ZeroParamStatus

    params = _gather_params(group, 1)
    rank_in_group = 0

    def once():
        for p in params:
            p.ds_status = ZeroParamStatus.INFLIGHT
        # _all_gather_dtype, line by line (partition_parameters.py), the all-gather call itself a no-op
        partition_sz = sum(p.ds_tensor.ds_numel for p in params)
        flat_tensor = torch.empty(partition_sz * group, dtype=torch.float32, device="cpu", requires_grad=False)
        partitions = []
        for i in range(group):
            partitions.append(flat_tensor.narrow(0, partition_sz * i, partition_sz))
        torch.cat([p.ds_tensor.to("cpu").to(torch.float32) for p in params], out=partitions[rank_in_group])
        AllGatherCoalescedHandle(allgather_handle=_DoneHandle(), params=params, partitions=partitions,
                                 world_size=group)

    return _median_seconds(once, repeats, 1)


def time_reduce_scatter(group, repeats):
    from deepspeed.runtime.comm import coalesced_collectives as cc

    count = 4

    class _Dist:  # the module's `dist` as a group of `group` ranks sees it
        @staticmethod
        def get_rank(g=None):
            return 0

        @staticmethod
        def get_world_size(g=None):
            return group

    saved = (cc.dist, cc._torch_reduce_scatter_fn)
    cc.dist = _Dist
    cc._torch_reduce_scatter_fn = lambda *a, **k: None
    try:
        tensors = [torch.zeros(PER_RANK * group - 1) for _ in range(count)]  # padded: the interleave path
        return _median_seconds(lambda: cc.reduce_scatter_coalesced(tensors, None), repeats, count)
    finally:
        cc.dist, cc._torch_reduce_scatter_fn = saved


def time_collective_issue(repeats):
    """The call that issues an asynchronous all-reduce, timed up to its return (its wait is not timed)."""
    t = torch.zeros(16)
    dist.all_reduce(t, async_op=True).wait()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        work = dist.all_reduce(t, async_op=True)
        samples.append(time.perf_counter() - t0)
        work.wait()
    return statistics.median(samples)


def time_module_hooks(repeats, group=1):
    """Seconds per module and pass of ZeRO-3's four module hooks: lins's small model (seq 128, one micro-batch) under
    deepspeed.initialize, the hooks timed inside repeats training steps (median over steps of the hooks' seconds over
    the hooks' module passes). group 1: on the one-rank group already made, where DeepSpeed gathers nothing. group > 1:
    on torch's fake process group of that many ranks in this process (made here, destroyed at the end), so that the
    hooks take DeepSpeed's gather path (fetch_sub_module's all_gather_coalesced and its handle's wait, the release's
    partition); the time inside the torch.distributed collectives they call and inside the gather handles' waits
    (which ds_gather_wait prices) is left out. The gather's issue (what ds_gather_issue prices, a few microseconds per
    call) stays inside. Returns (seconds, details)."""
    import lins_torch
    from deepspeed.runtime.zero import parameter_offload as po

    from . import workload as wl
    from .deepspeed_zero import DeepSpeedPeer

    if group > 1:
        from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend
        os.environ["WORLD_SIZE"] = str(group)
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=group)
    w = wl.Workload(model_name="small", config=lins_torch.preset("small"), seq=128, micro_batch_size=1,
                    micro_batches=1, world=group, gpus_per_node=group, seed=1, adamw=wl.AdamWConfig())
    z = po.DeepSpeedZeRoOffload
    names = ("pre_sub_module_forward_function", "post_sub_module_forward_function",
             "pre_sub_module_backward_function", "post_sub_module_backward_function")
    saved = {n: getattr(z, n) for n in names}
    depth, spent, passes = [0], [0.0], [0]

    def timed(name):
        original = saved[name]

        def wrapper(*args, **kwargs):
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
                depth[0] -= 1
                passes[0] += name.startswith("pre_")
        return wrapper

    from deepspeed.runtime.zero import partition_parameters as pp

    saved_colls = {n: getattr(dist, n) for n in FSDP2_COLLECTIVES if hasattr(dist, n)}
    # the handles' waits, which ds_gather_wait prices per parameter
    saved_waits = [(cls, cls.__dict__["wait"]) for cls in (pp.AllGatherCoalescedHandle, pp.AllGatherHandle)]
    coll_depth, coll_spent = [0], [0.0]  # the collectives and the handles' waits inside the hooks, where outermost
    for n in names:
        setattr(z, n, timed(n))
    for n, fn in saved_colls.items():
        setattr(dist, n, _timed_inside(fn, depth, coll_depth, coll_spent))
    for cls, fn in saved_waits:
        setattr(cls, "wait", _timed_inside(fn, depth, coll_depth, coll_spent))
    try:
        peer = DeepSpeedPeer("zero3", w, torch.device("cpu"), "bf16", "comparison")
        ids, targets = wl.batch(w, 0, 0, 0, torch.device("cpu"))
        samples = []
        for step in range(repeats + 2):
            spent[0], passes[0], coll_spent[0] = 0.0, 0, 0.0
            peer.backward(peer.forward(ids, targets, 0, True), 0, True)
            peer.optimizer_step()
            if step >= 2:  # the first steps record DeepSpeed's trace
                samples.append((spent[0] - coll_spent[0]) / passes[0])
        peer.close()
        details = {"group": group, "module_passes_per_step": passes[0], "steps": repeats,
                   "hooks_s_per_module_pass_min": min(samples), "hooks_s_per_module_pass_max": max(samples)}
        return statistics.median(samples), details
    finally:
        for n, f in saved.items():
            setattr(z, n, f)
        for n, fn in saved_colls.items():
            setattr(dist, n, fn)
        for cls, fn in saved_waits:
            setattr(cls, "wait", fn)
        if group > 1:
            dist.destroy_process_group()


def _timed_inside(fn, hooks_depth, depth, spent, on_call=None):
    """fn timed where outermost (into spent[0]) when called from inside the hooks (hooks_depth[0] > 0), on_call()
    for each such outermost call; outside the hooks it runs untimed."""
    timed = _timed_outermost(fn, depth, spent)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not hooks_depth[0]:
            return fn(*args, **kwargs)
        if on_call is not None and not depth[0]:
            on_call()
        return timed(*args, **kwargs)
    return wrapper


def _timed_outermost(fn, depth, spent):
    """fn wrapped so that its calls add their seconds to spent[0], the outermost call only: a wrapped function called
    from inside another (depth[0] > 0) is already inside that one's time."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if depth[0]:
            return fn(*args, **kwargs)
        depth[0] += 1
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0
            depth[0] -= 1
    return wrapper


# FSDP2's hooks: what runs per parameter group in forward (the state's pre- and post-forward hooks: the unshard, its
# wait, the reshard, the autograd hooks registered) and in backward (the state's pre-backward hook, the group's
# post-backward: unshard, wait, the gradients' reduction, reshard; and the root's final callback, which runs the
# post-backward of groups whose inputs need no gradient and finishes the step). The group's own methods (pre_forward,
# unshard, wait_for_unshard, reshard...) run inside these, so only these are timed.
FSDP2_HOOKS = (("_fsdp_state", "FSDPState", "_pre_forward"), ("_fsdp_state", "FSDPState", "_post_forward"),
               ("_fsdp_state", "FSDPState", "_pre_backward"),
               ("_fsdp_state", "FSDPState", "_root_post_backward_final_callback"),
               ("_fsdp_param_group", "FSDPParamGroup", "post_backward"))
# The torch.distributed collectives _fsdp_collectives.py issues (as `dist.<name>`, looked up at each call): 2.15's
# all_gather_single and reduce_scatter_single, the older names of the same, and HSDP's all_reduce.
FSDP2_COLLECTIVES = ("all_gather_single", "all_gather_into_tensor", "reduce_scatter_single", "reduce_scatter_tensor",
                     "all_reduce")


def time_fsdp2_hooks(steps, group):
    """Seconds per FSDP parameter group and pass (one forward, or one backward) of FSDP2's hooks, the torch.distributed
    collectives they call excluded: lins's small model (seq 128, one micro-batch) under fully_shard per lins module as
    lins_peers.fsdp2 builds it (strategy full, bf16 mixed precision), on a fake process group of `group` ranks in this
    one process (torch's own "fake" backend: every collective returns at once, moving nothing), so that FSDP2 takes
    its multi-rank path: the foreach copy-in into the all-gather buffer, the copy-out into the parameters
    (split_with_sizes_copy), the reduce-scatter's chunk_cat. (On a one-rank group FSDP2 skips all three and issues no
    collective; group 1 times that path.) The median over `steps` training steps of the hooks' seconds, less the
    collectives' seconds inside them, over 2 x the parameter groups; the default group must not be initialised (it is
    the fake one here, destroyed at the end). Returns (seconds, details)."""
    import importlib

    import lins_torch
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    from . import workload as wl
    from .fsdp2 import Fsdp2Peer

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=group)
    pkg = "torch.distributed.fsdp._fully_shard."
    hooks = [(getattr(importlib.import_module(pkg + m), c), n) for m, c, n in FSDP2_HOOKS]
    saved_hooks = [(cls, name, cls.__dict__[name]) for cls, name in hooks]
    saved_colls = {n: getattr(dist, n) for n in FSDP2_COLLECTIVES if hasattr(dist, n)}
    depth, spent = [0], [0.0]               # the hooks
    coll_depth, coll_spent = [0], [0.0]     # the collectives called from inside them
    calls = {}

    def collective(name, fn):
        """fn timed (the outermost collective call) and counted when called from inside the hooks."""
        def count():
            calls[name] = calls.get(name, 0) + 1
        return _timed_inside(fn, depth, coll_depth, coll_spent, count)

    # The hooks are patched before the model is built: fully_shard registers the forward hooks as bound methods.
    for cls, name, fn in saved_hooks:
        setattr(cls, name, _timed_outermost(fn, depth, spent))
    for name, fn in saved_colls.items():
        setattr(dist, name, collective(name, fn))
    try:
        w = wl.Workload(model_name="small", config=lins_torch.preset("small"), seq=128, micro_batch_size=1,
                        micro_batches=1, world=group, gpus_per_node=group, seed=1, adamw=wl.AdamWConfig())
        peer = Fsdp2Peer("full", w, torch.device("cpu"), "bf16")
        ids, targets = wl.batch(w, 0, 0, 0, torch.device("cpu"))
        samples, coll_samples = [], []
        groups = 0
        for step in range(steps + 2):
            spent[0], coll_spent[0] = 0.0, 0.0
            calls.clear()
            peer.backward(peer.forward(ids, targets, 0, True), 0, True)
            peer.optimizer_step()
            # the root's states are known after its first forward (FSDP2's lazy init); the root has no group of its
            # own, so its hooks' work is spread over the lins modules' groups
            groups = sum(len(s._fsdp_param_groups) for s in peer.model._get_fsdp_state()._state_ctx.all_states)
            if step >= 2:  # the first forward runs FSDP2's lazy initialisation
                samples.append((spent[0] - coll_spent[0]) / (2 * groups))
                coll_samples.append(coll_spent[0] / (2 * groups))
        peer.close()
        del peer
        details = {"model": "small", "seq": 128, "group": group, "strategy": "full", "precision": "bf16",
                   "parameter_groups": groups, "group_passes_per_step": 2 * groups, "steps": steps,
                   "collective_calls_per_step": dict(sorted(calls.items())),
                   "collective_s_per_group_pass": statistics.median(coll_samples),
                   "hooks_s_per_group_pass_min": min(samples), "hooks_s_per_group_pass_max": max(samples)}
        return statistics.median(samples), details
    finally:
        for cls, name, fn in saved_hooks:
            setattr(cls, name, fn)
        for name, fn in saved_colls.items():
            setattr(dist, name, fn)
        dist.destroy_process_group()


DDP_SEQ = 16  # a short sequence: the backward's compute is small beside the reducer's work


def time_ddp_bucket(steps):
    """Seconds per gradient bucket of DDP's reducer (C++, with its built-in all-reduce: no comm hook), the collective's
    issue excluded: lins's small model (seq 16, one micro-batch, fp32) on the one-rank gloo group, its backward timed
    plain and under DistributedDataParallel twice, with DDP's default buckets (as lins_peers.ddp: 25 MiB, the first
    1 MiB) and with a cap so small that every parameter is its own bucket, the three alternated step by step (so that the machine's
    load drifts over all three alike), and in each step as many collective_issue calls as the second makes buckets
    more. The reducer's work that does not depend on the bucket count (its autograd hooks, each gradient copied into
    its bucket and back, which on a CPU are the host's own copies) cancels in the difference of the two DDP backwards;
    that difference over the difference of their bucket counts (read from the reducer: num_buckets_reduced), less
    the step's median collective_issue, is the work per bucket besides the issue; the median over steps. Returns
    (seconds, details)."""
    import lins_torch
    from torch.nn.parallel import DistributedDataParallel

    from . import workload as wl

    w = wl.Workload(model_name="small", config=lins_torch.preset("small"), seq=DDP_SEQ, micro_batch_size=1,
                    micro_batches=1, world=1, gpus_per_node=1, seed=1, adamw=wl.AdamWConfig())
    cpu = torch.device("cpu")
    # bucket_cap_mb: DDP's default, as lins_peers.ddp (None: 25 MiB, and the first bucket 1 MiB, which a cap given
    # would set to the cap too); so small that every parameter is its own bucket
    caps = (None, 1e-6)
    variants = [wl.build_model(w, cpu)] + [DistributedDataParallel(wl.build_model(w, cpu), bucket_cap_mb=c)
                                           for c in caps]
    ids, targets = wl.batch(w, 0, 0, 0, cpu)

    def backward(model):
        loss = wl.loss_sum(model, ids, targets)
        t0 = time.perf_counter()
        loss.backward()
        seconds = time.perf_counter() - t0
        for p in model.parameters():
            p.grad = None
        return seconds

    for _ in range(3):  # warm; DDP rebuilds its buckets after the first backward
        for model in variants:
            backward(model)
    buckets = [int(m._get_ddp_logging_data()["num_buckets_reduced"]) for m in variants[1:]]
    extra = buckets[1] - buckets[0]
    if extra <= 0:
        raise SystemExit(f"ddp_bucket: DDP made {buckets} buckets at bucket_cap_mb {caps}: no difference to time")
    times, issues = [[] for _ in variants], []
    for step in range(steps):
        order = range(len(variants)) if step % 2 == 0 else reversed(range(len(variants)))
        for i in order:
            times[i].append(backward(variants[i]))
        issues.append(time_collective_issue(extra))
    if [int(m._get_ddp_logging_data()["num_buckets_reduced"]) for m in variants[1:]] != buckets:
        raise SystemExit("ddp_bucket: DDP changed its buckets while timed")
    plain, few, many = times
    per_bucket = [(b - a) / extra for a, b in zip(few, many)]  # the issue included, per step
    besides_issue = [p - i for p, i in zip(per_bucket, issues)]
    # what the reducer spends per step whatever its buckets (on top of the plain backward): for the provenance
    fixed = statistics.median(f - p for p, f in zip(plain, few)) - buckets[0] * statistics.median(per_bucket)
    quartiles = statistics.quantiles(besides_issue, n=4)
    details = {"model": "small", "seq": DDP_SEQ, "precision": "fp32", "comm_hook": None,
               "bucket_cap_mb": list(caps), "buckets": buckets, "steps": steps,
               "backward_s_median": {"plain": statistics.median(plain), f"ddp_{buckets[0]}_buckets":
                                     statistics.median(few), f"ddp_{buckets[1]}_buckets": statistics.median(many)},
               "per_bucket_s": statistics.median(per_bucket), "collective_issue_s": statistics.median(issues),
               "besides_issue_s_quartiles": [quartiles[0], quartiles[2]], "per_step_fixed_s": fixed}
    del variants, model  # DDP's reducers hold the process group: freed before the group is destroyed
    gc.collect()
    return statistics.median(besides_issue), details


LINS_ISSUE_RANKS = 2


def time_lins_issue(lins, mpirun):
    """Seconds lins's executor spends issuing one collective, from lins's own action log: `lins step --model small
    --strategies lins --gpu-mem 16MiB --trace` on 2 ranks (the planner's plan under a 16 MiB limit, which shards, so
    that the step issues gathers and reduce-scatters per module), the median of end_s - start_s over the issue
    actions of the traced step of both ranks (timeline.<strategy>.rank<r>.csv). Returns (seconds, details)."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [mpirun] + (["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []) + [
            "--oversubscribe", "-np", str(LINS_ISSUE_RANKS), "-x", "OPENBLAS_NUM_THREADS=1", str(lins), "step",
            "--model", "small", "--strategies", "lins", "--gpu-mem", "16MiB", "--trace", "--out", d]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"lins_issue: {' '.join(cmd)} did not finish in 600 s")
        if r.returncode != 0:
            raise SystemExit(f"lins_issue: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
        logs = sorted(Path(d).glob("timeline.*.rank*.csv"))
        if len(logs) != LINS_ISSUE_RANKS:
            raise SystemExit(f"lins_issue: lins step --trace wrote {len(logs)} action logs, not {LINS_ISSUE_RANKS}")
        seconds, by_kind = [], {}  # of every issue action; how many of each collective kind
        for log in logs:
            with open(log, newline="") as f:
                for row in csv.DictReader(f):
                    if row["action"] == "issue":
                        seconds.append(float(row["end_s"]) - float(row["start_s"]))
                        by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + 1
        if not seconds:
            raise SystemExit(f"lins_issue: no issue action in {', '.join(str(p.name) for p in logs)}")
        with open(Path(d) / "step.csv", newline="") as f:
            plans = sorted({row.get("plan", "") for row in csv.DictReader(f)})
    # the command as run, without this machine's paths
    words = ["mpirun"] + cmd[1:cmd.index(str(lins))] + ["lins"] + cmd[cmd.index(str(lins)) + 1:-1] + ["DIR"]
    quartiles = statistics.quantiles(seconds, n=4) if len(seconds) > 1 else [seconds[0]] * 3
    details = {"command": " ".join(words), "plan": plans, "issues": len(seconds),
               "issues_by_kind": dict(sorted(by_kind.items())), "issue_s_quartiles": [quartiles[0], quartiles[2]],
               "issue_s_max": max(seconds)}
    return statistics.median(seconds), details


def fit(points):
    """seconds = a + b * group over (group, seconds), least squares of the relative error (each point weighted by
    1 / seconds^2, so that the small groups count as much as the large ones); a and b kept non-negative. Returns
    a, b and the largest relative error of the fit over the points."""
    w = [1.0 / (s * s) for _, s in points]
    sw = sum(w)
    swx = sum(wi * g for wi, (g, _) in zip(w, points))
    swy = sum(wi * s for wi, (_, s) in zip(w, points))
    swxx = sum(wi * g * g for wi, (g, _) in zip(w, points))
    swxy = sum(wi * g * s for wi, (g, s) in zip(w, points))
    det = sw * swxx - swx * swx
    b = (sw * swxy - swx * swy) / det if det > 0 else 0.0
    a = (swy - b * swx) / sw
    if a < 0:  # through the origin
        a, b = 0.0, swxy / swxx
    if b < 0:
        a, b = swy / sw, 0.0
    return a, b, max(abs(s - (a + b * g)) / s for g, s in points)


def _write_csv(path, rows):
    """Written whole to PATH.partial, then renamed: a killed run leaves no half-written file."""
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    tmp.replace(path)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m lins_peers.host_costs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="data/host", help="output folder (default data/host)")
    ap.add_argument("--groups", default="2,4,8,16,32,64,128,256,512,1024", help="group sizes timed")
    ap.add_argument("--repeats", type=int, default=200, help="timed calls per point (median taken)")
    ap.add_argument("--hook-steps", type=int, default=20,
                    help="training steps timed for ds_module_hooks and fsdp2_hooks (median taken)")
    ap.add_argument("--ds-hook-group", type=int, default=1,
                    help="ranks of the group ds_module_hooks runs DeepSpeed on (default 1: the one-rank group, no "
                         "gathers; more: torch's fake process group, DeepSpeed's gather path, its collectives "
                         "left out)")
    ap.add_argument("--fsdp2-group", type=int, default=2,
                    help="ranks of the fake process group fsdp2_hooks runs FSDP2 on (default 2; 1: FSDP2's one-rank "
                         "path, without its copy-in, copy-out and collectives)")
    ap.add_argument("--ddp-steps", type=int, default=200,
                    help="backwards of each variant timed for ddp_bucket (median taken)")
    ap.add_argument("--lins", default=str(REPO / "build" / "lins"),
                    help="the lins binary lins_issue runs (default build/lins of this repository)")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="kinds measured (default all); the other kinds' rows and points are kept from OUT's files")
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or any(k not in KINDS for k in kinds):
        raise SystemExit(f"--kinds {args.kinds}: valid kinds are {', '.join(KINDS)}")
    if args.hook_steps < 1:
        raise SystemExit("--hook-steps must be at least 1")
    if args.fsdp2_group < 1 or args.ds_hook_group < 1:
        raise SystemExit("--fsdp2-group and --ds-hook-group must be at least 1")
    if args.ddp_steps < 2:
        raise SystemExit("--ddp-steps must be at least 2")
    mpirun = None
    if "lins_issue" in kinds:  # checked before anything is timed
        if not Path(args.lins).is_file():
            raise SystemExit(f"lins_issue needs the lins binary: {args.lins} does not exist (build it, or give "
                             "--lins PATH)")
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            raise SystemExit("lins_issue needs mpirun (Open MPI) on the PATH: not found")
    try:
        groups = [int(g) for g in args.groups.split(",")]
    except ValueError:
        raise SystemExit(f"--groups {args.groups}: give comma-separated whole numbers, e.g. 2,8,64")
    if any(g < 1 for g in groups) or len(set(groups)) < 2:
        raise SystemExit("--groups: at least two different group sizes, each at least 1")
    if args.repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29599")
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):  # deepspeed.initialize reads them
        os.environ.setdefault(k, v)
    dist.init_process_group("gloo", rank=0, world_size=1)
    import deepspeed

    points = {k: [] for k in KINDS}
    # the kinds measured as one constant: (seconds, details for the provenance)
    measured = {}
    if "collective_issue" in kinds:
        measured["collective_issue"] = (time_collective_issue(args.repeats), {})
    timers = {"ds_gather_issue": time_gather_issue, "ds_gather_wait": time_gather_wait,
              "ds_reduce_scatter": time_reduce_scatter}
    for g in groups:
        for k, timer in timers.items():
            if k in kinds:
                points[k].append((g, timer(g, args.repeats)))
    if "ds_module_hooks" in kinds and args.ds_hook_group == 1:
        measured["ds_module_hooks"] = time_module_hooks(args.hook_steps)
    if "ddp_bucket" in kinds:
        measured["ddp_bucket"] = time_ddp_bucket(args.ddp_steps)
    dist.destroy_process_group()
    if "ds_module_hooks" in kinds and args.ds_hook_group > 1:  # on a process group of its own
        measured["ds_module_hooks"] = time_module_hooks(args.hook_steps, args.ds_hook_group)
    if "fsdp2_hooks" in kinds:  # on a process group of its own
        measured["fsdp2_hooks"] = time_fsdp2_hooks(args.hook_steps, args.fsdp2_group)
    if "lins_issue" in kinds:
        measured["lins_issue"] = time_lins_issue(args.lins, mpirun)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = {
        "collective_issue": "torch.distributed.all_reduce(async_op=True) call on a one-rank gloo group",
        "ds_gather_issue": "partition_parameters._all_gather_dtype (transcribed) + AllGatherCoalescedHandle",
        "ds_gather_wait": "partition_parameters.AllGatherCoalescedHandle.wait, per parameter",
        "ds_reduce_scatter": "runtime/comm/coalesced_collectives.reduce_scatter_coalesced, per tensor",
        "ds_module_hooks": "parameter_offload pre/post_sub_module_forward/backward_function, per module and pass",
        "fsdp2_hooks": "FSDP2 _fsdp_state/_fsdp_param_group hooks incl. foreach copy-in/out and chunk_cat, per group "
                       "and pass, collectives excluded",
        "ddp_bucket": "DDP reducer (built-in all-reduce) per bucket: backward at its default buckets vs one per "
                      "parameter, collective_issue excluded",
    }
    if "ds_module_hooks" in measured and args.ds_hook_group > 1:
        sources["ds_module_hooks"] = f"parameter_offload module hooks on DeepSpeed's gather path (fake group of " \
                                     f"{args.ds_hook_group}; collectives and gather-handle waits excluded, " \
                                     "the gather issue included), per module and pass"
    if "fsdp2_hooks" in measured and args.fsdp2_group == 1:
        sources["fsdp2_hooks"] = "FSDP2 _fsdp_state/_fsdp_param_group hooks on one rank (no copy-in/out, no " \
                                 "collectives), per group and pass"
    if "lins_issue" in measured:
        sources["lins_issue"] = f"lins step --trace, plan {' '.join(measured['lins_issue'][1]['plan'])} on 2 ranks: " \
                                "median end_s - start_s of its issue actions, per op"
    if "ddp_bucket" in measured and measured["ddp_bucket"][0] <= 0:
        d = measured["ddp_bucket"][1]
        sources["ddp_bucket"] = f"DDP reducer per bucket not above the noise: {d['per_bucket_s'] * 1e6:.1f} us " \
                                f"per bucket <= collective_issue {d['collective_issue_s'] * 1e6:.1f} us"
    # The kinds not measured now keep their rows and points from OUT's files (when there).
    kept_rows, kept_points = {}, []
    if len(kinds) < len(KINDS):
        if (out / "host_costs.csv").exists():
            with open(out / "host_costs.csv", newline="") as f:
                kept_rows = {r[0]: r for r in list(csv.reader(f))[1:] if r and r[0] not in kinds}
        if (out / "host_cost_points.csv").exists():
            with open(out / "host_cost_points.csv", newline="") as f:
                kept_points = [r for r in list(csv.reader(f))[1:] if r and r[0] not in kinds]
    rows = [["kind", "a_s", "b_s", "max_rel_error", "source"]]
    for k in KINDS:
        if k not in kinds:
            if k in kept_rows:
                rows.append(kept_rows[k])
            continue
        if k in measured:  # one constant, per call (b = 0); a difference below the noise written as 0
            a, b, err = max(measured[k][0], 0.0), 0.0, 0.0
        else:
            a, b, err = fit(points[k])
        rows.append([k, f"{a:.3e}", f"{b:.3e}", f"{err:.3f}", sources[k]])
    _write_csv(out / "host_costs.csv", rows)
    new_points = [[k, g, f"{s:.4e}"] for k in timers if k in kinds for g, s in points[k]]
    _write_csv(out / "host_cost_points.csv", [["kind", "group", "seconds"]] + sorted(
        kept_points + new_points, key=lambda r: (KINDS.index(r[0]), int(r[1]))))
    prov = {"result": "measured", "torch": torch.__version__, "deepspeed": deepspeed.__version__,
            "python": platform.python_version(), "machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "threads": 1, "repeats": args.repeats, "hook_steps": args.hook_steps,
            "groups": groups, "kinds": kinds,
            "command": "python -m lins_peers.host_costs " + " ".join(argv if argv is not None else sys.argv[1:])}
    if "fsdp2_hooks" in kinds:
        prov["fsdp2_group"] = args.fsdp2_group
    if "ds_module_hooks" in kinds:
        prov["ds_hook_group"] = args.ds_hook_group
    if "ddp_bucket" in kinds:
        prov["ddp_steps"] = args.ddp_steps
    for k, (_, details) in measured.items():  # how each constant was derived
        if details:
            prov[k] = details
    if len(kinds) < len(KINDS) and (out / "host_costs.provenance.json").exists():
        # the kinds kept, and the provenance of the run that measured them
        prov["kept_kinds"] = [k for k in KINDS if k in kept_rows]
        prov["kept_from"] = json.loads((out / "host_costs.provenance.json").read_text())
    try:
        with open("/proc/cpuinfo") as f:
            prov["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    (out / "host_costs.provenance.json").write_text(json.dumps(prov, indent=2) + "\n")
    print("\n".join(",".join(str(f) for f in r) for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
