"""Statistics over replicates when points have different numbers of done replicates (adaptive
replicates): load.replicate_stats, tidy(by="point"), the figures' standard error and the summary's
`n` column. The store is a real one whose /tasks is rewritten with the five-value status enum
(4 = not_needed) and a mix of statuses; rows of tasks that are not done hold junk that must not count."""
import shutil

import h5py
import numpy as np
import pytest

from rcsweep_tools import load, tidy
from rcsweep_tools.load import replicate_stats
from rcsweep_tools.plot import mean_band

SWEEP = """[sweep]
name = "adaptive"
seed = 7
[sweep.replicates]
min = 2
max = 5
step = 1
targets = [{ metric = "sr_cov", rel_se = 1e-9 }]
[model]
mixer = "markov"
T = 8
d = 8
depth = 2
[axes]
sigma_A = [0.5, 1.0, 2.0]
"""
ENUM = {"pending": 0, "done": 1, "failed": 2, "diverged": 3, "not_needed": 4}
# (point, replicate) -> status; every other task stays done (the sweep's target is never met, so
# every replicate runs). not_needed only from the rule's min = 2, as the engine decides it.
STATUSES = {(0, 2): 2, (0, 3): 4, (0, 4): 4, (1, 2): 0, (1, 4): 3, (2, 1): 2, (2, 2): 4, (2, 3): 4, (2, 4): 4}
JUNK = 1.0e6


@pytest.fixture(scope="module")
def store(run_sweep, tmp_path_factory):
    src = run_sweep(SWEEP)
    out = tmp_path_factory.mktemp("adaptive") / "adaptive.h5"
    shutil.copy(src, out)
    with h5py.File(out, "r+") as f:
        tasks = f["tasks"][...]
        reps = int(f.attrs["replicates"])
        status = tasks["status"].astype(np.int8)
        for (p, r), s in STATUSES.items():
            status[p * reps + r] = s
        # the store as an rcsweep with adaptive replicates writes it: a five-value enum
        fields = [(n, h5py.enum_dtype(ENUM, basetype="i1") if n == "status" else tasks.dtype.fields[n][0])
                  for n in tasks.dtype.names]
        new = np.zeros(len(tasks), dtype=fields)
        for n in tasks.dtype.names:
            new[n] = status if n == "status" else tasks[n]
        attrs = dict(f["tasks"].attrs)
        del f["tasks"]
        d = f.create_dataset("tasks", data=new)
        for k, v in attrs.items():
            d.attrs[k] = v
        sr = f["layers/sr_cov"][...]
        for (p, r), s in STATUSES.items():
            if s != 3:  # junk in the rows of tasks that are not done (a diverged one keeps its rows)
                sr[p * reps + r] = JUNK
        f["layers/sr_cov"][...] = sr
    return out


def raw(store):
    with h5py.File(store, "r") as f:
        return f["layers/sr_cov"][...], f["tasks"]["status"][...], int(f.attrs["replicates"])


def test_replicate_stats_count_only_done_tasks(store):
    sr, status, reps = raw(store)
    st = replicate_stats(store)
    done_per_point = (status.reshape(-1, reps) == 1).sum(axis=1)
    assert done_per_point.tolist() == [2, 3, 1]  # different n per point
    assert st["n_done"].values.tolist() == done_per_point.tolist()
    assert st["n_not_needed"].values.tolist() == [2, 0, 3]
    assert st["n_pending"].values.tolist() == [0, 1, 0]
    assert st["n_diverged"].values.tolist() == [0, 1, 0] and st["n_failed"].values.tolist() == [1, 0, 1]
    for p in range(3):
        rows = sr[p * reps:(p + 1) * reps][status[p * reps:(p + 1) * reps] == 1]
        for layer in range(sr.shape[1]):
            x = rows[:, layer]
            cell = st.isel(sigma_A=p).sel(layer=layer)
            assert int(cell["sr_cov_n"]) == len(x)
            assert float(cell["sr_cov"]) == pytest.approx(x.mean(), rel=1e-12)
            if len(x) >= 2:
                assert float(cell["sr_cov_se"]) == pytest.approx(x.std(ddof=1) / np.sqrt(len(x)), rel=1e-10)
            else:
                assert np.isnan(float(cell["sr_cov_se"]))
    assert float(st["sr_cov"].max()) < JUNK / 10  # no junk row counted


def test_load_masks_not_needed_like_pending(store):
    ds = load(store)
    assert set(np.unique(ds["status"].values).tolist()) == {0, 1, 2, 3, 4}
    for (p, r), s in STATUSES.items():
        v = ds["sr_cov"].isel(sigma_A=p, replicate=r).values
        if s == 3:
            assert np.isfinite(v).any()  # a diverged task keeps its rows (existing behaviour)
        else:
            assert np.isnan(v).all(), (p, r, s)


def test_tidy_by_point_has_n_and_se(store):
    df = tidy(store, by="point")
    st = replicate_stats(store)
    nl = st.sizes["layer"]
    assert len(df) == 3 * nl
    for p in range(3):
        sub = df[df.point == p]
        assert sub["n_done"].tolist() == [int(st["n_done"][p])] * nl
        assert np.allclose(sub["sr_cov"], st["sr_cov"].isel(sigma_A=p).values, equal_nan=True)
        assert np.allclose(sub["sr_cov_se"], st["sr_cov_se"].isel(sigma_A=p).values, equal_nan=True)
        assert sub["sr_cov_n"].tolist() == st["sr_cov_n"].isel(sigma_A=p).values.tolist()
        assert sub["sigma_A"].tolist() == [[0.5, 1.0, 2.0][p]] * nl
    per_task = tidy(store)  # the default stays one row per (task, layer)
    assert len(per_task) == 15 * nl and "sr_cov_se" not in per_task
    with pytest.raises(ValueError, match="by must be"):
        tidy(store, by="nope")


def test_band_standard_error_is_the_loaders(store):
    ds = load(store)
    st = replicate_stats(ds)
    # point 0 has no diverged task: the figures' "se" band is mean +- the loader's standard error
    da = ds["sr_cov"].isel(sigma_A=0)
    mean, lo, hi = mean_band(da, band="se", valid=(None, None))
    assert np.allclose(mean.values, st["sr_cov"].isel(sigma_A=0).values)
    assert np.allclose((hi - mean).values, st["sr_cov_se"].isel(sigma_A=0).values)


def test_summary_prints_n_per_point(store, capsys):
    from rcsweep_tools import summary

    summary.main([str(store)])
    lines = capsys.readouterr().out.splitlines()
    import re

    spans = [m.span() for m in re.finditer(r"-+", lines[1])]  # the rule under the header gives the columns
    cells = [[line[a:b].strip() for a, b in spans] for line in lines]
    head = cells[0]
    assert head[-2:] == ["n", "not done"]
    assert [row[head.index("n")] for row in cells[2:]] == ["2", "3", "1"]
    # every other replicate by its outcome's own name (load.outcome_words)
    assert [row[-1] for row in cells[2:]] == ["2 not needed, 1 failed", "1 diverged, 1 pending", "3 not needed, 1 failed"]
    sr, status, reps = raw(store)
    x = sr[:reps][status[:reps] == 1, -1]  # point 0's done replicates at the last layer
    assert cells[2][head.index("sr_cov@L2")] == f"{x.mean():.4g} ± {x.std(ddof=1):.2g}"  # the sample sd, as the bands
    assert cells[4][head.index("sr_cov@L2")] == f"{sr[2 * reps, -1]:.4g}"  # one done replicate: no sd


def test_report_and_plot_title_count_not_needed_tasks(store, tmp_path):
    from conftest import plot_main
    from rcsweep_tools.report import provenance

    counts = {k: list(STATUSES.values()).count(k) for k in range(5)}
    counts[1] = 15 - len(STATUSES)
    others = f"{counts[4]} not needed, {counts[3]} diverged, {counts[2]} failed, {counts[0]} pending"
    assert provenance(store)["tasks"] == f"{counts[1]} done, {others}"
    import matplotlib

    matplotlib.use("Agg")
    from rcsweep_tools.plot_cli import build, parser

    a = parser().parse_args([str(store), "--y", "sr_cov"])
    fig = build(load(store), a)
    assert f"{counts[1]}/{15 - counts[4]} tasks done ({others})" in fig._suptitle.get_text()
    code, out, err = plot_main(store, "--y", "sr_cov", "-o", tmp_path / "sr.png")
    assert code == 0, err


ADAPTIVE = """[sweep]
name = "adaptive-real"
seed = 3
[sweep.replicates]
min = 3
max = 15
step = 3
targets = [{ metric = "sr_cov", layer = "last", rel_se = 0.03 }]
[model]
mixer = "markov"
depth = 2
[axes]
gap_fix = ["none", "perp"]
[[zip]]
T = [8, 16, 32]
d = [8, 16, 32]
"""


def test_a_real_adaptive_store_meets_its_targets_where_it_stopped(run_sweep):
    """The engine's adaptive rule and the toolkit's statistics agree: every point that stopped
    before max has sr_cov's relative standard error at the last layer within the target, the rest
    of its replicates are not needed, and n varies over the points."""
    st = replicate_stats(run_sweep(ADAPTIVE), metrics=["sr_cov"]).isel(layer=-1)
    n = st["n_done"].values.ravel()
    rel = (st["sr_cov_se"] / abs(st["sr_cov"])).values.ravel()
    assert len(set(n.tolist())) > 1, n  # points used different numbers of replicates
    assert np.all((n - 3) % 3 == 0) and n.min() >= 3 and n.max() <= 15
    assert np.all(rel[n < 15] <= 0.03 * (1 + 1e-9)), (n, rel)
    assert np.all(st["n_not_needed"].values.ravel() == 15 - n)
