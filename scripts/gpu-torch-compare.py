#!/usr/bin/env python3
"""PyTorch's side of the GPU check, on the same device as scripts/gpu_check.py (which runs this as its torch stage):
the references the GPU issue's ratios are taken against, measured in the same session.

  scripts/gpu-torch-compare.py OUTDIR [--seq 4096 --heads 32 --head-dim 128] [--step-args "..."]

Writes into OUTDIR:
  - sdpa.csv: torch.nn.functional.scaled_dot_product_attention (causal, bf16, batch 1) forward and forward+backward,
    timed with CUDA events (3 warm-ups, 10 timed calls, the mean), with the FLOP convention of bench_kernels_gpu's
    attention rows (forward: 2 s^2 d per head, the causal half of 4 s^2 d; backward 2.5x the forward), so the rows
    sit beside that benchmark's attention_forward / attention_backward rows;
  - torch-step/: one rank of python/lins_peers' DDP runner (plain PyTorch eager, bf16 autocast, SDPA) on the step
    shape of gpu_check.py's step stage (llama-7b cut to 2 layers, seq 4096, micro-batch 1, one micro-batch): its
    step CSV (tokens per second, MFU) and provenance, beside lins's step rows;
  - torch-compare.txt: the log.
Every row is measured. Exit status 0 when both parts ran; 1 otherwise (the log says which failed). Needs torch with
CUDA and a CUDA device.
"""
import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def log(out: Path, text: str) -> None:
    line = f"[torch-compare +{time.monotonic() - START:.0f}s] {text}"
    print(line, flush=True)
    with open(out / "torch-compare.txt", "a") as f:
        f.write(line + "\n")


def provenance(torch) -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"gpu": p.name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def time_cuda_ms(torch, fn, warmup: int = 3, iters: int = 10) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def sdpa(out: Path, seq: int, heads: int, head_dim: int) -> None:
    import torch
    import torch.nn.functional as F

    shape = (1, heads, seq, head_dim)
    q, k, v = (torch.rand(shape, device="cuda", dtype=torch.bfloat16).mul_(2).sub_(1).requires_grad_() for _ in range(3))
    dout = torch.rand(shape, device="cuda", dtype=torch.bfloat16)
    fwd_flops = 2.0 * seq * seq * head_dim * heads  # the causal half of 4 s^2 d per head

    def forward():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward_backward():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(dout)

    fwd_ms = time_cuda_ms(torch, forward)
    fb_ms = time_cuda_ms(torch, forward_backward)
    bwd_ms = max(fb_ms - fwd_ms, 1e-9)
    prov = provenance(torch)
    shape_text = f"b1 s{seq} h{heads} d{head_dim} causal"
    rows = [("sdpa_forward", fwd_flops, fwd_ms), ("sdpa_backward", 2.5 * fwd_flops, bwd_ms),
            ("sdpa_forward_backward", 3.5 * fwd_flops, fb_ms)]
    with open(out / "sdpa.csv.part", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "kernel", "shape", "dtype", "flops", "time_us", "achieved_tflops", "gpu", "torch", "cuda",
                    "cudnn", "date_utc"])
        for name, flops, ms in rows:
            w.writerow(["measured", name, shape_text, "bf16", f"{flops:.6g}", f"{ms * 1e3:.1f}",
                        f"{flops / (ms * 1e9):.1f}", prov["gpu"], prov["torch"], prov["cuda"], prov["cudnn"],
                        prov["date_utc"]])
            log(out, f"{name:<22} {shape_text} {ms * 1e3:9.1f} us {flops / (ms * 1e9):7.1f} TFLOP/s")
    os.replace(out / "sdpa.csv.part", out / "sdpa.csv")
    log(out, f"sdpa: the kernel is PyTorch's own choice; {json.dumps(prov)}")


def torch_step(out: Path, extra: str, timeout_s: float) -> bool:
    env = dict(os.environ)
    # this checkout's lins_peers and lins_torch (python/) and lins_schema (analysis/), whatever is installed
    ours = os.pathsep.join([str(ROOT / "python"), str(ROOT / "analysis")])
    env["PYTHONPATH"] = ours + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", "29533")
    env["PYTHONUNBUFFERED"] = "1"
    env.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
    cmd = [sys.executable, "-m", "lins_peers.ddp", "--backend", "gpu", "--model", "llama-7b", "--layers", "2",
           "--seq", "4096", "--micro-batch", "1", "--micro-batches", "1", "--gpus-per-node", "1",
           "--precision", "bf16", "--attention", "sdpa", "--peak-tflops", "989", "--warmup", "2", "--steps", "3", "--fast-init",
           "--out", str(out / "torch-step"), "--name", "torch-ddp"] + extra.split()
    log(out, "torch step: " + " ".join(cmd))
    # The runner's output goes to the log as it comes, so a run cut short still says how far it got.
    with open(out / "torch-step.log", "w") as f:
        try:
            rc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = None
    tail = "\n".join((out / "torch-step.log").read_text(errors="replace").splitlines()[-8:])
    log(out, (f"torch step: FAIL (over {timeout_s:.0f} s)" if rc is None else f"torch step: exit {rc}") +
        "; last lines:\n" + tail)
    return rc == 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--step-args", default="", help="extra flags for the lins_peers DDP runner")
    p.add_argument("--step-timeout", type=float, default=150)
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    ok = True
    try:
        import torch
        if not torch.cuda.is_available():
            log(out, "FAIL: torch sees no CUDA device")
            return 1
        sdpa(out, a.seq, a.heads, a.head_dim)
    except Exception as e:  # report and go on to the step
        log(out, f"sdpa: FAIL: {type(e).__name__}: {e}")
        ok = False
    ok = torch_step(out, a.step_args, a.step_timeout) and ok
    log(out, "PASS" if ok else "FAIL")
    return 0 if ok else 1


START = time.monotonic()
if __name__ == "__main__":
    sys.exit(main())
