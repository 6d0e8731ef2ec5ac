#!/usr/bin/python3
"""Rank 0's intake over TCP: a sweep of many tiny tasks (the writer, not the computing, sets the
pace) run on the three-node test cluster of tests/cluster/netns.py (network namespaces, Open MPI
over TCP on a private bridge) and, for comparison, on this machine alone (shared memory). Prints per
run: tasks, wall seconds (rcsweep's "finished after"), results/s, and for the cluster the bytes node
1 (rank 0) received per task computed on the other nodes (results, MPI and TCP overhead included).
As root (namespaces); docs/CLUSTER.md (5. Multi-node) quotes its output.

    /usr/bin/python3 bench/multinode_writer.py [REPLICATES] [RANKS_PER_NODE]   (default 2000, 2)
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(SOURCE / "tests" / "cluster")]
import netns  # noqa: E402

BIN = os.environ.get("RCSWEEP_BIN", str(SOURCE / "build" / "rcsweep"))
MPIEXEC = os.environ.get("MPIEXEC", "/usr/bin/mpiexec")
SWEEP = """[sweep]
name = "writer-tiny"
seed = 5
replicates = {replicates}
[model]
T = 8
d = 8
depth = 10
[axes]
lambda = [{lambdas}]
"""


def finished(stderr):
    m = re.search(r"finished after ([\d.]+) s: (\d+) done", stderr)
    assert m, stderr
    return float(m.group(1)), int(m.group(2))


def main():
    replicates = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    per_node = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    work = Path(tempfile.mkdtemp(prefix="rcsweep-writer-"))
    sweep = work / "tiny.toml"
    sweep.write_text(SWEEP.format(replicates=replicates, lambdas=", ".join(f"{0.1 * i:.1f}" for i in range(20))))
    ranks = 3 * per_node
    local = [MPIEXEC, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"] + \
        (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    p = subprocess.run(local + [BIN, "run", sweep, "-o", work / "local.h5"], capture_output=True, text=True)
    s, n = finished(p.stderr)
    print(f"one node, {ranks} ranks (shared memory): {n} tasks in {s:.2f} s = {n / s:.0f} results/s")

    cluster = netns.Cluster(3).start()
    try:
        before = cluster.traffic(0)[0]
        p = subprocess.run(cluster.mpiexec(MPIEXEC, ranks, BIN, "run", sweep, "-o", work / "nodes.h5", slots=per_node),
                           capture_output=True, text=True)
        received = cluster.traffic(0)[0] - before
        s, n = finished(p.stderr)
        info = subprocess.run([BIN, "info", work / "nodes.h5"], capture_output=True, text=True).stdout
        remote = sum(int(k) for h, k in re.findall(r" on (\S+): (\d+) tasks", info) if h != cluster.hosts[0])
        print(f"3 nodes, {ranks} ranks (TCP): {n} tasks in {s:.2f} s = {n / s:.0f} results/s; node 1 received "
              f"{received} bytes for {remote} tasks of nodes 2-3 = {received / remote:.0f} bytes/task")
    finally:
        cluster.stop()
        subprocess.run(["rm", "-rf", str(work)])


if __name__ == "__main__":
    main()
