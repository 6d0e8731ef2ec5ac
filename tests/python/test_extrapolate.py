"""Finite-size extrapolation (rcsweep_tools.extrapolate) on synthetic means with a known T -> infinity
value, its degenerate inputs, and the closed-form limits of rcsweep_tools.analytic against
independent routes (moments of the Fuss-Catalan law, a numerical maximum, Monte Carlo)."""
import numpy as np
import pytest

from rcsweep_tools.analytic import edge_point, perp_markov_limits
from rcsweep_tools.extrapolate import fit_limit

C0, C1, C2 = 0.2, -1.3, 4.0  # the synthetic law y(T) = C0 + C1/T (+ C2/T^2)


def synthetic(rng, T, se, quad=False):
    T = np.asarray(T, dtype=float)
    y = C0 + C1 / T + (C2 / T ** 2 if quad else 0.0)
    return y + rng.normal(0.0, se, size=T.shape), np.full(T.shape, se)


def test_linear_fit_recovers_the_intercept_within_its_uncertainty():
    rng = np.random.default_rng(11)
    T = [16, 24, 32, 48, 64, 96, 128]
    z = []
    for _ in range(200):
        y, se = synthetic(rng, T, 0.003)
        f = fit_limit(T, y, se)
        assert f.weighted and f.degree == 1 and f.dof == len(T) - 2
        z.append((f.limit - C0) / f.limit_se)
    z = np.array(z)
    # calibrated: |z| < 2 about 95% of the time (the Birge factor only widens), never wildly off
    assert np.mean(np.abs(z) < 2) > 0.9 and np.max(np.abs(z)) < 5
    f = fit_limit(T, *synthetic(rng, T, 0.003))
    assert f.slope == pytest.approx(C1, abs=5 * f.slope_se)
    assert f.predict(np.inf) == pytest.approx(f.limit)


def test_uncertainty_shrinks_with_more_data():
    rng = np.random.default_rng(3)
    few = fit_limit([16, 32, 64], *synthetic(rng, [16, 32, 64], 0.004))
    more_t = fit_limit([16, 24, 32, 48, 64, 96, 128, 256], *synthetic(rng, [16, 24, 32, 48, 64, 96, 128, 256], 0.004))
    more_reps = fit_limit([16, 32, 64], *synthetic(rng, [16, 32, 64], 0.001))  # 16x the replicates
    assert more_t.limit_se < few.limit_se
    assert more_reps.limit_se < 0.5 * few.limit_se
    for f in (few, more_t, more_reps):
        assert abs(f.limit - C0) < 4 * f.limit_se


def test_quadratic_fit_and_the_bias_of_a_linear_one():
    rng = np.random.default_rng(5)
    T = [8, 12, 16, 24, 32, 48, 64, 96, 128]
    y, se = synthetic(rng, T, 0.0005, quad=True)
    quad = fit_limit(T, y, se, degree=2)
    assert abs(quad.limit - C0) < 3 * quad.limit_se
    assert quad.coef[2] == pytest.approx(C2, abs=4 * np.sqrt(quad.cov[2, 2]))
    lin = fit_limit(T, y, se, degree=1)
    # the missing 1/T^2 term shows in chi^2, and the Birge factor widens the linear fit's uncertainty
    assert lin.chi2 / lin.dof > 2 and lin.birge == pytest.approx(lin.chi2 / lin.dof)
    assert lin.limit_se == pytest.approx(np.sqrt(np.linalg.inv((lin.x[:, None] ** [0, 1] / se[:, None] ** 2).T
                                                               @ (lin.x[:, None] ** [0, 1]))[0, 0] * lin.birge))


def test_power_and_unweighted_fits():
    rng = np.random.default_rng(8)
    T = np.array([32, 64, 128, 256, 512, 1024], dtype=float)
    y = 0.05 + 0.3 * T ** (-2 / 3) + rng.normal(0, 1e-4, T.shape)
    f = fit_limit(T, y, None, power=2 / 3)
    assert not f.weighted and f.dof == 4
    assert abs(f.limit - 0.05) < 4 * f.limit_se
    # with a NaN or a zero standard error the fit is unweighted too
    assert not fit_limit(T, y, [1e-4, np.nan, 1e-4, 1e-4, 1e-4, 1e-4], power=2 / 3).weighted
    assert not fit_limit(T, y, [1e-4, 0.0, 1e-4, 1e-4, 1e-4, 1e-4], power=2 / 3).weighted
    # NaN means (a T without a done replicate) are left out
    g = fit_limit(T, np.where(T == 64, np.nan, y), None, power=2 / 3)
    assert len(g.x) == 5


@pytest.mark.parametrize("T, y, kw, match", [
    ([64], [0.3], {}, "at least 2 distinct T values"),
    ([64, 64, 64], [0.3, 0.31, 0.29], {"se": [0.01] * 3}, "at least 2 distinct T values"),
    ([32, 64], [0.3, 0.31], {"se": [0.01] * 2, "degree": 2}, "at least 3 distinct T values"),
    ([32, 64, 128], [0.3, np.nan, np.nan], {}, "got 1"),
    ([32, 64], [0.3, 0.31], {}, "unweighted degree-1 fit needs at least 3"),
    ([0, 64, 128], [0.3, 0.3, 0.3], {}, "T must be finite and > 0"),
    ([32, 64, 128], [0.3, 0.3, 0.3], {"degree": 3}, "degree must be"),
])
def test_degenerate_input_is_a_clear_error(T, y, kw, match):
    with pytest.raises(ValueError, match=match):
        fit_limit(T, y, **kw)


def fuss_catalan(p, k):
    from math import comb

    return comb(p * k + k, k) / (p * k + 1)


@pytest.mark.parametrize("L", [1, 2, 3, 5])
def test_limits_at_gamma_0_and_1_are_fuss_catalan(L):
    # gamma = 0: Sigma ~ (product of L circular elements)(...)^*: Fuss-Catalan FC_L, edge (L+1)^(L+1)/L^L;
    # gamma = 1: the L Wishart factors of W_V count as L more circular ones: FC_2L.
    for gamma, p in ((0.0, L), (1.0, 2 * L)):
        lim = perp_markov_limits(L, gamma)
        edge = (p + 1) ** (p + 1) / p ** p
        assert lim["edge"] == pytest.approx(edge, rel=1e-12)
        assert lim["m2"] == pytest.approx(fuss_catalan(p, 2), rel=1e-12)
        assert lim["sr_cov"] == pytest.approx(fuss_catalan(p, 2) / edge ** 2, rel=1e-12)
        assert lim["pr"] == pytest.approx(1 / fuss_catalan(p, 2), rel=1e-12)


@pytest.mark.parametrize("L, gamma", [(1, 0.5), (2, 0.25), (4, 0.75)])
def test_edge_point_is_the_maximum(L, gamma):
    z = np.linspace(1e-4, 5, 200001)
    u = z / ((1 + z) ** (L + 1) * (1 + gamma * z) ** L)
    assert edge_point(L, gamma) == pytest.approx(z[np.argmax(u)], abs=1e-4)
    assert perp_markov_limits(L, gamma)["sr_x"] == pytest.approx(u.max(), rel=1e-8)
    with pytest.raises(ValueError, match="gamma"):
        perp_markov_limits(L, 1.5)


def test_limits_against_a_monte_carlo_of_the_model():
    # X_L = A_L^perp ... A_1^perp X_0 W_1 ... W_L, T = 256, d = 512 (gamma = 1/2), L = 2: the moment
    # ratio pr/T is within a few 1/T of its limit (the edge-based sr converges more slowly).
    rng = np.random.default_rng(0)
    T, d, L = 256, 512, 2
    s2 = np.log(1 + 0.5 ** 2)
    prs = []
    for _ in range(4):
        q, r = np.linalg.qr(rng.standard_normal((d, T)))
        X = (q * np.sign(np.diag(r))).T
        for _ in range(L):
            Z = np.exp(rng.normal(-s2 / 2, np.sqrt(s2), (T, T)))
            X = (Z / Z.sum(1, keepdims=True) - 1.0 / T) @ X @ rng.standard_normal((d, d))
        s = np.linalg.svd(X / np.abs(X).max(), compute_uv=False)
        prs.append((s ** 2).sum() ** 2 / (s ** 4).sum() / T)
    assert np.mean(prs) == pytest.approx(perp_markov_limits(L, 0.5)["pr"], rel=0.03)
