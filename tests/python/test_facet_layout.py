"""The generic plot's facet grid (rcsweep_tools/facet.py, FacetGrid) laid out for any grid: grids
of 1 x 1 up to 6 x 4 panels with long labels ("norm = layernorm", "lambda = 0.25") and 25 layers
on x, drawn by rcsweep-plot's own code path (plot_cli.build) in every style and width, then read
back from matplotlib's text extents: no two texts (titles, row labels, axis labels, tick labels,
legend texts, the title) overlap and none leaves the figure; one label per row on the right
margin and one per column on top; a long wrapped grid at a column's width keeps a sane aspect;
a grid that cannot fit the width asked is refused with a message naming the options that help.
The data are synthetic (no store): only the layout is under test."""
import itertools
import re
import struct

import numpy as np
import pytest
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg

from rcsweep_tools.facet import MAX_HEIGHT
from rcsweep_tools.plot import FigureDataError, style

NORMS = ["layernorm", "rms", "none", "batchnorm", "groupnorm", "scalenorm"]
LAMBDAS = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]


def synthetic(nrow, ncol, layers=25, replicates=3):
    """A dataset as load() gives it: mu_rel over norm x lambda x mixer x replicate x layer."""
    rng = np.random.default_rng(nrow * 10 + ncol)
    shape = (nrow, ncol, 3, replicates, layers)
    mu = np.clip(0.3 + np.abs(rng.normal(0.03, 0.01, shape)).cumsum(-1), 0, 1)
    ds = xr.Dataset({"mu_rel": (("norm", "lambda", "mixer", "replicate", "layer"), mu),
                     "status": (("norm", "lambda", "mixer", "replicate"), np.ones(shape[:-1], int))},
                    coords={"norm": NORMS[:nrow], "lambda": LAMBDAS[:ncol], "mixer": ["softmax", "markov", "relu"],
                            "replicate": np.arange(replicates), "layer": np.arange(layers)})
    ds["mu_rel"].attrs.update(long_name="relative distance from rank one", symbol="μ/‖X‖_F")
    ds["layer"].attrs.update(long_name="layer", symbol="ℓ")
    ds["lambda"].attrs.update(long_name="skip strength", symbol="λ")
    ds.attrs.update(path="/data/sweeps/a_rather_long_store_name_of_the_norm_study.h5", sweep_name="norm_study",
                    git_commit="0123abcd")
    return ds


def build(ds, *args):
    """The Figure rcsweep-plot draws for these arguments, drawn on an Agg canvas as saving does."""
    from rcsweep_tools.plot_cli import build as build_figure, parser

    a = parser().parse_args(["store.h5", "--y", "mu_rel", "--hue", "mixer", *args])
    with style("paper" if a.width or a.style == "paper" else "default"):
        fig = build_figure(ds, a)
        FigureCanvasAgg(fig)
        fig.set_dpi(72)
        fig.canvas.draw()
    return fig


def texts(fig):
    """(what, Text) of every text matplotlib draws on the figure, with text in it."""
    found = [("figure", t) for t in fig.texts]
    for ax in fig.axes:
        found += [("title", t) for t in (ax.title, ax._left_title, ax._right_title)]
        found += [("label", ax.xaxis.label), ("label", ax.yaxis.label)]
        found += [("offset", ax.xaxis.offsetText), ("offset", ax.yaxis.offsetText)]
        found += [("margin", t) for t in ax.texts]
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks within the view: those drawn
                found += [("tick", tick.label1), ("tick", tick.label2)]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    for leg in legends:
        found += [("legend", t) for t in leg.get_texts()] + [("legend", leg.get_title())]
    return [(w, t) for w, t in found if t.get_visible() and t.get_text().strip()]


def assert_no_overlap(fig, tol=0.5):
    """No two drawn texts' boxes intersect (by more than `tol` pixels), none leaves the figure."""
    renderer = fig.canvas.get_renderer()
    drawn = [(w, t, t.get_window_extent(renderer)) for w, t in texts(fig)]
    page = fig.bbox
    for w, t, b in drawn:
        assert (b.x0 >= page.x0 - 1 and b.x1 <= page.x1 + 1 and b.y0 >= page.y0 - 1 and b.y1 <= page.y1 + 1), \
            f"{w} {t.get_text()!r} leaves the figure: {b.bounds} not in {page.bounds}"
    for (w1, t1, a), (w2, t2, b) in itertools.combinations(drawn, 2):
        overlap = min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol
        assert not overlap, f"{w1} {t1.get_text()!r} {a.bounds} overlaps {w2} {t2.get_text()!r} {b.bounds}"
    return drawn


def panels(fig):
    return [ax for ax in fig.axes if getattr(ax, "get_subplotspec", lambda: None)() is not None]


# (rows, cols): a row axis with --row, else the columns alone (wrapped); every style and width
GRIDS = [(None, 1), (2, 2), (3, 1), (6, 2), (2, 6), (6, 4), (None, 12)]
WIDTHS = {"default": (), "page": ("--style", "paper"), "column": ("--width", "column")}
# grids no column holds (4 or 6 panels across): refused, naming the option that fits them
TOO_WIDE = {((6, 4), "column"), ((2, 6), "column")}


@pytest.mark.parametrize("width", list(WIDTHS))
def test_no_text_overlaps_or_leaves_the_figure(width):
    for grid in GRIDS:
        rows, cols = grid
        ds = synthetic(rows or 1, cols)
        args = (("--row", "norm") if rows else ("--sel", "norm=layernorm")) + ("--col", "lambda") + WIDTHS[width]
        args += ("--logy",) if rows == 2 else ()  # labelled minor ticks (a log axis spanning less than a decade)
        if (grid, width) in TOO_WIDE:  # refused: test_a_grid_that_cannot_fit_names_the_option_that_fixes_it
            continue
        if grid == (None, 12) and width != "default":  # test_long_wrapped_grid_at_a_column_keeps_a_sane_aspect
            continue
        fig = build(ds, *args)
        drawn = assert_no_overlap(fig)
        w, h = fig.get_size_inches()
        if width != "default":
            assert w == pytest.approx({"page": 7.0, "column": 3.5}[width]), (grid, width)
            assert h <= MAX_HEIGHT + 0.01, (grid, width, h)
        n = (rows or 1) * cols
        axes = panels(fig)
        assert len(axes) == n
        for ax in axes:  # panels of a sane shape, not slivers
            b = ax.get_position()
            aspect = b.height * h / (b.width * w)
            assert 0.25 <= aspect <= 1.0, (grid, width, aspect)
        titles = [t.get_text().replace("\n", " ") for what, t, _ in drawn if what == "title"]
        margins = [t.get_text().replace("\n", " ") for what, t, _ in drawn if what == "margin"]
        if rows:  # seaborn's margin titles: each column's value once on top, each row's once on the right
            assert sorted(titles) == sorted(f"lambda = {v:g}" for v in LAMBDAS[:cols]), titles
            assert margins == [f"norm = {v}" for v in NORMS[:rows]], margins
        else:  # a wrapped grid: each panel titled with its value
            assert len(titles) == (cols if cols > 1 else 1) and not margins, (titles, margins)
        # tick labels only on the first column (y) and the lowest panel of each column (x), minor ones too
        for ax in axes:
            spec = ax.get_subplotspec()
            lowest = not any(o.get_subplotspec().rowspan.start == spec.rowspan.start + 1
                             and o.get_subplotspec().colspan.start == spec.colspan.start for o in axes)
            for axis, shows in ((ax.yaxis, spec.colspan.start == 0), (ax.xaxis, lowest)):
                drawn_here = [t for tick in axis._update_ticks() for t in (tick.label1, tick.label2)
                              if t.get_visible() and t.get_text()]
                assert bool(drawn_here) == shows, (grid, width, axis.axis_name, [t.get_text() for t in drawn_here])
        # the x ticks: thinned where the panels are narrow, never gone
        for ax in axes:
            if ax.get_xlabel():  # the lowest panel of its column
                shown = [t for t in ax.xaxis.get_majorticklabels() if any(t is d for _, d, _ in drawn)]
                assert len(shown) >= 2, (grid, width, [t.get_text() for t in shown])


def test_long_wrapped_grid_at_a_column_keeps_a_sane_aspect():
    """12 panels at 3.5 in: two a row (not a 1050 x 8342 px strip), legend below, within a page."""
    fig = build(synthetic(1, 12), "--sel", "norm=layernorm", "--col", "lambda", "--width", "column")
    assert_no_overlap(fig)
    w, h = fig.get_size_inches()
    assert w == pytest.approx(3.5) and 1.0 <= h / w <= MAX_HEIGHT / 3.5, (w, h)
    columns = {ax.get_subplotspec().colspan.start for ax in panels(fig)}
    assert columns == {0, 1}
    assert fig.legends and not any(ax.get_legend() for ax in fig.axes)  # the legend below the panels
    legend = fig.legends[0].get_window_extent()
    assert all(legend.y1 <= ax.get_tightbbox().y0 + 1 for ax in panels(fig))
    # at a page's width the same grid takes more panels a row and is flatter
    page = build(synthetic(1, 12), "--sel", "norm=layernorm", "--col", "lambda", "--style", "paper")
    assert_no_overlap(page)
    assert page.get_figheight() / 7.0 < h / w
    assert len({ax.get_subplotspec().colspan.start for ax in panels(page)}) >= 3


@pytest.mark.parametrize("grid,args,wanted", [
    # 4 lambda values across at a column (as 6 x 4): a page holds them, or lambda as lines
    ((2, 4), ("--row", "norm", "--col", "lambda"), ["--width page", "--hue or --dash lambda"]),
    # 6 across, 2 down: swapped they fit the column
    ((2, 6), ("--row", "norm", "--col", "lambda"), ["--row lambda --col norm"]),
    # --wrap asks more panels a row than a column holds: a --wrap that fits
    ((1, 6), ("--sel", "norm=layernorm", "--col", "lambda", "--wrap", "6"), ["--wrap "]),
    # 12 rows of one panel are taller than a page: the values wrapped as --col
    ((1, 12), ("--sel", "norm=layernorm", "--row", "lambda"), ["--col lambda instead of --row"]),
])
def test_a_grid_that_cannot_fit_names_the_option_that_fixes_it(grid, args, wanted):
    with pytest.raises(FigureDataError) as e:
        build(synthetic(*grid), *args, "--width", "column")
    msg = str(e.value)
    assert "does not fit --width column (3.5 in)" in msg, msg
    for text in wanted:
        assert text in msg, (text, msg)
    # the options named do fit: each drawn with no text overlapping
    fixes = {"--width page": [a for a in args] + ["--style", "paper"]}
    swap = re.search(r"--row (\w+) --col (\w+)", msg)
    if swap:
        fixes["swap"] = ["--row", swap.group(1), "--col", swap.group(2), "--width", "column"]
    wrap = re.search(r"--wrap (\d+)", msg)
    if wrap:
        fixes["wrap"] = [a for a in args[:-1]] + [wrap.group(1), "--width", "column"]
    if "instead of --row" in msg:
        fixes["wrap"] = [a.replace("--row", "--col") for a in args] + ["--width", "column"]
    for name, fixed in fixes.items():
        if name in msg or name in ("swap", "wrap"):
            assert_no_overlap(build(synthetic(*grid), *fixed))


def test_wrap_with_row_is_refused():
    with pytest.raises(FigureDataError, match="--wrap 2 wraps the panels of --col alone"):
        build(synthetic(2, 2), "--row", "norm", "--col", "lambda", "--wrap", "2")


WIDE = """
[sweep]
name = "wide"
seed = 5
replicates = 2
[model]
input = "orthonormal"
T = 4
d = 4
depth = 3
[axes]
mixer = ["softmax", "markov"]
lambda = [0.0, 0.5, 1.0, 2.0, 4.0]
"""


def test_rcsweep_plot_exits_2_naming_the_option_and_draws_what_fits(run_sweep, tmp_path):
    """On a store the engine makes: 5 lambda panels across 2 mixer rows do not fit a column
    (exit 2, the message naming --width page, nothing written); at a page they do, and so does
    the 5-panel --col grid at a column, wrapped (two a row)."""
    from conftest import plot_main

    store = run_sweep(WIDE)
    out = tmp_path / "wide.png"
    code, _, err = plot_main(store, "--y", "mu_rel", "--row", "mixer", "--col", "lambda", "--width", "column", "-o", out)
    assert code == 2 and "does not fit --width column (3.5 in)" in err and "--width page" in err, err
    assert not out.exists()
    code, _, err = plot_main(store, "--y", "mu_rel", "--row", "mixer", "--col", "lambda", "--width", "page",
                             "-o", out, "--dpi", "60")
    assert code == 0 and out.exists(), err
    code, _, err = plot_main(store, "--y", "mu_rel", "--hue", "mixer", "--col", "lambda", "--width", "column",
                             "-o", out, "--dpi", "60")
    assert code == 0, err
    w, h = struct.unpack(">II", out.read_bytes()[16:24])  # the PNG's size: 3.5 in at 60 dpi, not a strip
    assert w == 210 and 1.0 <= h / w <= MAX_HEIGHT / 3.5, (w, h)
