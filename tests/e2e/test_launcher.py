"""The launcher (docs/GUARANTEES.md "The launcher"): ranks whose mpiexec dies stop at once and
free the store for the same command; Ctrl-C and SIGTERM of a plain mpiexec stop the ranks cleanly
(Open MPI then exits 1); `rcsweep run -n N` turns Ctrl-C, SIGTERM and SIGUSR1 into exit code 4 with
the resume line last, and a second Ctrl-C into a stop at once.

The workloads are sized from measurements of computing time on this machine (workload.py), and
every stop of a many-task run lands once rank 0 has reported a share of its tasks done (progress
every 50 ms), not after a sleep: the tests hold on machines several times faster or slower, and on
a busy machine whose speed changes during the test."""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

import workload
from conftest import BIN, DATA, MPIEXEC, assert_same_results, rcsweep
from test_kill_resume import alive, descendants, mpi_rank_of

ROOT = os.geteuid() == 0
MPIEXEC_CMD = " ".join([MPIEXEC, "--oversubscribe"] + (["--allow-run-as-root"] if ROOT else []))
START = re.compile(rb"\d+ tasks in \d+ bundles")  # rank 0's first line: the run computes from here
PROGRESS = re.compile(r"\[rcsweep\] (\d+)/(\d+) tasks")  # rank 0's progress lines
RESUME_LINE = re.compile(r"\[rcsweep\] stopped [^\n]*: \d+ tasks left, every finished task is in [^\n]*; "
                         r"resume with the same command$")


def mpiexec_args(ranks):
    return MPIEXEC_CMD.split() + ["-n", str(ranks)]


def statuses(path):
    with h5py.File(path, "r") as f:
        return f["tasks"]["status"][...]


def finished_after(stderr):
    """Rank 0's wall time of a run, from its last line ('finished after 3.2 s')."""
    m = re.search(r"(?:finished|stopped) after ([\d.]+) (s|min)", stderr)
    assert m, stderr
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1)


SHARE = 0.25  # stops of a many-task run land once rank 0 reports this share of the tasks done


@pytest.fixture(autouse=True)
def frequent_progress(monkeypatch):
    """Rank 0 reports progress every 50 ms (the ranks of a local mpiexec inherit its environment)."""
    monkeypatch.setenv("RCSWEEP_PROGRESS_INTERVAL", "0.05")


@pytest.fixture(scope="module", name="workload")
def long_workload(tmp_path_factory):
    """kill.toml with replicates for about 6 s on 2 ranks here, and its uninterrupted 2-rank store.
    Returns (sweep, reference). Sized from the computing time of one core (workload.sized), then
    from the 2-rank reference run itself: a measurement made while the machine was busier than it
    is now would leave a run too short for a stop to land in it (after Ctrl-C, mpiexec waits 1 s
    before it passes the stop on)."""
    d = tmp_path_factory.mktemp("launcher")
    sweep, reference = d / "long.toml", d / "reference.h5"
    text = workload.sized("kill", (DATA / "kill.toml").read_text(), "replicates", 12.0, lo=30, hi=4000)
    for _ in range(4):
        sweep.write_text(text)
        seconds = finished_after(rcsweep("run", sweep, "-o", reference, "--overwrite", ranks=2, check=0).stderr)
        replicates = int(re.search(r"^replicates = (\d+)$", text, re.M).group(1))
        if seconds >= 4.0 or replicates >= 4000:
            return sweep, reference
        text = workload.set_unit(text, "replicates", min(4000, int(replicates * 6.0 / max(seconds, 0.1)) + 1))
    return sweep, reference


# One bundle per replicate: a Markov stack of T = d = 256 whose depth gives about 6 s here.
BIG = """[sweep]
name = "long-bundles"
seed = 3
replicates = {replicates}
[model]
mixer = "markov"
T = 256
d = 256
depth = {depth}
input = "orthonormal"
norm = "rms"
"""


@pytest.fixture(scope="module")
def big_depth(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    probe = d / "probe.toml"
    probe.write_text(BIG.format(depth=40, replicates=1))
    seconds = finished_after(rcsweep("run", probe, "-o", d / "probe.h5", check=0).stderr)
    return int(min(100000, max(40, 40 * 6.0 / max(seconds, 0.01))))


def big_sweep(directory, depth, replicates):
    sweep = directory / f"big{replicates}.toml"
    sweep.write_text(BIG.format(depth=depth, replicates=replicates))
    return sweep


# Runs a command under a child subreaper (PR_SET_CHILD_SUBREAPER), so that the processes orphaned
# by a kill -9 become its children: it waits for them and reports how and when each ended. It waits
# for rank 0's progress line with a share `share` of the tasks done, SIGKILLs the victims: "top" (the command's own process:
# mpiexec, or rcsweep run -n), "top+rank0"; then reaps everything (at most 30 s, then SIGKILL).
REAPER = r"""
import ctypes, json, os, re, select, signal, subprocess, sys, time
spec = json.loads(sys.argv[1])
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    print(json.dumps({"skip": "no PR_SET_CHILD_SUBREAPER"})); sys.exit(0)
p = subprocess.Popen(spec["cmd"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
def reached(err):
    return any(int(d) >= spec["share"] * int(t) for d, t in re.findall(spec["progress"].encode(), err))
err, deadline = b"", time.monotonic() + 120
while not reached(err) and time.monotonic() < deadline:
    if select.select([p.stderr], [], [], 0.5)[0]:
        chunk = os.read(p.stderr.fileno(), 65536)
        if not chunk:
            break
        err += chunk
started = reached(err)

def tree(pid):
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                kids.setdefault(int(open(f"/proc/{e}/stat").read().rsplit(")", 1)[1].split()[1]), []).append(int(e))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c); todo.append(c)
    return out

def rank_of(pid):
    try:
        for item in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
            if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                return int(item.split(b"=")[1])
    except OSError:
        pass
    return None

procs = {q: rank_of(q) for q in tree(p.pid)}
victims = [p.pid] + ([q for q, r in procs.items() if r == 0] if spec["victims"] == "top+rank0" else [])
t0 = time.monotonic()
for v in victims:
    os.kill(v, signal.SIGKILL)
procs[p.pid] = "top"
ended, leftover = {}, []
os.set_blocking(p.stderr.fileno(), False)
while len(ended) < len(procs):
    try:
        chunk = os.read(p.stderr.fileno(), 65536)
        err += chunk or b""
    except (BlockingIOError, ValueError):
        pass
    try:
        pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid == 0:
        if time.monotonic() - t0 > 30:
            leftover = [q for q in procs if q not in ended]
            for q in leftover:
                try:
                    os.kill(q, signal.SIGKILL)
                except OSError:
                    pass
            t0 = float("inf")
        time.sleep(0.005)
        continue
    if pid in procs:
        ended[pid] = (os.waitstatus_to_exitcode(status), time.monotonic() - t0)
print(json.dumps({"started": started, "ranks": {str(r): ended.get(q) for q, r in procs.items() if isinstance(r, int)},
                  "ended": {str(q): v for q, v in ended.items()}, "leftover": leftover,
                  "stderr": err.decode(errors="replace")}))
"""


def kill_under_reaper(cmd, victims="top"):
    proc = subprocess.run([sys.executable, "-c", REAPER, json.dumps(
        {"cmd": [str(c) for c in cmd], "share": SHARE, "victims": victims, "progress": PROGRESS.pattern})],
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["started"], out["stderr"]
    assert not out["leftover"], f"processes left 30 s after the kill: {out}"
    return out


STARTED = []  # processes of start(): whatever a failing test leaves of their trees is killed


def kill_tree(proc):
    for p in [proc.pid] + descendants(proc.pid):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    proc.communicate()


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None or descendants(proc.pid):
            kill_tree(proc)


def start(cmd):
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    STARTED.append(proc)
    return proc


def wait_for_start(proc, timeout=120):
    """Read stderr until rank 0's first line (at most `timeout` s); returns what was read."""
    text, deadline = b"", time.monotonic() + timeout
    while not START.search(text):
        assert time.monotonic() < deadline and proc.poll() is None, text.decode(errors="replace")
        if select.select([proc.stderr], [], [], 0.5)[0]:
            text += os.read(proc.stderr.fileno(), 65536)
    return text.decode(errors="replace")


def wait_for_share(proc, timeout=120):
    """Read stderr until rank 0 reports SHARE of the tasks done (at most `timeout` s); returns what
    was read. The run must still be going then."""
    text, deadline = "", time.monotonic() + timeout
    while not any(int(d) >= SHARE * int(t) for d, t in PROGRESS.findall(text)):
        assert time.monotonic() < deadline and proc.poll() is None, text
        if select.select([proc.stderr], [], [], 0.5)[0]:
            text += os.read(proc.stderr.fileno(), 65536).decode(errors="replace")
    return text


def finish(proc, before, timeout=60, linger=5.0):
    """Wait for `proc`; then no process of its tree may be left `linger` s later (a rank may still be
    exiting when mpiexec returns, more so on a loaded machine; one left then is killed and the test
    fails)."""
    tree = [proc.pid] + descendants(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        deadline = time.monotonic() + linger
        while any(alive(p) for p in tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in tree if alive(p)]
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert not left, f"processes left: {left}"
    return before + err


def resume(sweep, store, reference, *launch):
    """The same command again completes the store, bitwise the uninterrupted run."""
    done = np.sum(statuses(store) == 1)
    assert 0 < done < len(statuses(store)), "the stop did not land mid-run"
    proc = rcsweep("run", *launch, sweep, "-o", store, ranks=None if launch else 2, check=0)
    assert "resuming" in proc.stderr
    assert_same_results(store, reference)


@pytest.mark.parametrize("victims,ranks", [("top", 2), ("top+rank0", 3)])
def test_sigkill_of_mpiexec_stops_the_ranks_and_the_same_command_resumes(tmp_path, workload, victims, ranks):
    """kill -9 of mpiexec (and of rank 0 with it): the ranks notice that their parent is gone, stop
    at once, keep what they finished and exit, so the same command run right after resumes. Rank 0
    and the workers end cleanly with exit code 4 (before Open MPI's own exit, 195, a second later);
    workers whose rank 0 died with mpiexec end within a few seconds all the same."""
    sweep, reference = workload
    store = tmp_path / "k9.h5"
    out = kill_under_reaper(mpiexec_args(ranks) + [BIN, "run", sweep, "-o", store], victims)
    ranks_ended = out["ranks"]
    assert len(ranks_ended) == ranks, out
    for rank, (code, after) in ranks_ended.items():
        if victims == "top+rank0" and rank == "0":
            assert code == -signal.SIGKILL
            continue
        assert after < 5.0, f"rank {rank} ended {after:.2f} s after the kill: {out}"
        if victims == "top":
            assert code == 4, f"rank {rank} did not stop cleanly (exit {code}): {out}"
    resume(sweep, store, reference)  # at once: the store is free


def test_a_silent_worker_stops_the_run_and_the_same_command_resumes(tmp_path, workload):
    """A worker that falls silent (SIGSTOP: as a node cut off the network looks from rank 0, whose
    own launcher does not notice) is taken for lost after RCSWEEP_SILENCE_S: rank 0 writes what it
    has, closes the store and ends with exit 4 and the resume line; Open MPI then ends the job.
    The same command completes the store bitwise."""
    sweep, reference = workload
    store = tmp_path / "silent.h5"
    cmd = mpiexec_args(2) + ["-x", "RCSWEEP_SILENCE_S", BIN, "run", sweep, "-o", store]
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "RCSWEEP_SILENCE_S": "2"})
    STARTED.append(proc)
    before = wait_for_share(proc)
    (worker,) = [p for p in descendants(proc.pid) if mpi_rank_of(p) == 1]
    os.kill(worker, signal.SIGSTOP)
    stopped = time.monotonic()
    err = finish(proc, before, timeout=30)
    took = time.monotonic() - stopped
    assert 2.0 <= took < 2.0 + 5.0, f"{took:.1f} s\n{err}"
    assert re.search(r"rank 1 \(\S+\) has not been heard from for [2-9] s: its node or the network failed", err), err
    assert re.search(r"stopped because rank 1 was lost: \d+ tasks left, .*resume with the same command", err), err
    resume(sweep, store, reference)


def test_ctrl_c_of_a_plain_mpiexec_stops_the_ranks_cleanly(tmp_path, workload):
    """Ctrl-C (SIGINT to mpiexec's process group; the ranks have their own): Open MPI's mpiexec
    sends the ranks SIGTERM after odls_base_sigkill_timeout (1 s) and SIGKILL after as many again,
    and exits 1 whatever they return. The ranks take that SIGTERM as a stop at once: rank 0 prints
    the resume line and the job ends before the SIGKILL; the same command resumes."""
    sweep, reference = workload
    store = tmp_path / "int.h5"
    proc = start(mpiexec_args(2) + [BIN, "run", sweep, "-o", store])
    before = wait_for_share(proc)
    t = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    err = finish(proc, before)
    assert time.monotonic() - t < 1.0 + 1.0, f"the ranks waited for the SIGKILL\n{err}"
    assert proc.returncode == 1, err  # Open MPI 4.1: mpiexec exits 1 after a SIGINT, whatever the ranks return
    assert re.search(r"stopped by SIGTERM from mpiexec \(pid \d+\): \d+ tasks left.*resume with the same command", err), err
    resume(sweep, store, reference)


def test_ctrl_c_of_a_plain_mpiexec_abandons_long_bundles(tmp_path, big_depth):
    """The grace period cannot outlast mpiexec's SIGKILL: with a bundle of about 6 s on each rank and
    --grace 600, Ctrl-C still ends the job within 2 s, with the resume line; both tasks stay pending."""
    store = tmp_path / "long.h5"
    proc = start(mpiexec_args(2) + [BIN, "run", big_sweep(tmp_path, big_depth, 2), "-o", store, "--grace", "600"])
    before = wait_for_start(proc)
    time.sleep(0.5)
    t = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    err = finish(proc, before)
    assert time.monotonic() - t < 1.0 + 1.0, err
    assert re.search(r"stopped by SIGTERM from mpiexec \(pid \d+\): 2 tasks left", err), err
    assert np.all(statuses(store) == 0)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGUSR1], ids=lambda s: signal.Signals(s).name)
def test_stop_under_rcsweep_run_n_exits_4_with_the_resume_line_last(tmp_path, workload, sig):
    """`rcsweep run -n 2`: Ctrl-C (SIGINT to its process group), SIGTERM or SIGUSR1 stop every rank
    cleanly; the exit code is 4 and the resume line is the last word (no Open MPI report of a
    job aborted on a non-zero status); the same command resumes."""
    sweep, reference = workload
    store = tmp_path / "n2.h5"
    launch = ["--mpiexec", MPIEXEC_CMD]
    proc = start([BIN, "run", "-n", "2", *launch, sweep, "-o", store])
    before = wait_for_share(proc)
    t = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    err = finish(proc, before)
    assert time.monotonic() - t < 10, "the stop took longer than the grace period allows"
    assert proc.returncode == 4, err
    assert "aborted" not in err and "non-zero" not in err, err
    assert RESUME_LINE.search(err.rstrip().splitlines()[-1]), err
    resume(sweep, store, reference, "-n", "2", *launch)


def test_second_ctrl_c_under_rcsweep_run_n_stops_at_once(tmp_path, big_depth):
    """A second Ctrl-C does not wait for the running bundle (as a single process): Open MPI kills
    the ranks, rcsweep dies of SIGINT, nothing is left running; the store is readable and its task
    still pending."""
    store = tmp_path / "twice.h5"
    proc = start([BIN, "run", "-n", "2", "--mpiexec", MPIEXEC_CMD, big_sweep(tmp_path, big_depth, 1), "-o", store,
                  "--grace", "600"])
    before = wait_for_start(proc)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.3)
    t = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    err = finish(proc, before)
    assert time.monotonic() - t < 1.0 + 3.0, err
    assert proc.returncode == -signal.SIGINT, err
    rcsweep("info", store, check=0)
    assert np.all(statuses(store) == 0)


def test_sigkill_of_rcsweep_run_n_stops_mpiexec_and_the_ranks(tmp_path, workload):
    """kill -9 of `rcsweep run -n 2`: mpiexec gets SIGTERM (its parent-death signal) and tears the
    job down; the ranks stop cleanly within its 1 s and the same command resumes."""
    sweep, reference = workload
    store = tmp_path / "launcher9.h5"
    out = kill_under_reaper([BIN, "run", "-n", "2", "--mpiexec", MPIEXEC_CMD, sweep, "-o", store])
    assert len(out["ranks"]) == 2, out
    for rank, (code, after) in out["ranks"].items():
        assert after < 1.0 + 3.0, out
        # Rank 0 ends only after every worker has handed over its last results (the final
        # broadcast); when it exits non-zero, mpiexec SIGKILLs the ranks left, whose part is done.
        assert code == 4 or (rank != "0" and code == -signal.SIGKILL), out
    resume(sweep, store, reference, "-n", "2", "--mpiexec", MPIEXEC_CMD)


def test_ranks_option_errors(tmp_path):
    store = tmp_path / "x.h5"
    proc = rcsweep("run", "-n", "2", "--mpiexec", "/nonexistent/mpiexec", DATA / "kill.toml", "-o", store, check=2)
    assert "cannot run '/nonexistent/mpiexec'" in proc.stderr
    proc = rcsweep("run", "-n", "3", DATA / "kill.toml", "-o", store, ranks=2, check=2)
    assert "-n 3 but the MPI job has 2 ranks" in proc.stderr
    assert not store.exists()


def test_run_n_passes_open_mpi_what_it_needs_as_root_and_for_more_ranks_than_cores(tmp_path):
    """`rcsweep run -n` with the plain `mpiexec` works as scripts/quickstart.sh does: as root it adds
    --allow-run-as-root, for more ranks than cores --oversubscribe, and says so in one line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_ALLOW_RUN_AS_ROOT", "RCSWEEP_MPIEXEC"))}
    ranks = (os.cpu_count() or 1) + 1
    store = tmp_path / "plain.h5"
    proc = rcsweep("run", "-n", ranks, "--mpiexec", MPIEXEC, DATA / "kill.toml", "sweep.replicates=1", "-o", store,
                   "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    note = [line for line in proc.stderr.splitlines() if line.startswith("[rcsweep] passing Open MPI's mpiexec")]
    assert len(note) == 1, proc.stderr
    assert f"--oversubscribe ({ranks} ranks on " in note[0]
    assert ("--allow-run-as-root (running as root)" in note[0]) == ROOT
    rcsweep("info", store, check=0)


def test_run_n_refuses_a_bad_sweep_before_any_rank_starts(tmp_path):
    """Sweep-file and override errors under -n come from the launcher itself: exit 2, the errors
    alone (no mpiexec 'job aborted' report), nothing written, and quickly."""
    bad = tmp_path / "bad.toml"
    bad.write_text((DATA / "kill.toml").read_text().replace("depth = 32", "depth = -1"))
    store = tmp_path / "x.h5"
    started = time.monotonic()
    proc = rcsweep("run", "-n", "2", "--mpiexec", MPIEXEC_CMD, bad, "axes.lambda=[0, nan]", "-o", store)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and "model.depth" in proc.stderr and "axes.lambda[1]" in proc.stderr
    assert "abort" not in proc.stderr.lower() and "mpiexec" not in proc.stderr and "passing" not in proc.stderr
    assert not store.exists() and list(tmp_path.iterdir()) == [bad]
    assert time.monotonic() - started < 10


def marked_mpiexec(directory):
    """An mpiexec (for RCSWEEP_MPIEXEC) that first leaves a marker file, even when only asked its
    --version: (the command, the marker)."""
    marker = directory / "mpiexec-started"
    script = directory / "mpiexec.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec {MPIEXEC_CMD} "$@"\n')
    script.chmod(0o755)
    return str(script), marker


def assert_refused_before_mpiexec(directory, *args):
    """`rcsweep run -n 2 ARGS` refuses what a single process refuses, before mpiexec: exit 2, the
    single process's stderr word for word (no mpiexec report), and mpiexec never started.
    Returns that stderr."""
    one = rcsweep("run", *args)
    assert one.returncode == 2, one.stderr
    assert one.stderr.startswith("error: "), one.stderr
    mpiexec, marker = marked_mpiexec(directory)
    started = time.monotonic()
    proc = rcsweep("run", "-n", "2", *args, env={**os.environ, "RCSWEEP_MPIEXEC": mpiexec})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == one.stderr
    for banner in ("mpiexec", "Primary job", "prterun", "abort", "-----"):
        assert banner not in proc.stderr, proc.stderr
    assert not marker.exists()
    assert time.monotonic() - started < 30
    marker.parent.joinpath("mpiexec.sh").unlink()
    return proc.stderr


def small_store(directory, *overrides):
    """A finished store of kill.toml with one replicate (and `overrides`) in `directory`."""
    store = directory / "small.h5"
    rcsweep("run", DATA / "kill.toml", "sweep.replicates=1", *overrides, "-o", store, "-q", check=0)
    return store


@pytest.mark.parametrize("case", ["other-sweep", "fewer-replicates", "not-a-store", "missing-directory",
                                  "resume-missing", "reuse-itself", "overwrite-a-directory", "memory"])
def test_run_n_refuses_a_store_before_mpiexec_starts(tmp_path, case):
    """Store refusals under -n come from the launcher itself, as a single process says them (the
    store of another sweep, or of more replicates, a file that is no store, a missing directory,
    --resume of nothing, --reuse of the output, --overwrite of a directory), and so does the memory
    budget: nothing is written, mpiexec never starts."""
    sweep = [DATA / "kill.toml", "sweep.replicates=1"]
    if case == "other-sweep":
        store = small_store(tmp_path, "model.depth=2")
        args = [*sweep, "model.depth=3", "-o", store]
        expected = "was made from a different sweep file"
    elif case == "fewer-replicates":
        store = small_store(tmp_path, "sweep.replicates=2")
        args = [*sweep, "-o", store]
        expected = "finished tasks are not tasks of this sweep"
    elif case == "memory":
        store = tmp_path / "x.h5"
        args = [*sweep, "--mem-per-rank", "1K", "-o", store]
        expected = "--mem-per-rank"
    elif case == "not-a-store":
        store = tmp_path / "notes.h5"
        store.write_text("my notes\n")
        args = [*sweep, "-o", store]
        expected = "not an HDF5 file"
    elif case == "missing-directory":
        store = tmp_path / "nowhere" / "x.h5"
        args = [*sweep, "-o", store]
        expected = "does not exist"
    elif case == "resume-missing":
        store = tmp_path / "x.h5"
        args = [*sweep, "--resume", "-o", store]
        expected = "nothing to resume"
    elif case == "reuse-itself":
        store = small_store(tmp_path)
        args = [*sweep, "--reuse", store, "-o", store]
        expected = "is the output store itself"
    else:
        store = tmp_path / "a-directory"
        store.mkdir()
        args = [*sweep, "--overwrite", "-o", store]
        expected = "is a directory, not a store"
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    err = assert_refused_before_mpiexec(tmp_path, *args)
    assert expected in err.splitlines()[0], err
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before  # nothing written, nothing left


def test_run_n_refuses_a_store_another_writer_holds_before_mpiexec_starts(tmp_path):
    """A store another rcsweep is writing: `run -n 2` says so as a single process does, before
    mpiexec starts, and the writer goes on."""
    sweep = tmp_path / "long.toml"
    sweep.write_text((DATA / "kill.toml").read_text().replace("replicates = 30", "replicates = 4000"))
    store = tmp_path / "busy.h5"
    writer = start([BIN, "run", sweep, "-o", store])
    wait_for_start(writer)
    err = assert_refused_before_mpiexec(tmp_path, sweep, "-o", store)
    assert "is being written by another rcsweep" in err.splitlines()[0], err
    assert writer.poll() is None
    writer.send_signal(signal.SIGTERM)
    writer.communicate(timeout=120)
    assert writer.returncode == 4


def test_a_rerun_right_after_a_killed_launcher_waits_for_its_ranks(tmp_path, workload):
    """kill -9 of `rcsweep run -n 2`, then the same command at once: its ranks find the old ones
    still holding the store while they stop, wait for them (saying so) instead of refusing, and
    complete the store bitwise."""
    sweep, reference = workload
    store = tmp_path / "rerun.h5"
    proc = start([BIN, "run", "-n", "2", "--mpiexec", MPIEXEC_CMD, sweep, "-o", store])
    wait_for_share(proc)
    old = [proc.pid] + descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    again = rcsweep("run", "-n", "2", "--mpiexec", MPIEXEC_CMD, sweep, "-o", store)
    assert again.returncode == 0, again.stderr
    assert "is being written by another rcsweep" not in again.stderr
    # The old ranks take a second or so to let go; the new rank 0 meets them when it starts first,
    # either before the old rank 0 has marked the lock as stopping (then the new one finds the
    # launcher gone itself) or after.
    if "is still held by a run that is stopping" in again.stderr:
        assert re.search(r"\(host [^,]+, pid \d+, since [^,]+, launcher %d(; its launcher is gone)?\): waiting up "
                         r"to 10 s" % proc.pid, again.stderr), again.stderr
    assert_same_results(store, reference)
    proc.communicate()
    deadline = time.monotonic() + 10  # the old ranks stop within about a second, the rerun may be quicker
    while [p for p in old if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in old if alive(p)]
