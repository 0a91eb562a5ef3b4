#!/usr/bin/env python3
"""The independent oracle: lins's real training steps (oracle_dump) against PyTorch's autograd and
torch.optim.AdamW on the same model (python/lins_torch), with the same initial weights and data.

For each model (tiny, small), storage dtype (fp32; bf16 with fp32 master weights) and micro-batch count (1; 3 with
gradient accumulation), over two optimizer steps, it checks:
  init    lins's initial parameters equal lins_torch.init's, bit for bit (fp32, or rounded to bf16);
  loss    each step's mean token loss against the reference's, in fp64;
  grad    every parameter's gradient, by name, as lins's optimizer read it, against autograd in fp64: at step 1 from
          the reference's own initial weights, at step 2 from lins's parameters after step 1 (with bf16 storage the
          reference rounds its accumulation into bf16 once per micro-batch, as lins stores G);
  master  the fp32 master weights after each AdamW step against torch.optim.AdamW in fp64 run on lins's gradients
          (which `grad` checks; see the tolerances for why the optimizer is checked on the same input). Step 2 is
          what checks the betas: at step 1 bias correction makes the update g / (|g| + eps) whatever they are;
  param   the stored parameters P after each step (the master with fp32 storage; with bf16 storage, the reference's
          master rounded to bf16).
An error is max |lins - reference| over the tensor divided by max |reference| (the tensor's max norm): a relative error
that stays meaningful for tensors with elements near zero.

Tolerances (u = 2^-24, the fp32 unit roundoff; b = 2^-8, bf16's). Measured errors are in the table each run prints.
  loss: 2^4 u = 9.5e-7. lins sums the token losses in fp64; each comes from fp32 logits with an error of a few ulp
    of a value near ln V, and the mean only averages them (measured: ~1e-9).
  grad, fp32 storage: 2^7 u = 7.6e-6. lins computes in fp32: every value is a sum of up to a few hundred products
    (inner dimensions 16-704 here, and the step's tokens for weight gradients), and the rounding errors of some
    twenty such operations in sequence add up (measured: up to 1.1e-6 on the small model). The smallest effect of a
    broken model convention is over 1e-4 (see --break).
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
convention broken, and exits 0 only when the comparison fails exactly where the convention acts: a model convention
in the gradients (and maybe the loss), never in the optimizer's check; an optimizer convention only in the updates.
Exit 77: PyTorch is not importable (skipped)."""

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
STEPS = 2

# Each broken convention: how the reference changes, which checks must all fail and which may (regexes on the check's
# key, "step<N> <kind> <tensor>"). The gradients, not the loss, are what a model convention must show in: at
# initialisation the logits are small (init std 0.02), so the loss is within ~1e-5 of ln V whatever the conventions
# (it may fail too, and does for these).
MODEL_ONLY = r"step\d (loss|grad .*)"
BREAKS = {
    # LLaMA-1's epsilon instead of lins's (and LLaMA-2's) 1e-5.
    "rmsnorm_eps": dict(norm_eps=1e-6, must_fail=[r"step\d grad .*"], only=MODEL_ONLY),
    # The Hugging Face pairing (i, i + head_dim / 2) instead of Meta's interleaved (2i, 2i + 1).
    "rope_pairing": dict(rope_pairing="half", must_fail=[r"step\d grad .*attention\.w[qk]\.weight"], only=MODEL_ONLY),
    # 1 / head_dim (muP's) instead of 1 / sqrt(head_dim).
    "attention_scale": dict(attention_scale="inverse", must_fail=[r"step\d grad .*attention\.w[qkv]\.weight"],
                            only=MODEL_ONLY),
    # Weight decay on every parameter, the RMSNorm weights too.
    "decay_groups": dict(decay_everything=True, must_fail=[r"step\d (master|param) .*norm\.weight"],
                         only=r"step\d (master|param) .*norm\.weight"),
    # PyTorch's default beta2 (0.999) instead of lins's 0.95: invisible at step 1, in every update from step 2.
    "adamw_beta2": dict(beta2=0.999, must_fail=[r"step2 master .*"], only=r"step2 (master|param) .*"),
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
    step: int  # 0 for the initial weights
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
        return f"step{self.step} {self.kind}" + ("" if self.name == self.kind else f" {self.name}")


def to_bf16(x: torch.Tensor) -> torch.Tensor:
    """Rounded to bf16 (nearest even) and widened back to fp64."""
    return x.float().to(torch.bfloat16).double()


def compare(step: int, kind: str, name: str, got, want: torch.Tensor, tol: float) -> Check:
    got = torch.as_tensor(np.asarray(got), dtype=torch.float64)
    err = (got - want.double()).abs().max().item()
    scale = want.abs().max().item()
    return Check(step, kind, name, err, err / scale if scale > 0 else err, tol)


def run_dump(dump: str, case: Case, out: str) -> dict:
    cmd = [dump, "--out", out, "--model", case.model, "--precision", case.precision,
           "--micro-batches", str(case.micro_batches), "--micro-batch-size", str(case.micro_batch_size),
           "--seq", str(case.seq), "--seed", str(case.seed), "--steps", str(STEPS)]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "meta.json")) as f:
        return json.load(f)


def load_tensors(folder: str, names) -> dict:
    return {n: torch.from_numpy(np.load(os.path.join(folder, n + ".npy"))).double() for n in names}


def reference_model(cfg, breaks: dict) -> lmodel.LlamaModel:
    cfg = dataclasses.replace(cfg, norm_eps=breaks.get("norm_eps", cfg.norm_eps))
    scale = 1.0 / cfg.head_dim if breaks.get("attention_scale") == "inverse" else None
    return lmodel.LlamaModel(cfg, rope_pairing=breaks.get("rope_pairing", "interleaved"), attention_scale=scale,
                             dtype=torch.float64)


def reference_gradients(model, case: Case, meta: dict, params: dict, step_index: int):
    """The mean loss and every parameter's gradient of step `step_index` (0-based, which picks the data), in fp64
    autograd from `params` (the stored P: fp32, or bf16 values). With bf16 storage each micro-batch's gradient is
    added into a bf16 G in fp32 and rounded, as lins accumulates it; with fp32 storage the fp64 sum is kept."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(params[n])
    model.zero_grad(set_to_none=True)
    vocab, tokens = model.config.vocab, meta["global_tokens"]
    loss, acc = 0.0, None
    for j in range(case.micro_batches):
        ids, targets = ldata.micro_batch_tokens(case.seed, vocab, case.seq, step_index, 0, j, case.micro_batches,
                                                case.micro_batch_size)
        loss_sum = lmodel.token_loss_sum(model(torch.from_numpy(ids)), torch.from_numpy(targets))
        (loss_sum / tokens).backward()
        loss += loss_sum.item()
        if case.precision == "bf16":
            g = {n: p.grad.float() for n, p in model.named_parameters()}
            model.zero_grad(set_to_none=True)
            acc = {n: (g[n] if acc is None else acc[n].float() + g[n]).to(torch.bfloat16) for n in g}
    grads = {n: (acc[n].double() if acc is not None else p.grad.clone()) for n, p in model.named_parameters()}
    return loss / tokens, grads


def reference_optimizer(master0: dict, meta: dict, breaks: dict):
    """fp64 copies of the master weights and torch.optim.AdamW over them, in lins's parameter groups and with lins's
    (fp32) hyper-parameters."""
    params = {n: torch.nn.Parameter(t.clone()) for n, t in master0.items()}
    groups = loptim.param_groups(params.items(), meta["weight_decay"], breaks.get("decay_everything", False))
    betas = (meta["beta1"], breaks.get("beta2", meta["beta2"]))
    return params, torch.optim.AdamW(groups, lr=meta["lr"], betas=betas, eps=meta["eps"])


def check_case(dump: str, case: Case, workdir: str, breaks: dict):
    cfg = lconfig.preset(case.model)
    names = [n for n, _ in lconfig.tensor_shapes(cfg)]
    out = os.path.join(workdir, case.label.replace(" ", "_"))
    meta = run_dump(dump, case, out)
    bf16 = case.precision == "bf16"

    # Initial weights: lins_torch.init reproduces lins's generator bit for bit; the reference starts from its own.
    init = {n: torch.from_numpy(w).double() for n, w in linit.initial_weights(cfg, case.seed).items()}
    p0 = {n: to_bf16(w) if bf16 else w for n, w in init.items()}
    lins_init = load_tensors(os.path.join(out, "init"), names)
    exact = sum(torch.equal(lins_init[n], p0[n]) for n in names)
    checks = [Check(0, "init", f"{exact}/{len(names)} tensors bit-exact", 0.0, float(len(names) - exact), 0.0)]

    model = reference_model(cfg, breaks)
    params, opt = reference_optimizer(p0, meta, breaks)  # lins's master starts as the stored P, widened
    p_step = p0
    grad_tol = case.micro_batches * 2 * BF16 if bf16 else TOL_GRAD_FP32
    for step in range(1, STEPS + 1):
        lins = {k: load_tensors(os.path.join(out, f"step{step}", k), names) for k in ("grad", "master", "param")}
        loss, grads = reference_gradients(model, case, meta, p_step, step - 1)
        checks.append(compare(step, "loss", "loss", meta["loss"][step - 1], torch.tensor(loss, dtype=torch.float64),
                              TOL_LOSS))
        checks += [compare(step, "grad", n, lins["grad"][n], grads[n], grad_tol) for n in names]
        # The optimizer on lins's own gradient (exact in fp64: fp32 or bf16 values).
        for n, p in params.items():
            p.grad = lins["grad"][n].clone()
        opt.step()
        for n in names:
            checks.append(compare(step, "master", n, lins["master"][n], params[n].detach(), TOL_MASTER))
        for n in names:
            want = to_bf16(params[n].detach()) if bf16 else params[n].detach()
            checks.append(compare(step, "param", n, lins["param"][n], want, 2 * BF16 if bf16 else TOL_MASTER))
        p_step = lins["param"]  # the next step's gradient is taken where lins stands
    return checks


def print_table(case: Case, checks) -> None:
    print(f"\n== {case.label} (micro-batch {case.micro_batch_size} x seq {case.seq})")
    init = checks[0]
    print(f"initial weights: {init.name}" + ("" if init.ok else "  FAIL"))
    by = {(c.step, c.kind, c.name): c for c in checks}
    names = [c.name for c in checks if c.kind == "grad" and c.step == 1]
    w = max(len(n) for n in names)
    for step in range(1, STEPS + 1):
        loss = by[(step, "loss", "loss")]
        print(f"step {step} loss: max abs err {loss.max_abs:.3e}  rel err {loss.rel:.3e}  tol {loss.tol:.1e}"
              + ("" if loss.ok else "  FAIL"))
        head = "".join(f" | {k + ' abs':>10} {k + ' rel':>10} {'tol':>7}" for k in ("grad", "master", "param"))
        print(f"{'step ' + str(step) + ' tensor':<{w}}{head}")
        for n in names:
            row = f"{n:<{w}}"
            for k in ("grad", "master", "param"):
                c = by[(step, k, n)]
                row += f" | {c.max_abs:10.3e} {c.rel:10.3e} {c.tol:7.1e}" + ("" if c.ok else " FAIL")
            print(row)


def print_summary(cases, checked) -> None:
    """One line per case and step: the worst relative error of each kind of check, against its tolerance."""
    kinds = ("loss", "grad", "master", "param")
    print("\n== summary: worst relative error (max |lins - reference| / max |reference|) / tolerance")
    print(f"{'case':<16} {'init':<10} {'step':>4}" + "".join(f" {k:>20}" for k in kinds))
    for case in cases:
        mine = [c for k, c in checked if k is case]
        init = next(c for c in mine if c.kind == "init")
        for step in range(1, STEPS + 1):
            row = f"{case.label:<16} {'bit-exact' if init.ok else 'DIFFERS':<10} {step:>4}"
            for k in kinds:
                worst = max((c for c in mine if c.kind == k and c.step == step), key=lambda c: c.rel / c.tol)
                row += f" {worst.rel:9.2e} / {worst.tol:7.1e}" + ("" if worst.ok else "!")
            print(row)


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
        for case in cases:
            checks = check_case(args.dump, case, args.workdir or tmp, breaks)
            print_table(case, checks)
            checked += [(case, c) for c in checks]
    print_summary(cases, checked)
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
    problems += [f"'{k}' failed, but {args.broken} does not act there" for k in keys
                 if not re.fullmatch(breaks["only"], k)]
    for p in problems:
        print(f"FAIL: {p}")
    if not problems:
        print(f"ok: the oracle catches a broken {args.broken}, where it acts and nowhere else")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
