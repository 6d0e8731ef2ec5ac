"""A cluster of nodes on this machine for multi-node tests: each node is a network namespace with its
own address on a private bridge and a UTS namespace with its own host name; all share this
machine's file system (the store, the binary, the sweep files) and its cores.

    head (this namespace)  10.213.N.254 on bridge rcst<pid>b
      node1  netns rcst-<pid>-n1, eth0 10.213.N.1, host name rcst-node1
      node2  netns rcst-<pid>-n2, eth0 10.213.N.2, host name rcst-node2   ...

`mpiexec` runs on the head; it starts Open MPI's daemon (orted) on every node through an rsh agent
(`agent`, written next to the hostfile) that enters the node's namespaces with nsenter and a clean
environment, as ssh would. The Open MPI options (`mpi_options`) keep every connection on the
bridge's subnet and make ranks talk over TCP, also between ranks of one node.

Names carry the owner's pid (`rcst-<pid>-...`): a run finds the leftovers of runs whose owner is
gone (a killed test) and removes them before it starts; those of a live owner (a concurrent run)
are left alone, and its subnet is not reused. `stop` kills every process in the nodes' namespaces
and removes namespaces, bridge and mounts, with bounded waits, and `leftovers` lists what is still
there (empty after `stop`).
"""
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

PREFIX = "rcst"
NETNS_DIR = Path("/run/netns")
KEEPALIVE = {"oob_tcp_keepalive_time": 5, "oob_tcp_keepalive_intvl": 1, "oob_tcp_keepalive_probes": 3}


def _ip(*args, check=True):
    p = subprocess.run(["ip", *map(str, args)], capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(map(str, args))}: {p.stderr.strip()}")
    return p


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def netns_pids(name):
    """Pids of the processes in network namespace `name` (ip netns pids)."""
    p = _ip("netns", "pids", name, check=False)
    return [int(x) for x in p.stdout.split()] if p.returncode == 0 else []


def describe_pids(pids):
    """pid: command line (and state) of each, to say what is left."""
    out = {}
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
            out[pid] = f"[{state}] {cmd}"
        except OSError:
            out[pid] = "(gone)"
    return out


def kill_netns(name, timeout=10.0):
    """SIGKILL every process in network namespace `name` until none is left (bounded); return how
    many were killed. Processes can still appear while this runs (a daemon forking): looped."""
    killed = set()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pids = netns_pids(name)
        if not pids:
            return len(killed)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"processes still in netns {name} after {timeout} s: {netns_pids(name)}")


def _owned(owner_filter):
    """(netns names, link names, nsfs mount points) of this prefix whose owner pid passes the filter."""
    netns = [n for n in (line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip())
             if (m := re.fullmatch(rf"{PREFIX}-(\d+)-n\d+", n)) and owner_filter(int(m.group(1)))]
    links = [n for n in re.findall(r"^\d+: ([^:@]+)", _ip("-o", "link", "show").stdout, re.M)
             if (m := re.fullmatch(rf"{PREFIX}(\d+)[bv]\d*", n)) and owner_filter(int(m.group(1)))]
    mounts = [f.split()[1] for f in Path("/proc/self/mounts").read_text().splitlines()
              if f.split()[2] == "nsfs" and (m := re.search(rf"/{PREFIX}-(\d+)-", f.split()[1]))
              and owner_filter(int(m.group(1))) and not f.split()[1].startswith(str(NETNS_DIR))]
    return netns, links, mounts


def owned_by(*owners):
    """(netns names, link names, nsfs mount points) of these owner pids."""
    return _owned(lambda pid: pid in owners)


def _remove(netns, links, mounts):
    for n in netns:
        kill_netns(n)
        _ip("netns", "del", n, check=False)
    for path in mounts:
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=30)
    for link in links:
        _ip("link", "del", link, check=False)


def remove_stale():
    """Remove namespaces, links and mounts of earlier runs whose owner process is gone, then their
    temporary directories; return the names of the namespaces, links and mounts."""
    stale = _owned(lambda pid: not _alive(pid))
    _remove(*stale)
    for d in Path(tempfile.gettempdir()).glob(f"{PREFIX}-*-*"):
        m = re.fullmatch(rf"{PREFIX}-(\d+)-\w+", d.name)
        if m and d.is_dir() and not _alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)
    return [x for group in stale for x in group]


def unavailable():
    """Why this machine cannot run the cluster (None if it can): not root, no ip/nsenter/unshare, or
    a kernel that forbids network or UTS namespaces."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for prog in ("ip", "nsenter", "unshare"):
        if not shutil.which(prog):
            return f"{prog} not installed (scripts/install_deps.sh installs iproute2 and util-linux)"
    p = subprocess.run(["unshare", "--net", "--uts", "true"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return f"the kernel forbids network/UTS namespaces here: unshare --net --uts: {p.stderr.strip()}"
    return None


class Cluster:
    """`nodes` nodes in namespaces on a fresh bridge (see the module's description)."""

    def __init__(self, nodes=3):
        self.owner = os.getpid()
        self.n = nodes
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{self.owner}-"))
        self.bridge = f"{PREFIX}{self.owner}b"
        self.netns = [f"{PREFIX}-{self.owner}-n{i}" for i in range(1, nodes + 1)]
        self.hosts = [f"{PREFIX}-node{i}" for i in range(1, nodes + 1)]
        self.uts = [self.root / f"uts-n{i}" for i in range(1, nodes + 1)]
        self.agent = self.root / "agent"
        self.agent_log = self.root / "agent.log"
        self.subnet = None

    # -- set up and tear down ------------------------------------------------------------------
    def _free_subnet(self):
        used = set(re.findall(r"inet 10\.213\.(\d+)\.", _ip("-4", "-o", "addr", "show").stdout))
        for k in range(250):
            x = (self.owner + k) % 250
            if str(x) not in used:
                return ipaddress.ip_network(f"10.213.{x}.0/24")
        raise RuntimeError("no free 10.213.x.0/24 subnet")

    def address(self, i):
        """Address of node i (0-based), or of the head for i = None."""
        return str(self.subnet.network_address + (254 if i is None else i + 1))

    def start(self):
        remove_stale()
        self.subnet = self._free_subnet()
        prefix = self.subnet.prefixlen
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.address(None)}/{prefix}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, ns in enumerate(self.netns):
            veth = self._veth(i)
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/{prefix}", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            # A persistent UTS namespace: unshare bind-mounts it on the file; its host name is set
            # by the one command run in it.
            self.uts[i].touch()
            subprocess.run(["unshare", f"--uts={self.uts[i]}", "hostname", self.hosts[i]], check=True, timeout=30)
        cases = "\n".join(f"  {self.address(i)}|{self.hosts[i]}) ns={self.netns[i]} uts={self.uts[i]} ;;"
                          for i in range(self.n))
        self.agent.write_text(f"""#!/bin/sh
# rsh agent of the test cluster: AGENT HOST COMMAND... runs COMMAND in node HOST's network and UTS
# namespaces, with a clean environment as ssh gives (Open MPI passes what its daemon needs on the
# command line).
host=$1; shift
case $host in
{cases}
  *) echo "agent: unknown host $host" >&2; exit 255 ;;
esac
echo "$host: $*" >> {self.agent_log}
exec nsenter --net=/run/netns/$ns --uts=$uts -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /bin/sh -c "$*"
""")
        self.agent.chmod(0o755)
        return self

    def stop(self):
        """Kill every process in the nodes, remove namespaces, bridge and mounts (bounded waits)."""
        _remove(*owned_by(self.owner))
        shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self):
        """What of this cluster still exists: netns, links, mounts (each a list of names)."""
        return [x for group in owned_by(self.owner) for x in group]

    # -- using it ------------------------------------------------------------------------------
    def run(self, i, *cmd, **kw):
        """Run a command on node i (0-based), as the agent would."""
        return subprocess.run([str(self.agent), self.address(i), *map(str, cmd)], **kw)

    def hostfile(self, slots=1):
        """A hostfile of the nodes with `slots` slots each."""
        path = self.root / f"hosts-{slots}"
        path.write_text("".join(f"{self.address(i)} slots={slots}\n" for i in range(self.n)))
        return path

    def mpi_options(self):
        """Open MPI options of a job on this cluster: daemons started through the agent; the
        runtime's (oob) and MPI's (btl) connections over TCP on the bridge's subnet only; ob1, not
        UCX; no binding (every node sees the same cores: Open MPI would bind each node's first rank
        to core 0); TCP keepalive on the runtime's connections after 5 s idle, 3 probes 1 s apart,
        so that a node that falls silent is found lost in about 8 s (Open MPI's default: 300 s +
        9 x 20 s)."""
        net = str(self.subnet)
        opts = ["--mca", "plm_rsh_agent", str(self.agent), "--mca", "oob_tcp_if_include", net,
                "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", net, "--mca", "pml", "ob1",
                "--bind-to", "none"]
        for name, value in KEEPALIVE.items():
            opts += ["--mca", name, str(value)]
        if os.geteuid() == 0:
            opts.append("--allow-run-as-root")
        return opts

    def mpiexec(self, mpiexec, ranks, *cmd, slots=1, export=()):
        """The command line of `mpiexec -n ranks` over the nodes' hostfile; `export`: names of
        environment variables to pass to the ranks (-x; the agent starts the daemons with a clean
        environment), besides every OPENBLAS_* variable set here."""
        # OpenBLAS's settings too (e.g. OPENBLAS_CORETYPE): another kernel gives other bits than the
        # one-node reference, which runs in this environment
        blas = sorted(k for k in os.environ if k.startswith("OPENBLAS_") and k not in export)
        exported = [a for name in [*export, *blas] for a in ("-x", name)]
        return [str(mpiexec), "--hostfile", str(self.hostfile(slots)), "-n", str(ranks), *self.mpi_options(),
                *exported, *map(str, cmd)]

    def agent_calls(self):
        """Every call of the agent so far, one line each: "HOST: COMMAND"."""
        return self.agent_log.read_text().splitlines() if self.agent_log.exists() else []

    def kill(self, i):
        """A node failure: SIGKILL every process of node i; return how many there were."""
        return kill_netns(self.netns[i])

    def cut(self, i, down=True):
        """A silent node failure: node i's link to the bridge down (no packet in or out, its
        processes live on); down=False joins it again."""
        _ip("link", "set", self._veth(i), "down" if down else "up")

    def traffic(self, i):
        """(rx, tx) bytes of node i's eth0 so far: the bridge side's counters, reversed."""
        stats = Path(f"/sys/class/net/{self._veth(i)}/statistics")
        return int((stats / "tx_bytes").read_text()), int((stats / "rx_bytes").read_text())

    def _veth(self, i):
        """The bridge's end of node i's link (the node's end is its eth0)."""
        return f"{PREFIX}{self.owner}v{i + 1}"
