"""Shared pieces of the cluster tests: a private one-node Slurm (local_slurm.Slurm: munged, slurmctld,
slurmd started by the test on free ports, with their state in a temporary directory, stopped at the
end; scripts/test-cluster.sh starts the same by hand), three nodes
in network namespaces (netns.py) for multi-node MPI, the test sweeps (the long ones sized for this
machine), direct reference runs of them, and the store comparison of the end-to-end tests."""
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import netns
from local_slurm import Slurm, missing_programs

SOURCE = Path(os.environ.get("RCSWEEP_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BIN = os.environ.get("RCSWEEP_BIN", str(SOURCE / "build" / "rcsweep"))
MPIEXEC = os.environ.get("MPIEXEC") or shutil.which("mpiexec") or "mpiexec"
DATA = Path(__file__).parent / "data"
JOBS = SOURCE / "jobs"

# The e2e helpers (every result dataset of two stores compared bitwise), loaded under another name
# than "conftest", and their workload module (sweeps sized for this machine's speed).
sys.path.append(str(SOURCE / "tests" / "e2e"))
import workload  # noqa: E402

_spec = importlib.util.spec_from_file_location("e2e_helpers", SOURCE / "tests" / "e2e" / "conftest.py")
e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e)
assert_same_results = e2e.assert_same_results

# One core's seconds of computing of the sweeps made from long.toml: "long", about 20 s on two
# cores, several times the shortest time limit the requeue tests give a run (test_slurm.py,
# test_pbs.py, test_multinode.py); "medium", a multi-node run still running when a node is killed
# (test_multinode.py).
SIZED_SECONDS = {"long": 40.0, "medium": 10.0}


def job_env(**extra):
    """The environment the jobs inherit (sbatch exports the submitter's): rcsweep and mpiexec from
    this build, root allowed to run Open MPI."""
    env = dict(os.environ)
    env["RCSWEEP"] = BIN
    env["PATH"] = f"{Path(MPIEXEC).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(scope="session")
def sweep(tmp_path_factory):
    """sweep(name) -> tests/cluster/data/<name>.toml; "long" and "medium": long.toml with its
    replicates set for SIZED_SECONDS[name] of computing on one core of this machine
    (workload.sized), written once."""
    d = tmp_path_factory.mktemp("sweeps")
    cache = {}

    def get(name):
        if name not in cache:
            if name in SIZED_SECONDS:
                cache[name] = d / f"{name}.toml"
                cache[name].write_text(workload.sized("cluster-long", (DATA / "long.toml").read_text(), "replicates",
                                                      SIZED_SECONDS[name], lo=2, probe=1))
            else:
                cache[name] = DATA / f"{name}.toml"
        return cache[name]
    return get


@pytest.fixture(scope="session")
def reference(tmp_path_factory, sweep):
    """reference(name) -> a store of sweep(name) run directly (mpiexec -n 2); reference.seconds[name]
    is the time that run took."""
    d = tmp_path_factory.mktemp("reference")
    cache = {}

    def get(name):
        if name not in cache:
            out = d / f"{name}.h5"
            proc = e2e.rcsweep("run", sweep(name), "-o", out, ranks=2, check=0, timeout=900)
            get.seconds[name] = workload.run_seconds(proc.stderr)
            cache[name] = out
        return cache[name]
    get.seconds = {}
    return get


def started_slurm(nodes=None):
    """A started Slurm (a generator for the fixtures): skipped where Slurm is not installed."""
    for prog in missing_programs():
        pytest.skip(f"{prog} not installed (scripts/install_deps.sh installs slurm-wlm and munge)")
    root = Path(tempfile.mkdtemp(prefix="rcsweep-slurm-"))
    cluster = Slurm(root, nodes, base_env=job_env())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm():
    yield from started_slurm()


@pytest.fixture(scope="session")
def nodes():
    """Three nodes in network namespaces on a private bridge (netns.Cluster), removed at the end, also
    when a test fails; the teardown fails if any namespace, link, mount or process is left."""
    why = netns.unavailable()
    if why:
        pytest.skip(why)
    cluster = netns.Cluster(3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
    assert not cluster.leftovers(), f"left after stop: {cluster.leftovers()}"


@pytest.fixture(scope="session")
def slurm_nodes(nodes):
    """A Slurm of the three nodes (slurmd in each, slurmctld on this machine), stopped before them."""
    yield from started_slurm(nodes)
