"""The events of a run (docs/EVENTS.md): `run --progress json` writes one JSON object per event on
stdout (rank 0 only, also under mpiexec), in order: started, progress, task_ended for each task that
did not end done, a last progress, finished; stderr keeps the other events as text."""
import json
import os
import signal
import subprocess

import pytest

from conftest import BIN, SOURCE, rcsweep

SMALL = """
[sweep]
name = "events"
seed = 3
replicates = 3
[model]
mixer = "softmax"
T = 16
d = 16
depth = 6
[axes]
lambda = [0.0, 1.0]
"""

# ReLU attention at lambda = 0 vanishes (X exactly zero), softmax without a norm and huge value
# weights overflows (X non-finite): tests/cluster/data/diverging.toml with fewer replicates.
ENDING = """
[sweep]
name = "ending"
seed = 11
replicates = 2
[model]
depth = 12
T = 16
d = 16
sigma_v = 1e30
[axes]
mixer = ["relu", "softmax"]
lambda = [0.0, 1.0]
norm = ["none", "layernorm"]
"""

FAST = dict(os.environ, RCSWEEP_PROGRESS_INTERVAL="0.01")


def events_of(stdout):
    """Every line of stdout parsed: each must be one JSON object naming its event."""
    out = []
    for line in stdout.splitlines():
        ev = json.loads(line)
        assert isinstance(ev, dict) and isinstance(ev.get("event"), str), line
        out.append(ev)
    return out


def names(events):
    return [e["event"] for e in events]


def test_a_complete_run_reports_started_progress_and_finished(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SMALL)
    proc = rcsweep("run", sweep, "-o", tmp_path / "s.h5", "--progress", "json", check=0, env=FAST)
    events = events_of(proc.stdout)
    assert names(events)[0] == "started" and names(events)[-1] == "finished", names(events)
    started, finished = events[0], events[-1]
    assert started["tasks"] == 6 and started["ranks"] == 1 and started["resumed"] is False
    assert started["already_finished"] == 0 and started["store"] == str(tmp_path / "s.h5")
    assert finished["exit_code"] == 0 and finished["done"] == 6 and finished["stopped_because"] == ""
    assert finished["store_pending"] == 0 and finished["wall_s"] > 0
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and progress[-1]["last"] is True and events[-2] is progress[-1]
    assert progress[-1]["tasks_done"] == 6 and progress[-1]["fraction"] == 1.0
    fractions = [e["fraction"] for e in progress]
    assert fractions == sorted(fractions) and all(0.0 <= f <= 1.0 for f in fractions)
    assert sum(e["last"] for e in progress) == 1
    # stderr: the same run as text, without progress lines
    assert "[rcsweep] writing" in proc.stderr and "[rcsweep] finished after" in proc.stderr
    assert "% of work" not in proc.stderr


def test_text_progress_is_unchanged_without_json(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SMALL)
    proc = rcsweep("run", sweep, "-o", tmp_path / "s.h5", check=0, env=FAST)
    assert proc.stdout == ""
    assert "[rcsweep] 6/6 tasks, 100.0% of work" in proc.stderr
    quiet = rcsweep("run", sweep, "-o", tmp_path / "q.h5", "--progress", "none", check=0, env=FAST)
    assert quiet.stdout == "" and quiet.stderr == ""


def test_under_two_ranks_rank_0_alone_reports(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SMALL)
    proc = rcsweep("run", sweep, "-o", tmp_path / "s.h5", "--progress", "json", ranks=2, check=0, env=FAST)
    events = events_of(proc.stdout)
    assert names(events).count("started") == 1 and names(events).count("finished") == 1, names(events)
    assert events[0]["ranks"] == 2 and events[0]["schedule"] != ""
    assert events[-1]["done"] == 6


def test_tasks_that_end_early_are_events_with_their_status(tmp_path):
    sweep = tmp_path / "e.toml"
    sweep.write_text(ENDING)
    proc = rcsweep("run", sweep, "-o", tmp_path / "e.h5", "--progress", "json", check=0, env=FAST)
    events = events_of(proc.stdout)
    ended = [e for e in events if e["event"] == "task_ended"]
    finished = events[-1]
    assert finished["event"] == "finished" and finished["exit_code"] == 0
    assert finished["diverged"] > 0 and finished["vanished"] > 0, finished
    assert sum(e["status"] == "diverged" for e in ended) == finished["diverged"]
    assert sum(e["status"] == "vanished" for e in ended) == finished["vanished"]
    assert all(e["message"] and isinstance(e["task"], int) for e in ended)
    assert len({e["task"] for e in ended}) == len(ended)
    assert finished["ended_first_layer"] >= 0 and finished["ended_last_layer"] >= finished["ended_first_layer"]
    assert names(events).index("finished") > max(i for i, e in enumerate(events) if e["event"] == "task_ended")


def test_a_stop_reports_stopping_and_how_to_resume(tmp_path, kill_sweep):
    store = tmp_path / "k.h5"
    proc = subprocess.Popen([BIN, "run", str(kill_sweep), "-o", str(store), "--progress", "json", "--grace", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=FAST)
    events = []
    for line in proc.stdout:  # the first progress event with a task done: then stop it
        events.append(json.loads(line))
        if events[-1]["event"] == "progress" and events[-1]["tasks_done"] > 0:
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    events += events_of(out)
    assert proc.returncode == 4, err
    stopping = [e for e in events if e["event"] == "stopping"]
    assert len(stopping) == 1 and stopping[0]["signal"] == "SIGTERM" and stopping[0]["grace_s"] == 5, events
    finished = events[-1]
    assert finished["event"] == "finished" and finished["exit_code"] == 4
    assert "SIGTERM" in finished["stopped_because"] and finished["store_pending"] > 0
    assert names(events).index("stopping") < names(events).index("finished")
    assert "resume with the same command" in err


def test_the_python_reader_reads_every_line(tmp_path):
    import sys
    sys.path.insert(0, str(SOURCE / "scripts"))
    from rcsweep_tools.events import parse_event
    sweep = tmp_path / "s.toml"
    sweep.write_text(SMALL)
    proc = rcsweep("run", sweep, "-o", tmp_path / "s.h5", "--progress", "json", check=0, env=FAST)
    parsed = [parse_event(line) for line in proc.stdout.splitlines()]
    assert parsed == events_of(proc.stdout)
    assert parse_event("[rcsweep] not an event") is None and parse_event('{"no": "event"}') is None


@pytest.mark.parametrize("args, key", [(["--progress", "json", "-q"], "--quiet"),
                                       (["--progress", "yaml"], "--progress")])
def test_bad_progress_options_are_refused(tmp_path, args, key):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SMALL)
    proc = rcsweep("run", sweep, "-o", tmp_path / "s.h5", *args, check=2)
    assert key in proc.stderr and not (tmp_path / "s.h5").exists()


# --- A reader that does not keep up (docs/EVENTS.md "A reader that does not keep up") ---

STALL = dict(os.environ, RCSWEEP_PROGRESS_INTERVAL="0.001")  # a flood of progress events


def small_pipe():
    """(read end, write end) of a pipe of one page (4096 bytes), so that a reader that never reads
    holds up its writer after a few events."""
    import fcntl
    r, w = os.pipe()
    fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    return r, w


def start_stalled(cmd, stdout_fd, err_path, env=STALL):
    """rcsweep with `stdout_fd` as its stdout (a pipe nobody reads) and stderr to a file."""
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([BIN, *map(str, cmd)], stdout=stdout_fd, stderr=err, env=env)
    os.close(stdout_fd)
    return proc


def all_done(store):
    import h5py
    with h5py.File(store, "r") as f:
        status = f["tasks"]["status"][...]
    return len(status) > 0 and bool((status == 1).all())


def test_a_stdout_nobody_reads_does_not_hold_the_run(tmp_path, kill_sweep):
    store = tmp_path / "k.h5"
    r, w = small_pipe()
    try:
        proc = start_stalled(["run", kill_sweep, "-o", store, "--progress", "json"], w, tmp_path / "err")
        try:
            code = proc.wait(timeout=60)  # some 2 s of work; held for good before
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("the run was held by its stdout: " + (tmp_path / "err").read_text())
        err = (tmp_path / "err").read_text()
        assert code == 0, err
        assert all_done(store)
        assert "[rcsweep] finished after" in err
        assert "events were not written to stdout" in err, err  # what the stalled consumer missed
    finally:
        os.close(r)


def test_sigterm_with_a_stalled_stdout_stops_on_time_and_resumes(tmp_path):
    import time
    import workload
    sweep = tmp_path / "k.toml"
    sweep.write_text(workload.sized("stall", (SOURCE / "tests/e2e/data/kill.toml").read_text(), "replicates", 3.0,
                                    lo=4))
    store, err_path = tmp_path / "k.h5", tmp_path / "err"
    r, w = small_pipe()
    try:
        proc = start_stalled(["run", sweep, "-o", store, "--progress", "json", "--grace", "2"], w, err_path)
        end = time.monotonic() + 120
        while "[rcsweep] writing" not in err_path.read_text():
            assert proc.poll() is None and time.monotonic() < end, err_path.read_text()
            time.sleep(0.02)
        time.sleep(0.5)  # some hundred progress events: the pipe is full
        assert proc.poll() is None, "the run ended before the stop: " + err_path.read_text()
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            code = proc.wait(timeout=2 + 20)  # the grace and a margin
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("SIGTERM not honoured: " + err_path.read_text())
        took = time.monotonic() - sent
        err = err_path.read_text()
        assert code == 4, err
        assert "resume with the same command" in err and took < 2 + 20
    finally:
        os.close(r)
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    assert all_done(store)


def test_a_stdout_closed_early_still_completes_the_store(tmp_path, kill_sweep):
    store = tmp_path / "k.h5"
    proc = subprocess.Popen([BIN, "run", str(kill_sweep), "-o", str(store), "--progress", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=STALL)
    first = json.loads(proc.stdout.readline())  # `| head -1`
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert first["event"] == "started"
    assert proc.returncode == 0, err.decode(errors="replace")
    assert all_done(store)


def test_under_run_n_a_stdout_closed_early_still_completes_the_store(tmp_path, kill_sweep):
    # mpiexec aborts the job when its own stdout's reader goes away: `rcsweep run -n` passes
    # mpiexec's stdout through itself, so the run goes on as a single process does.
    store = tmp_path / "k.h5"
    env = dict(STALL, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.Popen([BIN, "run", "-n", "2", "--mpiexec", "mpiexec --oversubscribe", str(kill_sweep),
                             "-o", str(store), "--progress", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = json.loads(proc.stdout.readline())  # `| head -1`
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert first["event"] == "started"
    assert proc.returncode == 0, err.decode(errors="replace")
    assert all_done(store)


def test_any_bytes_in_a_path_give_strict_json(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SMALL)
    store = bytes(tmp_path) + b"/st\xff\xe2\x82ore\x1b.h5"  # not UTF-8, a cut sequence, an escape
    proc = subprocess.run([BIN, "run", sweep, "-o", store, "--progress", "json"], capture_output=True, env=FAST)
    assert proc.returncode == 0, proc.stderr
    events = events_of(proc.stdout.decode("utf-8"))  # strict: raises on bytes that are not UTF-8
    expected = store.decode("utf-8", "replace")  # one U+FFFD per maximal invalid subsequence
    assert events[0]["store"] == expected and events[-1]["store"] == expected
    assert "\ufffd\ufffdore\x1b.h5" in expected
    info = subprocess.run([BIN, "info", "--json", store], capture_output=True)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout.decode("utf-8"))["store"] == expected
