"""What the drawn figures show and how they fit a page, read back from the matplotlib artists:

- a series that ends early (every replicate diverged or vanished) is marked with an "x" at its last
  finite point and its legend entry says where and why; one without any value says so; points
  resting on fewer replicates get a hollow marker (plot.line_band, on stores the engine makes:
  an SSD stack without a norm that blows up, ReLU attention at lambda = 0 that vanishes);
- the band is ± 1 sample sd of the replicates by default in rcsweep-plot, the paper figures and
  rcsweep-summary's plot, and --band picks ci, se, range or none for the figures too;
- log axes are ticked at the swept values as plain numbers, without minor labels;
- --style paper is a page (7 in) wide, --width column 3.5 in (panels one under another),
  legends lie outside every panel, and a signed hue axis gets a diverging map centred at 0.
"""
import re

import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from conftest import plot_main
from test_figures_lambda_skip import TINY
from test_figures_mind_the_gap import STORES as MTG_SWEEPS

from rcsweep_tools import load
from rcsweep_tools.plot import hue_colors, line_band, series_note

RELU = """
[sweep]
name = "relu_vanish"
seed = 3
replicates = 4
[model]
mixer = "relu"
input = "sphere"
T = 8
d = 8
depth = 8
[axes]
lambda = [-0.5, 0.0, 0.5]
"""


def build(store, *args):
    from rcsweep_tools.plot_cli import build as build_figure, parser

    a = parser().parse_args([str(store), *args])
    fig = build_figure(load(store), a)
    fig.draw_without_rendering()  # lay out (constrained layout) as saving does
    return fig


def gid(ax, prefix):
    return {ln.get_gid(): ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)}


def legends(fig):
    return [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)


def legend_texts(fig):
    return [t.get_text() for leg in legends(fig) for t in leg.get_texts()]


def legends_outside_every_panel(fig):
    """Every legend (of a panel or of the figure) overlaps no panel and lies within the figure."""
    found = legends(fig)
    assert found
    page = fig.bbox
    panels = [ax for ax in fig.axes if getattr(ax, "get_subplotspec", lambda: None)() is not None]
    for leg in found:
        box = leg.get_window_extent()
        for ax in panels:
            assert not box.overlaps(ax.get_window_extent()), (leg, ax.get_title())
        assert box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y0 >= page.y0 - 1, (box, page)


# ------------------------------------------------------------------------------------------------
def test_series_note_and_markers_from_an_array():
    """Four replicates end after layers 6, 5, 4, 3: n falls from layer 4, the series ends at 6."""
    v = np.tile(np.linspace(0.9, 0.5, 9), (4, 1))
    for r, last in enumerate((6, 5, 4, 3)):
        v[r, last + 1:] = np.nan
    v += np.arange(4)[:, None] * 0.01
    da = xr.DataArray(v, dims=("replicate", "layer"), name="mu_rel",
                      coords={"layer": np.arange(9), "status": ("replicate", [3, 3, 3, 3])})
    fig = Figure()
    ax = fig.add_subplot()
    ln = line_band(ax, np.arange(9), da, "lambda = 0", color="k")
    assert ln.get_label() == "lambda = 0 (n 4→1 from layer 4, ends at layer 6: 4 diverged)"
    bare = line_band(Figure().add_subplot(), np.arange(9), da.drop_vars("status"), "bare")
    assert bare.series_note == "n 4→1 from layer 4, ends at layer 6: 4 without a value"  # no status: no outcome named
    assert ln.get_gid() == "mean:lambda = 0"
    end = gid(ax, "ends:")["ends:lambda = 0"]
    assert end.get_xdata().tolist() == [6] and end.get_ydata()[0] == pytest.approx(v[0, 6])
    assert end.get_marker() == "x"
    fewer = gid(ax, "fewer:")["fewer:lambda = 0"]
    assert fewer.get_xdata().tolist() == [4, 5, 6] and fewer.get_markerfacecolor() == "white"
    # the band rests on the finite replicates only: none where n < 2 (layer 6), sd of 2 at layer 5
    band = next(c for c in ax.collections if c.get_gid() == "band:lambda = 0")
    verts = np.concatenate([p.vertices for p in band.get_paths()])
    assert not np.isclose(verts[:, 0], 6).any()
    ys = verts[np.isclose(verts[:, 0], 5), 1]
    sd = np.std(v[:2, 5], ddof=1)
    np.testing.assert_allclose([ys.min(), ys.max()], [v[:2, 5].mean() - sd, v[:2, 5].mean() + sd], rtol=1e-12)
    # a series without a value anywhere, and one with a hole, say so
    assert series_note([0, 1, 2], [np.nan] * 3, [0, 0, 0], "T", [{"vanished": 3}] * 3)[0] == "no value: 3 vanished"
    note, last, fewer, gaps = series_note([8, 16, 32], [1.0, np.nan, 2.0], [3, 0, 3], "T", [{}, {"diverged": 3}, {}])
    assert note == "no value at T = 16: 3 diverged" and last is None and gaps.tolist() == [1]
    assert series_note([0, 1], [1.0, 2.0], [3, 3])[0] == ""


def test_a_series_that_blows_up_is_marked_where_it_ends(run_sweep):
    """SSD without a norm: every replicate non-finite after a few layers (status 3, kept by load)."""
    store = run_sweep(TINY["ls-fig3"])
    fig = build(store, "--y", "mu_rel", "--hue", "norm", "--col", "lambda", "--sel", "gate=none")
    ds = load(store)
    texts = legend_texts(fig)
    for ax, lam in zip(fig.axes, (0.0, 1.0)):
        mu = ds["mu_rel"].sel({"gate": "none", "norm": "none", "lambda": lam})
        mean = mu.mean("replicate").values
        last = int(np.nonzero(np.isfinite(mean))[0][-1])
        assert last < mu.sizes["layer"] - 1  # the stack blows up: the series ends early
        end = gid(ax, "ends:")
        assert list(end) == ["ends:norm = none"], end
        assert end["ends:norm = none"].get_xdata()[0] == last
        assert end["ends:norm = none"].get_ydata()[0] == pytest.approx(mean[last], rel=1e-12)
        reps = mu.sizes["replicate"]
        assert f"ends at layer {last}: {reps} diverged" in gid(ax, "mean:")["mean:norm = none"].get_label()
    assert any(t.startswith("none (") and "diverged" in t for t in texts), texts
    assert "layernorm" in texts  # the series that does not end carries no note
    assert "last finite value (after it no replicate has one: diverged)" in texts
    legends_outside_every_panel(fig)


def test_a_vanishing_series_is_never_silently_dropped(run_sweep, tmp_path):
    """ReLU attention at lambda = 0: X reaches exactly zero. Whether the loader keeps the layers
    the replicates reached (an x where the series ends) or not (no value at all), the legend entry
    of lambda = 0 says the series vanished, and the other two are drawn in full."""
    store = run_sweep(RELU)
    fig = build(store, "--y", "mu_rel", "--hue", "lambda")
    (ax,) = fig.axes
    zero = [t for t in legend_texts(fig) if t.startswith("0 (")]
    assert len(zero) == 1 and "vanished" in zero[0], legend_texts(fig)
    lines = gid(ax, "mean:")
    y0 = lines["mean:lambda = 0"].get_ydata()
    if np.isfinite(y0).any():
        last = int(np.nonzero(np.isfinite(y0))[0][-1])
        assert gid(ax, "ends:")["ends:lambda = 0"].get_xdata()[0] == last
        assert f"ends at layer {last}" in zero[0]
    else:
        assert re.fullmatch(r"0 \(no value: \d+ vanished\)", zero[0]), zero
    for lam in (-0.5, 0.5):
        assert np.isfinite(lines[f"mean:lambda = {lam:g}"].get_ydata()).all()
    # against lambda at the last layer: lambda = 0 has no value there; an x on the axis marks it
    fig = build(store, "--y", "mu_rel", "--x", "lambda")
    (ax,) = fig.axes
    gap = gid(ax, "gap:")
    assert list(gap) == ["gap:mu_rel"] and gap["gap:mu_rel"].get_xdata().tolist() == [0.0]
    assert any(re.search(r"no value at lambda = 0: \d+ vanished", t) for t in legend_texts(fig)), legend_texts(fig)
    assert "on the x axis: no value there (vanished)" in legend_texts(fig)
    code, _, err = plot_main(store, "--y", "mu_rel", "-o", tmp_path / "relu.png", "--dpi", "60")
    assert code == 0, err


# ------------------------------------------------------------------------------------------------
def bands(fig):
    return {c.get_gid()[5:]: np.concatenate([p.vertices for p in c.get_paths()])
            for ax in fig.axes for c in ax.collections
            if isinstance(c, PolyCollection) and (c.get_gid() or "").startswith("band:")}


def half_widths(verts, x, mean):
    ys = verts[np.isclose(verts[:, 0], x), 1]
    return ys.max() - mean


@pytest.mark.parametrize("band", [None, "sd", "ci", "se", "range", "none"])
def test_paper_figures_take_band_and_default_to_sd(run_sweep, band):
    store = run_sweep(TINY["ls-fig4"])
    ds = load(store)
    fig = build(store, "ls-fig4", *(("--band", band) if band else ()))
    caption = fig._supxlabel.get_text()
    found = bands(fig)
    mu = ds["mu_rel"].sel({"lambda": 1.0, "norm": "layernorm"})
    mean, sd, n = mu.mean("replicate").values, mu.std("replicate", ddof=1).values, mu.count("replicate").values
    if band == "none":
        assert not found and "no band" in caption
        return
    v = found["skip (lambda = 1), norm = layernorm"]
    ell = 3
    want = {None: sd, "sd": sd, "se": sd / np.sqrt(n), "ci": 4.302652729911275 * sd / np.sqrt(n),
            "range": mu.max("replicate").values - mean}[band]
    assert half_widths(v, ell, mean[ell]) == pytest.approx(want[ell], rel=1e-9)
    words = {None: "± 1 sd", "sd": "± 1 sd", "ci": "95%", "se": "standard error", "range": "min–max"}[band]
    assert words in caption, caption


def test_summary_plot_band_is_the_sd(run_sweep, tmp_path, monkeypatch):
    from rcsweep_tools import facet, summary

    seen = {}
    real = facet.draw

    def spy(*args, **kw):
        seen.update(kw)
        return real(*args, **kw)

    monkeypatch.setattr(facet, "draw", spy)
    summary.main([str(run_sweep(TINY["ls-fig4"])), "--metric", "mu_rel", "--png", str(tmp_path / "s.png")])
    assert seen["band"] == "sd"
    assert "± 1 sd" in summary.__doc__ and "ddof = 1" in summary.__doc__


# ------------------------------------------------------------------------------------------------
def test_log_x_ticked_at_the_swept_values(run_sweep):
    store = run_sweep(MTG_SWEEPS["mtg-fig4a"])
    T = sorted(np.unique(load(store)["T"].values).tolist())
    assert 2 <= len(T) <= 8
    for fig in (build(store, "--y", "sr_cov", "--x", "T", "--hue", "layer", "--col", "zip0", "--logx", "--logy"),
                build(store, "mtg-fig4a")):
        for ax in fig.axes:
            if ax.get_xscale() != "log" or not ax.get_xlabel():  # (upper panels share the lowest one's labels)
                continue
            assert ax.get_xticks().tolist() == T
            assert [t.get_text() for t in ax.get_xticklabels()] == [f"{v:g}" for v in T]
            assert not any(t.get_text() for t in ax.xaxis.get_minorticklabels())
            for t in ax.yaxis.get_minorticklabels() + ax.yaxis.get_majorticklabels():  # plain numbers
                assert t.get_text() == "" or float(t.get_text()) > 0, t.get_text()


def test_symlog_lambda_axis_few_and_many_values(run_sweep):
    store = run_sweep(RELU)  # lambda -0.5, 0, 0.5: few values, ticked at them
    (ax,) = build(store, "--y", "mu_rel", "--x", "lambda", "--logx").axes
    assert ax.get_xscale() == "symlog"
    assert ax.get_xticks().tolist() == [-0.5, 0.0, 0.5]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["-0.5", "0", "0.5"]
    fig = build(run_sweep(TINY["ls-fig2"]), "ls-fig2")  # 6 values over 10 decades
    for ax in fig.axes:
        assert not any(t.get_text() for t in ax.xaxis.get_minorticklabels())


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ls-fig1", "ls-fig2", "ls-fig3", "ls-thm41"])
def test_paper_style_is_a_page_wide_with_legends_outside(run_sweep, name):
    store = run_sweep(TINY[name])
    fig = build(store, name, "--style", "paper")
    assert fig.get_figwidth() == pytest.approx(7.0)
    assert fig._suptitle is None
    legends_outside_every_panel(fig)
    fig = build(store, name, "--style", "paper", "--width", "column")
    assert fig.get_figwidth() == pytest.approx(3.5)
    panels = [ax for ax in fig.axes if getattr(ax, "get_subplotspec", lambda: None)() is not None]
    assert {ax.get_subplotspec().colspan.start for ax in panels} == {0}  # one panel a row
    legends_outside_every_panel(fig)


def test_mind_the_gap_legends_leave_the_data_visible(run_sweep):
    store = run_sweep(MTG_SWEEPS["mtg-fig4a"])
    for args in ((), ("--style", "paper"), ("--style", "paper", "--width", "column")):
        fig = build(store, "mtg-fig4a", *args)
        legends_outside_every_panel(fig)
    assert build(store, "mtg-fig4a", "--width", "page").get_figwidth() == pytest.approx(7.0)
    fig = build(store, "--y", "sr_cov", "--x", "T", "--hue", "layer", "--col", "zip0", "--style", "paper")
    assert fig.get_figwidth() == pytest.approx(7.0)
    legends_outside_every_panel(fig)


def test_signed_hue_axis_gets_a_diverging_map(run_sweep):
    store = run_sweep(RELU)
    (ax,) = build(store, "--y", "mu_rel", "--hue", "lambda").axes
    rgb = {lam: np.array(gid(ax, "mean:")[f"mean:lambda = {lam:g}"].get_color()[:3]) for lam in (-0.5, 0.0, 0.5)}
    assert rgb[-0.5][2] > rgb[-0.5][0] + 0.3       # negative: blue
    assert rgb[0.5][0] > rgb[0.5][2] + 0.3         # positive: red
    assert np.ptp(rgb[0.0]) < 0.05                 # zero: grey
    for a, b in ((-0.5, 0.0), (0.0, 0.5), (-0.5, 0.5)):
        assert np.linalg.norm(rgb[a] - rgb[b]) > 0.3
    # symmetric: equal magnitudes get the same depth of colour on either side
    lo, hi = np.array(hue_colors([-2, -1, 1, 2]))[:, :3][[0, 3]]
    assert lo[2] > lo[0] and hi[0] > hi[2]
    # one sign keeps the sequential map (viridis)
    seq = np.array(hue_colors([0.0, 0.5, 1.0]))[:, :3]
    assert np.allclose(seq[0], [0.267004, 0.004874, 0.329415], atol=1e-6)
