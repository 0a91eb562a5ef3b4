#!/usr/bin/env python3
"""The independent oracle: lins's real training step (oracle_dump) against PyTorch's autograd and torch.optim.AdamW on
the same model (python/lins_torch), with the same initial weights and data.

For each model (tiny, small), storage dtype (fp32; bf16 with fp32 master weights) and micro-batch count (1; 3 with
gradient accumulation) it checks:
  init   lins's initial parameters equal lins_torch.init's, bit for bit (fp32, or rounded to bf16);
  loss   the step's mean token loss against the reference's, computed in fp64 from the same initial weights;
  grad   every parameter's gradient, by name, as lins's optimizer read it, against autograd in fp64 (with bf16
         storage, the reference rounds its accumulation into bf16 per micro-batch as lins stores G);
  master the fp32 master weights after one AdamW step against torch.optim.AdamW in fp64, applied to lins's own
         gradient (the gradient itself is checked by `grad`; see tolerances below for why the optimizer is checked on
         the same input);
  param  the stored parameters P after the step (= master with fp32 storage; with bf16 storage, the reference's master
         rounded to bf16).
An error is max |lins - reference| over the tensor divided by max |reference| (the tensor's max norm): a relative error
that stays meaningful for tensors with elements near zero.

Tolerances (u = 2^-24, the fp32 unit roundoff; b = 2^-8, bf16's). Measured errors are in the table each run prints.
  loss: 2^4 u = 9.5e-7. lins sums the token losses in fp64; each comes from fp32 logits with an error of a few ulp
    of a value near ln V, and the mean only averages them (measured: ~1e-9).
  grad, fp32 storage: 2^7 u = 7.6e-6. lins computes in fp32: every value is a sum of up to a few hundred products
    (inner dimensions 16-704 here, and the step's tokens for weight gradients), and the rounding errors of some
    twenty such operations in sequence add up (measured: up to 1.1e-6 on the small model). The smallest effect of a
    broken convention is over 1e-4 (see --break).
  grad, bf16 storage: M * 2 b. The reference rounds the same fp32 sums into bf16 as lins does, but two fp32 values a
    few ulp apart straddle a bf16 rounding boundary now and then, and then differ by one bf16 ulp, up to 2 b of the
    element's magnitude; there is one rounding per micro-batch (measured: up to 5e-3 with M = 3).
  master: 2^4 u = 9.5e-7. AdamW on identical inputs: lins's fp32 arithmetic against fp64 differs by a few rounding
    errors of the updated value (measured: 6e-8). Checking the update on the reference's own gradient instead would
    need a far wider tolerance: at step 1 AdamW moves each element by lr * g / (|g| + eps), about lr * sign(g), so an
    element whose gradient is at rounding level can move by up to 2 lr in one run and not in the other, which would
    hide a wrong weight-decay group (lr * wd * |p| = 1e-4 |p|).
  param: as master with fp32 storage (P is the master); with bf16 storage 2 b (P = bf16(master): equal except one
    bf16 ulp where the master sits within fp32 rounding of a bf16 rounding boundary).

--break CONVENTION runs the comparison on the tiny model (fp32 storage, one micro-batch) against a reference with one
convention broken and exits 0 only when the comparison fails, and fails exactly where the convention acts (for
decay_groups: only the updated norm weights; for the others: the loss and the gradients named below, never the
optimizer's check). Exit 77: PyTorch is not importable (skipped)."""

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
except ImportError as e:  # a skip, not a pass: ctest reports it
    print(f"oracle: skipped, PyTorch and numpy are needed ({e}); install python3-torch (scripts/install-deps.sh)")
    sys.exit(77)

from lins_torch import config as lconfig
from lins_torch import data as ldata
from lins_torch import init as linit
from lins_torch import model as lmodel
from lins_torch import optim as loptim

U32 = 2.0**-24
BF16 = 2.0**-8
TOL_LOSS = 2.0**4 * U32
TOL_GRAD_FP32 = 2.0**7 * U32
TOL_MASTER = 2.0**4 * U32

# Each broken convention: how the reference is changed, and which checks must fail (regexes on "kind name"). The
# gradients, not the loss, are what a model convention must show in: at initialisation the logits are small (init std
# 0.02), so the loss is within ~1e-5 of ln V whatever the conventions (it may fail too, and usually does).
BREAKS = {
    # LLaMA-1's epsilon instead of lins's (and LLaMA-2's) 1e-5.
    "rmsnorm_eps": dict(norm_eps=1e-6, must_fail=[r"grad .*norm\.weight", r"grad .*wq\.weight"]),
    # The Hugging Face pairing (i, i + head_dim / 2) instead of Meta's interleaved (2i, 2i + 1).
    "rope_pairing": dict(rope_pairing="half", must_fail=[r"grad .*attention\.wq\.weight", r"grad .*attention\.wk\.weight"]),
    # 1 / head_dim (muP's) instead of 1 / sqrt(head_dim).
    "attention_scale": dict(attention_scale="inverse", must_fail=[r"grad .*attention\.w[qkv]\.weight"]),
    # Weight decay on every parameter, the RMSNorm weights too.
    "decay_groups": dict(decay_everything=True, must_fail=[r"(master|param) .*norm\.weight"],
                         only=r"(master|param) .*norm\.weight"),
}


@dataclasses.dataclass
class Case:
    model: str
    precision: str  # storage of P and G: fp32 or bf16
    micro_batches: int
    micro_batch_size: int
    seq: int
    seed: int = 1

    @property
    def label(self) -> str:
        return f"{self.model} {self.precision} M={self.micro_batches}"


@dataclasses.dataclass
class Check:
    kind: str  # init, loss, grad, master, param
    name: str
    max_abs: float
    rel: float
    tol: float

    @property
    def ok(self) -> bool:
        return self.rel <= self.tol

    @property
    def key(self) -> str:
        return self.kind if self.name == self.kind else f"{self.kind} {self.name}"


def to_bf16(x: torch.Tensor) -> torch.Tensor:
    """Rounded to bf16 (nearest even) and widened back to fp64."""
    return x.float().to(torch.bfloat16).double()


def compare(kind: str, name: str, got, want, tol: float) -> Check:
    got = torch.as_tensor(np.asarray(got), dtype=torch.float64)
    want = torch.as_tensor(np.asarray(want), dtype=torch.float64) if not torch.is_tensor(want) else want.double()
    err = (got - want).abs().max().item()
    scale = want.abs().max().item()
    return Check(kind, name, err, err / scale if scale > 0 else err, tol)


def run_dump(dump: str, case: Case, out: str) -> dict:
    cmd = [dump, "--out", out, "--model", case.model, "--precision", case.precision,
           "--micro-batches", str(case.micro_batches), "--micro-batch-size", str(case.micro_batch_size),
           "--seq", str(case.seq), "--seed", str(case.seed)]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "meta.json")) as f:
        return json.load(f)


def load_tensors(folder: str, names) -> dict:
    return {n: np.load(os.path.join(folder, n + ".npy")) for n in names}


def reference_gradients(cfg, case: Case, meta: dict, p0: dict, breaks: dict):
    """The mean loss and every parameter's gradient of one step, in fp64 autograd from the parameters p0 (the stored
    P: fp32, or bf16 values). With bf16 storage each micro-batch's gradient is added into a bf16 G in fp32 and
    rounded, as lins accumulates it; with fp32 storage the fp64 sum is kept."""
    cfg = dataclasses.replace(cfg, norm_eps=breaks.get("norm_eps", cfg.norm_eps))
    scale = 1.0 / cfg.head_dim if breaks.get("attention_scale") == "inverse" else None
    model = lmodel.LlamaModel(cfg, rope_pairing=breaks.get("rope_pairing", "interleaved"), attention_scale=scale,
                              dtype=torch.float64)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(p0[n])
    tokens = meta["global_tokens"]
    loss, acc = 0.0, None
    for j in range(case.micro_batches):
        ids, targets = ldata.micro_batch_tokens(case.seed, cfg.vocab, case.seq, 0, 0, j, case.micro_batches,
                                                case.micro_batch_size)
        loss_sum = lmodel.token_loss_sum(model(torch.from_numpy(ids)), torch.from_numpy(targets))
        (loss_sum / tokens).backward()
        loss += loss_sum.item()
        if case.precision == "bf16":
            g = {n: p.grad.float() for n, p in model.named_parameters()}
            model.zero_grad(set_to_none=True)
            acc = {n: (g[n] if acc is None else acc[n].float() + g[n]).to(torch.bfloat16) for n in g}
    grads = {n: (acc[n].double() if acc is not None else p.grad) for n, p in model.named_parameters()}
    return loss / tokens, grads


def reference_update(master0: dict, grads: dict, meta: dict, breaks: dict) -> dict:
    """The fp32-master weights after one torch.optim.AdamW step (fp64) from master0 with gradients `grads`, in lins's
    parameter groups and with lins's (fp32) hyper-parameters."""
    params = {n: torch.nn.Parameter(t.clone()) for n, t in master0.items()}
    groups = loptim.param_groups(params.items(), meta["weight_decay"], breaks.get("decay_everything", False))
    opt = torch.optim.AdamW(groups, lr=meta["lr"], betas=(meta["beta1"], meta["beta2"]), eps=meta["eps"])
    for n, p in params.items():
        p.grad = grads[n].clone()
    opt.step()
    return {n: p.detach() for n, p in params.items()}


def check_case(dump: str, case: Case, workdir: str, breaks: dict):
    cfg = lconfig.preset(case.model)
    names = [n for n, _ in lconfig.tensor_shapes(cfg)]
    out = os.path.join(workdir, case.label.replace(" ", "_"))
    meta = run_dump(dump, case, out)
    lins = {k: load_tensors(os.path.join(out, k), names) for k in ("init", "grad", "master", "param")}
    bf16 = case.precision == "bf16"

    checks = []
    # Initial weights: lins_torch.init reproduces lins's generator bit for bit; the reference starts from its own.
    init = {n: torch.from_numpy(w).double() for n, w in linit.initial_weights(cfg, case.seed).items()}
    p0 = {n: to_bf16(w) if bf16 else w for n, w in init.items()}
    mismatched = [n for n in names if not np.array_equal(lins["init"][n], p0[n].float().numpy())]
    checks.append(Check("init", f"{len(names) - len(mismatched)}/{len(names)} tensors bit-exact", 0.0,
                        float(len(mismatched)), 0.0))

    loss, grads = reference_gradients(cfg, case, meta, p0, breaks)
    checks.append(compare("loss", "loss", meta["loss"], torch.tensor(loss, dtype=torch.float64), TOL_LOSS))
    grad_tol = case.micro_batches * 2 * BF16 if bf16 else TOL_GRAD_FP32
    for n in names:
        checks.append(compare("grad", n, lins["grad"][n], grads[n], grad_tol))

    # The optimizer on lins's own gradient (exact in fp64: fp32 or bf16 values), from the same master weights.
    lins_grads = {n: torch.from_numpy(lins["grad"][n]).double() for n in names}
    master = reference_update(p0, lins_grads, meta, breaks)
    for n in names:
        checks.append(compare("master", n, lins["master"][n], master[n], TOL_MASTER))
    for n in names:
        want = to_bf16(master[n]) if bf16 else master[n]
        checks.append(compare("param", n, lins["param"][n], want, 2 * BF16 if bf16 else TOL_MASTER))
    return checks


def print_table(case: Case, checks) -> None:
    print(f"\n== {case.label} (micro-batch {case.micro_batch_size} x seq {case.seq})")
    init = checks[0]
    print(f"initial weights: {init.name}" + ("" if init.ok else "  FAIL"))
    loss = checks[1]
    print(f"loss: max abs err {loss.max_abs:.3e}  rel err {loss.rel:.3e}  tol {loss.tol:.1e}"
          + ("" if loss.ok else "  FAIL"))
    by = {(c.kind, c.name): c for c in checks}
    names = [c.name for c in checks if c.kind == "grad"]
    w = max(len(n) for n in names)
    head = "".join(f" | {k + ' abs':>10} {k + ' rel':>10} {'tol':>7}" for k in ("grad", "master", "param"))
    print(f"{'tensor':<{w}}{head}")
    for n in names:
        row = f"{n:<{w}}"
        for k in ("grad", "master", "param"):
            c = by[(k, n)]
            row += f" | {c.max_abs:10.3e} {c.rel:10.3e} {c.tol:7.1e}" + ("" if c.ok else " FAIL")
        print(row)
    worst = {k: max((c for c in checks if c.kind == k), key=lambda c: c.rel / c.tol) for k in ("grad", "master", "param")}
    print("worst: " + ", ".join(f"{k} {c.rel:.2e} of tol {c.tol:.1e} ({c.name})" for k, c in worst.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump", required=True, help="the oracle_dump program")
    ap.add_argument("--break", dest="broken", choices=sorted(BREAKS),
                    help="break one convention in the reference; succeed only if the comparison fails where it acts")
    ap.add_argument("--workdir", help="keep the dumps here (default: a temporary folder)")
    args = ap.parse_args()

    if args.broken:
        cases = [Case("tiny", "fp32", 1, 2, 16)]
        breaks = BREAKS[args.broken]
    else:
        cases = [Case(m, p, mb, 2, s) for m, s in (("tiny", 16), ("small", 32)) for p in ("fp32", "bf16")
                 for mb in (1, 3)]
        breaks = {}
    print(f"oracle: torch {torch.__version__}, numpy {np.__version__}"
          + (f"; reference broken on purpose: {args.broken}" if args.broken else ""))
    t0 = time.time()
    checked = []
    with tempfile.TemporaryDirectory(prefix="lins-oracle-") as tmp:
        workdir = args.workdir or tmp
        for case in cases:
            checks = check_case(args.dump, case, workdir, breaks)
            print_table(case, checks)
            checked += [(case, c) for c in checks]
    print(f"\noracle: {len(cases)} cases in {time.time() - t0:.1f} s")
    failed = [(case, c) for case, c in checked if not c.ok]

    if not args.broken:
        for case, c in failed:
            print(f"FAIL {case.label}: {c.key}: rel err {c.rel:.3e} > tol {c.tol:.1e}")
        return 1 if failed else 0

    # A broken convention must be caught: every check where it acts fails, and no check where it does not.
    keys = [c.key for _, c in failed]
    print(f"with {args.broken} broken, {len(keys)} checks fail: " + ", ".join(keys))
    problems = []
    for pattern in breaks["must_fail"]:
        acting = [c.key for _, c in checked if re.fullmatch(pattern, c.key)]
        problems += [f"'{k}' passed, but {args.broken} acts there" for k in acting if k not in keys]
        if not acting:
            problems.append(f"no check matches '{pattern}'")
    allowed = breaks.get("only", r"loss|grad .*")  # a model convention never shows in the optimizer's own check
    problems += [f"'{k}' failed, but {args.broken} does not act there" for k in keys if not re.fullmatch(allowed, k)]
    for p in problems:
        print(f"FAIL: {p}")
    if not problems:
        print(f"ok: the oracle catches a broken {args.broken}, where it acts and nowhere else")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
