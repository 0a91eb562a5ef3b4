"""The step loop every peer shares: warm-up and timed steps per strategy, each timed step's collectives recorded,
one step-CSV row per timed step (max/min/mean over ranks as lins), the collective log of every rank, provenance."""

import dataclasses
import gc
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch

from . import launch, results, workload as wl
from .options import strategy_list, workload
from .recorder import CollectiveRecorder

INTRA_KINDS = ("all_gather", "reduce_scatter", "all_reduce", "broadcast")


class Peer:
    """One real system set up for one strategy. Subclasses build the system around lins's model and say how a
    micro-batch runs."""

    system = ""       # e.g. fsdp2-2.15.0
    strategy = ""     # e.g. full
    preset = ""       # the lins preset with the same sharding (results.preset_plan)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor, micro_batch: int, last: bool) -> torch.Tensor:
        """The micro-batch's summed token loss (fp32 scalar); `last`: the step's last micro-batch."""
        raise NotImplementedError

    def backward(self, loss_sum: torch.Tensor, micro_batch: int, last: bool) -> None:
        raise NotImplementedError

    def optimizer_step(self) -> None:
        raise NotImplementedError

    def config(self) -> Dict[str, object]:
        """The system's settings, for the provenance file."""
        return {}

    def close(self) -> None:
        pass


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reduce(values: List[float], op, device) -> List[float]:
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def measure_peak_tflops(w: "wl.Workload", device, precision: str) -> float:
    """The GEMM rate of this rank on the step's largest GEMM shape (tokens of a micro-batch x ffn x hidden), every
    rank at once, as lins step measures the peak its mfu column uses when --peak-tflops is not given: fp32 on the
    CPU, the compute dtype on a GPU."""
    import torch.distributed as dist

    m, n, k = w.micro_batch_tokens, w.config.ffn, w.config.hidden
    dtype = torch.bfloat16 if device.type == "cuda" and precision == "bf16" else torch.float32
    a = torch.full((m, k), 0.5, dtype=dtype, device=device)
    b = torch.full((n, k), 0.25, dtype=dtype, device=device)
    for _ in range(3):
        a @ b.t()
    dist.barrier()
    _sync(device)
    iters, t0 = 0, time.perf_counter()
    while True:
        for _ in range(10):
            a @ b.t()
        iters += 10
        _sync(device)
        elapsed = time.perf_counter() - t0
        if elapsed >= 0.3:
            break
    return 2.0 * m * n * k * iters / elapsed / 1e12


def step_bytes(rows, gpus_per_node: int) -> Dict[str, float]:
    """Message bytes of one rank's step by kind (lins's four columns) and inside/across nodes (every kind)."""
    out = {f"{k}_bytes": 0.0 for k in INTRA_KINDS}
    out["intra_bytes"] = out["inter_bytes"] = 0.0
    for r in rows:
        if r.kind in INTRA_KINDS:
            out[f"{r.kind}_bytes"] += r.message_bytes
        nodes = {x // gpus_per_node for x in r.ranks}
        out["intra_bytes" if len(nodes) <= 1 else "inter_bytes"] += r.message_bytes
    return out


def run(system_label: str, file_stem: str, args, builders: Dict[str, Callable[..., Peer]],
        backend_name: Callable[[str], str], system_config: Optional[Callable[[], Dict[str, object]]] = None) -> int:
    """Runs every strategy of args.strategies with builders[strategy](w, device, precision), writes the files and
    ends the process (exit status 0); an error raises before that."""
    import torch.distributed as dist

    place = launch.place_from_env()
    w = workload(args, place.world)  # bad options fail here, on every rank, before the rendezvous
    strategies = strategy_list(args.strategies, builders)
    rec = CollectiveRecorder(system_label).install()  # before the system's modules take references
    device = launch.device_for(args.backend, place)
    launch.init_distributed(backend_name(args.backend), place, args.timeout)
    torch.manual_seed(args.seed)
    precision = args.precision
    fpt = results.flops_per_token(w.config, w.seq)
    fpt_causal = results.causal_flops_per_token(w.config, w.seq)
    with rec.paused():
        peak_tflops, peak_source, peak_kind = args.peak_tflops, "--peak-tflops", "given"
        gemm_tflops = measure_peak_tflops(w, device, args.precision)
        if peak_tflops is None:
            peak_tflops, peak_kind = gemm_tflops, "gemm"
            peak_source = f"GEMM {w.micro_batch_tokens}x{w.config.ffn}x{w.config.hidden} measured on rank 0"
    name = args.name or file_stem
    out = Path(args.out)
    csv = results.StepCsv(out / f"{name}.csv")
    chosen = []
    for strategy in strategies:
        peer = builders[strategy](w, device, precision)
        rec.strategy = peer.strategy
        chosen.append({"strategy": f"{peer.system}:{peer.strategy}", "stands_for": peer.preset,
                       "config": peer.config()})
        if place.rank == 0:
            print(f"[{peer.system}:{peer.strategy}] stands for lins's {peer.preset}", flush=True)
        plan = results.preset_plan(peer.preset, w.gpus_per_node, w.nodes)
        for s in range(args.warmup + args.steps):
            timed = s - args.warmup
            with rec.paused():
                dist.barrier()
            _sync(device)
            if timed >= 0:
                rec.begin_step(timed)
            t0 = time.perf_counter()
            fwd = bwd = 0.0
            loss = torch.zeros((), dtype=torch.float64, device=device)
            for mb in range(w.micro_batches):
                ids, targets = wl.batch(w, s, place.rank, mb, device)
                t = time.perf_counter()
                ls = peer.forward(ids, targets, mb, mb == w.micro_batches - 1)
                _sync(device)
                fwd += time.perf_counter() - t
                t = time.perf_counter()
                peer.backward(ls, mb, mb == w.micro_batches - 1)
                _sync(device)
                bwd += time.perf_counter() - t
                loss += ls.detach().double()
            t = time.perf_counter()
            peer.optimizer_step()
            _sync(device)
            opt = time.perf_counter() - t
            step_s = time.perf_counter() - t0
            rec.end_step()
            if timed < 0:
                continue
            with rec.paused():
                b = step_bytes(rec.of_step(timed), w.gpus_per_node)
                keys = list(b)
                mx = _reduce([step_s, fwd, bwd, opt] + [b[k] for k in keys], dist.ReduceOp.MAX, device)
                mn = _reduce([step_s], dist.ReduceOp.MIN, device)
                sm = _reduce([step_s, float(loss)], dist.ReduceOp.SUM, device)
                peak = None
                if device.type == "cuda":
                    peak = _reduce([float(torch.cuda.max_memory_allocated(device))], dist.ReduceOp.MAX, device)[0]
                    torch.cuda.reset_peak_memory_stats(device)
            if place.rank == 0:
                row = {
                    "source": "measured", "strategy": f"{peer.system}:{peer.strategy}", "engine": peer.system,
                    **plan, "model": w.model_name, "params": w.params(), "backend": args.backend,
                    "precision": precision, "compute": precision, "world_size": w.world,
                    "gpus_per_node": w.gpus_per_node, "nodes": w.nodes, "seq": w.seq,
                    "micro_batch_size": w.micro_batch_size, "micro_batches": w.micro_batches,
                    "tokens": w.global_tokens, "recompute": int(w.recompute), "overlap": "all", "step": timed,
                    "step_time_s": mx[0], "step_time_min_s": mn[0], "step_time_mean_s": sm[0] / w.world,
                    "forward_s": mx[1], "backward_s": mx[2], "optimizer_s": mx[3],
                    "loss": sm[1] / w.global_tokens, "feasible": 1,
                }
                for i, k in enumerate(keys):
                    row[k] = mx[4 + i]
                if peak is not None:
                    row["peak_mem_bytes"] = peak
                tgs = w.global_tokens / w.world / mx[0]
                row["tgs"] = tgs
                row["peak_tflops"] = peak_tflops
                row["mfu"] = fpt * tgs / (peak_tflops * 1e12)
                row["mfu_causal"] = fpt_causal * tgs / (peak_tflops * 1e12)
                row["peak_source"] = peak_kind
                row["gemm_tflops"] = gemm_tflops
                csv.add(row)
                print(f"  step {timed}: {mx[0]:.4f} s, loss {sm[1] / w.global_tokens:.6f}", flush=True)
        peer.close()
        del peer
        gc.collect()  # the system's objects (DDP's reducer, FSDP's hooks) go before their process groups

    gathered = [None] * place.world
    dist.all_gather_object(gathered, {"host": launch.host_name(), "log": rec.log_rows(place.rank)})
    if place.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        csv.write()
        rows = [r for g in gathered for r in g["log"]]
        rows.sort(key=lambda r: (r[1], r[2], r[3], r[4]))
        results.write_collectives(out / f"{name}.collectives.csv", rows)
        run_info = {"system": system_label, "backend": args.backend, "dist_backend": backend_name(args.backend),
                    "precision": precision, "model": w.model_name, "params": w.params(), "seq": w.seq,
                    "micro_batch_size": w.micro_batch_size, "micro_batches": w.micro_batches,
                    "global_batch_tokens": w.global_tokens, "gpus_per_node": w.gpus_per_node, "nodes": w.nodes,
                    "warmup_steps": args.warmup, "timed_steps": args.steps, "seed": args.seed,
                    "peak_tflops": peak_tflops, "peak_tflops_source": peak_source,
                    "attention": w.attention, "recompute": w.recompute,
                    "adamw": dataclasses.asdict(w.adamw),
                    "strategies": chosen, "system_config": system_config() if system_config else {}}
        results.write_provenance(out / f"{name}.provenance.json", [sys.executable] + sys.argv,
                                 [g["host"] for g in gathered], place.world, place.launcher, run_info)
        print(f"wrote {out / (name + '.csv')}, {name}.collectives.csv, {name}.provenance.json", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # Every file is written and closed: leave without the interpreter's teardown, where a communication thread
    # still being destroyed can abort the process ("terminate called without an active exception") and fail a
    # run whose results are complete.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
