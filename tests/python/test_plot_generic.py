"""The generic plot (`rcsweep-plot STORE --y METRIC ...`, rcsweep_tools/facet.py), the styles and
the clipped bands, on a small store the engine makes in the test run: PNG and SVG written with
hue, columns and log axes; figure sizes of bounded aspect (also rcsweep-summary's); the plotted
means and bands equal the store's numbers recomputed here, and no band leaves the metric's range;
--style paper and --no-title leave out the provenance title; bad arguments exit 2 naming the
choices."""
import struct

import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import PolyCollection
from scipy import stats

from conftest import plot_main
from test_figures_lambda_skip import Raw

from rcsweep_tools import load
from rcsweep_tools.plot import hue_colors, mean_band

SWEEP = """
[sweep]
name = "generic"
seed = 11
replicates = 3
[model]
input = "orthonormal"
depth = 4
[axes]
mixer = ["softmax", "markov"]
lambda = [0.0, 0.5, 1.0, 2.0, 10.0]
gap_fix = ["none", "perp"]
norm = ["none", "layernorm"]
[[zip]]
T = [4, 8]
d = [4, 8]
"""
LAMBDAS = [0.0, 0.5, 1.0, 2.0, 10.0]
FIVE = """
[sweep]
name = "five"
seed = 3
replicates = 3
[model]
mixer = "softmax"
input = "sphere"
T = 8
d = 8
depth = 6
[axes]
lambda = [0.0, 0.5, 1.0, 2.0, 10.0]
"""


@pytest.fixture(scope="module")
def store(run_sweep):
    return run_sweep(SWEEP)


def build(store, *args):
    """The Figure rcsweep-plot draws for these arguments (before saving)."""
    from rcsweep_tools.plot_cli import build as build_figure, parser

    a = parser().parse_args([str(store), *args])
    fig = build_figure(load(store), a)
    fig.draw_without_rendering()  # lay out (constrained layout) as saving does
    return fig


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
    return struct.unpack(">II", data[16:24])


def bands(ax):
    return {c.get_gid()[5:]: np.concatenate([p.vertices for p in c.get_paths()])
            for c in ax.collections if isinstance(c, PolyCollection) and (c.get_gid() or "").startswith("band:")}


def panel(fig, title):
    found = [ax for ax in fig.axes if ax.get_title().replace("\n", ", ") == title]
    assert len(found) == 1, (title, [ax.get_title() for ax in fig.axes])
    return found[0]


def test_hue_col_log_axes_png_and_svg(store, tmp_path):
    for ext in ("png", "svg"):
        out = tmp_path / f"g.{ext}"
        code, stdout, err = plot_main(store, "--y", "sr_cov", "--hue", "lambda", "--col", "mixer", "--row", "gap_fix",
                                      "--sel", "norm=layernorm", "--sel", "T=8", "--logx", "--logy", "-o", out,
                                      "--dpi", "80")
        assert code == 0, err
        assert f"wrote {out}" in stdout
        data = out.read_bytes()
        if ext == "png":
            w, h = png_size(data)
            assert 1.0 <= w / h <= 3.0 and w <= 1600, (w, h)
        else:
            assert b"<svg" in data[:2000] and data.count(b"<path") > 20
    fig = build(store, "--y", "sr_cov", "--hue", "lambda", "--col", "mixer", "--row", "gap_fix",
                "--sel", "norm=layernorm", "--sel", "T=8", "--logx", "--logy")
    assert len(fig.axes) == 4
    for ax in fig.axes:
        assert ax.get_yscale() == "log" and ax.get_xscale() == "symlog"  # layer 0 on a log axis: symlog
    # the legend lists lambda in increasing order, outside every panel
    legend = next(ax.get_legend() for ax in fig.axes if ax.get_legend())
    assert [t.get_text() for t in legend.get_texts()] == [f"{v:g}" for v in LAMBDAS]
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)


@pytest.mark.parametrize("band", [None, "ci"])
def test_plotted_means_and_clipped_bands_equal_the_store(store, band):
    """Means and bands recomputed from the raw /layers rows, clipped at sr >= 1: by default mean ± 1
    sample sd of the replicates (the papers' convention), with --band ci the t-based 95% interval."""
    raw = Raw(store)
    fig = build(store, "--y", "sr_cov", "--hue", "lambda", "--col", "mixer", "--sel", "gap_fix=none",
                "--sel", "norm=none", "--sel", "T=8", *(("--band", band) if band else ()))
    assert "band ± 1 sd of the replicates" in fig._suptitle.get_text() or band
    clipped = 0
    for mixer in ("softmax", "markov"):
        ax = panel(fig, f"mixer = {mixer}")
        found = bands(ax)
        for lam in LAMBDAS:
            samples = raw.layers["sr_cov"][raw.rows(mixer=mixer, gap_fix="none", norm="none", T=8, **{"lambda": lam})]
            mean = samples.mean(axis=0)
            sd = samples.std(axis=0, ddof=1)
            half = stats.t.ppf(0.975, 2) * sd / np.sqrt(3) if band == "ci" else sd
            ln = next(l for l in ax.get_lines() if l.get_label() == f"lambda = {lam:g}")
            np.testing.assert_allclose(ln.get_ydata(), mean, rtol=1e-12)
            v = found[f"lambda = {lam:g}"]
            for ell in range(5):
                ys = v[np.isclose(v[:, 0], ell), 1]
                np.testing.assert_allclose([ys.min(), ys.max()], [max(mean[ell] - half[ell], 1.0), mean[ell] + half[ell]],
                                           rtol=1e-9, atol=1e-12)
                clipped += mean[ell] - half[ell] < 1.0
    assert clipped > 0  # the store has bands that reach below 1 unclipped: the clipping is exercised


@pytest.mark.parametrize("metric,low,high", [("sr_cov", 1.0, np.inf), ("sr_x", 1.0, np.inf), ("mu_rel", 0.0, 1.0),
                                             ("m_gap", 1.0, np.inf), ("res_rel", 0.0, np.inf)])
@pytest.mark.parametrize("band", ["sd", "ci", "se", "range"])
def test_no_band_leaves_the_metric_range(store, metric, low, high, band):
    fig = build(store, "--y", metric, "--hue", "lambda", "--col", "zip0", "--row", "mixer", "--dash", "gap_fix",
                "--sel", "norm=none", "--band", band)
    n = 0
    for ax in fig.axes:
        for v in bands(ax).values():
            assert v[:, 1].min() >= low and v[:, 1].max() <= high, (metric, band)
            n += 1
    assert n == 2 * 2 * 5 * 2


def test_band_function_clips_and_se():
    rng = np.random.default_rng(0)
    da = xr.DataArray(1 + rng.exponential(0.05, (4, 7)), dims=("replicate", "layer"), name="sr_cov")
    sd = da.std("replicate", ddof=1).values
    mean, lo, hi = mean_band(da)  # the default: ± 1 sample sd
    np.testing.assert_allclose(hi.values, mean.values + sd, rtol=1e-12)
    np.testing.assert_allclose(lo.values, np.maximum(mean.values - sd, 1.0), rtol=1e-12)
    mean, lo, hi = mean_band(da, band="ci")
    want = mean.values - stats.t.ppf(0.975, 3) * sd / 2
    assert (want < 1).any()
    np.testing.assert_allclose(lo.values, np.maximum(want, 1.0), rtol=1e-12)
    _, lo, hi = mean_band(da, band="se")
    np.testing.assert_allclose(hi.values, mean.values + sd / 2, rtol=1e-12)
    _, lo, hi = mean_band(da.rename("mu_rel") * 0.99, band="range")  # mu_rel lies in [0, 1]
    assert lo.min() >= 0 and hi.max() <= 1
    _, lo, _ = mean_band(da, band="ci", valid=(None, None))
    assert (lo.values < 1).any()


def test_five_panels_wrap_into_a_grid(store, tmp_path):
    out = tmp_path / "five.png"
    code, _, err = plot_main(store, "--y", "mu_rel", "--col", "lambda", "--hue", "mixer", "--sel", "gap_fix=none",
                             "--sel", "norm=none", "--sel", "T=8", "-o", out, "--dpi", "100")
    assert code == 0, err
    w, h = png_size(out.read_bytes())
    assert w / h <= 3.0 and w <= 2000 and h <= 1200, (w, h)
    fig = build(store, "--y", "mu_rel", "--col", "lambda", "--hue", "mixer", "--sel", "gap_fix=none",
                "--sel", "norm=none", "--sel", "T=8")
    assert sorted({ax.get_subplotspec().rowspan.start for ax in fig.axes}) == [0, 1]  # 3 + 2 panels


def test_summary_plot_wraps_many_panels(run_sweep, tmp_path):
    from rcsweep_tools import summary

    out = tmp_path / "summary.png"
    summary.main([str(run_sweep(FIVE)), "--png", str(out)])
    w, h = png_size(out.read_bytes())
    assert w / h <= 3.0, (w, h)  # 5 lambda panels: 3 + 2, not a strip


def test_paper_style_and_no_title(store, run_sweep):
    fig = build(store, "--y", "sr_cov", "--sel", "norm=none", "--sel", "gap_fix=none")
    assert fig._suptitle is not None and "generic" in fig._suptitle.get_text()
    for args in (("--style", "paper"), ("--no-title",)):
        fig = build(store, "--y", "sr_cov", "--sel", "norm=none", "--sel", "gap_fix=none", *args)
        assert fig._suptitle is None, args
    # a paper's figure too: no title, and paper style hides the caption line under the panels
    from test_figures_lambda_skip import TINY

    fig4 = run_sweep(TINY["ls-fig4"])
    fig = build(fig4, "ls-fig4")
    assert fig._suptitle is not None and fig._supxlabel.get_visible()
    fig = build(fig4, "ls-fig4", "--style", "paper")
    assert fig._suptitle is None and not fig._supxlabel.get_visible()
    fig = build(fig4, "ls-fig4", "--no-title")
    assert fig._suptitle is None and fig._supxlabel.get_visible()


def test_ordered_colours_stay_apart():
    lams = [-10, -1, 0, 0.5, 1, 2, 10, 100, 1e4]
    colours = np.array(hue_colors(lams))[:, :3]
    gaps = np.linalg.norm(colours[:, None] - colours[None], axis=-1) + np.eye(len(lams))
    assert gaps.min() > 0.1
    assert hue_colors([3, 1, 2])[1] == hue_colors([1, 2, 3])[0]  # by rank: the same value, the same colour
    assert len(set(map(tuple, hue_colors(["a", "b", "c"])))) == 3


@pytest.mark.parametrize("args,message", [
    (("--y", "bogus"), ["unknown metric 'bogus'", "sr_cov", "mu_rel", "theory_lambda_min"]),
    (("--y", "sr_cov", "--hue", "bogus"), ["unknown axis 'bogus' for --hue", "layer", "lambda", "mixer", "zip0", "T"]),
    (("--y", "sr_cov", "--col", "depth"), ["unknown axis 'depth' for --col", "not swept"]),
    (("--y", "sr_cov", "--hue", "T", "--col", "zip0"), ["same dimension 'zip0'"]),
    (("--y", "sr_cov"), ["beyond --x", "--sel"]),
    (("--y", "sr_cov", "--sel", "lambda=3"), ["lambda takes the values 0, 0.5, 1, 2, 10"]),
    (("--y", "sr_cov", "--sel", "bogus=1"), ["no coordinate 'bogus'", "mixer"]),
    (("--y", "sr_cov", "--x", "lambda", "--sel", "norm=none", "--layer", "9"), ["--layer 9", "0..4"]),
    (("--y", "sr_cov", "--sel", "norm=none", "--layer", "2"), ["--layer 2: layer is the --x axis"]),
    (("--y", "sr_cov", "--band", "sdev"), ["invalid choice: 'sdev'", "sd", "ci", "se"]),
    (("--y", "sr_cov", "--style", "poster"), ["invalid choice: 'poster'", "paper"]),
    (("mtg-fig4a", "--y", "sr_cov"), ["not both"]),
    (("mtg-fig4a", "--hue", "lambda"), ["--hue", "give --y METRIC"]),
])
def test_bad_arguments_exit_2_naming_the_choices(store, tmp_path, args, message):
    out = tmp_path / "x.png"
    code, _, err = plot_main(store, *args, "-o", out)
    assert code == 2, (args, err)
    for text in message:
        assert text in err, (args, text, err)
    assert not out.exists()
