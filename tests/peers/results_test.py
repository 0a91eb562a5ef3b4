"""lins_peers.results takes the step CSV's columns and the FLOPs of the mfu columns from `lins schema` (lins_schema),
not from copies: the columns in the binary's order, and the Megatron formula of ModelSpec::flops_per_token and
causal_flops_per_token (standard library only: runs without the peers' Python)."""

import unittest
from types import SimpleNamespace

import lins_schema
from lins_peers import results


class ResultsTest(unittest.TestCase):
    def test_step_columns_are_the_binary_columns(self):
        self.assertEqual(results.STEP_COLUMNS, lins_schema.columns("step"))
        for column in ("mfu", "mfu_causal", "tgs", "peak_tflops"):
            self.assertIn(column, results.STEP_COLUMNS)

    def test_flops_per_token_of_llama_7b(self):
        # LLaMA-7B at seq 4096: 72 L h^2 + 12 L h s + 6 h V = 72*32*4096^2 + 12*32*4096*4096 + 6*4096*32000, and
        # 6 L h s for causal attention; every product is exact in a double.
        config = SimpleNamespace(layers=32, hidden=4096, heads=32, ffn=11008, vocab=32000)
        self.assertEqual(results.flops_per_token(config, 4096), 45_883_588_608.0)
        self.assertEqual(results.causal_flops_per_token(config, 4096), 42_662_363_136.0)

    def test_every_preset_through_the_one_formula(self):
        for name, m in lins_schema.MODELS.items():
            config = SimpleNamespace(**m)
            for seq in (16, 4096):
                self.assertEqual(results.flops_per_token(config, seq), lins_schema.flops_per_token(m, seq), name)
                L, h, V = m["layers"], m["hidden"], m["vocab"]
                closed = 72.0 * L * h * h * (1.0 + seq / (6.0 * h) + V / (12.0 * L * h))  # docs/method.md
                self.assertAlmostEqual(results.flops_per_token(config, seq) / closed, 1.0, places=12, msg=name)


if __name__ == "__main__":
    unittest.main()
