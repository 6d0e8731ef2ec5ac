"""Which BLAS kernel computed each task: recorded per task in /provenance, counted by `rcsweep
info`, noted when a run's ranks or a resume use another kernel than the store's earlier tasks.

The environment's own kernel (OPENBLAS_CORETYPE as set, or OpenBLAS's choice) is left alone; the
second kernel is OpenBLAS's generic x86-64 one, Prescott (SSE3), which every x86-64 CPU runs."""
import os
import socket
import platform

import h5py
import numpy as np
import pytest

from conftest import BIN, MPIEXEC, rcsweep

OTHER = "Prescott"
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="OpenBLAS core names of x86-64")


def own_kernel(tmp_path):
    """The kernel name this environment gives, from a one-task store."""
    sweep = tmp_path / "one.toml"
    sweep.write_text('[sweep]\nname = "one"\n[model]\nT = 4\nd = 4\ndepth = 1\n')
    rcsweep("run", sweep, "-o", tmp_path / "one.h5", "-q", check=0)
    with h5py.File(tmp_path / "one.h5", "r") as f:
        return f["provenance"].attrs["blas_kernels"]


def platforms(path):
    """(kernel per task, cpu per task) as lists of str ('' where not recorded)."""
    with h5py.File(path, "r") as f:
        g = f["provenance"]
        kernels, cpus = g.attrs["blas_kernels"].split("\n"), g.attrs["cpus"].split("\n")
        index = g["platform"][...]
        return [kernels[i] if i >= 0 else "" for i in index], [cpus[i] if i >= 0 else "" for i in index]


SWEEP = """[sweep]
name = "kernels"
replicates = 3
[model]
mixer = "softmax"
T = 12
d = 16
depth = 200
norm = "none"
[axes]
lambda = [0.0, 1.0, 100.0]
"""


@pytest.fixture
def other_env(tmp_path):
    if own_kernel(tmp_path).endswith(" " + OTHER):
        pytest.skip(f"this environment already runs OpenBLAS's {OTHER} kernel")
    return {**os.environ, "OPENBLAS_CORETYPE": OTHER}


def test_every_task_records_its_kernel_and_cpu(tmp_path):
    sweep = tmp_path / "k.toml"
    sweep.write_text(SWEEP)
    rcsweep("run", sweep, "-o", tmp_path / "k.h5", "-q", ranks=2, check=0)  # lambda = 100 diverges: an outcome
    kernels, cpus = platforms(tmp_path / "k.h5")
    assert len(set(kernels)) == 1 and kernels[0].startswith("OpenBLAS 0.") and kernels[0] == own_kernel(tmp_path)
    with open("/proc/cpuinfo") as f:
        model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    assert all(c.startswith(model + " (family ") for c in cpus), cpus[0]
    info = rcsweep("info", tmp_path / "k.h5", check=0).stdout
    with h5py.File(tmp_path / "k.h5", "r") as f:
        assert f["provenance"].attrs["hosts"] == socket.gethostname()
    assert f"computed by   {kernels[0]} on {cpus[0]} on {socket.gethostname()}: 9 tasks" in info
    assert "mixes" not in info


def test_ranks_on_different_kernels_are_told_apart(tmp_path, other_env):
    """A heterogeneous job: rank 1 runs the other kernel (an MPMD launch with its own environment)."""
    import subprocess

    sweep = tmp_path / "k.toml"
    sweep.write_text(SWEEP)
    cmd = [MPIEXEC, "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    run = [BIN, "run", sweep, "-o", tmp_path / "k.h5"]
    cmd += ["-n", "1", *run, ":", "-n", "1", "-x", f"OPENBLAS_CORETYPE={OTHER}", *run]
    proc = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "the ranks of this run use different BLAS kernels" in proc.stderr
    kernels, _ = platforms(tmp_path / "k.h5")
    with h5py.File(tmp_path / "k.h5", "r") as f:
        rank = f["tasks"]["rank"]
    own = own_kernel(tmp_path)
    for k, r in zip(kernels, rank):
        assert k == (own if r == 0 else f"OpenBLAS {own.split()[1]} {OTHER}")
    info = rcsweep("info", tmp_path / "k.h5", check=0).stdout
    assert "this store mixes 2 kernels" in info
    counts = {k: kernels.count(k) for k in set(kernels)}
    for k, n in counts.items():
        assert f"computed by   {k} on " in info and f": {n} tasks" in info


def test_resume_on_another_kernel_is_allowed_and_said(tmp_path, other_env):
    """The store's tasks were computed on this machine's kernel; --retry-failed recomputes the
    diverged ones on the other kernel: allowed, printed, and counted by `info`."""
    sweep = tmp_path / "k.toml"
    sweep.write_text(SWEEP)
    out = tmp_path / "k.h5"
    first = rcsweep("run", sweep, "-o", out, "-q", check=0)
    assert "note:" not in first.stderr
    with h5py.File(out, "r") as f:
        diverged = int(np.sum(f["tasks"]["status"] == 3))
    assert diverged == 3  # lambda = 100: X overflows
    again = rcsweep("run", sweep, "-o", out, "-q", "--retry-failed", check=0, env=other_env)
    own = own_kernel(tmp_path)
    assert f"this run computes with OpenBLAS {own.split()[1]} {OTHER}; the store's finished tasks were computed " \
           f"with {own} (9 tasks)" in again.stderr
    assert "agree to rounding, not bitwise" in again.stderr
    kernels, _ = platforms(out)
    assert kernels.count(f"OpenBLAS {own.split()[1]} {OTHER}") == diverged
    assert kernels.count(own) == 9 - diverged
    info = rcsweep("info", out, check=0).stdout
    assert "this store mixes 2 kernels" in info
