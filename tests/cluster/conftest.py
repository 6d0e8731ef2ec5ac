"""Shared pieces of the cluster tests: a private one-node Slurm (munged, slurmctld, slurmd started by
the test on free ports, with their state in a temporary directory, stopped at the end), three nodes
in network namespaces (netns.py) for multi-node MPI, the test sweeps (the long ones sized for this
machine), direct reference runs of them, and the store comparison of the end-to-end tests."""
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import netns

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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurm:
    """A Slurm cluster private to the test: its own munge key and socket, slurm.conf (SLURM_CONF),
    ports, state and spool directories. One node, this machine, by default; with `nodes` (a
    netns.Cluster) one slurmd in each of its nodes, started through its agent, and slurmctld on
    this machine at the bridge's address. Only the daemons it started are stopped."""

    def __init__(self, root, nodes=None):
        self.root = root
        self.procs = []
        self.nodes = nodes
        self.head = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        self.conf = root / "slurm.conf"
        self.env = job_env(SLURM_CONF=self.conf)

    def start(self):
        r = self.root
        for sub in ("munge", "msock", "state", "spool", "log", "work"):
            (r / sub).mkdir()
        os.chmod(r, 0o755)  # munged wants its socket's directories searchable by all
        os.chmod(r / "msock", 0o755)
        os.chmod(r / "munge", 0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))
        os.chmod(key, 0o400)
        sock = r / "msock" / "munge.socket"
        self.spawn(["munged", "-F", f"--key-file={key}", f"--socket={sock}", f"--pid-file={r}/munge/munged.pid",
                    f"--log-file={r}/log/munged.log", f"--seed-file={r}/munge/seed"], "munged")
        self.wait_for(lambda: sock.exists(), "munged socket", 20)
        mem_mb = int(int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1)) / 1024 * 0.8)
        if self.nodes:  # name, address, command prefix of each node's slurmd
            daemons = [(h, self.nodes.address(i), [str(self.nodes.agent), self.nodes.address(i)])
                       for i, h in enumerate(self.nodes.hosts)]
            head_addr = self.nodes.address(None)
        else:
            daemons = [(self.head, "127.0.0.1", [])]
            head_addr = "127.0.0.1"
        node_lines = "".join(f"NodeName={h} NodeAddr={a} CPUs={self.cpus} RealMemory={mem_mb // len(daemons)} "
                             "State=UNKNOWN\n" for h, a, _ in daemons)
        self.conf.write_text(f"""\
ClusterName=rcsweeptest
SlurmctldHost={self.head}({head_addr})
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long a requeued job waits before it is eligible again (default 120 s); the
# schedulers, which start it, look every bf_interval and sched_interval seconds (default 30, 60)
AuthInfo=socket={sock},cred_expire=5
SchedulerParameters=bf_interval=1,sched_interval=2
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait=10
OverTimeLimit=0
MinJobAge=600
InactiveLimit=0
{node_lines}PartitionName=test Nodes={",".join(h for h, _, _ in daemons)} Default=YES MaxTime=INFINITE State=UP
# a second partition of the same nodes, for jobs that name theirs (plan --emit --partition)
PartitionName=compute Nodes={",".join(h for h, _, _ in daemons)} Default=NO MaxTime=INFINITE State=UP
""")
        # Slurm's pmix plugin makes a directory per job step in PMIxCliTmpDirBase (default /tmp), the
        # same name on every node: node-local on a real cluster, shared by the test's nodes. So each
        # node's slurmd runs in a mount namespace of its own where that base is its node's directory.
        pmix_base = r / "pmix-tmp"
        pmix_base.mkdir()
        (r / "mpi.conf").write_text(f"PMIxCliTmpDirBase={pmix_base}\n")
        self.spawn(["slurmctld", "-D", "-f", str(self.conf)], "slurmctld")
        for h, _, prefix in daemons:  # through an agent: one command line, run by sh
            cmd = ["slurmd", "-D", "-f", str(self.conf), "-N", h]
            if prefix:
                (r / f"pmix-tmp-{h}").mkdir()
                line = (f"unshare --mount --propagation private sh -c 'mount --bind {r}/pmix-tmp-{h} {pmix_base} "
                        f"&& exec {' '.join(cmd)}'")
                self.spawn(prefix + [line], f"slurmd-{h}")
            else:
                self.spawn(cmd, f"slurmd-{h}")
        self.wait_for(lambda: self.idle_nodes() == len(daemons), "nodes idle in sinfo", 60)

    def spawn(self, cmd, name):
        log = open(self.root / "log" / f"{name}.stdout", "w")
        self.procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)))

    def wait_for(self, cond, what, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, p in self.procs:
                assert p.poll() is None, f"{name} exited ({p.returncode}):\n{self.logs()}"
            if cond():
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}\n{self.logs()}")

    def idle_nodes(self):
        p = subprocess.run(["sinfo", "-h", "-N", "-p", "test", "-o", "%t"], capture_output=True, text=True, env=self.env)
        return p.stdout.split().count("idle") if p.returncode == 0 else 0

    def logs(self, lines=25):
        out = []
        for f in sorted((self.root / "log").glob("*")):
            text = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"== {f.name}\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self):
        """Cancel every job of this cluster, stop its daemons, then kill any slurmstepd they left
        (recognised by this cluster's SLURM_CONF in its environment)."""
        if all(p.poll() is None for _, p in self.procs):
            self.run("scancel", "--full", "--user", str(os.getuid()), check=False)
            end = time.monotonic() + 30
            while time.monotonic() < end:
                q = self.run("squeue", "-h", check=False)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(1)
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        mark = f"SLURM_CONF={self.conf}".encode()
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if (proc / "comm").read_text().startswith("slurmstepd") and mark in (proc / "environ").read_bytes():
                    os.kill(int(proc.name), 9)
            except (OSError, ValueError):
                pass

    def run(self, *cmd, cwd=None, check=True, env=None):
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd or self.root / "work",
                           env=env or self.env, timeout=120)
        if check:
            assert p.returncode == 0, f"{cmd} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
        return p

    def sbatch(self, *args, env=None, cwd=None):
        """Submit (from `cwd`, default root/work); return the job id."""
        p = self.run("sbatch", "--parsable", *args, env=env, cwd=cwd)
        return p.stdout.strip().split(";")[0]

    def job(self, job_id):
        """scontrol's fields of a job (an array: of its first element)."""
        p = self.run("scontrol", "-o", "show", "job", job_id)
        return dict(re.findall(r"(\w+)=(\S*)", p.stdout.splitlines()[0]))

    def wait(self, *job_ids, timeout=600):
        """Wait until the jobs (and array elements) have left the queue; return their scontrol records
        (one per line of `scontrol -o show job`)."""
        end = time.monotonic() + timeout
        ids = ",".join(job_ids)
        while True:
            p = self.run("squeue", "-h", "-j", ids, "-o", "%i %T", check=False)
            if p.returncode == 0 and not p.stdout.strip():
                break
            assert time.monotonic() < end, f"jobs {ids} still queued after {timeout} s:\n{p.stdout}\n{self.logs()}"
            time.sleep(1)
        records = []
        for j in job_ids:
            p = self.run("scontrol", "-o", "show", "job", j)
            records += [dict(re.findall(r"(\w+)=(\S*)", line)) for line in p.stdout.splitlines() if line]
        return records


def started_slurm(nodes=None):
    """A started Slurm (a generator for the fixtures): skipped where Slurm is not installed."""
    for prog in ("munged", "slurmctld", "slurmd", "sbatch"):
        if not shutil.which(prog):
            pytest.skip(f"{prog} not installed (scripts/install_deps.sh installs slurm-wlm and munge)")
    root = Path(tempfile.mkdtemp(prefix="rcsweep-slurm-"))
    cluster = Slurm(root, nodes)
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
