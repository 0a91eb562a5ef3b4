#!/usr/bin/env python3
"""scripts/gpu-check-verdict.py on step CSVs made here: a good pair of runs (bf16 and fp32, three strategies, three
timed steps, llama-7b layer shapes cut to 2 layers, as gpu_check.py runs them) passes every check, and each bad one
fails, with exactly the checks it breaks. Standard library only.

    test_gpu_check_verdict.py [path/to/gpu-check-verdict.py]
"""
import copy
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VERDICT = os.path.join(HERE, "..", "..", "scripts", "gpu-check-verdict.py")
COLUMNS = ["source", "strategy", "engine", "model", "backend", "precision", "compute", "step", "step_time_s",
           "forward_s", "backward_s", "optimizer_s", "exposed_comm_s", "loss", "mfu", "peak_tflops"]
STRATEGIES = ["ddp", "zero3", "lins"]
LN_V = math.log(32000)  # 10.373; the loss must stay below 11.373


def rows_for(precision):
    """Rows as a GPU run would give them: the loss just below ln V and falling, the strategies within 2e-4 of each
    other, fp32 0.01 above bf16, MFU 0.35."""
    out = []
    for s_i, strategy in enumerate(STRATEGIES):
        for step in range(3):
            loss = 10.30 - 0.05 * step + 1e-4 * s_i + (0.01 if precision == "fp32" else 0.0)
            out.append({"source": "measured", "strategy": strategy, "engine": strategy if strategy != "zero3" else
                        "zero", "model": "custom", "backend": "gpu", "precision": precision, "compute": precision,
                        "step": str(step), "step_time_s": "0.5", "forward_s": "0.15", "backward_s": "0.3",
                        "optimizer_s": "0.02", "exposed_comm_s": "0.001", "loss": "%.9g" % loss, "mfu": "0.35",
                        "peak_tflops": "989"})
    return out


def provenance_for(precision, argv_extra=(), run_extra=None):
    run = {"command": "step", "backend": "gpu", "precision": precision, "compute": precision, "model": "custom",
           "warmup_steps": 1, "timed_steps": 3,
           "strategies": [{"strategy": s, "plan": "p=1x1,g=1x1,os=1x1", "engine": s} for s in STRATEGIES]}
    run.update(run_extra or {})
    return {"tool": "lins", "argv": ["lins", "step", "--backend", "gpu", "--precision", precision, "--compute",
                                     precision, "--model", "llama-7b", "--layers", "2", "--seq", "4096",
                                     "--strategies", ",".join(STRATEGIES), "--warmup", "1", "--steps", "3"] +
            list(argv_extra), "run": run}


class VerdictTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write_run(self, name, rows, provenance, columns=COLUMNS):
        d = os.path.join(self.tmp.name, name)
        os.makedirs(d)
        path = os.path.join(d, "step.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        if provenance is not None:
            with open(os.path.join(d, "step.provenance.json"), "w") as f:
                json.dump(provenance, f)
        return path

    def verdict(self, paths, *flags):
        p = subprocess.run([sys.executable, VERDICT, "--expect-backend", "gpu"] + list(flags) + paths,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.stderr, "", p.stderr)
        return p.returncode, p.stdout

    def pair(self, bf16_rows=None, fp32_rows=None, bf16_prov=None, fp32_prov=None):
        a = self.write_run("step", rows_for("bf16") if bf16_rows is None else bf16_rows,
                           provenance_for("bf16") if bf16_prov is None else bf16_prov)
        b = self.write_run("step-fp32", rows_for("fp32") if fp32_rows is None else fp32_rows,
                           provenance_for("fp32") if fp32_prov is None else fp32_prov)
        return [a, b]

    def assert_fails_only(self, paths, expected, *flags):
        """Exit 1, `verdict: FAIL`, and every FAIL line matches one of `expected` (substrings), each matched."""
        rc, out = self.verdict(paths, *flags)
        fails = [l for l in out.splitlines() if l.startswith("FAIL")]
        self.assertEqual(rc, 1, out)
        self.assertIn("verdict: FAIL", out)
        for e in expected:
            self.assertTrue(any(e in l for l in fails), "no FAIL line with %r in:\n%s" % (e, out))
        for l in fails:
            self.assertTrue(any(e in l for e in expected), "unexpected failure %r in:\n%s" % (l, out))
        return out

    def test_good_runs_pass(self):
        rc, out = self.verdict(self.pair())
        self.assertEqual(rc, 0, out)
        self.assertNotIn("FAIL", out)
        self.assertIn("verdict: PASS", out)
        self.assertIn("V = 32000 (model preset llama-7b)", out)
        self.assertIn("< ln(32000) + 1 = 11.3735", out)
        self.assertIn("9 rows, 9 (strategy, step) pairs", out)
        # Every kind of check ran: 2 files x (columns, rows, backend, vocab, loss, mfu, 3 times) + 2 x 3 strategy
        # agreements + 9 cross-run agreements.
        self.assertIn("PASS  losses agree across strategies", out)
        self.assertIn("PASS  losses agree across runs, lins, g = 3 updates", out)
        self.assertIn("verdict: PASS (33 checks)", out)

    def test_nan_loss(self):
        rows = rows_for("bf16")
        rows[4]["loss"] = "nan"  # zero3 step 1
        out = self.assert_fails_only(self.pair(bf16_rows=rows), ["loss finite, > 0 and < ln(32000) + 1"])
        self.assertIn("failing: zero3/bf16 step 1 = nan", out)

    def test_inf_and_empty_loss(self):
        rows = rows_for("fp32")
        rows[0]["loss"] = "inf"
        rows[1]["loss"] = ""
        out = self.assert_fails_only(self.pair(fp32_rows=rows), ["step-fp32/step.csv: loss finite"])
        self.assertIn("ddp/fp32 step 0 = inf", out)
        self.assertIn("ddp/fp32 step 1 = (empty)", out)

    def test_loss_above_ln_vocab_plus_one(self):
        rows, fp32 = rows_for("bf16"), rows_for("fp32")
        for r in rows + fp32:  # every row, so that the runs still agree: only the bound fails
            r["loss"] = "%.9g" % (float(r["loss"]) + 1.2)
        out = self.assert_fails_only(self.pair(bf16_rows=rows, fp32_rows=fp32), ["loss finite, > 0 and < ln(32000)"])
        self.assertIn("ddp/bf16 step 0 = 11.5", out)

    def test_zero_and_negative_loss(self):
        rows = rows_for("bf16")
        rows[2]["loss"] = "0"
        rows[5]["loss"] = "-1"
        # The bad losses also break the agreement of their steps (0 and -1 against 10.2).
        out = self.assert_fails_only(self.pair(bf16_rows=rows), ["loss finite", "losses agree across strategies",
                                                                 "losses agree across runs"])
        self.assertIn("ddp/bf16 step 2 = 0", out)
        self.assertIn("zero3/bf16 step 2 = -1", out)

    def test_mfu_zero(self):
        rows = rows_for("bf16")
        rows[3]["mfu"] = "0"
        out = self.assert_fails_only(self.pair(bf16_rows=rows), ["mfu finite, 0 < mfu < 0.85"])
        self.assertIn("zero3/bf16 step 0 = 0", out)

    def test_mfu_above_limit(self):
        rows = rows_for("fp32")
        rows[8]["mfu"] = "1.2"
        out = self.assert_fails_only(self.pair(fp32_rows=rows), ["step-fp32/step.csv: mfu finite, 0 < mfu < 0.85"])
        self.assertIn("lins/fp32 step 2 = 1.2", out)

    def test_zero_forward_time(self):
        rows = rows_for("bf16")
        rows[0]["forward_s"] = "0"
        out = self.assert_fails_only(self.pair(bf16_rows=rows), ["forward_s finite and > 0"])
        self.assertIn("ddp/bf16 step 0 = 0", out)

    def test_zero_backward_and_optimizer_time(self):
        rows = rows_for("bf16")
        rows[1]["backward_s"] = "0"
        rows[2]["optimizer_s"] = "nan"
        self.assert_fails_only(self.pair(bf16_rows=rows), ["backward_s finite and > 0", "optimizer_s finite and > 0"])

    def test_strategies_disagree(self):
        rows, fp32 = rows_for("bf16"), rows_for("fp32")
        for r in rows + fp32:
            if r["strategy"] == "lins" and r["step"] == "2":
                r["loss"] = "10.5"  # others 10.2: spread 0.3 > (3 + 1) * 1.6e-3 * 10.5 = 0.067
        out = self.assert_fails_only(self.pair(bf16_rows=rows, fp32_rows=fp32), ["losses agree across strategies"])
        self.assertIn("FAIL  losses agree across strategies, bf16 storage, bf16 compute", out)
        self.assertIn("g = 3 updates", out)

    def test_precisions_disagree(self):
        fp32 = rows_for("fp32")
        for r in fp32:
            r["loss"] = "%.9g" % (float(r["loss"]) + 0.5)  # beyond (g + 1) * 6.4e-3 * loss (0.13 .. 0.27)
        out = self.assert_fails_only(self.pair(fp32_rows=fp32), ["losses agree across runs"])
        self.assertIn("FAIL  losses agree across runs, ddp, g = 1 updates", out)

    def test_precisions_agree_within_tolerance(self):
        fp32 = rows_for("fp32")
        for r in fp32:
            r["loss"] = "%.9g" % (float(r["loss"]) + 0.1)  # within 0.13 at g = 1
        rc, out = self.verdict(self.pair(fp32_rows=fp32))
        self.assertEqual(rc, 0, out)

    def test_vocab_unknown(self):
        prov = provenance_for("bf16")
        prov["argv"] = [a for a in prov["argv"] if a != "--model" and a != "llama-7b"]
        out = self.assert_fails_only(self.pair(bf16_prov=prov), ["step/step.csv: vocab"])
        self.assertIn("model 'custom' is not a preset", out)

    def test_vocab_from_argv_and_column(self):
        prov = provenance_for("bf16", argv_extra=["--vocab=30000"])
        rc, out = self.verdict(self.pair(bf16_prov=prov))
        self.assertEqual(rc, 0, out)
        self.assertIn("V = 30000 (--vocab in the run's argv)", out)
        rows = rows_for("fp32")
        for r in rows:
            r["vocab"] = "32000"
        path = self.write_run("with-vocab", rows, None, COLUMNS + ["vocab"])
        rc, out = self.verdict([path])
        self.assertEqual(rc, 0, out)
        self.assertIn("V = 32000 (the CSV's vocab column)", out)
        rc, out = self.verdict([path], "--vocab", "24")  # --vocab wins: ln 24 + 1 = 4.18 < every loss
        self.assertEqual(rc, 1, out)
        self.assertIn("V = 24 (--vocab)", out)

    def test_no_rows(self):
        # Only the fp32 run has rows: nothing to compare it with, and its own checks pass.
        self.assert_fails_only(self.pair(bf16_rows=[]), ["step/step.csv: rows"])

    def test_missing_rows(self):
        rows = rows_for("bf16")[:-1]
        out = self.assert_fails_only(self.pair(bf16_rows=rows), ["step/step.csv: rows"])
        self.assertIn("8 rows, 8 (strategy, step) pairs; 3 strategies (ddp,zero3,lins) x 3 timed steps = 9", out)

    def test_missing_column(self):
        cols = [c for c in COLUMNS if c != "mfu"]
        path = self.write_run("no-mfu", rows_for("bf16"), provenance_for("bf16"), cols)
        rc, out = self.verdict([path])
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL  %s: columns: missing mfu" % path, out)

    def test_wrong_backend(self):
        rows = rows_for("bf16")
        for r in rows:
            r["backend"] = "cpu"
        out = self.assert_fails_only(self.pair(bf16_rows=rows), ["backend = gpu"])
        self.assertIn("values: cpu", out)

    def test_warmup_from_provenance(self):
        prov = provenance_for("bf16", run_extra={"warmup_steps": 4})
        rc, out = self.verdict(self.pair(bf16_prov=prov, fp32_prov=copy.deepcopy(prov)))
        self.assertEqual(rc, 0, out)
        self.assertIn("g = 6 updates (warmup from the provenance's run.warmup_steps)", out)

    def test_unreadable_file(self):
        rc, out = self.verdict([os.path.join(self.tmp.name, "missing.csv")])
        self.assertEqual(rc, 1, out)
        self.assertIn("readable", out)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].endswith(".py"):
        VERDICT = sys.argv.pop(1)
    unittest.main(verbosity=2)
