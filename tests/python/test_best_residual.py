"""res_best (src/metrics/best_residual.hpp) against an exact reference: the minimum over x of
||X - 1 x^T||_{1,inf} = sqrt(a(x) b(x)), a the largest column abs sum and b the largest row abs sum
of X - 1 x^T (Dong et al., arXiv:2103.03404, sec. 2.2), by linear programs (scipy's HiGHS).

The set {(a(x), b(x))} + R^2_+ is convex and its lower-left frontier piecewise linear; a b is
concave on each of its edges, so the minimum is at a vertex. Every vertex minimises alpha a + b for
some alpha > 0 (a linear program in x, the entries' absolute values and a, b): the vertices are
found by the non-inferior set estimation method (the two ends, then the weight of each chord
between two known vertices until no chord hides another vertex), and the reference is the least
a b over them. The C++ value, evaluated at its own x, must lie in [reference, reference (1 + 1e-4)]
and its lower bound below the reference, as best_residual_tolerance says.

Run by ctest (python.best_residual, which builds nothing: build the target best_residual_tool, or
set RCSWEEP_BEST_RESIDUAL to it)."""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse

ROOT = Path(__file__).resolve().parents[2]
TOOL = Path(os.environ.get("RCSWEEP_BEST_RESIDUAL", ROOT / "build" / "tests" / "python" / "best_residual_tool"))
TOLERANCE = 1e-4  # metrics::best_residual_tolerance
LP_SLACK = 1e-7   # what HiGHS's feasibility and optimality tolerances leave of the reference


def parts(X, x):
    D = np.abs(X - x)
    return D.sum(axis=0).max(), D.sum(axis=1).max()


def weighted_lp(X, alpha, beta, a_max=None, b_max=None):
    """min alpha a + beta b over x (optionally a <= a_max, b <= b_max): variables x (d), e (T d), a, b."""
    T, d = X.shape
    n = d + T * d + 2
    ia, ib = n - 2, n - 1
    i, j = np.divmod(np.arange(T * d), d)
    e = d + np.arange(T * d)
    r = np.arange(T * d)
    ones = np.ones(T * d)
    # e_ij >= X_ij - x_j and e_ij >= x_j - X_ij
    upper = scipy.sparse.csr_matrix((np.r_[-ones, -ones], (np.r_[r, r], np.r_[e, j])), shape=(T * d, n))
    lower = scipy.sparse.csr_matrix((np.r_[-ones, ones], (np.r_[r, r], np.r_[e, j])), shape=(T * d, n))
    cols = scipy.sparse.csr_matrix((np.r_[ones, -np.ones(d)], (np.r_[j, np.arange(d)], np.r_[e, np.full(d, ia)])),
                                   shape=(d, n))
    rows = scipy.sparse.csr_matrix((np.r_[ones, -np.ones(T)], (np.r_[i, np.arange(T)], np.r_[e, np.full(T, ib)])),
                                   shape=(T, n))
    c = np.zeros(n)
    c[ia], c[ib] = alpha, beta
    bounds = [(None, None)] * d + [(0, None)] * (T * d) + [(0, a_max), (0, b_max)]
    res = scipy.optimize.linprog(c, A_ub=scipy.sparse.vstack([upper, lower, cols, rows]).tocsr(),
                                 b_ub=np.r_[-X.ravel(), X.ravel(), np.zeros(d + T)], bounds=bounds, method="highs",
                                 options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0, res.message
    return parts(X, res.x[:d])


def exact_minimum(X):
    """min_x sqrt(a(x) b(x)) over the frontier's vertices (see the module's docstring)."""
    a_star = parts(X, np.median(X, axis=0))[0]  # the column medians minimise a exactly
    first = weighted_lp(X, 0.0, 1.0, a_max=a_star * (1 + 1e-12))  # the least b where a is least
    b_star = weighted_lp(X, 0.0, 1.0)[1]
    last = weighted_lp(X, 1.0, 0.0, b_max=b_star * (1 + 1e-12))  # the least a where b is least
    vertices = [first, last]
    stack = [(first, last)] if last[0] > first[0] * (1 + 1e-9) else []
    while stack:
        (a1, b1), (a2, b2) = stack.pop()
        alpha = (b1 - b2) / (a2 - a1)
        a, b = weighted_lp(X, alpha, 1.0)
        vertices.append((a, b))
        if alpha * a + b < (alpha * a1 + b1) * (1 - 1e-9):  # a vertex below the chord
            stack += [((a1, b1), (a, b)), ((a, b), (a2, b2))]
    return min(np.sqrt(a * b) for a, b in vertices)


def run_tool(matrices):
    assert TOOL.exists(), f"{TOOL} is missing: build the target best_residual_tool or set RCSWEEP_BEST_RESIDUAL"
    text = "".join(f"{X.shape[0]} {X.shape[1]}\n" + " ".join(repr(float(v)) for v in X.ravel()) + "\n"
                   for X in matrices)
    out = subprocess.run([str(TOOL)], input=text, capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.splitlines()
    assert len(lines) == len(matrices)
    return [np.array([float(v) for v in line.split()]) for line in lines]


def composite(X, x=None):
    return np.sqrt(np.prod(parts(X, np.zeros(X.shape[1]) if x is None else x)))


@pytest.mark.parametrize("shape", [(6, 5), (12, 8)])
def test_the_value_is_the_exact_minimum_within_its_tolerance(shape):
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    matrices = [rng.standard_normal(shape) for _ in range(6)]
    matrices.append(rng.standard_normal(shape) * np.linspace(0.1, 3.0, shape[1]) + 5.0)  # scaled columns, shifted
    matrices.append(np.outer(rng.standard_normal(shape[0]), rng.standard_normal(shape[1]))
                    + 0.1 * rng.standard_normal(shape))  # nearly rank one
    for X, out in zip(matrices, run_tool(matrices)):
        value, lower, x = out[0], out[1], out[2:]
        norm = composite(X)
        reference = exact_minimum(X) / norm
        assert value == pytest.approx(composite(X, x) / norm, rel=1e-12)  # the norm at its own x
        assert value >= reference * (1 - LP_SLACK)
        assert value <= reference * (1 + TOLERANCE + LP_SLACK)
        assert lower <= reference * (1 + LP_SLACK)
        mean = composite(X, X.mean(axis=0)) / norm  # res_rel
        assert value <= mean * (1 + 1e-12)


def test_two_tokens_and_a_collapsed_signal():
    u, v = np.array([1.0, -2.0, 0.5]), np.array([0.0, 1.0, 4.0])
    collapsed = np.tile([3.0, -1.0, 2.0, 0.25], (5, 1))
    out = run_tool([np.vstack([u, v]), collapsed])
    # T = 2: sqrt(||u - v||_inf ||u - v||_1 / 2), at the mean
    assert out[0][0] == pytest.approx(np.sqrt(np.abs(u - v).max() * np.abs(u - v).sum() / 2)
                                      / composite(np.vstack([u, v])), rel=1e-12)
    assert out[1][0] == 0.0 and out[1][1] == 0.0
