"""Progress on long runs: a single task of many layers shows its progress and an ETA before it
finishes (rank 0 counts its bundle's layers), and the final line says all tasks are done."""
import os
import re

from conftest import rcsweep
import workload

SWEEP = """
[sweep]
name = "progress"
seed = 1
replicates = 1
[model]
mixer = "softmax"
input = "sphere"
T = 512
d = 256
depth = 80
norm = "layernorm"
lambda = 1.0
"""


def test_one_long_task_reports_progress_within_the_task(tmp_path):
    sweep = tmp_path / "p.toml"  # depth for about 1 s here: some 20 progress lines at 0.05 s
    sweep.write_text(workload.sized("progress", SWEEP, "depth", 1.0, lo=10, probe=16))
    env = dict(os.environ, RCSWEEP_PROGRESS_INTERVAL="0.05")
    proc = rcsweep("run", sweep, "-o", tmp_path / "p.h5", check=0, env=env, timeout=600)
    lines = re.findall(r"\[rcsweep\] (\d+)/1 tasks, +([0-9.]+)% of work, elapsed \S+, ETA (\S+)", proc.stderr)
    partial = [(float(p), eta) for done, p, eta in lines if done == "0" and 0.0 < float(p) < 100.0]
    assert partial, proc.stderr  # progress inside the one task, before it is done
    assert all(eta != "?" for _, eta in partial)
    fractions = [p for p, _ in partial]
    assert fractions == sorted(fractions)  # never goes back
    assert lines[-1][0] == "1" and float(lines[-1][1]) == 100.0


def test_a_stderr_nobody_reads_does_not_hold_the_run(tmp_path, kill_sweep):
    """Text progress on a stderr pipe that is never read (a full pipe of one page): the run ends on
    time with its store complete (docs/EVENTS.md "A reader that does not keep up")."""
    import fcntl
    import subprocess
    import h5py
    from conftest import BIN
    store = tmp_path / "k.h5"
    r, w = os.pipe()
    fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    env = dict(os.environ, RCSWEEP_PROGRESS_INTERVAL="0.001")
    try:
        proc = subprocess.Popen([BIN, "run", str(kill_sweep), "-o", str(store)], stdout=subprocess.DEVNULL,
                                stderr=w, env=env)
        os.close(w)
        try:
            code = proc.wait(timeout=60)  # some 2 s of work
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("the run was held by its stderr")
        assert code == 0
        with h5py.File(store, "r") as f:
            assert (f["tasks"]["status"][...] == 1).all()
    finally:
        os.close(r)
