"""Shared helpers of the end-to-end tests: run the rcsweep binary (optionally under mpiexec) and
compare stores."""
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

import workload

SOURCE = Path(os.environ.get("RCSWEEP_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BIN = os.environ.get("RCSWEEP_BIN", str(SOURCE / "build" / "rcsweep"))
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
DATA = Path(__file__).parent / "data"


def mpi_prefix(ranks):
    if ranks is None:
        return []
    cmd = [MPIEXEC, "-n", str(ranks), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def rcsweep(*args, ranks=None, check=None, timeout=300, **kw):
    """Run rcsweep; return the CompletedProcess (stdout/stderr as text)."""
    cmd = mpi_prefix(ranks) + [BIN, *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check is not None:
        assert proc.returncode == check, f"{cmd} -> {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def results(path):
    """Every result a store holds: all datasets except the grid description (/axes, /points), a
    weights dump and /provenance, with /tasks reduced to what was computed (id, point, replicate,
    status, message; not wall_s and rank, which, like /provenance, record how a run went)."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and not name.startswith(("axes", "points", "dump", "provenance")):
                out[name] = obj[...]
        f.visititems(visit)
    tasks = out.pop("tasks")
    for field in ("id", "point", "replicate", "status", "message"):
        out[f"tasks/{field}"] = tasks[field]
    return out


def assert_same_results(a, b):
    ra, rb = results(a), results(b)
    assert ra.keys() == rb.keys()
    for k in ra:
        x, y = ra[k], rb[k]
        assert x.shape == y.shape, k
        if x.dtype.kind == "f":  # bitwise, NaN included
            assert np.array_equal(x.view(np.uint64), y.view(np.uint64)), f"{k} differs"
        else:
            assert np.array_equal(x, y), f"{k} differs"


@pytest.fixture(scope="session")
def kill_sweep(tmp_path_factory):
    """kill.toml with as many replicates as take about 2 s of computing on one core of this machine
    (workload.sized): the sweep the kill-and-resume tests kill."""
    path = tmp_path_factory.mktemp("kill") / "kill.toml"
    path.write_text(workload.sized("kill", (DATA / "kill.toml").read_text(), "replicates", 2.0, lo=4))
    return path


@pytest.fixture(scope="session")
def reference_kill_store(kill_sweep):
    """The kill-and-resume sweep run once without interruption (single process)."""
    path = kill_sweep.parent / "kill_ref.h5"
    rcsweep("run", kill_sweep, "-o", path, "-q", check=0)
    return path
