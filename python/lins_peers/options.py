"""Command line of a peer runner: `lins step`'s options where they apply, plus the system's own."""

import argparse
import dataclasses
from typing import Dict, List

import lins_torch
from lins_torch import AdamWConfig

from .workload import Workload


def parser(system: str, strategies: Dict[str, str], default_strategies: str) -> argparse.ArgumentParser:
    lines = "\n".join(f"  {name:<8} {help}" for name, help in strategies.items())
    p = argparse.ArgumentParser(
        prog=f"python -m lins_peers.{system}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"Run lins's training step on {system} and write lins's step CSV, its provenance and a log of "
                    "every collective issued in the timed steps. Launch one process per rank with torchrun or "
                    "mpirun (or srun).",
        epilog=f"strategies:\n{lines}\n\nexample (4 CPU ranks as 2 nodes x 2 GPUs):\n"
               f"  torchrun --nproc-per-node 4 -m lins_peers.{system} --model tiny --gpus-per-node 2\n"
               f"  mpirun -np 4 python -m lins_peers.{system} --model tiny --gpus-per-node 2")
    a = p.add_argument
    a("--model", default="small", help=f"model preset: {', '.join(lins_torch.PRESETS)} (default small)")
    a("--layers", type=int, default=None,
      help="keep only the first N transformer layers of --model (as lins step --layers; default all)")
    a("--seq", type=int, default=128, help="sequence length (default 128)")
    a("--micro-batch", type=int, default=1, help="sequences per micro-batch per rank (default 1)")
    a("--micro-batches", type=int, default=None, help="micro-batches M per step (default 2, as lins step)")
    a("--global-batch-tokens", type=int, default=None,
      help="tokens per step over all ranks; M = TOKENS / (seq x micro-batch x ranks)")
    a("--gpus-per-node", type=int, required=True, help="ranks per (emulated) node: the inner dimension of meshes")
    a("--strategies", default=default_strategies, help=f"comma-separated (default {default_strategies})")
    a("--warmup", type=int, default=1, help="untimed steps per strategy (default 1)")
    a("--steps", type=int, default=3, help="timed steps per strategy, one CSV row each (default 3)")
    a("--seed", type=int, default=1, help="seed of lins's initial weights and synthetic data (default 1)")
    a("--lr", type=float, default=1e-3, help="AdamW learning rate (default 0.001, as lins)")
    a("--precision", choices=["bf16", "fp32"], default="bf16",
      help="bf16: bf16 parameters and gradients (and collectives), fp32 master weights and Adam moments; fp32: "
           "everything fp32 (default bf16)")
    a("--backend", choices=["cpu", "gpu"], default="cpu", help="cpu (gloo) or gpu (one CUDA device per rank, NCCL)")
    a("--out", default="results/peers", help="output folder (default results/peers)")
    a("--name", default=None, help=f"file stem in --out (default {system}): NAME.csv, NAME.provenance.json, "
                                   "NAME.collectives.csv")
    a("--attention", choices=["auto", "reference", "sdpa"], default="auto",
      help="the attention kernel: reference (lins_torch's: scores materialised), sdpa "
           "(scaled_dot_product_attention: FlashAttention on a GPU); auto: sdpa on gpu, reference on cpu")
    a("--fast-init", action="store_true",
      help="draw lins's initial weights with numpy's vectorised log and cos: an element may differ from lins's in its "
           "last bit, but a 7B-shaped model starts in seconds instead of minutes (for throughput runs)")
    a("--recompute", action="store_true", help="recompute every layer's activations in backward (as lins step)")
    a("--peak-tflops", type=float, default=None, help="peak TFLOP/s per rank for the mfu column (default: a GEMM of the step's largest shape, "
           "measured on every rank at once, as lins step)")
    a("--timeout", type=float, default=600, help="seconds a collective may wait before the job fails")
    return p


def micro_batches(args, world: int) -> int:
    if args.micro_batches is not None and args.global_batch_tokens is not None:
        raise SystemExit("give either --micro-batches or --global-batch-tokens, not both")
    if args.global_batch_tokens is not None:
        per = args.seq * args.micro_batch * world
        if args.global_batch_tokens % per:
            raise SystemExit(f"--global-batch-tokens {args.global_batch_tokens} is not a multiple of seq x "
                             f"micro-batch x ranks = {per}")
        return args.global_batch_tokens // per
    return 2 if args.micro_batches is None else args.micro_batches


def workload(args, world: int) -> Workload:
    if world % args.gpus_per_node:
        raise SystemExit(f"--gpus-per-node {args.gpus_per_node} does not divide the {world} ranks")
    m = micro_batches(args, world)
    if m < 1 or args.seq < 1 or args.micro_batch < 1:
        raise SystemExit("--seq, --micro-batch and --micro-batches must be at least 1")
    config = lins_torch.preset(args.model)
    if args.layers is not None:
        if not 1 <= args.layers <= config.layers:
            raise SystemExit(f"--layers {args.layers}: {args.model} has {config.layers} layers; give 1 to {config.layers}")
        config = dataclasses.replace(config, layers=args.layers)
    return Workload(model_name=args.model, config=config, seq=args.seq,
                    micro_batch_size=args.micro_batch, micro_batches=m, world=world,
                    gpus_per_node=args.gpus_per_node, seed=args.seed, adamw=AdamWConfig(lr=args.lr),
                    attention=("sdpa" if args.backend == "gpu" else "reference") if args.attention == "auto"
                    else args.attention, recompute=args.recompute,
                    exact_init=not args.fast_init)


def strategy_list(text: str, known: Dict[str, str]) -> List[str]:
    out = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in out if s not in known]
    if bad or not out:
        raise SystemExit(f"unknown strategy {', '.join(bad) or '(none)'}; valid: {', '.join(known)}")
    return out
