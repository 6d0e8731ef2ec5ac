"""Stops and faults (docs/GUARANTEES.md): stop signals with a grace period, a paused job and a
terminal hang-up (neither stops a run), the time limit, a full disk, --retry-failed. Every
interrupted store must resume to bitwise the uninterrupted one.

Nothing here is sized for one machine's speed: the sweeps that must still be running when they are
stopped take a set time of computing on this machine (workload.sized), signals are sent once rank 0's
progress line shows a share of the work done (workload.Watched), and the time limits are fractions
of the measured time of the same sweep."""
import math
import os
import re
import shutil
import signal
import subprocess
import time
from collections import namedtuple

import h5py
import numpy as np
import pytest

from conftest import BIN, DATA, MPIEXEC, assert_same_results, mpi_prefix, rcsweep
from test_kill_resume import alive, descendants, mpi_rank_of
import workload

# `rcsweep run -n`'s mpiexec; -x passes RCSWEEP_SILENCE_S to ranks on other nodes (here: all local)
MPIEXEC_CMD = " ".join([MPIEXEC, "--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else []), "-x",
                        "RCSWEEP_SILENCE_S"])

Long = namedtuple("Long", "sweep reference seconds")


@pytest.fixture(scope="module")
def long_sweep(tmp_path_factory):
    """kill.toml with as many replicates as take about 8 s of computing on one core here (4 s on
    2 ranks), run once on 2 ranks: the sweep file, the reference store and the run's wall time."""
    d = tmp_path_factory.mktemp("long")
    sweep = d / "long.toml"
    sweep.write_text(workload.sized("kill", (DATA / "kill.toml").read_text(), "replicates", 8.0, lo=8))
    reference = d / "reference.h5"
    proc = rcsweep("run", sweep, "-o", reference, ranks=2, check=0)
    return Long(sweep, reference, workload.run_seconds(proc.stderr))


def statuses(path):
    with h5py.File(path, "r") as f:
        return f["tasks"]["status"][...]


def start(args, ranks=None, env=None):
    """rcsweep (under mpiexec when `ranks`) with its progress lines read as they come."""
    return workload.Watched(mpi_prefix(ranks) + [BIN, *map(str, args)], env=env)


def tenth_done(w):
    """Rank 0 reports at least a tenth of the tasks done (written to the store)."""
    return w.total > 0 and w.done >= max(1, w.total // 10)


def rank_pids(proc):
    """{MPI rank: pid} of an mpiexec job started by start()."""
    deadline = time.time() + 60
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


def check_stopped(proc, err, sig_name):
    """The run stopped early for `sig_name`, as its `finished` event says, and told how to resume."""
    assert proc.returncode == 4, f"exit {proc.returncode}\n{err}"
    f = proc.finished
    assert f is not None and f["exit_code"] == 4, err
    assert f["stopped_because"].startswith(f"stopped by {sig_name}") and f["store_pending"] > 0, f
    assert "resume with the same command" in err, err


def test_sigterm_single_process_stops_cleanly_and_resumes(tmp_path, long_sweep):
    sweep, reference, _ = long_sweep
    store = tmp_path / "term.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "5"])
    assert proc.wait_until(tenth_done), proc.err
    t_signal = time.time()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.wait(timeout=30)
    assert time.time() - t_signal < 5 + 2, "did not stop within the grace period"
    check_stopped(proc, err, "SIGTERM")
    s = statuses(store)
    assert 0 < np.sum(s == 1) < len(s)
    with h5py.File(store, "r") as f:
        assert f.attrs["finished"] == ""  # not complete: not marked finished
    resume_and_compare(sweep, store, reference)


def test_sigterm_to_every_rank_under_mpiexec(tmp_path, long_sweep):
    """What Slurm does on scancel or at the time limit with srun: SIGTERM to every task."""
    sweep, reference, _ = long_sweep
    store = tmp_path / "term2.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "5"], ranks=2)
    pids = rank_pids(proc)
    assert proc.wait_until(tenth_done), proc.err
    t_signal = time.time()
    for pid in pids.values():
        os.kill(pid, signal.SIGTERM)
    _, err = proc.wait(timeout=60)
    assert time.time() - t_signal < 5 + 3
    check_stopped(proc, err, "SIGTERM")
    assert 0 < np.sum(statuses(store) == 1) < len(statuses(store))
    resume_and_compare(sweep, store, reference)


def test_sigusr1_to_mpiexec_is_forwarded_and_stops_cleanly(tmp_path, long_sweep):
    """mpiexec forwards SIGUSR1 to every rank without tearing the job down (job scripts ask the
    scheduler for it before the limit)."""
    sweep, reference, _ = long_sweep
    store = tmp_path / "usr1.h5"
    proc = start(["run", sweep, "-o", store], ranks=2)
    rank_pids(proc)
    assert proc.wait_until(tenth_done), proc.err
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.wait(timeout=60)
    check_stopped(proc, err, "SIGUSR1")
    resume_and_compare(sweep, store, reference)


def test_signal_to_rank_0_only_stops_the_whole_job(tmp_path, long_sweep):
    sweep, reference, _ = long_sweep
    store = tmp_path / "rank0.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "5"], ranks=2)
    pids = rank_pids(proc)
    assert proc.wait_until(tenth_done), proc.err
    os.kill(pids[0], signal.SIGTERM)
    _, err = proc.wait(timeout=60)
    check_stopped(proc, err, "SIGTERM")
    resume_and_compare(sweep, store, reference)


def stopped(pid):
    """The process is stopped (SIGSTOP, SIGTSTP), or gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except OSError:
        return True


PAUSE_S = 4.0  # twice RCSWEEP_SILENCE_S = 2


def test_a_paused_job_is_not_a_failed_node(tmp_path, long_sweep):
    """The whole job stopped for longer than RCSWEEP_SILENCE_S, then continued, twice: Ctrl-Z of
    `rcsweep run -n 2` (SIGTSTP: mpiexec stops the ranks, rcsweep stops itself) and SIGCONT as the
    shell's `fg` sends it, once a tenth of the tasks is done; then SIGSTOP of every process (rcsweep,
    mpiexec, the ranks: a job suspended, a VM paused) and SIGCONT, once half the work is done. Rank 0
    knows it was stopped itself: the workers' silence over a pause is no failure. The run goes on,
    finishes with exit 0, nobody is taken for lost, and the store equals the uninterrupted run's
    bitwise."""
    sweep, reference, _ = long_sweep
    store = tmp_path / "paused.h5"
    proc = workload.Watched([BIN, "run", "-n", "2", "--mpiexec", MPIEXEC_CMD, sweep, "-o", store],
                            env={"RCSWEEP_SILENCE_S": "2"})
    ranks = rank_pids(proc)
    assert proc.wait_until(tenth_done), proc.err
    assert proc.poll() is None, "finished before the pause"
    proc.send_signal(signal.SIGTSTP)
    deadline = time.monotonic() + 5
    while not all(stopped(p) for p in [proc.pid, *ranks.values()]):
        assert time.monotonic() < deadline, "Ctrl-Z did not stop the ranks and rcsweep"
        time.sleep(0.02)
    time.sleep(PAUSE_S)
    proc.send_signal(signal.SIGCONT)

    assert proc.wait_until(lambda w: w.work >= 0.5), proc.err
    assert proc.poll() is None, "finished before the second pause"
    everything = [proc.pid, *descendants(proc.pid)]
    for pid in everything:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(PAUSE_S)
    for pid in everything:
        if alive(pid):
            os.kill(pid, signal.SIGCONT)

    code, err = proc.wait(timeout=120)
    assert code == 0, f"exit {code}\n{err}"
    assert not proc.named("rank_lost") and "lost" not in err, err
    # A stop takes effect when the process next runs, a few ms after kill() on a busy machine:
    # a pause of PAUSE_S can measure slightly less.
    paused = proc.named("paused")
    assert len([e for e in paused if PAUSE_S - 0.5 <= e["seconds"] < PAUSE_S + 6]) == 2, paused
    assert_same_results(store, reference)


def test_terminal_hang_up_does_not_stop_a_single_process(tmp_path, kill_sweep, reference_kill_store):
    """A single `rcsweep run` (no launcher) keeps running when its terminal hangs up or its shell
    dies, as with nohup: SIGHUP is ignored, and so is the loss of the reader of its output (a pipe
    to a `tee` that died with the terminal). It completes the store, exit 0, bitwise equal to the
    uninterrupted run."""
    store = tmp_path / "hup.h5"
    proc = subprocess.Popen([BIN, "run", str(kill_sweep), "-o", str(store)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "RCSWEEP_PROGRESS_INTERVAL": "0.05"})
    try:
        read = ""
        for line in proc.stderr:  # until a task is written: the run computes
            read += line
            m = workload.PROGRESS.search(line)
            if m and int(m.group(1)) > 0:
                break
        assert proc.poll() is None, f"finished before the hang-up\n{read}"
        proc.send_signal(signal.SIGHUP)
        proc.stderr.close()  # the reader of its output is gone too
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, f"exit {code}\n{read}"
    assert_same_results(store, reference_kill_store)


# One task of T = d = 256, its depth set for about 4 s of computing here (big_bundle).
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


def big_bundle(tmp_path):
    """BIG_BUNDLE with the depth that takes about 4 s here (a layer takes a few ms)."""
    sweep = tmp_path / "big.toml"
    sweep.write_text(workload.sized("big-bundle", BIG_BUNDLE, "depth", 4.0, lo=50, probe=50))
    return sweep


def started_computing(w):
    """Rank 0 reports progress inside its (only) bundle."""
    return w.work >= 0.02


def test_grace_period_abandons_a_long_bundle(tmp_path):
    """A bundle that cannot finish within --grace is abandoned: the run stops on time and its
    task stays pending (then the resume computes it)."""
    sweep = big_bundle(tmp_path)
    store = tmp_path / "big.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "0.5"])
    assert proc.wait_until(started_computing), proc.err
    t_signal = time.time()
    proc.send_signal(signal.SIGINT)
    _, err = proc.wait(timeout=30)
    assert time.time() - t_signal < 0.5 + 1.5, "the long bundle was not abandoned"
    check_stopped(proc, err, "SIGINT")
    assert np.all(statuses(store) == 0)  # abandoned: pending, not failed
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    assert np.all(statuses(store) == 1)


def test_second_sigint_stops_at_once_and_the_store_survives(tmp_path):
    sweep = big_bundle(tmp_path)
    store = tmp_path / "twice.h5"
    proc = start(["run", sweep, "-o", store, "--grace", "60"])
    assert proc.wait_until(started_computing), proc.err
    proc.send_signal(signal.SIGINT)
    assert proc.wait_until(lambda w: w.named("stopping")), proc.err  # the first one was taken
    proc.send_signal(signal.SIGINT)  # Ctrl-C twice: do not wait for the running task
    _, err = proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGINT, err
    rcsweep("info", store, check=0)
    assert np.all(statuses(store) == 0)
    rcsweep("run", sweep, "-o", store, "-q", check=0)


def test_time_limit_cuts_the_sweep_into_parts(tmp_path, long_sweep):
    """--time-limit: each run stops before its limit (give or take one bundle) with exit 4; the
    runs together complete the sweep, bitwise as one run. The limits follow the machine's speed as
    the runs find it (it may change while the tests run on a shared machine): the first run gets a
    fifth of the reference run's time, the second a third of the time the rest would take at the
    pace of the first (its tasks' wall_s over the reference's) but no more than the first's limit
    (a first run slowed by a busy machine must not give the second room for the whole rest), the
    next twice that time: about three runs complete the sweep, on any machine."""
    sweep, reference, seconds = long_sweep
    with h5py.File(reference, "r") as f:
        cost = f["tasks"]["wall_s"][...]  # each task's relative cost
    store = tmp_path / "parts.h5"
    limit = max(0.3, round(seconds / 5, 1))
    done = np.zeros(len(cost), dtype=bool)
    runs = []
    for _ in range(40):
        proc = rcsweep("run", sweep, "-o", store, "--time-limit", f"{limit}s", ranks=2)
        assert proc.returncode in (0, 4), proc.stderr
        wall = workload.run_seconds(proc.stderr)
        runs.append((proc.returncode, wall, limit))
        if proc.returncode == 0:
            break
        assert f"time limit of {limit:.1f} s reached" in proc.stderr
        with h5py.File(store, "r") as f:
            tasks = f["tasks"][...]
        new = (tasks["status"] == 1) & ~done
        done |= new
        # this run's computing time for its tasks over the reference's: the machine's pace now
        slower = tasks["wall_s"][new].sum() / max(cost[new].sum(), 1e-9) if new.any() else 1.0
        left_s = slower * cost[~done].sum() / 2  # on 2 ranks
        # the second run a third of the rest, at most the first's limit: stopped too, unless the
        # machine got 3x faster; then room for the rest
        limit = max(0.3, round(min(left_s / 3, limit) if len(runs) == 1 else 2 * left_s + 1, 1))
    assert runs[-1][0] == 0 and len(runs) >= 3, (runs, seconds)
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
    for code, wall, limit in runs:
        assert wall <= limit + slack, (runs, slack)
    assert_same_results(store, reference)


def test_scheduler_end_time_is_a_time_limit(tmp_path, long_sweep):
    """SLURM_JOB_END_TIME (Unix seconds) limits the run to the job's end less one minute: a job
    ending in 62 s stops a single-process run of the long sweep (about 8 s here) after 2 s less
    its start-up."""
    sweep = long_sweep.sweep
    store = tmp_path / "slurm.h5"
    time.sleep(1.0 - time.time() % 1.0)  # at a whole second: the end is 62 s away, not up to 1 s less
    env = {**os.environ, "SLURM_JOB_END_TIME": str(int(time.time()) + 62)}
    proc = subprocess.run([BIN, "run", sweep, "-o", store], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 4, proc.stderr
    limit = float(re.search(r"time limit of ([\d.]+) s reached", proc.stderr).group(1))
    assert 0.5 < limit <= 2.0, proc.stderr
    assert 0.5 < workload.run_seconds(proc.stderr) < limit + 2.0, proc.stderr


def test_time_limit_estimates_use_the_stored_calibration(tmp_path):
    """With a calibration of this machine stored (RCSWEEP_CALIBRATION), the time limit's bundle
    estimates come from its rates: a calibration claiming the machine is 10^4 times slower makes
    every bundle too long for a 20 s limit (nothing starts, exit 4), the real one completes the
    same sweep within the limit (20 s, or ten times the sweep's time here if more)."""
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
    # at least 20 s and ten times what kill.toml takes here
    kill = (DATA / "kill.toml").read_text()
    replicates = int(re.search(r"^replicates = (\d+)$", kill, re.M).group(1))
    limit = max(20.0, 10 * replicates * workload.seconds_per_unit("kill", kill, "replicates"))
    for calibration, code in ((slow, 4), (real, 0)):
        store = tmp_path / f"{calibration.stem}.h5"
        env = {**os.environ, "RCSWEEP_CALIBRATION": str(calibration)}
        proc = rcsweep("run", DATA / "kill.toml", "-o", store, "--time-limit", f"{limit:.0f}s", env=env,
                       timeout=60 + 2 * limit)
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
    """Diverged tasks are outcomes (exit 0, counted), --fail-on-diverged makes them exit 3, and
    --retry-failed runs them again (deterministic: they diverge again)."""
    sweep = tmp_path / "div.toml"
    sweep.write_text(DIVERGING)
    store = tmp_path / "div.h5"
    proc = rcsweep("run", sweep, "-o", store, check=0)
    assert re.search(r"the store holds [1-9]\d* diverged \(X non-finite\) and 0 vanished", proc.stderr), proc.stderr
    assert re.search(r"this run's diverged and vanished tasks ended at layers \d+ to \d+", proc.stderr)
    assert rcsweep("run", sweep, "-o", store, "--fail-on-diverged", check=3).stderr.count("--fail-on-diverged") == 1
    with h5py.File(store, "r") as f:
        before = f["tasks"][...]
    diverged = before["status"] == 3
    assert diverged.any() and (before["status"] == 1).any()
    again = rcsweep("run", sweep, "-o", store, check=0)  # without the flag: nothing to do
    assert "0 tasks" in again.stderr
    retry = rcsweep("run", sweep, "-o", store, "--retry-failed", check=0)
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
    sweep, reference, _ = long_sweep
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    size_mib = max(32, math.ceil(3 * reference.stat().st_size / 2**20))  # room for the store, and to fill
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)")
    proc = None
    try:
        store = mnt / "s.h5"
        proc = start(["run", sweep, "-o", store])
        assert proc.wait_until(lambda w: w.done >= 1), proc.err  # writing results
        fill(mnt)
        assert shutil.disk_usage(mnt).free < 65536
        assert proc.poll() is None, "the run ended before the disk was full"
        _, err = proc.wait(timeout=600)
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
            proc.wait(timeout=60)
        subprocess.run(["umount", "-l", str(mnt)], check=True)
