#!/usr/bin/env python3
"""The verdict of scripts/gpu_check.py's step stage: whether the step CSVs of `lins step --backend gpu` hold numbers
that mean something. Standard library only (the GPU machine may have no pandas).

    scripts/gpu-check-verdict.py [--vocab V] [--warmup N] [--expect-backend gpu] STEP_CSV [STEP_CSV ...]

Each STEP_CSV is one `lins step` run (its provenance, `<stem>.provenance.json` beside it, is read when present).
Prints one line per check, `PASS` or `FAIL` with the values it judged, then `verdict: PASS` or `verdict: FAIL`;
exits 0 when every check passed, 1 when one failed, 2 on a usage error.

The checks, for every row of every file (columns as docs/results-schema.md, "The step CSV"):
  - rows: the file has rows (and, when the provenance names the strategies and timed steps, one per pair);
  - backend (with --expect-backend): every row ran on that backend;
  - vocab: V is known: --vocab, else a `vocab` column, else `--vocab` in the run's argv, else the vocabulary of the
    preset named by `--model` in the argv (or the provenance's run.model; a `custom` model needs one of the others);
  - loss: finite, > 0 and < ln(V) + 1. The step's loss is the mean token cross-entropy (docs/model-conventions.md,
    "Loss and its scaling"); at initialisation it is within about 1e-5 of ln V, and a few AdamW steps at lr 1e-3 only
    lower it, so a loss above ln V + 1 is a broken forward (or diverged logits), and 0 or less is impossible;
  - mfu: finite and 0 < MFU < 0.85. No dense bf16 training step reaches 85% of the datasheet peak (the check runs with
    --peak-tflops 989, the H200's); 0 means the step time or the FLOP count is wrong, above 0.85 a clock that
    stopped early (a missing synchronisation);
  - forward_s, backward_s, optimizer_s: finite and > 0 (each is timed by device events around real kernels);
  - loss agreement, when several strategies or precisions ran (below).

Agreement. The loss of timed step `step` is computed after g = warmup + step optimizer updates from the same initial
weights and data (every strategy starts afresh, docs/model-conventions.md, "Initial weights" and "Synthetic data"),
so the runs agree up to rounding, and the tolerances grow with g:
  - the strategies of one precision and compute dtype, at each step: |max - min| <= (g + 1) * 1.6e-3 * loss. On one
    rank every strategy runs the same arithmetic in another schedule; what differs is the order of fp32 sums (atomics,
    buckets) and the bf16 ulp flips that causes. tests/gpu/train/gpu_step_test.cpp bounds exactly that difference (GPU
    against the CPU's bf16 emulation of the same roundings) by 1e-2 at step 0 on the small model, whose loss is then
    about ln 512 = 6.24: 1.6e-3 of the loss. A step compounds it at most linearly: AdamW moves each element by about lr
    whatever its gradient's size (docs/model-conventions.md, "AdamW"), so two trajectories separate by at most the
    same amount again per update. Measured on the CPU backend (data/sample/all_strategies, 4 ranks, bf16 storage):
    9 strategies within 8e-5 of each other at loss 5.9, g = 1, against 1.9e-2 allowed here.
  - the same strategy and step in two runs (two files; in gpu_check.py bf16 storage+compute against fp32
    storage+compute): |a - b| <= min((g + 1) * 6.4e-3 * loss, 0.2 + 0.15 * loss). gpu_step_test allows each against
    the fp32 CPU reference 3e-2 (bf16 P, G and activations: one more rounding to 8 bits at every kernel output,
    docs/model-conventions.md, "Precision") and 1e-2 (the fp32 path: bf16 GEMM and attention inputs only) at step 0,
    so 4e-2 between them, again on loss 6.24: 6.4e-3 of the loss, compounding at most linearly as above; the cap is
    the sum of its bounds for later steps (0.15 + 10% and 0.05 + 5% of the loss).
"""
import argparse
import csv
import json
import math
import os
import sys

# Vocabulary of each model preset (src/core/model/model_spec.cpp, make_model_preset).
PRESET_VOCAB = {"tiny": 24, "small": 512, "llama-7b": 32000, "llama-13b": 32000, "llama-30b": 32000}
LINS_STEP_DEFAULT_WARMUP = 1  # `lins step --warmup` (src/apps/cmd_step.cpp)
MFU_MAX = 0.85
SAME_REL_PER_STEP = 1.6e-3
CROSS_REL_PER_STEP = 6.4e-3
MAX_LISTED = 12  # values listed in full up to this many, else their range and the failing ones


class Report:
    def __init__(self):
        self.checks = 0
        self.failed = 0

    def check(self, ok, what, detail):
        self.checks += 1
        self.failed += 0 if ok else 1
        print("%s  %s: %s" % ("PASS" if ok else "FAIL", what, detail))
        return ok


def number(text):
    """The float of a CSV cell; NaN for an empty or unparsable one (so that it fails every bound)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def argv_value(argv, flag):
    """The value of `--flag V` or `--flag=V` in an argv list (the last one wins, as in lins's parser)."""
    value = None
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith(flag + "="):
            value = a[len(flag) + 1:]
    return value


def provenance_path(csv_path):
    stem, _ = os.path.splitext(csv_path)
    return stem + ".provenance.json"


def load_provenance(csv_path):
    path = provenance_path(csv_path)
    if not os.path.exists(path):
        return None, "no %s" % os.path.basename(path)
    try:
        with open(path) as f:
            return json.load(f), path
    except (OSError, ValueError) as e:
        return None, "%s unreadable (%s)" % (path, e)


def find_vocab(given, rows, prov):
    """(V, where it came from) or (None, why not)."""
    if given:
        return given, "--vocab"
    cells = {r.get("vocab", "") for r in rows} - {""}
    if len(cells) == 1:
        v = number(cells.pop())
        if v >= 1:
            return int(v), "the CSV's vocab column"
    argv = (prov or {}).get("argv") or []
    run = (prov or {}).get("run") or {}
    if run.get("vocab"):
        return int(run["vocab"]), "the provenance's run.vocab"
    v = argv_value(argv, "--vocab")
    if v is not None and number(v) >= 1:
        return int(number(v)), "--vocab in the run's argv"
    model = argv_value(argv, "--model") or run.get("model")
    if model is None:
        models = {r.get("model", "") for r in rows} - {""}
        model = models.pop() if len(models) == 1 else None
    if model in PRESET_VOCAB:
        return PRESET_VOCAB[model], "model preset %s" % model
    return None, "no --vocab, vocab column or argv, and model %r is not a preset" % model


def find_warmup(given, prov):
    if given is not None:
        return given, "--warmup"
    run = (prov or {}).get("run") or {}
    if run.get("warmup_steps") is not None:
        return int(run["warmup_steps"]), "the provenance's run.warmup_steps"
    v = argv_value((prov or {}).get("argv") or [], "--warmup")
    if v is not None:
        return int(number(v)), "--warmup in the run's argv"
    return LINS_STEP_DEFAULT_WARMUP, "lins step's default"


def row_name(r):
    return "%s/%s step %s" % (r.get("strategy", "?"), r.get("precision", "?"), r.get("step", "?"))


def listing(rows, column, bad):
    """The values of a column for the report: all of them when few, else the range; the failing ones always."""
    values = [number(r.get(column)) for r in rows]
    finite = [v for v in values if math.isfinite(v)]
    if len(values) <= MAX_LISTED:
        text = ", ".join("%.6g" % v for v in values)
    else:
        text = "%d rows, %s" % (len(values), "%.6g .. %.6g" % (min(finite), max(finite)) if finite else "none finite")
    if bad:
        text += "; failing: " + ", ".join("%s = %s" % (row_name(r), r.get(column) or "(empty)")
                                          for r in bad[:MAX_LISTED])
        if len(bad) > MAX_LISTED:
            text += ", ... (%d in all)" % len(bad)
    return text


def check_file(rep, path, args):
    """The per-row checks of one step CSV. Returns its rows (with the g of each) for the agreement checks."""
    name = path
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            columns = reader.fieldnames or []
    except OSError as e:
        rep.check(False, "%s: readable" % name, str(e))
        return []
    prov, prov_where = load_provenance(path)
    required = ["strategy", "step", "loss", "mfu", "forward_s", "backward_s", "optimizer_s"]
    missing = [c for c in required if c not in columns]
    if not rep.check(not missing, "%s: columns" % name,
                     "missing %s" % ", ".join(missing) if missing else ", ".join(required) + " present"):
        return []
    run = (prov or {}).get("run") or {}
    strategies = [s.get("strategy") for s in run.get("strategies") or [] if isinstance(s, dict)]
    timed = run.get("timed_steps")
    if strategies and timed:
        want = len(strategies) * int(timed)
        have = {(r["strategy"], r["step"]) for r in rows}
        rep.check(len(rows) == want and len(have) == want, "%s: rows" % name,
                  "%d rows, %d (strategy, step) pairs; %d strategies (%s) x %d timed steps = %d expected (%s)" %
                  (len(rows), len(have), len(strategies), ",".join(strategies), int(timed), want, prov_where))
    else:
        rep.check(len(rows) > 0, "%s: rows" % name, "%d rows (%s: strategies and timed steps unknown)" %
                  (len(rows), prov_where))
    if not rows:
        return []
    if args.expect_backend:
        bad = [r for r in rows if r.get("backend") != args.expect_backend]
        rep.check(not bad, "%s: backend = %s" % (name, args.expect_backend), listing_text(rows, "backend", bad))
    vocab, vocab_where = find_vocab(args.vocab, rows, prov)
    if not rep.check(vocab is not None, "%s: vocab" % name, "V = %s (%s)" % (vocab, vocab_where)):
        limit = None
    else:
        limit = math.log(vocab) + 1
    if limit is not None:
        bad = [r for r in rows if not (0 < number(r["loss"]) < limit)]  # NaN and inf fail both comparisons
        rep.check(not bad, "%s: loss finite, > 0 and < ln(%d) + 1 = %.4f" % (name, vocab, limit),
                  listing(rows, "loss", bad))
    bad = [r for r in rows if not (0 < number(r["mfu"]) < MFU_MAX)]
    rep.check(not bad, "%s: mfu finite, 0 < mfu < %.2f" % (name, MFU_MAX), listing(rows, "mfu", bad))
    for col in ("forward_s", "backward_s", "optimizer_s"):
        bad = [r for r in rows if not (0 < number(r[col]) < math.inf)]
        rep.check(not bad, "%s: %s finite and > 0" % (name, col), listing(rows, col, bad))
    warmup, warmup_where = find_warmup(args.warmup, prov)
    for r in rows:
        r["_file"] = name
        r["_g"] = warmup + int(number(r["step"])) if math.isfinite(number(r["step"])) else warmup
        r["_warmup_where"] = warmup_where
        r["_run"] = "%s storage, %s compute" % (r.get("precision", "?"), r.get("compute", "?"))
    return rows


def listing_text(rows, column, bad):
    values = sorted({r.get(column, "") for r in rows})
    text = "values: " + ", ".join(values)
    if bad:
        text += "; failing: " + ", ".join("%s = %s" % (row_name(r), r.get(column, "")) for r in bad[:MAX_LISTED])
    return text


def check_agreement(rep, rows):
    runs = {}
    for r in rows:
        if math.isfinite(number(r["loss"])):
            runs.setdefault((r["_file"], r["_run"]), []).append(r)
    # The strategies of one run (precision, compute), step by step.
    label = {k: k[1] if len({f for f, _ in runs}) == 1 else "%s (%s)" % (k[1], k[0]) for k in runs}
    for key, rs in runs.items():
        run = label[key]
        by_step = {}
        for r in rs:
            by_step.setdefault(r["_g"], []).append(r)
        strategies = {r["strategy"] for r in rs}
        if len(strategies) < 2:
            continue
        for g in sorted(by_step):
            group = by_step[g]
            losses = [number(r["loss"]) for r in group]
            spread = max(losses) - min(losses)
            tol = (g + 1) * SAME_REL_PER_STEP * max(abs(x) for x in losses)
            rep.check(spread <= tol, "losses agree across strategies, %s, g = %d updates (warmup from %s)" %
                      (run, g, group[0]["_warmup_where"]),
                      "%s; spread %.3g, tolerance (g + 1) * %.1e * loss = %.3g" %
                      (", ".join("%s %.6g" % (r["strategy"], number(r["loss"])) for r in group), spread,
                       SAME_REL_PER_STEP, tol))
    # The same strategy and step in two runs (files, or precisions within a file).
    names = list(runs)  # in the order of the files given
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            a = {(r["strategy"], r["_g"]): r for r in runs[names[i]]}
            b = {(r["strategy"], r["_g"]): r for r in runs[names[j]]}
            common = sorted(set(a) & set(b), key=lambda k: (k[1], k[0]))
            if not common:
                rep.check(False, "losses agree across runs, %s vs %s" % (label[names[i]], label[names[j]]),
                          "no (strategy, step) in both")
                continue
            for key in common:
                x, y = number(a[key]["loss"]), number(b[key]["loss"])
                loss = max(abs(x), abs(y))
                tol = min((key[1] + 1) * CROSS_REL_PER_STEP * loss, 0.2 + 0.15 * loss)
                rep.check(abs(x - y) <= tol, "losses agree across runs, %s, g = %d updates" % (key[0], key[1]),
                          "%s %.6g vs %s %.6g: |diff| %.3g, tolerance min((g + 1) * %.1e * loss, 0.2 + 0.15 loss) "
                          "= %.3g" % (label[names[i]], x, label[names[j]], y, abs(x - y), CROSS_REL_PER_STEP, tol))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", nargs="+", help="step.csv of a lins step run (one per precision)")
    p.add_argument("--vocab", type=int, help="vocabulary size (else from the CSV or the provenance)")
    p.add_argument("--warmup", type=int, help="warm-up steps before the timed ones (else from the provenance)")
    p.add_argument("--expect-backend", help="every row must have this backend (gpu)")
    args = p.parse_args()
    rep = Report()
    rows = []
    for path in args.csv:
        rows += check_file(rep, path, args)
    check_agreement(rep, rows)
    if rep.failed:
        print("verdict: FAIL (%d of %d checks failed)" % (rep.failed, rep.checks))
        return 1
    print("verdict: PASS (%d checks)" % rep.checks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
