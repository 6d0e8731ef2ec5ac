"""Mind the Gap figures on tiny stores the engine makes here: what each figure draws, read back
from the matplotlib artists, equals the store's numbers (means and ± 1 sd bands recomputed
here from the raw h5py datasets), theory curves equal their formulas, every figure command writes
PNG and SVG, and a store of the wrong sweep is refused. The sweep files of jobs/examples are
checked by `rcsweep plan`."""
import subprocess

import h5py
import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.figure import Figure

from conftest import BIN, SOURCE, plot_cli, plot_main

from rcsweep_tools import load
from rcsweep_tools.figures import FIGURES
from rcsweep_tools.plot import FigureDataError

MTG = [n for n, f in FIGURES.items() if f.paper == "Mind the Gap"]

FIG1 = """
[sweep]
name = "t-fig1"
seed = 3
replicates = 2
[model]
input = "orthonormal"
T = 16
d = 16
depth = 1
sigma_qk = 1.0
sigma_A = 0.7
[axes]
mixer = ["softmax", "markov", "relu"]
[output]
mixer_spectra = "last"
"""
WIDTH = """
[sweep]
name = "t-width"
seed = 3
replicates = 3
[model]
input = "orthonormal"
depth = 2
sigma_qk = "inv_sqrt_d"
[axes]
gap_fix = ["none", "perp"]
[[zip]]
mixer = ["markov", "softmax"]
norm = ["none", "layernorm"]
[[zip]]
T = [4, 8, 16]
d = [4, 8, 16]
"""
DEPTH = """
[sweep]
name = "t-depth"
seed = 3
replicates = 3
[model]
mixer = "markov"
input = "orthonormal"
T = 8
d = 8
depth = 4
[axes]
gap_fix = ["none", "perp"]
[[zip]]
lambda = [0.0, 0.0, 1.0, 1.0]
norm = ["none", "layernorm", "none", "layernorm"]
"""
GRAD = """
[sweep]
name = "t-grad"
seed = 3
replicates = 3
[model]
mixer = "markov"
input = "orthonormal"
depth = 3
[axes]
gap_fix = ["none", "perp"]
norm = ["none", "layernorm"]
[[zip]]
T = [4, 8]
d = [4, 8]
[output]
gradients = "all"
grad_probes = 4
"""
FIG7 = """
[sweep]
name = "t-fig7"
seed = 3
replicates = 2
[model]
mixer = "softmax"
input = "orthonormal"
T = 12
d = 16
depth = 3
sigma_qk = 1.0
norm = "layernorm"
[output]
mixer_spectra = "all"
"""
QC = """
[sweep]
name = "t-qc"
seed = 3
replicates = 2
[model]
mixer = "markov"
input = "orthonormal"
T = 40
d = 40
depth = 1
gap_fix = "perp"
[axes]
sigma_A = [0.5, 1.0]
[output]
mixer_spectra = "last"
"""
FIG6 = """
[sweep]
name = "t-fig6"
seed = 3
replicates = 3
[model]
mixer = "softmax"
input = "orthonormal"
depth = 2
sigma_qk = "inv_sqrt_d"
norm = "layernorm"
[axes]
gap_fix = ["none", "perp", "outliers"]
[[zip]]
T = [4, 8]
d = [4, 8]
[output]
gradients = "all"
grad_probes = 2
"""
LIMITS = """
[sweep]
name = "t-limits"
seed = 3
replicates = 3
[model]
mixer = "markov"
input = "orthonormal"
depth = 2
sigma_A = 0.5
gap_fix = "perp"
[[zip]]
T = [8, 12, 16, 24]
d = [8, 12, 16, 24]
"""
# mtg-limits is drawn and checked against the closed form in test_figures_mtg_limits.py
STORES = {"mtg-fig1": FIG1, "mtg-fig6": FIG6, "mtg-fig4a": WIDTH, "mtg-fig4b": DEPTH, "mtg-fig5": GRAD, "mtg-fig7": FIG7,
          "mtg-lemma-a6": QC, "mtg-limits": LIMITS}


class Raw:
    """The store through h5py only: per-task parameters, metrics, spectra."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            self.tasks = f["tasks"][...]
            pts = f["points"][...][self.tasks["point"]]
            self.p = {n: (np.char.decode(pts[n]) if pts[n].dtype.kind == "S" else pts[n]) for n in pts.dtype.names}
            self.layers = {m: f["layers"][m][...] for m in f["layers"]}
            self.grad = f["grad/log10_g_all"][...] if "grad" in f else None
            self.spectra = {k: f["spectra"][k][...] for k in f["spectra"]} if "spectra" in f else {}
        self.rep = self.tasks["replicate"]

    def rows(self, **where):
        ok = np.ones(len(self.tasks), bool)
        for k, v in where.items():
            ok &= self.p[k] == v
        return np.nonzero(ok)[0]

    def eig(self, t, layer):
        o, n = self.spectra["m_offset"][t, layer], self.spectra["m_length"][t]
        return self.spectra["m_eig_re"][o:o + n] + 1j * self.spectra["m_eig_im"][o:o + n]

    def m_sv(self, t, layer):
        o, n = self.spectra["m_offset"][t, layer], self.spectra["m_length"][t]
        return self.spectra["m_sv"][o:o + n]


SR = (1.0, np.inf)  # a stable rank sum s_i^p / s_1^p is >= 1: the bands are clipped to it
ANY = (-np.inf, np.inf)


def mean_band(samples, valid=ANY):
    """Mean and ± 1 sample sd band (the default band) of one row of replicate samples, computed
    independently and clipped to `valid`."""
    s = np.asarray(samples, float)
    s = s[~np.isnan(s)]
    m = s.mean()
    if len(s) < 2:
        return m, np.nan, np.nan
    h = s.std(ddof=1)
    return m, max(m - h, valid[0]), min(m + h, valid[1])


def draw(name, store):
    fig = Figure()
    FIGURES[name].draw(load(store), fig)
    return fig


def line(ax, label):
    """The mean line of `label` (its gid; the legend label may carry a note on divergence)."""
    found = [l for l in ax.get_lines() if l.get_gid() == f"mean:{label}" or (l.get_label() == label and not
                                                                           (l.get_gid() or "").startswith("mean:"))]
    assert len(found) == 1, (label, [l.get_label() for l in ax.get_lines()])
    return found[0]


def theory(ax, gid):
    found = [l for l in ax.get_lines() if l.get_gid() == gid]
    assert len(found) == 1, gid
    return found[0]


def band(ax, label):
    found = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_gid() == f"band:{label}"]
    assert len(found) == 1, label
    v = np.concatenate([p.vertices for p in found[0].get_paths()])
    return v


def assert_line_and_band(ax, label, x, samples_per_x, valid=ANY):
    """The line `label` is at x with the means of samples_per_x; its band spans lo..hi at each x."""
    ln = line(ax, label)
    exp = [mean_band(s, valid) for s in samples_per_x]
    np.testing.assert_allclose(ln.get_xdata(), x, rtol=1e-12)
    np.testing.assert_allclose(ln.get_ydata(), [e[0] for e in exp], rtol=1e-10, atol=1e-12)
    v = band(ax, label)
    for xi, (_, lo, hi) in zip(x, exp):
        ys = v[np.isclose(v[:, 0], xi, rtol=1e-12), 1]
        assert ys.size, (label, xi)
        np.testing.assert_allclose([ys.min(), ys.max()], [lo, hi], rtol=1e-9, atol=1e-12)


def panel(fig, title_start):
    found = [a for a in fig.axes if a.get_title() == title_start or a.get_title().startswith(title_start + ",")]
    assert len(found) == 1, (title_start, [a.get_title() for a in fig.axes])
    return found[0]


@pytest.fixture(scope="module")
def stores(run_sweep):
    return {name: run_sweep(text, ranks=2) for name, text in STORES.items()}


def test_every_mind_the_gap_figure_is_tested():
    assert sorted(MTG) == sorted(STORES)


def test_fig1_eigenvalues_and_circle(stores):
    s = stores["mtg-fig1"]
    raw, fig = Raw(s), draw("mtg-fig1", s)
    assert len(fig.axes) == 3
    for m in ("softmax", "markov", "relu"):
        ax = panel(fig, m)
        rows = raw.rows(mixer=m)
        eig = np.concatenate([raw.eig(t, 1) for t in rows])
        sc = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_gid() == f"eig:{m}"][0]
        np.testing.assert_array_equal(sc.get_offsets()[:, 0], eig.real)
        np.testing.assert_array_equal(sc.get_offsets()[:, 1], eig.imag)
        out = [c for c in ax.collections if c.get_gid() == f"outlier:{m}"][0]
        np.testing.assert_array_equal(out.get_offsets()[:, 0], [raw.eig(t, 1)[0].real for t in rows])
        circles = [l for l in ax.get_lines() if l.get_gid() == "theory:circle"]
        if m == "relu":
            assert not circles
            continue
        r = 0.7 / 4 if m == "markov" else np.sqrt(np.e - 1) / 4  # sigma_A / sqrt(T); sqrt(e^(sigma_qk^4) - 1) / sqrt(T)
        x, y = circles[0].get_xdata(), circles[0].get_ydata()
        np.testing.assert_allclose(np.hypot(x, y), r, rtol=1e-12)
    # a row-stochastic mixer has the eigenvalue 1 first
    assert np.allclose([raw.eig(t, 1)[0] for t in raw.rows(mixer="markov")], 1.0)


def test_fig4a_stable_rank_vs_T(stores):
    s = stores["mtg-fig4a"]
    raw, fig = Raw(s), draw("mtg-fig4a", s)
    Ts = [4, 8, 16]
    for title, mixer in (("A", "markov"), ("A(X) + LN", "softmax")):
        ax = panel(fig, title)
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        for ell in range(3):
            for gf in ("none", "perp"):
                label = f"ℓ={ell}" + (" ⊥" if gf == "perp" else "")
                samples = [raw.layers["sr_cov"][raw.rows(mixer=mixer, gap_fix=gf, T=T), ell] for T in Ts]
                assert all(len(x) == 3 for x in samples)
                assert_line_and_band(ax, label, Ts, samples, SR)
        np.testing.assert_array_equal(theory(ax, "theory:sr=1").get_ydata(), [1, 1, 1])
        t = theory(ax, "theory:sr=T")
        np.testing.assert_array_equal(t.get_xdata(), Ts)
        np.testing.assert_array_equal(t.get_ydata(), Ts)
    # the physics the figure shows: perp keeps a larger stable rank at layer 1
    ax = panel(fig, "A")
    assert line(ax, "ℓ=1 ⊥").get_ydata()[-1] > line(ax, "ℓ=1").get_ydata()[-1]


def test_fig4b_stable_rank_vs_depth(stores):
    s = stores["mtg-fig4b"]
    raw, fig = Raw(s), draw("mtg-fig4b", s)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    names = {(0.0, "none"): "A", (0.0, "layernorm"): "A + LN", (1.0, "none"): "A + skip", (1.0, "layernorm"): "A + skip + LN"}
    labels = {l.get_label() for l in ax.get_lines()}
    assert labels == set(names.values()) | {n + " ⊥" for n in names.values()}
    for (lam, norm), name in names.items():
        for gf in ("none", "perp"):
            rows = raw.rows(**{"lambda": lam}, norm=norm, gap_fix=gf)
            assert len(rows) == 3
            assert_line_and_band(ax, name + (" ⊥" if gf == "perp" else ""), np.arange(5),
                                 [raw.layers["sr_cov"][rows, ell] for ell in range(5)], SR)


def test_fig5_gradients_and_T_power_reference(stores):
    s = stores["mtg-fig5"]
    raw, fig = Raw(s), draw("mtg-fig5", s)
    ax_l, ax_t = fig.axes[:2]
    assert ax_t.get_xscale() == "log"
    names = {("none", "none"): "A", ("none", "layernorm"): "A + LN", ("perp", "none"): "A ⊥", ("perp", "layernorm"): "A + LN ⊥"}
    for (gf, norm), name in names.items():
        # vs depth at the largest T: g_{L,1} = log10_g_all[t, L-1, 0]
        rows = raw.rows(gap_fix=gf, norm=norm, T=8)
        assert_line_and_band(ax_l, name, [1, 2, 3], [raw.grad[rows, L - 1, 0] for L in (1, 2, 3)])
        assert_line_and_band(ax_t, name, [4, 8], [raw.grad[raw.rows(gap_fix=gf, norm=norm, T=T), 2, 0] for T in (4, 8)])
    # Prop. 3.6 reference: slope log10(T) per layer through plain A's first mean; slope L-1 in log10 T
    a_l1 = raw.grad[raw.rows(gap_fix="none", norm="none", T=8), 0, 0].mean()
    ref = theory(ax_l, "theory:T^(L-1) vs L")
    np.testing.assert_allclose(ref.get_ydata(), a_l1 + (np.array([1, 2, 3]) - 1) * np.log10(8), rtol=1e-12)
    a_t4 = raw.grad[raw.rows(gap_fix="none", norm="none", T=4), 2, 0].mean()
    ref = theory(ax_t, "theory:T^(L-1) vs T")
    np.testing.assert_allclose(ref.get_ydata(), a_t4 + 2 * (np.log10([4, 8]) - np.log10(4)), rtol=1e-12)
    # plain A explodes with depth, perp does not (Prop. 3.6, 3.8; gamma = 1)
    assert np.diff(line(ax_l, "A").get_ydata()).min() > 0.6  # ~ log10 T = 0.9 per layer
    assert np.diff(line(ax_l, "A").get_ydata()).min() > abs(np.diff(line(ax_l, "A ⊥").get_ydata())).max()


def test_fig7_spectra_across_layers(stores):
    s = stores["mtg-fig7"]
    raw, fig = Raw(s), draw("mtg-fig7", s)
    assert [a.get_title() for a in fig.axes] == ["layer ℓ = 1", "layer ℓ = 2", "layer ℓ = 3"]
    for ell, ax in zip((1, 2, 3), fig.axes):
        eig = np.concatenate([raw.eig(t, ell) for t in range(2)])
        sc = [c for c in ax.collections if c.get_gid() == f"eig:layer {ell}"][0]
        np.testing.assert_array_equal(sc.get_offsets()[:, 0], eig.real)
        np.testing.assert_array_equal(sc.get_offsets()[:, 1], eig.imag)


def test_lemma_a6_histogram_and_quarter_circle(stores):
    s = stores["mtg-lemma-a6"]
    raw, fig = Raw(s), draw("mtg-lemma-a6", s)
    assert len(fig.axes) == 2
    for ax, sigma in zip(fig.axes, (0.5, 1.0)):
        sv = np.sqrt(40) * np.concatenate([raw.m_sv(t, 1) for t in raw.rows(sigma_A=sigma)])
        bins = np.linspace(0, max(2 * sigma, sv.max()), 31)
        heights, _ = np.histogram(sv, bins=bins, density=True)
        bars = [p for p in ax.patches if p.get_gid() == f"hist:sigma_A={sigma}"] or \
               [p for p in ax.patches]
        np.testing.assert_allclose([b.get_height() for b in bars], heights, rtol=1e-12)
        np.testing.assert_allclose([b.get_x() for b in bars], bins[:-1], rtol=1e-12, atol=1e-12)
        q = theory(ax, "theory:quarter-circle")
        x = np.asarray(q.get_xdata())
        assert x[0] == 0 and np.isclose(x[-1], 2 * sigma)
        np.testing.assert_allclose(q.get_ydata(), np.sqrt(np.maximum(4 * sigma**2 - x**2, 0)) / (np.pi * sigma**2),
                                   rtol=1e-12, atol=1e-15)
        # the data follow the law: same mean within 10%
        assert abs(sv.mean() - 8 * sigma / (3 * np.pi)) < 0.1 * 8 * sigma / (3 * np.pi)


@pytest.mark.parametrize("name", sorted(STORES))
def test_figure_command_writes_png_and_svg(stores, name, tmp_path):
    for ext in ("png", "svg"):
        out = tmp_path / f"{name}.{ext}"
        code, _, err = plot_main(stores[name], name, "-o", out, "--dpi", "60")
        assert code == 0, err
        data = out.read_bytes()
        if ext == "png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
        else:
            assert b"<svg" in data[:2000] and data.count(b"<path") > 10


def test_fig6_perp_against_no_outliers(stores):
    s = stores["mtg-fig6"]
    raw, fig = Raw(s), draw("mtg-fig6", s)
    ax_w, ax_d, ax_g = fig.axes
    assert ax_w.get_xscale() == "log" and ax_w.get_yscale() == "log" and ax_d.get_yscale() == "log"
    for gf, name in (("none", "A(X) + LN"), ("perp", "A(X) + LN ⊥"), ("outliers", "A(X) + LN no outliers")):
        assert_line_and_band(ax_w, name, [4, 8], [raw.layers["sr_cov"][raw.rows(gap_fix=gf, T=T), 1] for T in (4, 8)], SR)
        rows = raw.rows(gap_fix=gf, T=8)
        assert len(rows) == 3
        assert_line_and_band(ax_d, name, [0, 1, 2], [raw.layers["sr_cov"][rows, ell] for ell in range(3)], SR)
        assert_line_and_band(ax_g, name, [1, 2], [raw.grad[rows, L - 1, 0] for L in (1, 2)])


@pytest.mark.parametrize("name,wrong", [("mtg-fig1", "mtg-fig4a"), ("mtg-fig6", "mtg-fig5"), ("mtg-fig4a", "mtg-fig7"), ("mtg-fig4b", "mtg-fig1"),
                                        ("mtg-fig5", "mtg-fig4b"), ("mtg-fig7", "mtg-fig1"), ("mtg-lemma-a6", "mtg-fig5"),
                                        ("mtg-limits", "mtg-fig4a"), ("mtg-fig4a", "mtg-limits")])
def test_store_of_another_sweep_is_refused(stores, name, wrong, tmp_path):
    with pytest.raises(FigureDataError, match=FIGURES[name].sweep):
        draw(name, stores[wrong])
    if name != "mtg-fig1":  # the command line once (test_plot_cli.py has more): a subprocess is slow
        return
    proc = plot_cli(stores[wrong], name, "-o", tmp_path / "x.png")
    assert proc.returncode == 2
    assert f"cannot draw {name}" in proc.stderr and f"jobs/examples/{FIGURES[name].sweep}" in proc.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("name", sorted(STORES))
def test_example_sweep_files_are_valid(name):
    sweep = SOURCE / "jobs" / "examples" / FIGURES[name].sweep
    assert sweep.is_file(), sweep
    proc = subprocess.run([BIN, "plan", str(sweep)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
