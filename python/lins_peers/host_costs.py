"""Measures the host (Python) cost of DeepSpeed's ZeRO-3 collective wrappers as a function of the group size, and
fits a + b * group per call kind: the defaults of lins's host model (src/core/host_model.h, docs/engines.md).

    python -m lins_peers.host_costs [--out data/host] [--groups 2,4,...,1024] [--repeats 200]

Timed, one process, one thread, on the CPU (DS_ACCELERATOR=cpu), with no collective actually run (a group of
1024 ranks cannot be launched here; what is timed is the host work that walks the group's ranks):

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
                       no-gather handles): per module and pass (a forward, or a backward), whatever the group

Tensors are small (4 elements per rank) so that copies cost nothing beside the dispatch, as on a GPU, where the
copies are kernels the host only launches. Writes OUT/host_costs.csv (kind, a_s, b_s, max_rel_error, source; with
--kinds, the other kinds' rows kept from it), the measured points OUT/host_cost_points.csv (kind, group, seconds)
and OUT/host_costs.provenance.json.
"""

import argparse
import csv
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

KINDS = ("collective_issue", "ds_gather_issue", "ds_gather_wait", "ds_reduce_scatter", "ds_module_hooks")
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


def time_module_hooks(repeats):
    """Seconds per module and pass of ZeRO-3's four module hooks: lins's small model (seq 128, one micro-batch) under
    deepspeed.initialize on the one-rank group, the hooks timed inside repeats training steps (median over steps of
    the hooks' seconds over the hooks' module passes)."""
    import lins_torch
    from deepspeed.runtime.zero import parameter_offload as po

    from . import workload as wl
    from .deepspeed_zero import DeepSpeedPeer

    w = wl.Workload(model_name="small", config=lins_torch.preset("small"), seq=128, micro_batch_size=1,
                    micro_batches=1, world=1, gpus_per_node=1, seed=1, adamw=wl.AdamWConfig())
    z = po.DeepSpeedZeRoOffload
    names = ("pre_sub_module_forward_function", "post_sub_module_forward_function",
             "pre_sub_module_backward_function", "post_sub_module_backward_function")
    saved = {n: getattr(z, n) for n in names}
    spent, passes = [0.0], [0]

    def timed(name):
        original = saved[name]

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
                passes[0] += name.startswith("pre_")
        return wrapper

    for n in names:
        setattr(z, n, timed(n))
    try:
        peer = DeepSpeedPeer("zero3", w, torch.device("cpu"), "bf16", "comparison")
        ids, targets = wl.batch(w, 0, 0, 0, torch.device("cpu"))
        samples = []
        for step in range(repeats + 2):
            spent[0], passes[0] = 0.0, 0
            peer.backward(peer.forward(ids, targets, 0, True), 0, True)
            peer.optimizer_step()
            if step >= 2:  # the first steps record DeepSpeed's trace
                samples.append(spent[0] / passes[0])
        peer.close()
        return statistics.median(samples)
    finally:
        for n, f in saved.items():
            setattr(z, n, f)


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
                    help="training steps timed for ds_module_hooks (median taken)")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="kinds measured (default all); the other kinds' rows and points are kept from OUT's files")
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or any(k not in KINDS for k in kinds):
        raise SystemExit(f"--kinds {args.kinds}: valid kinds are {', '.join(KINDS)}")
    if args.hook_steps < 1:
        raise SystemExit("--hook-steps must be at least 1")
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
    issue = time_collective_issue(args.repeats) if "collective_issue" in kinds else None
    timers = {"ds_gather_issue": time_gather_issue, "ds_gather_wait": time_gather_wait,
              "ds_reduce_scatter": time_reduce_scatter}
    for g in groups:
        for k, timer in timers.items():
            if k in kinds:
                points[k].append((g, timer(g, args.repeats)))
    hooks = time_module_hooks(args.hook_steps) if "ds_module_hooks" in kinds else None
    dist.destroy_process_group()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = {
        "collective_issue": "torch.distributed.all_reduce(async_op=True) call on a one-rank gloo group",
        "ds_gather_issue": "partition_parameters._all_gather_dtype (transcribed) + AllGatherCoalescedHandle",
        "ds_gather_wait": "partition_parameters.AllGatherCoalescedHandle.wait, per parameter",
        "ds_reduce_scatter": "runtime/comm/coalesced_collectives.reduce_scatter_coalesced, per tensor",
        "ds_module_hooks": "parameter_offload pre/post_sub_module_forward/backward_function, per module and pass",
    }
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
        if k == "ds_module_hooks":
            a, b, err = hooks, 0.0, 0.0
        else:
            a, b, err = fit(points[k]) if k != "collective_issue" else (issue, 0.0, 0.0)
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
