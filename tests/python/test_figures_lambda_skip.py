"""Lambda-skip figures (scripts/rcsweep_tools/figures/lambda_skip.py) on tiny stores the engine
makes in the test run: every line drawn (read back from the matplotlib artists) equals the mean
over replicates recomputed here from the raw h5py datasets, every band equals mean ± sd (the
default; with band="ci" mean ± t·sd/√n), a series whose replicates all diverge is marked where it
ends and its legend entry says so,
the Theorem 4.1 curves and maps equal their formulas (computed here by another route: through
/theory/lambda_min and /theory/b instead of S and C_M), and the sweep files of the figures plan."""
import subprocess
import warnings

import h5py
import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy import stats

from conftest import BIN, SOURCE, plot_cli

from rcsweep_tools import load
from rcsweep_tools.figures import FIGURES

TINY = {
    "ls-fig1": """
[sweep]
name = "t_fig1"
seed = 5
replicates = 3
[model]
input = "sphere"
T = 8
d = 8
depth = 6
norm = "rms"
value_scale = "inv_sqrt_d"
[axes]
mixer = ["softmax", "ssd"]
lambda = [-1.0, 0.0, 1.0, 100000.0]
""",
    "ls-fig2": """
[sweep]
name = "t_fig2"
seed = 5
replicates = 3
[model]
input = "sphere"
T = 8
d = 8
depth = 5
norm = "rms"
value_scale = "inv_sqrt_d"
collapse_rate = 0.8
[axes]
mixer = ["softmax", "ssd"]
lambda = [-100000.0, -1.0, 0.0, 0.5, 1.0, 100000.0]
""",
    "ls-fig3": """
[sweep]
name = "t_fig3"
seed = 5
replicates = 3
[model]
mixer = "ssd"
input = "sphere"
T = 8
d = 8
depth = 16
[axes]
lambda = [0.0, 1.0]
gate = ["none", "silu"]
norm = ["none", "layernorm"]
""",
    "ls-fig4": """
[sweep]
name = "t_fig4"
seed = 5
replicates = 3
[model]
mixer = "s4d"
input = "sphere"
T = 8
d = 8
depth = 5
[axes]
lambda = [0.0, 1.0]
norm = ["none", "layernorm"]
""",
    "ls-thm41": """
[sweep]
name = "t_thm41"
seed = 5
replicates = 3
[model]
mixer = "softmax"
input = "orthonormal"
T = 8
d = 8
depth = 6
norm = "rms"
value_scale = "inv_sqrt_d"
collapse_rate = 0.85
[axes]
lambda = [-100000.0, 0.0, 1.0, 100.0, 10000.0, 1000000.0]
""",
}


class Raw:
    """The store read with h5py only: task rows selected by point parameters."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            self.points = f["points"][...]
            self.tasks = f["tasks"][...]
            self.layers = {k: f["layers"][k][...] for k in f["layers"]}
            self.theory = {k: f["theory"][k][...] for k in f["theory"]}
            self.attrs = dict(f.attrs)
        self.reps = int(self.attrs["replicates"])

    def rows(self, **where):
        """Task rows (ordered by replicate) of the one point with these parameter values."""
        ok = np.ones(len(self.points), bool)
        for k, v in where.items():
            col = self.points[k]
            ok &= (np.char.decode(col) == v) if col.dtype.kind == "S" else (col == v)
        (pts,) = np.nonzero(ok)
        assert len(pts) == 1, (where, pts)
        rows = np.nonzero(self.tasks["point"] == pts[0])[0]
        rows = rows[np.argsort(self.tasks["replicate"][rows])]
        assert len(rows) == self.reps
        # load() masks pending/failed tasks; every task here finished (done, diverged or vanished)
        assert np.isin(self.tasks["status"][rows], (1, 3, 5)).all()
        return rows


# The range each plotted quantity can take, from its definition: the bands are clipped to it.
MU_REL = (0.0, 1.0)     # mu(X) = ||X - 1 xbar^T||_F <= ||X||_F: centring is an orthogonal projection
RES_REL = (0.0, np.inf)


def mean_band(a, valid=MU_REL, band="sd"):
    """mean over axis 0 ignoring NaN, and mean -/+ one sample sd (band "sd") or the t-based 95% half
    width (band "ci"), NaN where n < 2, clipped to `valid`."""
    a = np.asarray(a, float)
    n = np.isfinite(a).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: every replicate diverged
        mean = np.nanmean(a, axis=0)
        sd = np.array([np.std(c[np.isfinite(c)], ddof=1) if np.isfinite(c).sum() >= 2 else np.nan for c in a.T])
    if band == "sd":
        half = sd
    else:
        half = sd / np.sqrt(np.maximum(n, 1)) * np.where(n >= 2, stats.t.ppf(0.975, np.maximum(n - 1, 1)), np.nan)
    return mean, np.clip(mean - half, *valid), np.clip(mean + half, *valid)


def draw(name, store, band="sd"):
    fig = Figure(layout="constrained")
    FIGURES[name].draw(load(store), fig, band=band)
    fig.draw_without_rendering()  # lay out (constrained layout) as saving does: the figure must draw without error
    return fig


def panel(fig, text):
    axes = [ax for ax in fig.axes if text in ax.get_title()]
    assert len(axes) == 1, [ax.get_title() for ax in fig.axes]
    return axes[0]


def line(ax, label):
    """The mean line of `label` (its gid; its legend label may carry a note on divergence)."""
    found = [ln for ln in ax.get_lines() if ln.get_gid() == f"mean:{label}"]
    assert len(found) == 1, (label, [ln.get_label() for ln in ax.get_lines()])
    return found[0]


def gid_lines(ax, prefix):
    return {ln.get_gid(): ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)}


def check_band(ax, label, x, lo, hi):
    """The band polygon of `label` has, at every x where lo/hi are finite, vertices at lo and hi."""
    bands = [c for c in ax.collections if c.get_gid() == f"band:{label}"]
    ok = np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        assert not bands
        return
    assert len(bands) == 1, label
    verts = np.concatenate([p.vertices for p in bands[0].get_paths()])
    for xi, l, h in zip(np.asarray(x)[ok], lo[ok], hi[ok]):
        ys = verts[np.isclose(verts[:, 0], xi), 1]
        assert np.isclose(ys, l, rtol=1e-9, atol=1e-12).any(), (label, xi, l, ys)
        assert np.isclose(ys, h, rtol=1e-9, atol=1e-12).any(), (label, xi, h, ys)


def check_mean_line(ax, label, x, values, valid=MU_REL, band="sd"):
    mean, lo, hi = mean_band(values, valid, band)
    ln = line(ax, label)
    np.testing.assert_array_equal(ln.get_xdata(), x)
    np.testing.assert_allclose(ln.get_ydata(), mean, rtol=1e-12, atol=1e-15, equal_nan=True)
    check_band(ax, label, x, lo, hi)
    return mean


@pytest.fixture(scope="module")
def stores(run_sweep):
    return {name: run_sweep(text) for name, text in TINY.items()}


def test_fig1_lines_and_bound(stores):
    raw = Raw(stores["ls-fig1"])
    fig = draw("ls-fig1", stores["ls-fig1"])
    a = float(raw.points["collapse_rate"][0])
    L = int(raw.attrs["max_depth"])
    layers = np.arange(L + 1)
    n_bounds = 0
    for mixer in ("softmax", "ssd"):
        ax = panel(fig, f"mixer = {mixer}")
        theory = gid_lines(ax, "theory:")
        for lam in (-1.0, 0.0, 1.0, 100000.0):
            r = raw.rows(mixer=mixer, **{"lambda": lam})
            check_mean_line(ax, rf"$\lambda$ = {lam:g}", layers, raw.layers["mu_rel"][r])
            # the bound curve is drawn exactly where every replicate satisfies (7): |lambda| > lambda_min
            holds = (abs(lam) > raw.theory["lambda_min"][r]).all()
            gid = f"theory:bound:{lam:g}"
            assert (gid in theory) == holds, (mixer, lam)
            if holds:
                n_bounds += 1
                mu, fro = raw.layers["mu"][r], raw.layers["fro"][r]
                want = np.mean(a ** (layers / 2) * mu[:, :1] / fro, axis=0)
                np.testing.assert_allclose(theory[gid].get_ydata(), want, rtol=1e-12)
    assert n_bounds >= 2  # lambda = 1e5 satisfies (7) for both mixers: the theory branch is tested
    # one legend, right of the panels so that it hides no curve, lambda in increasing order, one
    # colour per lambda (the same in both panels)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == 1
    box = legends[0].get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)
    texts = [t.get_text() for t in legends[0].get_texts()]
    assert texts[:4] == [rf"$\lambda$ = {v:g}" for v in (-1.0, 0.0, 1.0, 100000.0)] and "Thm 4.1" in texts[4]
    colours = {t: [tuple(line(panel(fig, f"mixer = {m}"), t).get_color()) for m in ("softmax", "ssd")] for t in texts[:4]}
    assert all(a == b for a, b in colours.values()) and len({a for a, _ in colours.values()}) == 4
    # lambda = 0 collapses (softmax) while 1e5 keeps mu: the figure shows the paper's effect
    ax = panel(fig, "mixer = softmax")
    assert line(ax, r"$\lambda$ = 0").get_ydata()[-1] < 0.5 * line(ax, r"$\lambda$ = 100000").get_ydata()[-1]
    # the signed lambda axis gets a diverging map: negatives blue, 0 grey, positives red
    rgb = {lam: np.array(line(ax, rf"$\lambda$ = {lam:g}").get_color()[:3]) for lam in (-1.0, 0.0, 1.0, 100000.0)}
    assert rgb[-1.0][2] > rgb[-1.0][0] + 0.3 and rgb[1.0][0] > rgb[1.0][2] + 0.3 and rgb[1e5][0] > rgb[1e5][2] + 0.3
    assert np.ptp(rgb[0.0]) < 0.05
    # --band ci: the t-based 95% interval instead of ± 1 sd, said in the caption
    fig = draw("ls-fig1", stores["ls-fig1"], band="ci")
    assert "95%" in fig._supxlabel.get_text()
    for mixer in ("softmax", "ssd"):
        r = raw.rows(mixer=mixer, **{"lambda": 1.0})
        check_mean_line(panel(fig, f"mixer = {mixer}"), r"$\lambda$ = 1", layers, raw.layers["mu_rel"][r], band="ci")


def test_fig2_last_layer_and_theorem(stores):
    raw = Raw(stores["ls-fig2"])
    fig = draw("ls-fig2", stores["ls-fig2"])
    a = 0.8
    lams = np.array([-100000.0, -1.0, 0.0, 0.5, 1.0, 100000.0])
    for mixer in ("softmax", "ssd"):
        ax = panel(fig, f"mixer = {mixer}")
        rows = np.array([raw.rows(mixer=mixer, **{"lambda": v}) for v in lams])  # [lambda, replicate]
        check_mean_line(ax, "data", lams, raw.layers["mu_rel"][rows, -1].T)
        th = gid_lines(ax, "theory:")
        lmin = raw.theory["lambda_min"][rows]
        np.testing.assert_allclose(th["theory:lambda_min:+1"].get_xdata(), [lmin.mean()] * 2, rtol=1e-12)
        np.testing.assert_allclose(th["theory:lambda_min:-1"].get_xdata(), [-lmin.mean()] * 2, rtol=1e-12)
        holds = (np.abs(lams)[:, None] > lmin).all(axis=1)
        assert holds.any() and not holds.all()
        mu, fro = raw.layers["mu"][rows], raw.layers["fro"][rows]
        L = mu.shape[-1] - 1
        want = np.where(holds, np.mean(a ** (L / 2) * mu[..., 0] / fro[..., -1], axis=1), np.nan)
        np.testing.assert_allclose(th["theory:bound"].get_xdata(), lams)
        np.testing.assert_allclose(th["theory:bound"].get_ydata(), want, rtol=1e-12, equal_nan=True)
        assert ax.get_xscale() == "symlog"


@pytest.mark.parametrize("name,switch,labels", [
    ("ls-fig3", "gate", {"none": "no gate", "silu": "gate"}),
    ("ls-fig4", "lambda", {0.0: "no skip", 1.0: "skip (lambda = 1)"}),
])
def test_ablations(stores, name, switch, labels):
    raw = Raw(stores[name])
    fig = draw(name, stores[name])
    L = int(raw.attrs["max_depth"])
    layers = np.arange(L + 1)
    panels = [("lambda", v) for v in (0.0, 1.0)] if name == "ls-fig3" else [(None, None)]
    markers = 0
    for pdim, pv in panels:
        ax = panel(fig, f"lambda = {pv:g}") if pdim else fig.axes[0]
        for sv, slabel in labels.items():
            for norm in ("none", "layernorm"):
                where = {switch: sv, "norm": norm}
                if pdim:
                    where[pdim] = pv
                r = raw.rows(**where)
                label = f"{slabel}, norm = {norm}"
                mean = check_mean_line(ax, label, layers, loaded_rows(raw, stores[name], r, "mu_rel"))
                div = [ln for ln in ax.get_lines() if ln.get_gid() == f"ends:{label}"]
                shown = line(ax, label).get_label()
                if np.isnan(mean).all():  # no replicate the loader keeps has a value: said in the legend
                    assert not div and "(no value: " in shown, shown
                    markers += 1
                elif np.isnan(mean).any():  # every replicate diverged: an x at the last layer with a mean
                    last = np.nonzero(np.isfinite(mean))[0][-1]
                    assert len(div) == 1
                    assert div[0].get_xdata()[0] == last and div[0].get_ydata()[0] == mean[last]
                    # the legend entry says where it ends and why (the tasks' messages)
                    assert f"ends at layer {last}: " in shown and shown.startswith(label + " ("), shown
                    assert "diverged" in shown or "vanished" in shown
                    note = line(ax, label).series_note  # the legend entry (shared by the panels) carries it
                    assert any(t.get_text().startswith(label + " (") and note in t.get_text()
                               for lg in legends(fig) for t in lg.get_texts())
                    markers += 1
                else:
                    assert not div
    if name == "ls-fig3":  # without a norm the SSD stack blows up: the marker branch is exercised
        assert markers >= 2 and (raw.tasks["status"] == 3).any()


def loaded_rows(raw, store, rows, metric):
    """The raw /layers rows of `rows` as load() presents them: a task load() masks (status it does
    not keep, e.g. pending) is all NaN; a diverged one keeps the layers it reached."""
    kept = np.isfinite(load(store)[metric].values)  # layer 0 (the input) is finite in every task run
    ids = set(load(store)["task"].values[kept.any(axis=-1)].ravel().tolist())
    values = raw.layers[metric][rows].copy()
    values[[raw.tasks["id"][t] not in ids for t in rows]] = np.nan
    return values


def legends(fig):
    return [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)


def thm41_expected(raw):
    lams = raw.points["lambda"]
    a = float(raw.points["collapse_rate"][0])
    L = int(raw.attrs["max_depth"])
    depths = np.arange(1, L + 1)
    rows = np.array([raw.rows(**{"lambda": v}) for v in lams])        # [lambda, replicate]
    cond = np.abs(lams)[:, None] > raw.theory["lambda_min"][rows]      # (7) via lambda_min
    b = raw.theory["b"][rows][..., None] * a ** (L - depths)           # b(L) from the store's b(L_max)
    mu = raw.layers["mu"][rows]
    applies = cond[..., None] & (mu[..., :1] ** 2 >= b)
    code = np.where(applies, 2, np.where(cond[..., None], 1, 0)).min(axis=1).T   # [L, lambda]
    held = mu[..., 1:] ** 2 >= a ** depths * mu[..., :1] ** 2
    frac = held.mean(axis=1).T
    return lams, depths, code, frac, applies, held, rows


def test_thm41_map(stores):
    raw = Raw(stores["ls-thm41"])
    fig = draw("ls-thm41", stores["ls-thm41"])
    lams, depths, code, frac, applies, held, rows = thm41_expected(raw)
    images = {im.get_gid(): im for ax in fig.axes for im in ax.get_images()}
    np.testing.assert_array_equal(np.asarray(images["map:code"].get_array()), code)
    np.testing.assert_allclose(np.asarray(images["map:held"].get_array()), frac, rtol=1e-12)
    assert set(np.unique(code)) == {0, 1, 2}  # all three regimes appear in the tiny sweep
    # '!' marks a cell where a replicate has the bound applying and violated (a counterexample)
    bad = (applies & ~held).any(axis=1).T
    texts = [t for ax in fig.axes for t in ax.texts if t.get_gid() == "violation"]
    assert len(texts) == int(bad.sum())
    # at L = L_max the map's formulas agree with the engine's per-task /theory flags
    np.testing.assert_array_equal(applies[..., -1], raw.theory["bound_applies"][rows] == 1)
    np.testing.assert_array_equal(held[..., -1], raw.theory["bound_holds"][rows] == 1)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"{v:g}" for v in lams]


def test_thm41_formulas_match_store(stores):
    """condition_holds and b_of_depth (used by the map) reproduce /theory/lambda_min and /theory/b."""
    from rcsweep_tools.figures.lambda_skip import b_of_depth, condition_holds

    raw = Raw(stores["ls-thm41"])
    lam = raw.points["lambda"][raw.tasks["point"]]
    a = float(raw.points["collapse_rate"][0])
    S, C = raw.theory["S"], raw.theory["C_M"]
    np.testing.assert_array_equal(condition_holds(lam, S, C, a), np.abs(lam) > raw.theory["lambda_min"])
    b = b_of_depth(lam, S, C, a, 8, 8, int(raw.attrs["max_depth"]))
    np.testing.assert_allclose(b, raw.theory["b"], rtol=1e-10, equal_nan=True)
    assert np.isnan(b).any() and np.isfinite(b).any()


def test_wrong_store_is_a_usage_error(stores, tmp_path):
    """ls-thm41 on the ablation store: exit 2 naming what is missing and the sweep file to run."""
    p = plot_cli(stores["ls-fig4"], "ls-thm41", "-o", tmp_path / "x.png")
    assert p.returncode == 2, p
    assert "ls_thm41.toml" in p.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("name", ["ls-fig1", "ls-fig2", "ls-fig3", "ls-fig4", "ls-thm41"])
def test_registered_sweep_files_plan(name):
    f = FIGURES[name]
    assert f.paper == "Lambda-skip"
    p = subprocess.run([BIN, "plan", str(SOURCE / "jobs" / "examples" / f.sweep)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_cli_png(stores, tmp_path):
    out = tmp_path / "fig.png"
    p = plot_cli(stores["ls-thm41"], "ls-thm41", "-o", out)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
