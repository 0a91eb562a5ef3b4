"""A bandwidth profile of torch.distributed's own collectives (gloo on a CPU, NCCL on GPUs), in the format of
`lins comm --profile`, so that `lins simulate --profile` can price a real system's run with the collectives it used.

    torchrun --nproc-per-node 4 -m lins_peers.collective_profile --gpus-per-node 2 --out profile.csv

For every mesh of the ranks (R x 1: inside each node; 1 x N: one rank of each node; R x N: all), every collective
(all-gather, reduce-scatter, all-reduce, broadcast) and every message size from -b to -e (doubling), all groups of
the mesh at once: the median over -n iterations of each rank's time, the slowest rank's written. message_bytes as
lins counts them: the gathered buffer (all-gather), the input (reduce-scatter), the buffer (all-reduce, broadcast).
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


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m lins_peers.collective_profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus-per-node", type=int, required=True, help="ranks per (emulated) node")
    ap.add_argument("-b", type=size_arg, default=4096, help="smallest message (default 4K)")
    ap.add_argument("-e", type=size_arg, default=16 << 20, help="largest message (default 16M)")
    ap.add_argument("-n", type=int, default=20, help="timed iterations per point (default 20)")
    ap.add_argument("-w", type=int, default=3, help="warm-up iterations per point (default 3)")
    ap.add_argument("--backend", choices=["cpu", "gpu"], default="cpu", help="cpu (gloo) or gpu (NCCL)")
    ap.add_argument("--out", required=True, help="the profile CSV to write (rank 0)")
    args = ap.parse_args(argv)
    dist.init_process_group("nccl" if args.backend == "gpu" else "gloo")
    rank, world, per = dist.get_rank(), dist.get_world_size(), args.gpus_per_node
    if per < 1 or world % per:
        raise SystemExit(f"--gpus-per-node {per} does not divide the {world} ranks")
    if not 0 < args.b <= args.e or args.n < 1 or args.w < 0:
        raise SystemExit("need 0 < -b <= -e, -n >= 1 and -w >= 0")
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
                samples = []
                for _ in range(args.n):
                    dist.barrier(group=group)
                    t0 = time.perf_counter()
                    run_op(op, group, buf, out, members[0])
                    if args.backend == "gpu":
                        torch.cuda.synchronize()
                    samples.append(time.perf_counter() - t0)
                mine = torch.tensor([statistics.median(samples)], dtype=torch.float64)
                dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # the slowest rank of every group of the mesh
                t = mine.item()
                nbytes = elems * 2
                alg = nbytes / t / 1e9
                rows.append(f"{op},{intra},{inter},{nbytes},{t:.6g},{alg:.6g},{alg * BUS[op](n):.6g}")
                size *= 2
    if rank == 0:
        prov = {"tool": "lins_peers.collective_profile", "torch": torch.__version__, "backend": dist.get_backend(),
                "world_size": world, "gpus_per_node": per, "iters": args.n, "warmup_iters": args.w,
                "argv": ["python", "-m", "lins_peers.collective_profile"] + (argv if argv is not None else sys.argv[1:])}
        text = ("# bandwidth profile of torch.distributed's collectives, measured by python -m "
                "lins_peers.collective_profile; time_s = median over iterations of the slowest rank; message_bytes "
                "as CommOp::bytes()\n# provenance: " + json.dumps(prov) + "\n"
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
