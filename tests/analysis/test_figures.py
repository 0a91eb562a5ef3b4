"""Every figure script draws a non-empty image from the fixture tree and from data/sample/, and draws what the
paper draws: projected visibly different from measured, "oom" where a plan does not fit, the right rows picked."""

import os
import subprocess
import sys

import matplotlib.image as mpimg
import pandas as pd
import pytest

from lins_analysis import NoData, comm_model, fig2, fig16_17, make_figures, style, table4, table5
from lins_analysis.load import load

FIGURE_NAMES = list(make_figures.FIGURES)


def assert_images(paths):
    pngs = [p for p in paths if p.endswith(".png")]
    pdfs = [p for p in paths if p.endswith(".pdf")]
    assert pngs and len(pngs) == len(pdfs), paths
    for p in pngs:
        img = mpimg.imread(p)
        assert img.shape[0] > 50 and img.shape[1] > 50
        assert img.std() > 0.01, f"{p} is blank"
    for p in pdfs:
        assert os.path.getsize(p) > 1000


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_every_figure_draws_from_fixtures(name, fixture_dir, tmp_path):
    module = make_figures.FIGURES[name][0]
    assert_images(module.draw(load(fixture_dir), str(tmp_path)))


def test_sample_data_draws_and_reports_what_is_missing(sample_dir, tmp_path):
    lines = []
    drawn, missing = make_figures.make_all([sample_dir], str(tmp_path), log=lines.append)
    assert drawn, "\n".join(lines)
    for name in ("fig11", "fig12", "fig13", "table4"):  # a step CSV of every strategy allows at least these
        assert name in drawn, "\n".join(lines)
    for paths in drawn.values():
        assert_images([p for p in paths if p.endswith((".png", ".pdf"))])
    for name, why in missing.items():
        assert why and any(name in line and "NOT drawn" in line for line in lines)


@pytest.fixture
def captured(monkeypatch):
    """Keeps the matplotlib figures that the modules would save."""
    figs = []
    real = style.save_figure

    def keep(fig, out_dir, name, formats=("png", "pdf")):
        figs.append(fig)
        return real(fig, out_dir, name, formats)

    monkeypatch.setattr(style, "save_figure", keep)
    return figs


def test_projected_dashed_hollow_measured_solid_and_oom(fixture_dir, tmp_path, captured):
    make_figures.FIGURES["fig11"][0].draw(load(fixture_dir), str(tmp_path))
    fig = captured[0]
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["llama-7b", "llama-13b", "small"]  # the paper's models first, one panel each
    lines = [l for ax in fig.axes for l in ax.get_lines()]
    proj = [l for l in lines if "(proj.)" in l.get_label()]
    meas = [l for l in lines if l.get_label() and "(proj.)" not in l.get_label()]
    assert proj and meas
    assert all(l.get_linestyle() == "--" and l.get_markerfacecolor() == "white" for l in proj)
    assert all(l.get_linestyle() == "-" and l.get_markerfacecolor() != "white" for l in meas)
    oom = [t for t in fig.axes[1].texts if t.get_text() == "oom"]
    assert len(oom) == 1 and not [t for t in fig.axes[0].texts if t.get_text() == "oom"]
    legend_text = " ".join(t.get_text() for lg in fig.legends for t in lg.get_texts())
    assert "projected" in legend_text and "measured" in legend_text
    # every preset in the data, each on its own engine; the 6-tuple run on the Lins engine is not a series
    labels = {l.get_label().replace(" (proj.)", "") for l in lines}
    assert {"ZeRO-1", "ZeRO-3", "ZeRO++", "MiCS", "Lins", "DDP", "ZeRO-2"} <= labels
    assert not [l for l in labels if l.startswith("p=")]


def test_series_paper_keeps_the_papers_five_and_plain_titles_drop_the_figure_number(fixture_dir, tmp_path, captured,
                                                                                       monkeypatch):
    from lins_analysis import scaling
    monkeypatch.setattr(scaling, "SERIES", "paper")
    monkeypatch.setattr(scaling, "TITLES", "plain")
    make_figures.FIGURES["fig11"][0].draw(load(fixture_dir), str(tmp_path))
    fig = captured[0]
    labels = {l.get_label().replace(" (proj.)", "") for ax in fig.axes for l in ax.get_lines()}
    # DDP, ZeRO-2 and the 6-tuple run on the Lins engine are not among the paper's series
    assert labels == {"ZeRO-1", "ZeRO-3", "ZeRO++", "MiCS", "Lins"}
    assert fig._suptitle.get_text().startswith("MFU versus GPU count")


def test_series_named(fixture_dir, tmp_path, captured, monkeypatch):
    from lins_analysis import scaling
    monkeypatch.setattr(scaling, "SERIES", ["zero3", "lins"])
    make_figures.FIGURES["fig11"][0].draw(load(fixture_dir), str(tmp_path))
    labels = {l.get_label().replace(" (proj.)", "") for ax in captured[0].axes for l in ax.get_lines()}
    assert labels == {"ZeRO-3", "Lins"}


def test_fig16_17_finds_the_lins_engine_running_the_mics_plan(fixture_dir):
    rows = fig16_17.series_rows(load(fixture_dir))
    small = rows[(rows["model"] == "small") & (rows["world_size"] == 4)]
    assert sorted(small["series"]) == ["baseline", "lins", "lins_engine_mics_plan"]
    mics_plan = small[small["series"] == "lins_engine_mics_plan"].iloc[0]
    assert mics_plan["engine"] == "lins" and mics_plan["strategy"] == "p=2x1,g=2x1,os=2x1"


def test_table5_has_every_micro_batch_and_overlap_mode(fixture_dir, tmp_path):
    paths = table5.draw(load(fixture_dir), str(tmp_path))
    table = [p for p in paths if p.endswith(".csv")][0]
    t = pd.read_csv(table)
    assert list(t["M"]) == [1, 2, 4, 8]
    assert (t["TGS all overlaps"] > t["TGS no overlap"]).all()


def test_comm_model_uses_overlap_none_rows_and_computes_the_error(fixture_dir):
    rows = comm_model.comparison_rows(load(fixture_dir))
    lins4 = rows[(rows["strategy"] == "lins") & (rows["world_size"] == 4) & (rows["micro_batches"] == 4)]
    assert len(lins4) == 1 and bool(lins4["exact"].iloc[0])  # the overlap=none row wins over overlap=all
    assert lins4["error"].iloc[0] == pytest.approx(0.1)  # fixture: predicted = 1.1 x measured
    other = rows[rows["strategy"] == "zero3"]
    assert not other["exact"].any()  # only overlap=all rows: labelled a lower bound
    assert comm_model.bytes_ratio(rows).round(6).eq(1.0).all()


def test_fig2_latency_at_256_mib_and_no_data(fixture_dir):
    data = load(fixture_dir)
    g = data.profiles[(data.profiles["op"] == "all_reduce") & (data.profiles["mesh_inter"] == 2)]
    t, used = fig2.time_at_size(g)
    assert used == 2 ** 28 and t == pytest.approx(1e-4 + 2 ** 28 / 0.5e9)
    t, used = fig2.time_at_size(g, target=2 ** 30)  # beyond the profile: nearest measured size, said so
    assert used == 2 ** 28
    with pytest.raises(NoData):
        fig2.draw(load([]), "unused")


def test_cli_draws_everything_from_fixtures_and_exits_1_on_empty(fixture_dir, tmp_path):
    command = [sys.executable, "-m", "lins_analysis.make_figures"]
    r = subprocess.run(command + ["--data", fixture_dir, "--out", str(tmp_path / "figs"), "--formats", "png"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NOT drawn" not in r.stdout, r.stdout
    assert os.path.exists(tmp_path / "figs" / "fig11_mfu.png")
    assert not os.path.exists(tmp_path / "figs" / "fig11_mfu.pdf")
    assert os.path.exists(tmp_path / "figs" / "comm_model_error.csv")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run(command + ["--data", str(empty), "--out", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stdout.count("NOT drawn") == len(FIGURE_NAMES)


@pytest.mark.parametrize("name", ["make_figures", "cluster_summary", "compare_plans", "projections_table",
                                  "validate_projection"])
def test_checkout_scripts_run_without_an_install(name, repo, tmp_path):
    """analysis/NAME.py runs lins_analysis.NAME from a checkout with nothing installed and no PYTHONPATH: Python puts
    the script's folder, which holds the packages, on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # cluster_summary takes no options: an empty data folder gives its headings and "(no data)"
    args, expect = ([str(tmp_path)], "(no data)") if name == "cluster_summary" else (["--help"], "usage")
    # -s: without the user's site-packages, where scripts/install-deps.sh installs the packages
    r = subprocess.run([sys.executable, "-s", os.path.join(repo, "analysis", f"{name}.py")] + args, env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert expect in r.stdout, r.stdout


def test_fig2c_keeps_the_node_first_mesh_for_equal_gpu_counts(fixture_dir, tmp_path, captured):
    data = load(fixture_dir)
    extra = data.profiles[data.profiles["mesh_inter"] == 2].copy()  # 2x2 -> 1x4: same 4 GPUs, much faster
    extra["mesh_intra"], extra["mesh_inter"], extra["time_s"] = 1, 4, 1e-6
    data.profiles = pd.concat([data.profiles, extra], ignore_index=True)
    fig2.draw(data, str(tmp_path))
    ax_c = captured[0].axes[2]
    ar = [l for l in ax_c.get_lines() if l.get_label() == "AllReduce"][0]
    assert list(ar.get_xdata()) == [2, 4, 8]
    assert ar.get_ydata()[1] == pytest.approx((1e-4 + 2 ** 28 / 0.5e9) * 1e3)  # the 2x2 time, not 1x4's


def test_real_profile_draws_fig3_when_committed(repo, tmp_path):
    import glob
    profiles = glob.glob(os.path.join(repo, "data", "profiles", "**", "*.csv"), recursive=True)
    if not profiles:
        pytest.skip("data/profiles/ holds no measured profile yet")
    data = load(profiles)
    assert not data.profiles.empty, profiles
    assert_images(make_figures.FIGURES["fig3"][0].draw(data, str(tmp_path)))


def test_table4_planner_choice_and_baselines(fixture_dir):
    t = table4.planner_rankings(load(fixture_dir))
    assert t["system"].iloc[0] == "planner's choice" and t["plan"].iloc[0] == "(1,1 | 1,1 | 8,2)"
    assert set(t["system"].iloc[1:]) == {"ddp", "zero1", "zero2", "zero3", "zeropp", "mics"}
    assert t.loc[t["system"] == "ddp", "fits"].iloc[0] == "no: needs 120 GiB"


def test_timeline_kinds_and_rows(fixture_dir, tmp_path, captured):
    from lins_analysis import timeline
    assert timeline.kind_of({"name": "wait broadcast emb (previous step)", "cat": "wait"})[0].startswith("Wait")
    assert timeline.kind_of({"name": "all_gather layers.0.attn", "cat": "comm"})[0] == "AllGather"
    assert timeline.kind_of({"name": "backward layers.3.mlp", "cat": "compute"})[0] == "Backward"
    timeline.draw(load(fixture_dir), str(tmp_path))
    ax = captured[0].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:3] == ["rank 0 / compute", "rank 0 / comm", "rank 0 / stream 3"] and len(labels) == 6
    # the B/E pair became one bar: 2 ranks x (3 fwd + 3 AG + bwd + AR + wait + opt + bcast) bars
    assert len(ax.patches) == 2 * 11


def test_zeropp_quantized_variants_are_series_of_their_own_on_the_zeropp_engine():
    from lins_analysis import scaling
    assert scaling.own_engine("zeropp+qwz+qgz") == "zeropp"
    assert scaling.own_engine("zero3+qgz") == "zero"
    assert style.strategy_label("zeropp+qwz+qgz") == "ZeRO++ qwZ+qgZ"
    assert style.strategy_style("zeropp+qgz") != style.strategy_style("zeropp")
