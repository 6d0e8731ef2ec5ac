"""Dong et al. Fig. 2 (scripts/rcsweep_tools/figures/dong.py) on a tiny store the engine makes in
the test run: the four curves of each panel (read back from the matplotlib artists) equal the mean
over replicates of /layers/res_rel recomputed here with h5py, with the ± 1 sd band; the
relative residual itself is recomputed from X (--dump-weights) with NumPy; a store without the MLP
axis is a usage error naming the sweep file."""
import subprocess

import h5py
import numpy as np
import pytest
from matplotlib.figure import Figure

from conftest import BIN, SOURCE, plot_cli
from test_figures_lambda_skip import RES_REL, Raw, check_mean_line, line

from rcsweep_tools import load
from rcsweep_tools.figures import FIGURES

TINY = """
[sweep]
name = "t_dong"
seed = 11
replicates = 3
[model]
mixer = "softmax"
input = "sphere"
T = 6
d = 8
depth = 4
value_scale = "inv_sqrt_d"
[axes]
norm = ["none", "layernorm"]
lambda = [0.0, 0.5]
mlp = ["none", "relu"]
"""
VARIANTS = {  # label -> (lambda, mlp)
    "SAN (pure attention)": (0.0, "none"),
    "SAN + MLP": (0.0, "relu"),
    "SAN + skip": (0.5, "none"),
    "SAN + MLP + skip": (0.5, "relu"),
}


@pytest.fixture(scope="module")
def store(run_sweep):
    return run_sweep(TINY, args=("--dump-weights",))


def test_curves_equal_store(store):
    raw = Raw(store)
    fig = Figure(layout="constrained")
    FIGURES["dong-fig2"].draw(load(store), fig)
    fig.draw_without_rendering()  # lay out as saving does
    layers = np.arange(int(raw.attrs["max_depth"]) + 1)
    assert len(fig.axes) == 2
    for norm in ("none", "layernorm"):
        (ax,) = [a for a in fig.axes if a.get_title().startswith(f"norm = {norm}")]
        assert len([ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]) == 4
        for label, (lam, mlp) in VARIANTS.items():
            r = raw.rows(norm=norm, mlp=mlp, **{"lambda": lam})
            check_mean_line(ax, label, layers, raw.layers["res_rel"][r], RES_REL)
        # pure attention collapses: its last-layer residual is below the skip connection's
        assert line(ax, "SAN (pure attention)").get_ydata()[-1] < line(ax, "SAN + skip").get_ydata()[-1]


def res_rel(X):
    """||X - 1 xbar^T||_{1,inf} / ||X||_{1,inf}, ||A||_{1,inf} = sqrt(max col abs sum * max row abs sum)."""
    def n1inf(A):
        return np.sqrt(np.abs(A).sum(axis=0).max() * np.abs(A).sum(axis=1).max())
    return n1inf(X - X.mean(axis=0, keepdims=True)) / n1inf(X)


def test_res_rel_recomputed_from_X(store):
    """The plotted metric is Dong et al.'s relative residual: recomputed from the dumped X_l."""
    with h5py.File(store, "r") as f:
        stored = f["layers/res_rel"][...]
        n = 0
        for name, g in f["dump"].items():
            t = int(g.attrs["task"])
            for l in range(int(g.attrs["layers"]) + 1):
                X = g[f"X_{l}"][...] * 2.0 ** int(g[f"X_{l}"].attrs["log2_scale"])
                np.testing.assert_allclose(res_rel(X), stored[t, l], rtol=1e-9, atol=1e-14)
                n += 1
    assert n == stored.size


def test_store_without_mlp_axis_is_usage_error(run_sweep, tmp_path):
    store = run_sweep(TINY.replace('mlp = ["none", "relu"]', "").replace("t_dong", "t_dong_nomlp"))
    p = plot_cli(store, "dong-fig2", "-o", tmp_path / "x.png")
    assert p.returncode == 2, p
    assert "dong_fig2.toml" in p.stderr and "mlp" in p.stderr
    assert not (tmp_path / "x.png").exists()


def test_registered_sweep_file_plans():
    f = FIGURES["dong-fig2"]
    assert f.paper == "Dong et al."
    p = subprocess.run([BIN, "plan", str(SOURCE / "jobs" / "examples" / f.sweep)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
