"""A private Slurm for trying the cluster path on this machine: munged, slurmctld and slurmd with
their own munge key and socket, slurm.conf (SLURM_CONF), free ports, state and spool directories
under one folder, one node (this machine) by default. The cluster tests start one per session
(tests/cluster/conftest.py); `scripts/test-cluster.sh start|stop|status` starts one that outlives
the command (detached, its daemons' ids in ROOT/daemons.json) for trying `rcsweep plan --emit
slurm`, the job scripts and the Python API's submit by hand (docs/CLUSTER.md "Trying the cluster path
on one machine").

    python3 tests/cluster/local_slurm.py start|stop|status [--dir ROOT]

start prints the SLURM_CONF to export; stop cancels every job of that cluster, stops its daemons
and removes ROOT; status says whether it runs (exit 0) or not (exit 3) and shows sinfo and squeue.
Only the processes it started are stopped (by their ids, checked against their command lines)."""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch")


def missing_programs():
    """The programs of PROGRAMS not on PATH (scripts/install_deps.sh installs slurm-wlm and munge)."""
    return [p for p in PROGRAMS if not shutil.which(p)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurm:
    """A Slurm cluster private to the test: its own munge key and socket, slurm.conf (SLURM_CONF),
    ports, state and spool directories. One node, this machine, by default; with `nodes` (a
    netns.Cluster) one slurmd in each of its nodes, started through its agent, and slurmctld on
    this machine at the bridge's address. Only the daemons it started are stopped."""

    def __init__(self, root, nodes=None, base_env=None, detach=False):
        """`base_env`: the environment of the daemons and the commands (default this process's),
        with SLURM_CONF added; `detach`: daemons in sessions of their own, to outlive this process."""
        self.root = Path(root)
        self.procs = []
        self.nodes = nodes
        self.detach = detach
        self.head = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        self.conf = self.root / "slurm.conf"
        self.env = {**(os.environ if base_env is None else base_env), "SLURM_CONF": str(self.conf)}

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
        self.procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                                  start_new_session=self.detach)))

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


    def save(self):
        """Write the daemons' names and ids to ROOT/daemons.json (for `stop` from another process)."""
        (self.root / "daemons.json").write_text(json.dumps({"cpus": self.cpus, "daemons": [
            [name, p.pid] for name, p in self.procs]}))

    @classmethod
    def load(cls, root):
        """The cluster `save` described under `root`, its daemons as Daemon handles; None when there
        is none."""
        try:
            saved = json.loads((Path(root) / "daemons.json").read_text())
        except (OSError, ValueError):
            return None
        cluster = cls(root)
        cluster.cpus = saved["cpus"]
        cluster.procs = [(name, Daemon(pid, name.split("-")[0])) for name, pid in saved["daemons"]]
        return cluster


class Daemon:
    """A daemon another process started, by its id, with Popen's poll/terminate/kill/wait; gone
    (never signalled) once its id no longer runs the program `name` it was started as."""

    def __init__(self, pid, name):
        self.pid = pid
        self.name = name
        self.returncode = None

    def alive(self):
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        state = stat[stat.rindex(")") + 2:].split()[0]
        program = os.path.basename(cmdline[0].decode(errors="replace")) if cmdline and cmdline[0] else ""
        return state != "Z" and (program == self.name or self.name not in ("munged", "slurmctld", "slurmd"))

    def poll(self):
        if self.returncode is None and not self.alive():
            self.returncode = 0
        return self.returncode

    def _signal(self, sig):
        if self.alive():
            os.kill(self.pid, sig)

    def terminate(self):
        self._signal(signal.SIGTERM)

    def kill(self):
        self._signal(signal.SIGKILL)

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(self.name, timeout)
            time.sleep(0.2)
        return self.returncode


def default_root():
    return Path(os.environ.get("RCSWEEP_TEST_CLUSTER", f"/tmp/rcsweep-test-cluster-{os.getuid()}"))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="scripts/test-cluster.sh", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["start", "stop", "status"])
    ap.add_argument("--dir", type=Path, default=None,
                    help="the cluster's folder (default $RCSWEEP_TEST_CLUSTER, else /tmp/rcsweep-test-cluster-UID)")
    args = ap.parse_args(argv)
    root = (args.dir or default_root()).absolute()
    cluster = Slurm.load(root)
    running = cluster is not None and all(p.poll() is None for _, p in cluster.procs)
    if args.command == "status":
        if not running:
            print(f"no test Slurm runs in {root}" + (" (some of its daemons died: stop it)" if cluster else ""))
            return 3
        print(f"test Slurm in {root}: export SLURM_CONF={cluster.conf}")
        for cmd in (["sinfo"], ["squeue"]):
            p = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True)
            print(p.stdout + p.stderr, end="")
        print("PBS: none (the PBS tests run the scripts with the environment a PBS server gives, no server)")
        return 0
    if args.command == "stop":
        if cluster is None:
            print(f"no test Slurm in {root}")
            return 0
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        print(f"stopped the test Slurm of {root}")
        return 0
    if cluster is not None:
        print(f"error: a test Slurm is already in {root}" + (" and runs" if running else "") +
              ": `scripts/test-cluster.sh stop` first", file=sys.stderr)
        return 2
    missing = missing_programs()
    if missing:
        print(f"error: {', '.join(missing)} not installed (scripts/install_deps.sh installs slurm-wlm and munge)",
              file=sys.stderr)
        return 2
    if root.exists():
        print(f"error: {root} exists and holds no test Slurm: remove it or give another --dir", file=sys.stderr)
        return 2
    root.mkdir(parents=True)
    cluster = Slurm(root, detach=True)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    cluster.save()
    print(f"started a test Slurm of one node ({cluster.head}, {cluster.cpus} CPUs; partitions test, compute) in "
          f"{root}\nuse it with:\n  export SLURM_CONF={cluster.conf}\nstop it with: scripts/test-cluster.sh stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
