"""A bandwidth profile of torch.distributed's own collectives (gloo on a CPU, NCCL on GPUs), in the format of
`lins comm --profile`, so that `lins simulate --profile` can price a real system's run with the collectives it used.

    torchrun --nproc-per-node 4 -m lins_peers.collective_profile --gpus-per-node 2 --out profile.csv

For every mesh of the ranks (R x 1: inside each node; 1 x N: one rank of each node; R x N: all), every collective
(all-gather, reduce-scatter, all-reduce, broadcast) and every message size from -b to -e (doubling), all groups of
the mesh at once: the median over -n iterations of each rank's time, the slowest rank's written. message_bytes as
lins counts them: the gathered buffer (all-gather), the input (reduce-scatter), the buffer (all-reduce, broadcast).

--work-ms W prices the collectives as a training step uses them: before every timed call each rank runs about W ms
of small torch operations (a step's host and compute work between two collectives), with no barrier, and the time
written is the wait a rank sees from the end of its work to the end of the call (the median over iterations per
rank, the mean over the ranks of every group of the mesh). A collective ends when the last rank arrives, so on a
shared machine this price grows with the work before it; back to back (W = 0, the default) the ranks start each
call together, timed from a barrier, and the slowest rank's median is written.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

OPS = ("all_gather", "reduce_scatter", "all_reduce", "broadcast")
BUS = {"all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
       "all_reduce": lambda n: 2 * (n - 1) / n, "broadcast": lambda n: 1.0}


def size_arg(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B").rstrip("I")
    try:
        return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (a number of bytes, or with K, M, G)")


def run_op(op, group, buf, out, root):
    if op == "all_gather":
        dist.all_gather_into_tensor(out, buf, group=group)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(out, buf, group=group)
    elif op == "all_reduce":
        dist.all_reduce(buf, group=group)
    else:
        dist.broadcast(buf, src=root, group=group)


_WORK_A = _WORK_B = None


def work(steps):
    """`steps` small matmuls with an elementwise op each (64 x 64, fp32): the size of a step's autograd work between
    two of DeepSpeed's gathers. The values stay of order one (no denormals, which would slow it down)."""
    x = _WORK_A
    for _ in range(steps):
        x = torch.sin(_WORK_A @ _WORK_B + x)
    return x


def work_steps(ms):
    """How many steps of work() take `ms` milliseconds on this rank while every rank runs them at once."""
    global _WORK_A, _WORK_B
    g = torch.Generator().manual_seed(dist.get_rank())
    _WORK_A, _WORK_B = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    work(50)
    dist.barrier()
    t0 = time.perf_counter()
    work(2000)
    per_step = torch.tensor([(time.perf_counter() - t0) / 2000], dtype=torch.float64)
    dist.all_reduce(per_step)  # the mean over the ranks, so that every rank runs the same number of steps
    return max(1, round(ms * 1e-3 / (per_step.item() / dist.get_world_size())))


def timed_calls(op, group, buf, out, root, args, steps):
    """Seconds of each timed call: back to back from a barrier, or the wait after `steps` steps of work()."""
    samples = []
    for _ in range(args.n):
        if steps:
            work(steps)
        else:
            dist.barrier(group=group)
        t0 = time.perf_counter()
        run_op(op, group, buf, out, root)
        if args.backend == "gpu":
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return samples


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m lins_peers.collective_profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus-per-node", type=int, required=True, help="ranks per (emulated) node")
    ap.add_argument("-b", type=size_arg, default=4096, help="smallest message (default 4K)")
    ap.add_argument("-e", type=size_arg, default=16 << 20, help="largest message (default 16M)")
    ap.add_argument("-n", type=int, default=20, help="timed iterations per point (default 20)")
    ap.add_argument("-w", type=int, default=3, help="warm-up iterations per point (default 3)")
    ap.add_argument("--work-ms", type=float, default=0.0,
                    help="milliseconds of torch work each rank runs before every call (default 0: back to back)")
    ap.add_argument("--backend", choices=["cpu", "gpu"], default="cpu", help="cpu (gloo) or gpu (NCCL)")
    ap.add_argument("--out", required=True, help="the profile CSV to write (rank 0)")
    args = ap.parse_args(argv)
    if not 0 < args.b <= args.e or args.n < 1 or args.w < 0 or not 0 <= args.work_ms <= 1000:
        raise SystemExit("need 0 < -b <= -e, -n >= 1, -w >= 0 and 0 <= --work-ms <= 1000")
    dist.init_process_group("nccl" if args.backend == "gpu" else "gloo")
    rank, world, per = dist.get_rank(), dist.get_world_size(), args.gpus_per_node
    if per < 1 or world % per:
        raise SystemExit(f"--gpus-per-node {per} does not divide the {world} ranks")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if args.backend == "gpu" else "cpu"
    if args.backend == "gpu":
        torch.cuda.set_device(device)
    nodes = world // per
    # every group of each mesh, made on every rank in the same order (new_group is collective)
    meshes = {}
    for intra, inter in ((per, 1), (1, nodes), (per, nodes)):
        if intra * inter == 1:
            continue
        if intra == per and inter == 1:
            groups = [[n * per + i for i in range(per)] for n in range(nodes)]
        elif intra == 1:
            groups = [[n * per + i for n in range(nodes)] for i in range(per)]
        else:
            groups = [list(range(world))]
        made = [(g, dist.new_group(g)) for g in groups]
        meshes[(intra, inter)] = next((g, pg) for g, pg in made if rank in g)
    steps = work_steps(args.work_ms) if args.work_ms > 0 else 0
    rows = []
    for (intra, inter), (members, group) in meshes.items():
        n = len(members)
        for op in OPS:
            size = args.b
            while size <= args.e:
                elems = max(n, size // 2 // n * n)  # bf16, a multiple of the group
                full = torch.zeros(elems, dtype=torch.bfloat16, device=device)
                part = torch.zeros(elems // n, dtype=torch.bfloat16, device=device)
                buf, out = {"all_gather": (part, full), "reduce_scatter": (full, part)}.get(op, (full, None))
                for _ in range(args.w):
                    run_op(op, group, buf, out, members[0])
                samples = timed_calls(op, group, buf, out, members[0], args, steps)
                mine = torch.tensor([statistics.median(samples)], dtype=torch.float64)
                if steps:  # the mean rank's wait after its work: what a step's rank waits, on the average
                    dist.all_reduce(mine)
                    mine /= world
                else:  # the slowest rank of every group of the mesh
                    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
                t = mine.item()
                nbytes = elems * 2
                alg = nbytes / t / 1e9
                rows.append(f"{op},{intra},{inter},{nbytes},{t:.6g},{alg:.6g},{alg * BUS[op](n):.6g}")
                size *= 2
    if rank == 0:
        prov = {"tool": "lins_peers.collective_profile", "torch": torch.__version__, "backend": dist.get_backend(),
                "world_size": world, "gpus_per_node": per, "iters": args.n, "warmup_iters": args.w,
                "work_ms_before_each_call": args.work_ms, "work_steps": steps,
                "argv": ["python", "-m", "lins_peers.collective_profile"] + (argv if argv is not None else sys.argv[1:])}
        timed = ("the mean rank's median wait after its work" if steps else
                 "median over iterations of the slowest rank")
        text = ("# bandwidth profile of torch.distributed's collectives, measured by python -m "
                f"lins_peers.collective_profile; time_s = {timed}; message_bytes as CommOp::bytes()\n"
                "# provenance: " + json.dumps(prov) + "\n"
                "op,mesh_intra,mesh_inter,message_bytes,time_s,algbw_gbps,busbw_gbps\n" + "\n".join(rows) + "\n")
        tmp = args.out + ".partial"
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
        print(f"wrote {len(rows)} rows to {args.out}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
