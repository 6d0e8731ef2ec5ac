"""`rcsweep run --gemm-library`: which library multiplies the products (OpenBLAS, or BLIS for the
product sizes `rcsweep calibrate` measured it faster at), the same choice on every rank, recorded
per task with the BLAS kernel (src/linalg/blis.hpp, docs/GUARANTEES.md)."""
import os
import re

import h5py
import numpy as np
import pytest

from conftest import assert_same_results, rcsweep, results

# Small and larger products in one sweep (T x d x d from 2 000 to 1.7e6 multiply-adds), both
# mixers, a skip and LayerNorm, a gradient-free metric set: every gemm route of a stack layer.
SWEEP = """[sweep]
name = "gemm-library"
seed = 11
replicates = 2
[model]
input = "orthonormal"
depth = 4
sigma_qk = "inv_sqrt_d"
[[zip]]
T = [10, 40, 60]
d = [20, 80, 120]
[axes]
mixer = ["softmax", "markov"]
lambda = [0.0, 1.0]
norm = ["none", "layernorm"]
"""


def kernels(store):
    """The kernel text of every task (from /provenance)."""
    with h5py.File(store, "r") as f:
        g = f["provenance"]
        lines = g.attrs["blas_kernels"].split("\n")
        return {lines[i] for i in g["platform"][...]}


def blis_available(tmp_path):
    sweep = tmp_path / "probe.toml"
    sweep.write_text('[sweep]\nname = "probe"\n[model]\nT = 4\nd = 4\ndepth = 1\n')
    proc = rcsweep("run", sweep, "-o", tmp_path / "probe.h5", "-q", "--gemm-library", "blis")
    if proc.returncode == 2 and "BLIS is not available" in proc.stderr:
        return False
    assert proc.returncode == 0, proc.stderr
    return True


@pytest.fixture
def sweep(tmp_path):
    if not blis_available(tmp_path):
        pytest.skip("built without BLIS (libblis-dev)")
    path = tmp_path / "s.toml"
    path.write_text(SWEEP)
    return path


def test_blis_everywhere_is_bitwise_the_same_on_every_layout(tmp_path, sweep):
    one = tmp_path / "one.h5"
    rcsweep("run", sweep, "-o", one, "-q", "--gemm-library", "blis", check=0)
    for ranks, threads in ((2, 1), (1, 2)):
        other = tmp_path / f"r{ranks}t{threads}.h5"
        rcsweep("run", sweep, "-o", other, "-q", "--gemm-library", "blis", "--threads", threads, ranks=ranks,
                check=0)
        assert_same_results(one, other)
    (kernel,) = kernels(one)
    assert re.search(r"^OpenBLAS \S+ \S+ \+ BLIS \S+ \S+ for A B at m n k in \(0, inf\], "
                     r"A B\^T at m n k in \(0, inf\]$", kernel), kernel


def test_libraries_agree_to_rounding_and_openblas_is_the_default(tmp_path, sweep):
    blis, openblas, default = tmp_path / "blis.h5", tmp_path / "openblas.h5", tmp_path / "default.h5"
    rcsweep("run", sweep, "-o", blis, "-q", "--gemm-library", "blis", check=0)
    rcsweep("run", sweep, "-o", openblas, "-q", "--gemm-library", "openblas", check=0)
    # No calibration of this machine: auto is OpenBLAS for every product, bitwise.
    env = {**os.environ, "RCSWEEP_CALIBRATION": str(tmp_path / "none.toml")}
    rcsweep("run", sweep, "-o", default, "-q", env=env, check=0)
    assert_same_results(openblas, default)
    (kernel,) = kernels(openblas)
    assert "BLIS" not in kernel
    a, b = results(blis), results(openblas)
    assert np.array_equal(a["tasks/status"], b["tasks/status"])
    # The well-conditioned metrics (norms, top singular values, stable ranks) to rounding; those of
    # collapsed signals (s2, mu, residuals, gaps at rank one) are rounding noise by nature.
    for name in ("fro", "s1", "sr_cov", "sr_x", "m_s1", "m_fro"):
        x, y = a[f"layers/{name}"], b[f"layers/{name}"]
        assert np.array_equal(np.isfinite(x), np.isfinite(y)), name
        finite = np.isfinite(y)
        assert finite.sum() >= 0.75 * finite.size, name  # layer 0 has no mixer
        rel = np.abs(x[finite] - y[finite]) / np.maximum(np.abs(y[finite]), 1e-300)
        assert rel.max() <= 1e-12, (name, rel.max())


def test_auto_takes_the_calibrated_range(tmp_path, sweep):
    calibration = tmp_path / "calibration.toml"
    rcsweep("calibrate", "-o", calibration, check=0, timeout=600)
    text = calibration.read_text()
    text = re.sub(r"^blis_\w+ = .*\n", "", text, flags=re.M) + "blis_transposed = [9000.0, 300000.0]\n"
    calibration.write_text(text)
    env = {**os.environ, "RCSWEEP_CALIBRATION": str(calibration)}
    auto = tmp_path / "auto.h5"
    rcsweep("run", sweep, "-o", auto, "-q", env=env, check=0)
    (kernel,) = kernels(auto)
    assert kernel.endswith(" for A B^T at m n k in (9000, 300000]"), kernel
    # Two ranks read the same calibration: bitwise the same store.
    two = tmp_path / "two.h5"
    rcsweep("run", sweep, "-o", two, "-q", ranks=2, env=env, check=0)
    assert_same_results(auto, two)
    # A calibration of another machine is not used.
    calibration.write_text(re.sub(r"^machine = .*$", 'machine = "another machine"', text, flags=re.M))
    other = tmp_path / "other.h5"
    rcsweep("run", sweep, "-o", other, "-q", env=env, check=0)
    assert "BLIS" not in kernels(other).pop()


def test_an_unknown_library_is_refused(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    proc = rcsweep("run", sweep, "-o", tmp_path / "x.h5", "--gemm-library", "mkl")
    assert proc.returncode == 2
    assert "--gemm-library" in proc.stderr
    assert not (tmp_path / "x.h5").exists()
