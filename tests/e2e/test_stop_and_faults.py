"""Stops and faults (docs/GUARANTEES.md): stop signals with a grace period, the time limit, a full
disk, --retry-failed. Every interrupted store must resume to bitwise the uninterrupted one."""
import os
import re
import shutil
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import BIN, DATA, assert_same_results, mpi_prefix, rcsweep
from test_kill_resume import descendants, mpi_rank_of

# kill.toml with more replicates: about 15 s on one core, so a stop always lands mid-run.
LONG = (DATA / "kill.toml").read_text().replace("replicates = 30", "replicates = 250")


@pytest.fixture(scope="module")
def long_sweep(tmp_path_factory):
    d = tmp_path_factory.mktemp("long")
    sweep = d / "long.toml"
    sweep.write_text(LONG)
    reference = d / "reference.h5"
    rcsweep("run", sweep, "-o", reference, "-q", ranks=2, check=0)
    return sweep, reference


def statuses(path):
    with h5py.File(path, "r") as f:
        return f["tasks"]["status"][...]


def start(args, ranks=None, env=None):
    return subprocess.Popen(mpi_prefix(ranks) + [BIN, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, **(env or {})})


def rank_pids(proc):
    """{MPI rank: pid} of an mpiexec job started by start()."""
    deadline = time.time() + 20
    while time.time() < deadline:
        pids = {mpi_rank_of(p): p for p in descendants(proc.pid)}
        pids.pop(None, None)
        if len(pids) >= 2:
            return pids
        time.sleep(0.05)
    raise AssertionError("the ranks did not start")


def resume_and_compare(sweep, store, reference, ranks=2):
    proc = rcsweep("run", sweep, "-o", store, ranks=ranks, check=0)
    assert "resuming" in proc.stderr
    assert_same_results(store, reference)


def check_stopped(proc, out, err, sig_name):
    assert proc.returncode == 4, f"exit {proc.returncode}\n{err}"
    assert f"stopped by {sig_name}" in err and "resume with the same command" in err, err
    assert re.search(r"\d+ tasks left", err)


def test_sigterm_single_process_stops_cleanly_and_resumes(tmp_path, long_sweep):
    sweep, reference = long_sweep
    store = tmp_path / "term.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "5"])
    time.sleep(2.0)
    t_signal = time.time()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert time.time() - t_signal < 5 + 2, "did not stop within the grace period"
    check_stopped(proc, out, err, "SIGTERM")
    s = statuses(store)
    assert 0 < np.sum(s == 1) < len(s)
    with h5py.File(store, "r") as f:
        assert f.attrs["finished"] == ""  # not complete: not marked finished
    resume_and_compare(sweep, store, reference)


def test_sigterm_to_every_rank_under_mpiexec(tmp_path, long_sweep):
    """What Slurm does on scancel or at the time limit with srun: SIGTERM to every task."""
    sweep, reference = long_sweep
    store = tmp_path / "term2.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "5"], ranks=2)
    pids = rank_pids(proc)
    time.sleep(1.5)
    t_signal = time.time()
    for pid in pids.values():
        os.kill(pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert time.time() - t_signal < 5 + 3
    check_stopped(proc, out, err, "SIGTERM")
    assert 0 < np.sum(statuses(store) == 1) < len(statuses(store))
    resume_and_compare(sweep, store, reference)


def test_sigusr1_to_mpiexec_is_forwarded_and_stops_cleanly(tmp_path, long_sweep):
    """mpiexec forwards SIGUSR1 to every rank without tearing the job down (job scripts ask the
    scheduler for it before the limit)."""
    sweep, reference = long_sweep
    store = tmp_path / "usr1.h5"
    proc = start(["run", sweep, "-o", store], ranks=2)
    rank_pids(proc)
    time.sleep(1.5)
    proc.send_signal(signal.SIGUSR1)
    out, err = proc.communicate(timeout=60)
    check_stopped(proc, out, err, "SIGUSR1")
    resume_and_compare(sweep, store, reference)


def test_signal_to_rank_0_only_stops_the_whole_job(tmp_path, long_sweep):
    sweep, reference = long_sweep
    store = tmp_path / "rank0.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "5"], ranks=2)
    pids = rank_pids(proc)
    time.sleep(1.5)
    os.kill(pids[0], signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    check_stopped(proc, out, err, "SIGTERM")
    resume_and_compare(sweep, store, reference)


# One task of about 6 s (1000 layers of T = d = 256).
BIG_BUNDLE = """[sweep]
name = "one-long-bundle"
seed = 3
[model]
mixer = "markov"
T = 256
d = 256
depth = 1000
input = "orthonormal"
norm = "rms"
"""


def test_grace_period_abandons_a_long_bundle(tmp_path):
    """A bundle that cannot finish within --grace is abandoned: the run stops on time and its
    task stays pending (then the resume computes it)."""
    sweep = tmp_path / "big.toml"
    sweep.write_text(BIG_BUNDLE)
    store = tmp_path / "big.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "0.5"])
    time.sleep(1.5)
    t_signal = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.time() - t_signal < 0.5 + 1.5, "the long bundle was not abandoned"
    check_stopped(proc, out, err, "SIGINT")
    assert np.all(statuses(store) == 0)  # abandoned: pending, not failed
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    assert np.all(statuses(store) == 1)


def test_second_sigint_stops_at_once_and_the_store_survives(tmp_path):
    sweep = tmp_path / "big.toml"
    sweep.write_text(BIG_BUNDLE)
    store = tmp_path / "twice.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "60"])
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)  # Ctrl-C twice: do not wait for the running task
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGINT
    rcsweep("info", store, check=0)
    assert np.all(statuses(store) == 0)
    rcsweep("run", sweep, "-o", store, "-q", check=0)


def test_time_limit_cuts_the_sweep_into_parts(tmp_path, long_sweep):
    """--time-limit: each run stops before its limit (give or take one bundle) with exit 4; the
    runs together complete the sweep, bitwise as one run."""
    sweep, reference = long_sweep
    store = tmp_path / "parts.h5"
    limit = 2.0
    runs = []
    for _ in range(14):
        proc = rcsweep("run", sweep, "-o", store, "--time-limit", f"{limit}s", ranks=2)
        assert proc.returncode in (0, 4), proc.stderr
        wall = float(re.search(r"(?:stopped|finished) after ([\d.]+) s", proc.stderr).group(1))
        runs.append((proc.returncode, wall))
        if proc.returncode == 0:
            break
        assert f"time limit of {limit:.1f} s reached" in proc.stderr
    assert runs[-1][0] == 0 and len(runs) >= 3, runs  # about 20 core-s of work in 2 s parts on 2 ranks
    with h5py.File(store, "r") as f:
        tasks = f["tasks"][...]
        point = f["tasks"]["point"][...]
    # one bundle = the tasks of one (replicate, T, d): its largest measured cost bounds the overrun
    with h5py.File(store, "r") as f:
        T = f["points"]["T"][point]
    bundle_cost = {}
    for t, row in enumerate(tasks):
        key = (row["replicate"], T[t])
        bundle_cost[key] = bundle_cost.get(key, 0.0) + row["wall_s"]
    slack = max(bundle_cost.values()) + 0.5  # + the final flush
    for code, wall in runs:
        assert wall <= limit + slack, (runs, slack)
    assert_same_results(store, reference)


def test_scheduler_end_time_is_a_time_limit(tmp_path, long_sweep):
    """SLURM_JOB_END_TIME (Unix seconds) limits the run to the job's end less one minute."""
    sweep, _ = long_sweep
    store = tmp_path / "slurm.h5"
    env = {**os.environ, "SLURM_JOB_END_TIME": str(int(time.time()) + 64)}
    proc = subprocess.run([BIN, "run", sweep, "-o", store], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert "time limit of" in proc.stderr
    wall = float(re.search(r"stopped after ([\d.]+) s", proc.stderr).group(1))
    assert 1.0 < wall < 6.5


def test_time_limit_estimates_use_the_stored_calibration(tmp_path):
    """With a calibration of this machine stored (RCSWEEP_CALIBRATION), the time limit's bundle
    estimates come from its rates: a calibration claiming the machine is 10^4 times slower makes
    every bundle too long for a 20 s limit (nothing starts, exit 4), the real one completes the
    same sweep within the limit."""
    real = tmp_path / "real.toml"
    rcsweep("calibrate", "-o", real, check=0)
    slow_lines = []
    for line in real.read_text().splitlines():
        key = line.split("=")[0].strip()
        factor = {"gemm_rate": 1e-4, "normal_rate": 1e-4, "exp_rate": 1e-4, "pass_rate": 1e-4, "conv_rate": 1e-4,
                  "signal_s": 1e4, "mixer_s": 1e4, "svd_s": 1e4}.get(key)
        if factor is not None:
            if line.lstrip().startswith(("gemm_rate", "signal_s", "mixer_s", "svd_s")):  # [[size, value], ...]
                line = re.sub(r"\[([\d.e+-]+), ([\d.e+-]+)\]",
                              lambda m: f"[{m.group(1)}, {float(m.group(2)) * factor!r}]", line)
            else:
                line = f"{key} = {float(line.split('=')[1]) * factor!r}"
        slow_lines.append(line)
    slow = tmp_path / "slow.toml"
    slow.write_text("\n".join(slow_lines) + "\n")
    for calibration, code in ((slow, 4), (real, 0)):
        store = tmp_path / f"{calibration.stem}.h5"
        env = {**os.environ, "RCSWEEP_CALIBRATION": str(calibration)}
        proc = rcsweep("run", DATA / "kill.toml", "-o", store, "--time-limit", "20s", env=env)
        assert proc.returncode == code, proc.stderr
        with h5py.File(store, "r") as f:
            status = f["tasks"]["status"][...]
        assert np.sum(status == 1) == (0 if code == 4 else len(status)), proc.stderr


@pytest.mark.parametrize("text", ["5x", "-3m", "0", "1h30", "::", "12:99"])
def test_bad_time_limit_is_a_usage_error(tmp_path, text):
    proc = rcsweep("run", DATA / "kill.toml", "-o", tmp_path / "x.h5", "--time-limit", text, check=2)
    assert "--time-limit" in proc.stderr and text in proc.stderr
    assert not (tmp_path / "x.h5").exists()


def test_full_disk_stops_with_a_clear_error_and_resumes(tmp_path):
    """Writes to the store fail with ENOSPC after a byte budget (LD_PRELOAD shim): the run stops
    with a clear message, the store stays readable, and once there is space the same command
    completes it, bitwise as an undisturbed run."""
    shim = os.environ.get("RCSWEEP_ENOSPC_SHIM")
    if not shim:
        pytest.skip("RCSWEEP_ENOSPC_SHIM not set (run through ctest)")
    reference = tmp_path / "ref.h5"
    rcsweep("run", DATA / "kill.toml", "-o", reference, "-q", check=0)
    size = reference.stat().st_size
    store = tmp_path / "full.h5"
    env = {**os.environ, "LD_PRELOAD": shim, "RCSWEEP_ENOSPC_SUFFIX": "full.h5",
           "RCSWEEP_ENOSPC_AFTER": str(2 * size)}
    proc = subprocess.run([BIN, "run", DATA / "kill.toml", "-o", store], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "the disk is full" in proc.stderr and "free space and run the same command to resume" in proc.stderr
    info = rcsweep("info", store, check=0)  # readable
    s = statuses(store)
    assert np.sum(s == 1) < len(s)
    assert re.search(r"\d+ pending", info.stdout)
    rcsweep("run", DATA / "kill.toml", "-o", store, "-q", check=0)
    assert_same_results(store, reference)


DIVERGING = """[sweep]
name = "diverging"
seed = 4
replicates = 2
[model]
mixer = "softmax"
T = 8
d = 8
depth = 200
sigma_v = 100.0
[axes]
norm = ["none", "rms"]
"""


def test_retry_failed_reruns_diverged_tasks(tmp_path):
    sweep = tmp_path / "div.toml"
    sweep.write_text(DIVERGING)
    store = tmp_path / "div.h5"
    proc = rcsweep("run", sweep, "-o", store, check=3)
    assert "--retry-failed" in proc.stderr
    with h5py.File(store, "r") as f:
        before = f["tasks"][...]
    diverged = before["status"] == 3
    assert diverged.any() and (before["status"] == 1).any()
    again = rcsweep("run", sweep, "-o", store, check=3)  # without the flag: nothing to do
    assert "0 tasks" in again.stderr
    retry = rcsweep("run", sweep, "-o", store, "--retry-failed", check=3)
    assert f"{int(diverged.sum())} tasks" in retry.stderr
    with h5py.File(store, "r") as f:
        after = f["tasks"][...]
    assert np.array_equal(after["status"], before["status"])  # deterministic: diverges again
    assert np.array_equal(after["wall_s"][~diverged], before["wall_s"][~diverged])  # done ones untouched


@pytest.mark.parametrize("command", ["plan", "run"])
def test_memory_budget_refuses_a_sweep_that_does_not_fit(tmp_path, command):
    out = tmp_path / "m.h5"
    args = [command, DATA / "kill.toml", "--mem-per-rank", "10M"] + (["-o", out] if command == "run" else [])
    proc = rcsweep(*args, check=2, ranks=2 if command == "run" else None)
    assert re.search(r"--mem-per-rank: the largest bundle \(4 tasks with T = 48, d = 96, 32 layers\) needs "
                     r"about [\d.]+ MiB per rank, more than the budget of 10.0 MiB", proc.stderr), proc.stderr
    assert proc.stderr.count("largest bundle") == 1  # once, not per rank
    assert not out.exists()
    ok = rcsweep(command, DATA / "kill.toml", "--mem-per-rank", "1G", *(["-o", out, "-q"] if command == "run" else []),
                 check=0)
    if command == "plan":
        assert "memory budget 1.0 GiB per rank (--mem-per-rank 1G)" in ok.stdout


@pytest.mark.parametrize("text", ["10X", "-1G", "G", "0"])
def test_bad_memory_size_is_a_usage_error(text):
    proc = rcsweep("plan", DATA / "kill.toml", "--mem-per-rank", text, check=2)
    assert f"--mem-per-rank: expected a size like 4G, 512M, 2GiB or a number of bytes, got '{text}'" in proc.stderr


def fill(directory):
    """Write a file into `directory` until the file system is full."""
    try:
        with open(directory / "filler", "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 65536)
    except OSError:
        pass


def test_real_tmpfs_filled_mid_run_and_a_full_one(tmp_path, long_sweep):
    """On a real (tmpfs) file system: the store's storage is allocated when it is created, so
    filling the disk mid-run does not stop the run; creating a store on a full disk is refused
    with a clear message and leaves no file."""
    sweep, reference = long_sweep
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)")
    proc = None
    try:
        store = mnt / "s.h5"
        proc = start(["run", sweep, "-o", store, "-q"])
        while not store.exists() and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)
        fill(mnt)
        assert shutil.disk_usage(mnt).free < 65536
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert_same_results(store, reference)
        store.unlink()
        fill(mnt)
        refused = rcsweep("run", sweep, "-o", store, check=2)
        assert f"cannot create {store}: the disk is full" in refused.stderr
        assert "free space or write it elsewhere" in refused.stderr
        assert not store.exists()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["umount", "-l", str(mnt)], check=True)
