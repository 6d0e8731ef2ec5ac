"""scripts/test-cluster.sh start|stop|status: the tests' Slurm (local_slurm.Slurm) started to outlive
the command, used with the SLURM_CONF it prints (an emitted array of a small sweep runs and merges),
refused when already started, and stopped with every daemon it started gone and its folder removed."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import BIN, DATA, SOURCE, job_env
from local_slurm import Daemon, missing_programs

SCRIPT = SOURCE / "scripts" / "test-cluster.sh"


def script(*args, root):
    return subprocess.run(["bash", str(SCRIPT), *args, "--dir", str(root)], capture_output=True, text=True,
                          timeout=180)


def test_start_status_use_stop(tmp_path):
    for prog in missing_programs():
        pytest.skip(f"{prog} not installed (scripts/install_deps.sh installs slurm-wlm and munge)")
    parent = tempfile.mkdtemp(prefix="rcsweep-test-cluster-")  # munged wants its socket's folders searchable by all
    os.chmod(parent, 0o755)
    root = Path(parent) / "cluster"
    assert script("status", root=root).returncode == 3
    started = script("start", root=root)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        conf = re.search(r"export SLURM_CONF=(\S+)", started.stdout).group(1)
        assert conf == str(root / "slurm.conf")
        saved = json.loads((root / "daemons.json").read_text())["daemons"]
        daemons = [Daemon(pid, name.split("-")[0]) for name, pid in saved]
        assert sorted(d.name for d in daemons) == ["munged", "slurmctld", "slurmd"]
        assert all(d.alive() for d in daemons)
        status = script("status", root=root)
        assert status.returncode == 0 and "idle" in status.stdout, status.stdout + status.stderr
        again = script("start", root=root)
        assert again.returncode == 2 and "already" in again.stderr
        # the cluster path by hand: an array of 3 shards of a small sweep, its merge, the store
        env = {**job_env(), "SLURM_CONF": conf, "RCSWEEP": ""}
        work = tmp_path / "work"
        work.mkdir()
        emit = subprocess.run([BIN, "plan", str(DATA / "small.toml"), "--emit", "slurm", "--hours", "0.085",
                               "--shards", "3"], capture_output=True, text=True, env=env, timeout=120)
        assert emit.returncode == 0, emit.stderr
        (work / "job.sh").write_text(emit.stdout)
        sub = subprocess.run(["sbatch", "--parsable", "job.sh"], cwd=work, env=env, capture_output=True, text=True)
        assert sub.returncode == 0, sub.stderr
        end = time.monotonic() + 300
        while not list(work.glob("rcsweep-merge-*.out")) or subprocess.run(
                ["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
            assert time.monotonic() < end, script("status", root=root).stdout
            time.sleep(1)
        info = subprocess.run([BIN, "info", "--json", str(work / "cluster-small.h5")], capture_output=True, text=True)
        assert info.returncode == 0 and json.loads(info.stdout)["tasks"]["done"] == 72, info.stdout + info.stderr
    finally:
        stopped = script("stop", root=root)
        shutil.rmtree(parent, ignore_errors=True)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not root.exists() and not any(d.alive() for d in daemons)
    assert script("status", root=root).returncode == 3
    assert script("stop", root=root).returncode == 0  # nothing to stop: fine
