"""rcsweep-plot STORE mtg-limits: the finite-T means of the perp Markov stack, their extrapolation
T -> infinity and the free-probability limit (docs/ANALYTIC.md). The store is jobs/examples/mtg_limits.toml
made smaller on the command line (16 replicates, T = d up to 384: about 2 s on one rank); on it the
extrapolation must recover the closed-form limit at every depth within 3 of its standard uncertainties."""
import h5py
import numpy as np
import pytest
from matplotlib.figure import Figure

from conftest import SOURCE, plot_main
from rcsweep_tools import load
from rcsweep_tools.analytic import perp_markov_limits
from rcsweep_tools.extrapolate import fit_limit
from rcsweep_tools.figures import FIGURES
from rcsweep_tools.figures.mind_the_gap import LIMIT_FITS

SWEEP = SOURCE / "jobs" / "examples" / "mtg_limits.toml"
SIZES = [32, 48, 64, 96, 128, 192, 256, 384]
SMALL = ("sweep.replicates=16", f"zip[0].T={SIZES}".replace(" ", ""), f"zip[0].d={SIZES}".replace(" ", ""))


@pytest.fixture(scope="module")
def store(run_sweep):
    return run_sweep(SWEEP, args=SMALL)


@pytest.fixture(scope="module")
def drawn(store):
    fig = Figure(layout="constrained")
    FIGURES["mtg-limits"].draw(load(store), fig)
    return fig


def artist(fig, gid):
    hits = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]
    assert len(hits) == 1, gid
    return hits[0]


def raw_means(store, metric):
    """Per T and layer: mean and standard error over done tasks, from h5py alone."""
    with h5py.File(store, "r") as f:
        tasks, points = f["tasks"][...], f["points"][...]
        sr, sx = f["layers/sr_cov"][...], f["layers/sr_x"][...]
    T = points["T"][tasks["point"]].astype(float)
    v = (sr if metric == "sr_cov" else sx ** 2 / sr) / T[:, None]
    done = tasks["status"] == 1
    out = {}
    for t in SIZES:
        rows = v[done & (T == t)]
        out[t] = rows.mean(axis=0), rows.std(axis=0, ddof=1) / np.sqrt(len(rows))
    return out


@pytest.mark.parametrize("metric", list(LIMIT_FITS))
def test_extrapolation_recovers_the_free_probability_limit(store, drawn, metric):
    _, power, degree = LIMIT_FITS[metric]
    means = raw_means(store, metric)
    T = np.array(SIZES, dtype=float)
    for ell in range(1, 5):
        # the plotted means are the store's, the plotted limit is the fit of them
        x, y = artist(drawn, f"mean:{metric}:L={ell}").get_data()
        assert np.allclose(x, T ** -power)
        m = np.array([means[t][0][ell] for t in SIZES])
        se = np.array([means[t][1][ell] for t in SIZES])
        assert np.allclose(y, m, rtol=1e-12)
        fit = fit_limit(T, m, se, degree=degree, power=power)
        lx, ly = artist(drawn, f"limit:{metric}:L={ell}").get_data()
        assert lx[0] == 0 and ly[0] == pytest.approx(fit.limit, rel=1e-10)
        theory = perp_markov_limits(ell, 1.0)[metric]
        assert artist(drawn, f"theory:{metric}:L={ell}").get_data()[1][0] == pytest.approx(theory)
        # a meaningful check: the uncertainty is small against the value, and against the distance
        # of the largest T's mean from the limit (the extrapolation does work)
        assert fit.limit_se < 0.1 * theory
        assert abs(fit.limit - theory) < 3 * fit.limit_se, (metric, ell, fit.limit, fit.limit_se, theory)
        fx, fy = artist(drawn, f"fit:{metric}:L={ell}").get_data()
        assert fx[0] == 0 and fy[0] == pytest.approx(fit.limit, rel=1e-10)
    # the right panel: the limits per depth and the closed form
    lx, ly = artist(drawn, f"limit:{metric}").get_data()
    assert list(lx) == [1, 2, 3, 4]
    tx, ty = artist(drawn, f"theory:{metric}").get_data()
    assert np.allclose(ty, [perp_markov_limits(int(ell), 1.0)[metric] for ell in tx])


def test_command_writes_png_and_svg(store, tmp_path):
    for name in ("limits.png", "limits.svg"):
        code, out, err = plot_main(store, "mtg-limits", "-o", tmp_path / name)
        assert code == 0, err
        assert (tmp_path / name).stat().st_size > 20000


OTHER = """[sweep]
name = "not-limits"
replicates = 2
[model]
mixer = "softmax"
input = "orthonormal"
depth = 2
gap_fix = "perp"
norm = "layernorm"
[[zip]]
T = [8, 16, 32]
d = [8, 32, 64]
"""


def test_a_store_the_closed_form_does_not_cover_is_refused(run_sweep, tmp_path):
    code, out, err = plot_main(run_sweep(OTHER), "mtg-limits", "-o", tmp_path / "x.png")
    assert code == 2
    assert "mixer" in err and "norm" in err and "T/d" in err and "mtg_limits.toml" in err
    one_t = run_sweep(OTHER.replace("[[zip]]\nT = [8, 16, 32]\nd = [8, 32, 64]\n", "T = 8\nd = 8\n"))
    code, out, err = plot_main(one_t, "mtg-limits", "-o", tmp_path / "x.png")
    assert code == 2 and "T swept" in err
