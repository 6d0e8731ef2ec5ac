"""Outcomes named as the store names them: rcsweep-plot's legends, marker explanations, titles and
captions, rcsweep-summary's table and the report's task line say not needed, diverged, vanished,
failed and pending each by its own name (load.outcome_words, from the tasks' status), and never
call an outcome by another's. Hollow markers stand for replicates lost (diverged, vanished,
failed, pending), never for replicates an adaptive rule did not need (docs/FIGURES.md).

Stores: a real adaptive one (some replicates not needed, nothing else), a real diverging one (an
SSD stack without a norm), a real vanishing one (ReLU attention at lambda = 0), and a real store
whose /tasks is rewritten to hold failed and pending tasks (as test_replicate_stats does: the
engine has no switch that makes a task fail)."""
import re
import shutil

import h5py
import numpy as np
import pytest

from test_figures_lambda_skip import TINY
from test_plot_layout import RELU
from test_replicate_stats import ADAPTIVE

from rcsweep_tools import load
from rcsweep_tools.load import STATUS, outcome_words
from rcsweep_tools.plot import series_note

WORDS = {"not_needed": r"not needed", "diverged": r"\bdiverged\b", "vanished": r"\bvanished\b",
         "failed": r"\bfailed\b", "pending": r"\bpending\b"}

SMALL = """[sweep]
name = "outcomes"
seed = 11
replicates = 4
[model]
mixer = "markov"
input = "sphere"
T = 8
d = 8
depth = 3
[axes]
lambda = [0.0, 0.5, 1.0]
"""
# (point, replicate) -> status: 2 failed at lambda = 0.5, 0 pending at lambda = 1
REWRITE = {(1, 0): 2, (2, 0): 0, (2, 1): 0}


def build(store, *args):
    from rcsweep_tools.plot_cli import build as build_figure, parser

    a = parser().parse_args([str(store), *args])
    fig = build_figure(load(store), a)
    fig.draw_without_rendering()
    return fig


def all_texts(fig):
    """Every text of a figure: legends, titles, captions, axis labels."""
    out = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and callable(a.get_text))]
    return [t for t in out if isinstance(t, str) and t]


def legend_texts(fig):
    legs = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    return [t.get_text() for leg in legs for t in leg.get_texts()]


def present(ds):
    """The outcomes (other than done) of a loaded store's tasks, by name."""
    return {STATUS[int(c)] for c in np.unique(ds["status"].values)} - {"done"}


def check_only_present_outcomes(texts, ds, must=()):
    """No text names an outcome the store has no task of; each of `must` is named somewhere."""
    have = present(ds)
    joined = "\n".join(texts)
    for name, pattern in WORDS.items():
        if name not in have:
            assert not re.search(pattern, joined), (name, [t for t in texts if re.search(pattern, t)])
    for name in must:
        assert name in have and re.search(WORDS[name], joined), (name, texts)


def markers(fig, kind):
    return [ln for ax in fig.axes for ln in ax.get_lines() if (ln.get_gid() or "").startswith(kind + ":")]


@pytest.fixture(scope="module")
def failing(run_sweep, tmp_path_factory):
    out = tmp_path_factory.mktemp("outcomes") / "failing.h5"
    shutil.copy(run_sweep(SMALL), out)
    with h5py.File(out, "r+") as f:
        tasks = f["tasks"][...]
        reps = int(f.attrs["replicates"])
        for (p, r), s in REWRITE.items():
            tasks["status"][p * reps + r] = s
        f["tasks"][...] = tasks
    return out


# ------------------------------------------------------------------------------------------------
def test_the_one_wording():
    assert outcome_words({"not_needed": 20}) == "20 not needed"
    assert outcome_words({"failed": 1, "diverged": 3, "done": 7}) == "3 diverged, 1 failed"
    assert outcome_words({"pending": 2, "vanished": 1, "not_needed": 4}) == "4 not needed, 1 vanished, 2 pending"
    assert outcome_words({"diverged": 2, "vanished": 1}, numbers=False, last=" or ") == "diverged or vanished"
    assert outcome_words({"diverged": 0, "done": 3}) == ""
    assert outcome_words({None: 2}) == "2 without a value"
    # a series' note: adaptive points are "not needed" and carry no hollow marker
    note, last, fewer, gaps = series_note([0, 0.5, 1], [1.0, 2.0, 3.0], [32, 12, 30], "lambda",
                                          [{}, {"not_needed": 20}, {"diverged": 1, "not_needed": 1}], 32)
    assert note == "n = 12 of 32 at lambda = 0.5: 20 not needed, n = 30 of 32 at lambda = 1: 1 not needed, 1 diverged"
    assert fewer.tolist() == [2] and last is None and gaps.size == 0
    # along layers, an adaptive point whose run replicates diverge and vanish: each named, hollow only where lost
    import xarray as xr
    from matplotlib.figure import Figure

    from rcsweep_tools.plot import line_band

    v = np.tile(np.linspace(0.9, 0.5, 9), (4, 1))
    v[2:] = np.nan
    v[0, 7:] = np.nan
    v[1, 5:] = np.nan
    da = xr.DataArray(v, dims=("replicate", "layer"), name="mu_rel",
                      coords={"layer": np.arange(9), "status": ("replicate", [3, 5, 4, 4])})
    ax = Figure().add_subplot()
    ln = line_band(ax, np.arange(9), da, "x")
    assert ln.series_note == "n = 2 of 4: 2 not needed, n 2→1 from layer 5, ends at layer 6: 2 not needed, 1 diverged, 1 vanished"
    (hollow,) = [m for m in ax.get_lines() if m.get_gid() == "fewer:x"]
    assert hollow.get_xdata().tolist() == [5, 6]


def test_adaptive_store_says_not_needed_and_draws_no_hollow_marker(run_sweep, capsys):
    store = run_sweep(ADAPTIVE)
    ds = load(store)
    assert present(ds) == {"not_needed"}  # adaptive replicates only: nothing went wrong
    nn = int((ds["status"] == 4).sum())
    reps = ds.sizes["replicate"]
    for args in (("--y", "sr_cov", "--x", "T", "--hue", "gap_fix"), ("--y", "sr_cov", "--hue", "gap_fix")):
        fig = build(store, *args)
        texts = all_texts(fig)
        check_only_present_outcomes(texts, ds, must=("not_needed",))
        assert not markers(fig, "fewer") and not markers(fig, "ends") and not markers(fig, "gap")
        assert f"tasks done ({nn} not needed)" in fig._suptitle.get_text()
        assert not any("fewer replicates" in t for t in texts)
    # against T: each point with replicates not needed says how many, at which T
    fig = build(store, "--y", "sr_cov", "--x", "T", "--hue", "gap_fix")
    notes = " ".join(legend_texts(fig))
    zdim = ds["T"].dims[0]
    n = ds["status"].to_series().eq(1).groupby(["gap_fix", zdim]).sum()
    for (gap, z), k in n.items():
        if k < reps:
            t = int(ds["T"].sel({zdim: z}))
            assert re.search(rf"n = {k} of {reps}( at T = [^:]*\b{t}\b[^:]*)?: {reps - k} not needed", notes), (gap, t, notes)
    # the summary table and the report name the same outcome
    from rcsweep_tools import summary
    from rcsweep_tools.report import provenance

    summary.main([str(store)])
    table = capsys.readouterr().out
    assert "not needed" in table and not re.search(r"diverged|vanished|failed|pending", table), table
    assert provenance(store)["tasks"] == f"{int((ds['status'] == 1).sum())} done, {nn} not needed"


def test_diverging_store_says_diverged(run_sweep):
    store = run_sweep(TINY["ls-fig3"])
    ds = load(store)
    assert "diverged" in present(ds)
    fig = build(store, "--y", "mu_rel", "--hue", "norm", "--col", "lambda", "--sel", "gate=none")
    texts = all_texts(fig)
    check_only_present_outcomes(texts, ds, must=("diverged",))
    assert markers(fig, "ends")
    words = outcome_words({k: 1 for k in present(ds)}, numbers=False, last=" or ")
    assert f"last finite value (after it no replicate has one: {words})" in legend_texts(fig) or \
        any(t.startswith("last finite value (after it no replicate has one: ") for t in legend_texts(fig))
    # the paper figure's caption names the outcome where its x marks are drawn
    from matplotlib.figure import Figure

    from rcsweep_tools.figures import FIGURES

    paper = Figure(layout="constrained")
    FIGURES["ls-fig3"].draw(ds, paper)
    caption = paper._supxlabel.get_text()
    assert "x: no replicate has a value after this layer (" in caption and "diverged" in caption, caption
    check_only_present_outcomes(all_texts(paper), ds, must=("diverged",))


def test_vanishing_store_says_vanished(run_sweep):
    store = run_sweep(RELU)
    ds = load(store)
    assert "vanished" in present(ds)
    for args in (("--y", "mu_rel", "--hue", "lambda"), ("--y", "mu_rel", "--x", "lambda")):
        fig = build(store, *args)
        check_only_present_outcomes(all_texts(fig), ds, must=("vanished",))


def test_failed_and_pending_tasks_are_named_and_drawn_hollow(failing, capsys):
    ds = load(failing)
    assert present(ds) == {"failed", "pending"}
    fig = build(failing, "--y", "sr_cov", "--x", "lambda")
    texts = all_texts(fig)
    check_only_present_outcomes(texts, ds, must=("failed", "pending"))
    notes = " ".join(legend_texts(fig))
    assert "n = 3 of 4 at lambda = 0.5: 1 failed" in notes and "n = 2 of 4 at lambda = 1: 2 pending" in notes, notes
    (fewer,) = markers(fig, "fewer")
    assert fewer.get_xdata().tolist() == [0.5, 1.0] and fewer.get_markerfacecolor() == "white"
    assert "fewer replicates than requested (the others failed or pending)" in legend_texts(fig)
    assert "tasks done (1 failed, 2 pending)" in fig._suptitle.get_text()
    # against layer, one line per lambda: the lines that miss replicates say which, at every layer
    fig = build(failing, "--y", "sr_cov", "--hue", "lambda")
    labels = legend_texts(fig)
    assert "0.5 (n = 3 of 4: 1 failed)" in labels and "1 (n = 2 of 4: 2 pending)" in labels, labels
    assert "0" in labels  # lambda = 0 misses nothing: no note
    check_only_present_outcomes(all_texts(fig), ds, must=("failed", "pending"))
    from rcsweep_tools import summary

    summary.main([str(failing)])
    rows = capsys.readouterr().out.splitlines()
    assert rows[2].rstrip().endswith(" 0") and rows[3].rstrip().endswith("1 failed") \
        and rows[4].rstrip().endswith("2 pending"), rows


# ------------------------------------------------------------------------------------------------
# a caption's n: the replicates behind the plotted values, not the number requested
def test_band_caption_counts_the_replicates_behind_the_values():
    import xarray as xr

    from rcsweep_tools.plot import band_text, replicate_counts

    v = np.arange(12.0).reshape(4, 3)  # replicate x layer
    full = xr.DataArray(v, dims=("replicate", "layer"))
    assert replicate_counts(full) == (4, 4)
    assert band_text("sd", replicate_counts(full)) == "band ± 1 sd of the replicates (n = 4)"
    assert band_text("sd", 4) == "band ± 1 sd of the replicates (n = 4)"  # an int as before
    part = v.copy()
    part[2:, 2] = np.nan   # two replicates lost at the last layer (adaptive rule, divergence)
    part[3, 1] = np.inf    # not finite: no value
    lost = xr.DataArray(part, dims=("replicate", "layer"))
    assert replicate_counts(lost) == (2, 4)
    assert band_text("sd", replicate_counts(lost)) == "band ± 1 sd of the replicates (n = 2–4)"
    # the replicate dimension found by name in any position; a point without any value is not drawn
    empty = xr.DataArray(np.full((3, 4), np.nan), dims=("layer", "replicate"))
    assert replicate_counts(lost.T, empty) == (2, 4)
    assert replicate_counts(empty) == (0, 0)
    assert band_text("none", (2, 4)) == "no band"


def test_paper_caption_counts_a_diverging_stores_replicates(run_sweep):
    from matplotlib.figure import Figure

    from rcsweep_tools.figures import FIGURES

    ds = load(run_sweep(TINY["ls-fig3"]))
    count = np.isfinite(ds["mu_rel"].transpose("replicate", ...).values).sum(axis=0)
    lo, hi = int(count[count > 0].min()), int(count.max())
    assert lo < hi == ds.sizes["replicate"], (lo, hi)  # replicates lost after their divergence
    paper = Figure(layout="constrained")
    FIGURES["ls-fig3"].draw(ds, paper)
    caption = paper._supxlabel.get_text()
    assert caption.endswith(f"band ± 1 sd of the replicates (n = {lo}–{hi}))"), caption
