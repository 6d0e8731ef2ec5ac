"""rcsweep across three nodes: network namespaces on a private bridge, each with its own address and
host name (conftest.nodes, netns.py), and a plain `mpiexec --hostfile` whose daemons reach the
nodes through an rsh agent. Ranks talk over TCP on the bridge only. A sweep run across the nodes
equals a one-node run bitwise; a node that fails mid-run (every process on it killed, or its link
cut) ends the job within a bounded time with every finished task kept, and the same command
completes the store, again bitwise equal to an uninterrupted run. On a Slurm with a slurmd in each
node: the shipped MPI job unchanged on two and three nodes (mpiexec and srun), array shards spread
over the nodes and their dependent merge, a three-node job stopped at its walltime and requeued, and
a script `rcsweep plan --emit` wrote with site options, across the nodes."""
import re
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import netns
import workload
from conftest import BIN, DATA, JOBS, MPIEXEC, assert_same_results, e2e

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


RESTART_STALL_S = 60  # a resume after a node failure takes well under this (medium.toml: ~10 s)


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


@pytest.mark.parametrize("victim,how", [(2, "kill"), (0, "kill"), (2, "cut"), (0, "cut")],
                         ids=["worker-node-killed", "rank0-node-killed", "worker-node-cut-off", "rank0-node-cut-off"])
def test_node_failure_ends_the_job_and_the_same_command_completes_it(nodes, tmp_path, sweep, reference, victim, how,
                                                                    monkeypatch):
    """Once a third of the work is done, one node fails: every process on it killed (node 3:
    workers only; node 1: rank 0, the writer), or node 3 cut off the network (its link down: no
    packet in or out, as a crash or power loss looks from the others, found by the TCP keepalive
    of netns.KEEPALIVE). When rank 0's node is cut off, its own Open MPI daemon does not always notice
    (docs/GUARANTEES.md): rank 0 then finds its workers silent (RCSWEEP_SILENCE_S, here 5 s), writes
    what it has and ends; what the daemon leaves on that node is not rcsweep's and is removed
    before the same command runs again."""
    store = tmp_path / "node-failure.h5"
    monkeypatch.setenv("RCSWEEP_SILENCE_S", "5")
    cmd = nodes.mpiexec(MPIEXEC, 3, BIN, "run", sweep("medium"), "-o", store,
                        export=["RCSWEEP_PROGRESS_INTERVAL", "RCSWEEP_SILENCE_S"])
    w = workload.Watched(cmd)
    try:
        # progress counts tasks once they are written: some are in the store before the failure
        assert w.wait_until(lambda w: w.work >= 0.3 and w.done > 0), f"finished before the node failure:\n{w.err}"
        failed = time.monotonic()
        if how == "kill":
            assert nodes.kill(victim) > 0
        else:
            nodes.cut(victim)
        left = lambda: {ns: netns.describe_pids(pids) for ns in nodes.netns if (pids := netns.netns_pids(ns))}
        if (victim, how) == (0, "cut"):  # rank 0 must end by itself, its launcher does not end it
            while any(str(BIN) in text for procs in left().values() for text in procs.values()):
                assert time.monotonic() - failed < 5 + 10, left()
                time.sleep(0.1)
            print(f"rank 0 ended {time.monotonic() - failed:.2f} s after its node was cut off; left there: {left()}")
            nodes.kill(0)  # Open MPI's daemon, if it stayed (as a fenced node's would be): it holds mpiexec's output
        code, err = w.wait(timeout=NODE_FAILURE_BOUND_S)
        ended = time.monotonic() - failed
        # Nothing of the job is left on any node. (The agent's shell runs in the node, in one
        # process group with its orted, which mpiexec may kill at the end: a cut-off node's
        # processes can end that way here, where ssh's client would stay outside the node.)
        end = time.monotonic() + NODE_FAILURE_BOUND_S
        while left():
            assert time.monotonic() < end, left()
            time.sleep(0.1)
        print(f"node {victim + 1} {how}: mpiexec exit code {code} after {ended:.2f} s, "
              f"nodes empty after {time.monotonic() - failed:.2f} s")
    finally:
        if w.poll() is None:
            w.kill()
        nodes.cut(victim, down=False)
    assert code != 0, err
    if victim != 0:  # rank 0 lives on: it wrote what it had, closed the store and said so
        assert "resume with the same command" in err, err

    status = statuses(store)
    assert 0 < np.sum(status == 1) < len(status), err
    assert set(status) <= {0, 1}  # pending or done: a node failure fails no task
    assert_done_tasks_match(store, reference("medium"))
    with h5py.File(store, "r") as f:
        kept = f["tasks"][...]

    # Open MPI 4.1's start-up over a link just restored sometimes stalls in a TCP connect
    # ("Operation now in progress") and never gets going (seen about one run in three of this case
    # under load): such an mpiexec is ended and the command run once more, which is what a user
    # does (docs/GUARANTEES.md "What is not guaranteed"). Rank 0 notices its launcher gone and lets
    # go of the store within seconds.
    try:
        again = run(cmd, timeout=RESTART_STALL_S)
    except subprocess.TimeoutExpired:
        print(f"mpiexec stalled starting over the restored link for {RESTART_STALL_S} s: run once more")
        time.sleep(10)
        again = run(cmd)
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stderr
    with h5py.File(store, "r") as f:
        after = f["tasks"][...]
    done = kept["status"] == 1
    assert np.array_equal(after["wall_s"][done], kept["wall_s"][done])  # finished tasks not recomputed
    assert_same_results(store, reference("medium"))


def test_leftovers_of_a_dead_run_are_removed_and_a_live_runs_kept(tmp_path):
    """What a killed test run leaves (namespace with a process in it, bridge, UTS mount) is removed
    by the next run; what a live run owns (a concurrent test) is not touched."""
    why = netns.unavailable()
    if why:
        pytest.skip(why)
    gone = subprocess.Popen(["true"])
    gone.wait()
    live = subprocess.Popen(["sleep", "60"])
    made = []
    try:
        for owner in (gone.pid, live.pid):
            ns, bridge = f"{netns.PREFIX}-{owner}-n1", f"{netns.PREFIX}{owner}b"
            uts = tmp_path / f"{netns.PREFIX}-{owner}-x" / "uts-n1"
            uts.parent.mkdir()
            uts.touch()
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
            subprocess.run(["unshare", f"--uts={uts}", "true"], check=True)
            made.append((ns, bridge, str(uts)))
        inside = subprocess.Popen(["ip", "netns", "exec", made[0][0], "sleep", "60"])
        time.sleep(0.2)
        removed = netns.remove_stale()
        assert sorted(removed) == sorted(made[0]), removed
        assert inside.wait(timeout=10) == -9
        mounts = Path("/proc/self/mounts").read_text()
        netns_list = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert made[0][0] not in netns_list and made[0][2] not in mounts
        assert made[1][0] in netns_list and made[1][2] in mounts
    finally:
        live.kill()
        live.wait()
        netns.remove_stale()
    assert netns.owned_by(gone.pid, live.pid) == ([], [], [])


def tcp_env(nodes):
    """Open MPI's TCP settings of the test cluster, as environment variables (sbatch exports them)."""
    net = str(nodes.subnet)
    return {"OMPI_MCA_btl": "tcp,self", "OMPI_MCA_pml": "ob1", "OMPI_MCA_btl_tcp_if_include": net,
            "OMPI_MCA_oob_tcp_if_include": net}


def node_list(n):
    return f"{netns.PREFIX}-node[1-{n}]"


def assert_job_completed(slurm, record, log):
    assert record["JobState"] == "COMPLETED" and record["ExitCode"] == "0:0", f"{record}\n{log}\n{slurm.logs()}"


def test_slurm_mpi_job_on_two_and_three_nodes(slurm_nodes, nodes, reference):
    """The shipped mpi_job.sh, unchanged, on two and on three nodes, with mpiexec and with srun, of a
    Slurm whose slurmd run in the nodes: mpiexec starts the other nodes' orted through Slurm, srun
    starts every rank itself (with the PMI plugin the script found: pmix); Open MPI's TCP settings
    come from the submitter's environment (OMPI_MCA_*), which sbatch exports. The four jobs are
    submitted together."""
    work = slurm_nodes.root / "work"
    jobs = {}
    for n, launcher in [(2, "mpiexec"), (2, "srun"), (3, "mpiexec"), (3, "srun")]:
        name = f"nodes{n}-{launcher}"
        jobs[n, launcher] = slurm_nodes.sbatch("-N", n, "--ntasks-per-node=1", "-t", "5", f"--output={name}-%j.out",
                                               JOBS / "slurm" / "mpi_job.sh", DATA / "small.toml", work / f"{name}.h5",
                                               env={**slurm_nodes.env, **tcp_env(nodes), "LAUNCHER": launcher})
    for (n, launcher), jid in jobs.items():
        name = f"nodes{n}-{launcher}"
        (record,) = slurm_nodes.wait(jid)
        log = (work / f"{name}-{jid}.out").read_text()
        assert_job_completed(slurm_nodes, record, log)
        assert record["NodeList"] == node_list(n), record
        assert f"RANKS={n} NODES={n} LAUNCHER={launcher}" in log and "rcsweep exit code 0" in log, log
        assert ("MPI openmpi (MPI_FLAVOUR=auto)" if launcher == "mpiexec" else "MPI plugin pmix (SRUN_MPI=auto)") in log
        assert sorted(set(hosts_of_tasks(work / f"{name}.h5"))) == nodes.hosts[:n]
        assert_same_results(work / f"{name}.h5", reference("small"))


def test_slurm_array_shards_spread_over_the_nodes_and_the_merge(slurm_nodes, nodes, reference):
    """submit_array.sh's three shards, one whole node each (--exclusive), then the dependent merge:
    each shard is computed on another node, and the merged store equals the direct run bitwise."""
    work = slurm_nodes.root / "work"
    out = work / "spread.h5"
    proc = slurm_nodes.run("bash", JOBS / "slurm" / "submit_array.sh", DATA / "small.toml", out, "3",
                           env={**slurm_nodes.env, "ARRAY_SBATCH": "-t 5 --exclusive", "MERGE_SBATCH": "-t 5"})
    array, merge = re.search(r"array job (\d+) \(3 shards\), merge job (\d+)", proc.stdout).groups()
    records = slurm_nodes.wait(array, merge)
    log = "\n".join(f.read_text() for f in sorted(work.glob(f"rcsweep-*{array}_*.out")))
    elements = [r for r in records if r.get("ArrayJobId") == array]
    (merged,) = [r for r in records if r["JobId"] == merge]
    for r in records:
        assert_job_completed(slurm_nodes, r, log)
    assert sorted(r["BatchHost"] for r in elements) == nodes.hosts, elements  # one shard per node
    assert all(merged["StartTime"] >= r["EndTime"] for r in elements), "merge ran before a shard finished"
    for i in range(3):  # each shard's tasks computed on its element's node
        shard = work / "spread.shards" / f"shard-{i}-of-3.h5"
        (host,) = [r["BatchHost"] for r in elements if r["ArrayTaskId"] == str(i)]
        assert set(hosts_of_tasks(shard)) - {""} == {host}, (i, host)
    assert_same_results(out, reference("small"))


def test_slurm_multinode_job_stops_at_its_walltime_and_requeues(slurm_nodes, nodes, sweep, reference):
    """mpi_job.sh on three nodes with a one-minute limit and STOP_BEFORE=55: every run gets
    --time-limit of at most 5 s, stops cleanly (exit 4, or Slurm's warning signal forwarded) and the
    job requeues itself onto the three nodes until the long sweep (about 40 s of one core, some 13 s
    on the three nodes: several runs of at most 5 s, whatever the estimates of its units) is done;
    the store equals the direct run bitwise."""
    work = slurm_nodes.root / "work"
    out = work / "requeued.h5"
    jid = slurm_nodes.sbatch("-N", 3, "--ntasks-per-node=1", "-t", "1", "--signal=B:USR1@20", "--output=requeue-%j.out",
                             JOBS / "slurm" / "mpi_job.sh", sweep("long"), out,
                             env={**slurm_nodes.env, **tcp_env(nodes), "GRACE": "5", "STOP_BEFORE": "55"})
    (record,) = slurm_nodes.wait(jid, timeout=300)
    log = (work / f"requeue-{jid}.out").read_text()
    assert_job_completed(slurm_nodes, record, log)
    assert record["NodeList"] == node_list(3) and int(record["Restarts"]) >= 1, (record, log)
    runs = re.findall(r"rcsweep exit code (\d+)", log)
    assert set(runs[:-1]) <= {"4", "138"} and runs[-1] == "0" and len(runs) == int(record["Restarts"]) + 1, log
    assert log.count("RANKS=3 NODES=3 LAUNCHER=mpiexec") == len(runs), log
    limits = [int(x) for x in re.findall(r"job ends \S+: rcsweep --time-limit (\d+)s", log)]
    assert len(limits) == len(runs) and all(1 <= x <= 5 for x in limits), log
    assert len(re.findall(r"requeueing job", log)) == len(runs) - 1, log
    assert set(hosts_of_tasks(out)) == set(nodes.hosts), "every node computed tasks over the runs"
    assert_same_results(out, reference("long"))


def test_emitted_script_with_site_options_runs_across_the_nodes(slurm_nodes, nodes, reference, tmp_path):
    """`rcsweep plan --emit slurm --nodes 3 --cores 2` with --account, --partition, --qos and --setup
    (the setup file sets Open MPI's TCP settings, as a site's module would), submitted with plain
    sbatch: 6 ranks, 2 on each node, in the partition and account asked; the store equals the direct
    run bitwise. The test Slurm has no accounting database (slurmdbd): it accepts the qos line and
    keeps no qos, so QOS limits are not tested."""
    work = slurm_nodes.root / "work" / "emitted-nodes"
    work.mkdir()
    setup = work / "site-env.sh"
    setup.write_text("".join(f"export {k}={v}\n" for k, v in tcp_env(nodes).items()) + 'echo "site setup sourced"\n')
    site = ["--account", "proj42", "--partition", "compute", "--qos", "normal", "--setup", setup]
    plan = subprocess.run([BIN, "plan", DATA / "small.toml", "--emit", "slurm", "--nodes", "3", "--cores", "2", *site],
                          capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "6 ranks on 3 node(s) per job" in plan.stderr, plan.stderr
    script = work / "job.sh"
    script.write_text(plan.stdout)
    env = {k: v for k, v in slurm_nodes.env.items() if not k.startswith("OMPI_MCA_")}
    env["RCSWEEP"] = ""  # the script's default: this program
    jid = slurm_nodes.sbatch(script, cwd=work, env=env)
    (record,) = slurm_nodes.wait(jid)
    log = (work / f"rcsweep-{jid}.out").read_text()
    assert_job_completed(slurm_nodes, record, log)
    assert "\n#SBATCH --qos=normal\n" in plan.stdout
    assert (record["Partition"], record["Account"], record["NodeList"]) == ("compute", "proj42", node_list(3)), record
    # A Slurm without an accounting database (slurmdbd) takes --qos and keeps none (docs/CLUSTER.md)
    assert record["QOS"] == "(null)", record
    assert record["NumTasks"] == "6", record
    assert "site setup sourced" in log and "RANKS=6 NODES=3 LAUNCHER=mpiexec" in log, log
    hosts = hosts_of_tasks(work / "cluster-small.h5")
    assert set(hosts) == set(nodes.hosts), set(hosts)
    assert_same_results(work / "cluster-small.h5", reference("small"))

