"""rcsweep across three nodes: network namespaces on a private bridge, each with its own address and
host name (conftest.nodes, netns.py), and a plain `mpiexec --hostfile` whose daemons reach the
nodes through an rsh agent. Ranks talk over TCP on the bridge only. A sweep run across the nodes
equals a one-node run bitwise; a node that fails mid-run (every process on it killed) ends the job
within a bounded time with every finished task kept, and the same command completes the store,
again bitwise equal to an uninterrupted run."""
import re
import subprocess
import time

import h5py
import numpy as np
import pytest

import netns
import workload
from conftest import BIN, DATA, MPIEXEC, assert_same_results, e2e

# A job must end this soon after one of its nodes failed (measured: see docs/GUARANTEES.md).
NODE_FAILURE_BOUND_S = 30.0


def hosts_of_tasks(store):
    """Per task the host that computed it ('' while pending)."""
    with h5py.File(store, "r") as f:
        g = f["provenance"]
        hosts = g.attrs["hosts"].split("\n")
        return [hosts[i] if i >= 0 else "" for i in g["platform"][...]]


def statuses(store):
    with h5py.File(store, "r") as f:
        return f["tasks"]["status"][...]


def bytes_per_task(store):
    """Bytes of results of one task: a row of every dataset with one row per task."""
    res = e2e.results(store)
    n = len(res["tasks/status"])
    return sum(v.itemsize * v.size // n for k, v in res.items()
               if not k.startswith("tasks/") and v.ndim and v.shape[0] == n)


def assert_done_tasks_match(store, reference):
    """Every task the store holds as done has exactly the reference's results (bitwise)."""
    a, b = e2e.results(store), e2e.results(reference)
    done = a["tasks/status"] == 1
    n = len(done)
    for k, x in a.items():
        y = b[k]
        if x.ndim and x.shape[0] == n:
            xs, ys = x[done], y[done]
            if xs.dtype.kind == "f":
                xs, ys = xs.view(np.uint64), ys.view(np.uint64)
            assert np.array_equal(xs, ys), f"{k} differs in a done task"


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_nodes_are_separate_hosts_on_their_own_addresses(nodes):
    for i, host in enumerate(nodes.hosts):
        p = nodes.run(i, "sh", "-c", "hostname; ip -4 -o addr show eth0", capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        name, addr = p.stdout.splitlines()
        assert name == host
        assert f"inet {nodes.address(i)}/24" in addr


def test_sweep_across_three_nodes_equals_a_one_node_run(nodes, tmp_path, reference):
    store = tmp_path / "three-nodes.h5"
    before = [nodes.traffic(i) for i in range(nodes.n)]
    logged = nodes.agent_calls()
    p = run(nodes.mpiexec(MPIEXEC, 6, BIN, "run", DATA / "small.toml", "-o", store, slots=2))
    assert p.returncode == 0, p.stderr
    after = [nodes.traffic(i) for i in range(nodes.n)]
    assert_same_results(store, reference("small"))

    # Each node computed tasks, and the store says which (ranks 0, 1 on node 1, 2, 3 on node 2, ...).
    hosts = hosts_of_tasks(store)
    assert set(hosts) == set(nodes.hosts), set(hosts)
    info = e2e.rcsweep("info", store, check=0).stdout
    for h in nodes.hosts:
        assert f" on {h}: {hosts.count(h)} tasks" in info, info
    # The other nodes' results reached rank 0 (node 1) over the bridge: node 1 received at least
    # their bytes, and only Open MPI's daemons were started through the agent, one per node.
    remote = sum(h != nodes.hosts[0] for h in hosts)
    received = after[0][0] - before[0][0]
    assert received >= remote * bytes_per_task(store), (received, remote, bytes_per_task(store))
    started = nodes.agent_calls()[len(logged):]
    assert sorted(line.split(":")[0] for line in started) == [nodes.address(i) for i in range(nodes.n)], started
    assert all(re.search(r"\borted -mca ", line) for line in started), started


@pytest.mark.parametrize("victim", [2, 0], ids=["worker-node", "rank0-node"])
def test_node_failure_ends_the_job_and_the_same_command_completes_it(nodes, tmp_path, sweep, reference, victim):
    """Kill every process of one node (node 3: workers only; node 1: rank 0, the writer) once a
    third of the work is done."""
    store = tmp_path / "node-failure.h5"
    cmd = nodes.mpiexec(MPIEXEC, 3, BIN, "run", sweep("medium"), "-o", store, export=["RCSWEEP_PROGRESS_INTERVAL"])
    w = workload.Watched(cmd)
    try:
        assert w.wait_until(lambda w: w.work >= 0.3), f"finished before the node failure:\n{w.err}"
        failed = time.monotonic()
        assert nodes.kill(victim) > 0
        code, err = w.wait(timeout=NODE_FAILURE_BOUND_S)
        ended = time.monotonic() - failed
    finally:
        if w.poll() is None:
            w.kill()
    # Nothing of the job is left on any node.
    end = time.monotonic() + 10
    while any(netns.netns_pids(ns) for ns in nodes.netns):
        assert time.monotonic() < end, {ns: netns.netns_pids(ns) for ns in nodes.netns}
        time.sleep(0.1)
    print(f"node {victim + 1} failed: mpiexec exit code {code} after {ended:.2f} s")
    assert code != 0, err

    status = statuses(store)
    assert 0 < np.sum(status == 1) < len(status), err
    assert set(status) <= {0, 1}  # pending or done: a node failure fails no task
    assert_done_tasks_match(store, reference("medium"))
    with h5py.File(store, "r") as f:
        kept = f["tasks"][...]

    again = run(cmd)
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stderr
    with h5py.File(store, "r") as f:
        after = f["tasks"][...]
    done = kept["status"] == 1
    assert np.array_equal(after["wall_s"][done], kept["wall_s"][done])  # finished tasks not recomputed
    assert_same_results(store, reference("medium"))
