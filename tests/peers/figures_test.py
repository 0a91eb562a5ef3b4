"""Fig. 11/12/16/17 draw the real systems' rows (python/lins_peers) beside lins's: dotted, black-edged, in the colour
of the preset they stand for, labelled with the system and its version, with a legend note; lins's own series are
unchanged. Needs the analysis Python (pandas, matplotlib); exit 77 (skipped) without it."""

import sys
import tempfile
import unittest
from pathlib import Path

try:
    import matplotlib  # noqa: F401
    import pandas as pd
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

# lins_analysis as installed or through PYTHONPATH; fixtures from tests/analysis, which ctest puts on PYTHONPATH
from fixtures import step_row  # noqa: E402
from lins_analysis import fig11, fig16_17, scaling, style  # noqa: E402
from lins_analysis import schema  # noqa: E402
from lins_analysis.load import load  # noqa: E402


def peer_row(strategy, preset, world, tgs, mfu):
    """A peer's step row: the plan of its preset, its own strategy and engine names."""
    row = step_row("measured", preset, "small", world, 2)
    system = strategy.split(":")[0]
    row.update(strategy=strategy, engine=system, tgs=tgs, mfu=mfu)
    return row


def dataset():
    rows = []
    for world in (4, 8):
        for preset in ("zero1", "zero3", "zeropp", "mics", "lins"):
            rows.append(step_row("measured", preset, "small", world, 2))
        rows.append(step_row("measured", "p=2x1,g=2x1,os=2x1", "small", world, 2, engine="lins",
                             factors=(2, 1, 2, 1, 2, 1)))
        rows.append(peer_row("fsdp2-2.15.0:full", "zero3", world, 900.0, 0.2))
        rows.append(peer_row("fsdp2-2.15.0:hsdp", "mics", world, 800.0, 0.19))
        rows.append(peer_row("deepspeed-0.19.8:zero3", "zero3", world, 700.0, 0.18))
        rows.append(peer_row("deepspeed-0.19.8:zero3-defaults", "zero3", world, 750.0, 0.185))
        rows.append(peer_row("torch-ddp-2.15.0:ddp", "ddp", world, 1000.0, 0.25))  # not a paper series
    with tempfile.TemporaryDirectory() as d:
        pd.DataFrame(rows, columns=schema.STEP_COLUMNS).to_csv(Path(d) / "step.csv", index=False)
        return load(d)  # read as the figures read every step CSV


class Capture:
    def __init__(self):
        self.figs = []
        self.real = style.save_figure

    def __enter__(self):
        def keep(fig, out_dir, name, formats=("png", "pdf")):
            self.figs.append(fig)
            return self.real(fig, out_dir, name, formats)

        style.save_figure = keep
        return self.figs

    def __exit__(self, *exc):
        style.save_figure = self.real


class PeerFiguresTest(unittest.TestCase):
    def test_names(self):
        self.assertTrue(style.is_peer("fsdp2-2.15.0:full"))
        self.assertTrue(style.is_peer("deepspeed-0.19.8:zero3-defaults"))
        for lins_name in ("zero3", "mics:2", "zeropp:4", "p=2x1,g=2x1,os=2x1", "lins"):
            self.assertFalse(style.is_peer(lins_name), lins_name)
        self.assertEqual(style.peer_preset("fsdp2-2.15.0:hpz"), "zeropp")
        self.assertEqual(style.peer_preset("deepspeed-0.19.8:zero3-defaults"), "zero3")
        self.assertEqual(style.strategy_style("fsdp2-2.15.0:full"), style.strategy_style("zero3"))
        self.assertEqual(style.strategy_label("deepspeed-0.19.8:zero1"), "DeepSpeed 0.19.8 zero1")

    def test_fig11_draws_peers_dotted_beside_lins(self):
        # The paper's series (make_figures --series paper); by default every preset in the data is drawn (below).
        scaling.SERIES = "paper"
        try:
            with tempfile.TemporaryDirectory() as d, Capture() as figs:
                fig11.draw(dataset(), d)
        finally:
            scaling.SERIES = "all"
        lines = [line for ax in figs[0].axes for line in ax.get_lines() if line.get_label()]
        labels = {line.get_label() for line in lines}
        self.assertTrue({"ZeRO-1", "ZeRO-3", "ZeRO++", "MiCS", "Lins"} <= labels)
        peers = [line for line in lines if "FSDP2" in line.get_label() or "DeepSpeed" in line.get_label()]
        self.assertEqual({line.get_label() for line in peers},
                         {"FSDP2 2.15.0 full", "FSDP2 2.15.0 hsdp", "DeepSpeed 0.19.8 zero3",
                          "DeepSpeed 0.19.8 zero3-defaults"})
        self.assertNotIn("PyTorch DDP 2.15.0 ddp", labels)  # DDP is not one of the paper's series
        for line in peers:
            self.assertEqual(line.get_linestyle(), ":")
            self.assertEqual(line.get_markeredgecolor(), "black")
        for line in lines:
            if line not in peers:
                self.assertEqual(line.get_linestyle(), "-")
        zero3 = next(line for line in lines if line.get_label() == "ZeRO-3")
        full = next(line for line in lines if line.get_label() == "FSDP2 2.15.0 full")
        self.assertEqual(zero3.get_color(), full.get_color())
        self.assertEqual(list(full.get_ydata()), [20.0, 20.0])  # mfu 0.2 drawn in percent
        legend = " ".join(t.get_text() for lg in figs[0].legends for t in lg.get_texts())
        self.assertIn(style.PEER_NOTE, legend)

    def test_fig11_draws_every_preset_by_default(self):
        with tempfile.TemporaryDirectory() as d, Capture() as figs:
            fig11.draw(dataset(), d)
        labels = {line.get_label() for ax in figs[0].axes for line in ax.get_lines() if line.get_label()}
        self.assertTrue({"ZeRO-1", "ZeRO-3", "ZeRO++", "MiCS", "Lins"} <= labels)
        self.assertIn("PyTorch DDP 2.15.0 ddp", labels)  # every real system's row too

    def test_fig16_17_adds_the_real_mics_plan_systems(self):
        rows = fig16_17.series_rows(dataset())
        self.assertIn("fsdp2-2.15.0:hsdp", set(rows["series"]))
        self.assertNotIn("fsdp2-2.15.0:full", set(rows["series"]))
        with tempfile.TemporaryDirectory() as d, Capture() as figs:
            fig16_17.draw(dataset(), d)
        labels = {line.get_label() for line in figs[0].axes[0].get_lines()}
        self.assertIn("MiCS plan, FSDP2 2.15.0 hsdp", labels)
        self.assertIn("MiCS plan, baseline engine", labels)


if __name__ == "__main__":
    unittest.main()
