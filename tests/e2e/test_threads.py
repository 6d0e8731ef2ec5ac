"""Hybrid layouts (docs/GUARANTEES.md "Layouts"): MPI ranks, each with
`rcsweep run --threads N` OpenMP threads. On one BLAS kernel a store is bitwise the same for every
layout, and for a run stopped under one layout and resumed under another.

data/threads.toml mixes a bundle of small tasks (run concurrently, one task per thread) with big
tasks whose products, matrix-vector products, Gram matrix, random draws and row maps are split
into fixed parts over every thread of a rank; data/threads_grad.toml adds gradient norms and the
spectra of X and of the mixer. The sweep that is stopped has its replicates set for a time of
computing on this machine (workload.sized), and stops come once rank 0's progress line shows
finished tasks in the store."""
import json
import os
import re
import signal
import time

import h5py
import numpy as np
import pytest

from conftest import BIN, DATA, MPIEXEC, assert_same_results, mpi_prefix, rcsweep, results
from test_kill_resume import alive, descendants, using
import workload

# (MPI ranks, threads per rank); 2 x 2 and 3 x 2 oversubscribe a 2-core machine.
LAYOUTS = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 2)]
ROOT = os.geteuid() == 0
MPIEXEC_CMD = " ".join([MPIEXEC, "--oversubscribe"] + (["--allow-run-as-root"] if ROOT else []))


def env_without_omp(**extra):
    """This environment without OMP_NUM_THREADS (the default of --threads), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update(extra)
    return env


def run(sweep, store, ranks, threads, *args, quiet=True, **kw):
    """rcsweep run on `ranks` x `threads` (one rank: a single process, without mpiexec)."""
    return rcsweep("run", sweep, "-o", store, *(["-q"] if quiet else []), "--threads", threads, *args,
                   ranks=ranks if ranks > 1 else None, env=env_without_omp(), **kw)


def layout(store):
    """(mpi_ranks, threads, blas_threads): the store's record of its last run's layout."""
    with h5py.File(store, "r") as f:
        return tuple(int(f.attrs[k]) for k in ("mpi_ranks", "threads", "blas_threads"))


def assert_same(reference, store, what):
    """assert_same_results(reference, store); when they differ, the message names `what` (the
    layout) and, for each dataset that differs, the tasks (rows) whose values differ."""
    try:
        assert_same_results(reference, store)
    except AssertionError as e:
        ra, rb = results(reference), results(store)
        n_tasks = len(ra["tasks/id"])
        diffs = []
        for k in sorted(set(ra) | set(rb)):
            x, y = ra.get(k), rb.get(k)
            if x is None or y is None or x.shape != y.shape:
                diffs.append(f"{k}: {'missing' if x is None or y is None else f'shape {x.shape} vs {y.shape}'}")
                continue
            same = x.view(np.uint64) == y.view(np.uint64) if x.dtype.kind == "f" else x == y
            if same.all():
                continue
            if x.ndim >= 1 and x.shape[0] == n_tasks:
                rows = np.flatnonzero(~same.reshape(n_tasks, -1).all(axis=1))
                diffs.append(f"{k}: tasks {rows.tolist()}")
            else:
                diffs.append(f"{k}: {int(np.sum(~same))} of {same.size} entries")
        raise AssertionError(f"{what} differs from the reference ({e}): " + "; ".join(diffs)) from None


def task_rows(store):
    with h5py.File(store, "r") as f:
        return f["tasks"][...]


def check_resumed(store, before, reference, what):
    """The resumed store: every task done, those done before the stop untouched (their /tasks rows,
    wall time and rank included: not recomputed), and bitwise the uninterrupted store."""
    after = task_rows(store)
    assert np.all(after["status"] == 1)
    kept = before["status"] == 1
    assert np.array_equal(after[kept], before[kept]), "a task done before the stop was computed again"
    assert_same(reference, store, what)


@pytest.fixture(scope="module")
def threads_sweep(tmp_path_factory):
    """threads.toml with as many replicates as take about 2 s of computing on one core here (at
    least 2), and its store computed on 1 rank x 1 thread (the reference of every layout)."""
    d = tmp_path_factory.mktemp("threads")
    sweep = d / "threads.toml"
    sweep.write_text(workload.sized("threads", (DATA / "threads.toml").read_text(), "replicates", 2.0, lo=2, probe=1))
    reference = d / "reference.h5"
    run(sweep, reference, 1, 1, check=0)
    assert layout(reference) == (1, 1, 1)
    return sweep, reference


def test_every_layout_gives_the_same_store(tmp_path, threads_sweep):
    sweep, reference = threads_sweep
    with h5py.File(reference, "r") as f:
        assert np.all(f["tasks"]["status"][...] == 1)
        assert np.all(np.isfinite(f["layers/mu"][...]))
    for ranks, threads in LAYOUTS[1:]:
        store = tmp_path / f"{ranks}x{threads}.h5"
        run(sweep, store, ranks, threads, check=0)
        assert layout(store) == (ranks, threads, 1)
        with h5py.File(store, "r") as f:
            used = set(np.unique(f["tasks"]["rank"][...]).tolist())
        assert used <= set(range(ranks)) and len(used) >= min(ranks, 2), used  # the ranks shared the work
        assert_same(reference, store, f"{ranks} x {threads}")


def test_every_layout_gives_the_same_gradients_and_spectra(tmp_path):
    sweep = DATA / "threads_grad.toml"
    stores = {}
    for ranks, threads in [(1, 1), (1, 2), (3, 2)]:
        stores[ranks, threads] = tmp_path / f"{ranks}x{threads}.h5"
        run(sweep, stores[ranks, threads], ranks, threads, check=0)
    with h5py.File(stores[1, 1], "r") as f:
        assert np.all(f["tasks"]["status"][...] == 1)
        assert np.all(np.isfinite(f["grad/log10_g"][...]))
        assert f["spectra/x_sv"].size > 0 and f["spectra/m_eig_re"].size > 0
    for key, store in stores.items():
        assert_same(stores[1, 1], store, f"{key[0]} x {key[1]}")


def stop_when_done(args, ranks, sig, share=0.3):
    """Start `rcsweep args` (under mpiexec when `ranks`) and, once rank 0's progress shows tasks
    finished (written to the store) and `share` of the work done, send `sig`: SIGKILL to every
    process of the run, another signal to the process started. Returns (exit code, stderr); every
    rank has ended and freed the store then."""
    proc = workload.Watched(mpi_prefix(ranks) + [BIN, *map(str, args)], env=env_without_omp())
    running = proc.wait_until(lambda w: w.done >= 1 and w.work >= share)
    assert running, f"the run ended before the stop:\n{proc.err}"
    procs = [proc.pid] + descendants(proc.pid)
    for p in procs if sig == signal.SIGKILL else [proc.pid]:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass
    code, err = proc.wait(timeout=120)
    # Every rank gone and the store free before the next run opens it (as test_kill_resume does).
    path, quiet, deadline = str(args[args.index("-o") + 1]), 0, time.time() + 120
    while quiet < 3:
        assert time.time() < deadline, f"ranks survived the stop: {using(path, report=True)}"
        quiet = 0 if any(alive(p) for p in procs[1:]) or using(path) else quiet + 1
        time.sleep(0.1)
    return code, err


def test_killed_under_2x1_and_resumed_under_1x2(tmp_path, threads_sweep):
    """SIGKILL of every process of a 2-rank run (1 thread each) once tasks are in the store; the
    same command on 1 rank x 2 threads completes it, bitwise the uninterrupted store."""
    sweep, reference = threads_sweep
    store = tmp_path / "killed.h5"
    stop_when_done(["run", sweep, "-o", store, "--threads", "1"], 2, signal.SIGKILL)
    before = task_rows(store)
    done = np.sum(before["status"] == 1)
    assert 0 < done < len(before), f"{done} tasks done at the kill"
    proc = run(sweep, store, 1, 2, quiet=False, check=0)
    assert f"resuming {store}" in proc.stderr, proc.stderr
    assert layout(store) == (1, 2, 1)
    check_resumed(store, before, reference, "killed under 2 x 1, resumed under 1 x 2")


def test_stopped_under_1x2_and_resumed_under_2x1(tmp_path, threads_sweep):
    """SIGTERM of a single process on 2 threads with --grace 0 (the running bundle abandoned between
    two layers): exit 4; `rcsweep run -n 2 --threads 1` resumes it, bitwise the uninterrupted
    store."""
    sweep, reference = threads_sweep
    store = tmp_path / "stopped.h5"
    code, err = stop_when_done(["run", sweep, "-o", store, "--threads", "2", "--grace", "0"], None, signal.SIGTERM)
    assert code == 4 and "stopped by SIGTERM" in err and "resume with the same command" in err, err
    before = task_rows(store)
    done = np.sum(before["status"] == 1)
    assert 0 < done < len(before), f"{done} tasks done at the stop"
    proc = rcsweep("run", "-n", "2", "--mpiexec", MPIEXEC_CMD, sweep, "-o", store, "--threads", "1",
                   env=env_without_omp(), check=0)
    assert f"resuming {store}" in proc.stderr, proc.stderr
    assert layout(store) == (2, 1, 1)
    check_resumed(store, before, reference, "stopped under 1 x 2, resumed under 2 x 1")


TINY = """[sweep]
name = "tiny"
seed = 2
replicates = 2
[model]
T = 8
d = 8
depth = 2
[axes]
mixer = ["softmax", "markov"]
"""


def test_omp_num_threads_is_the_default_of_threads(tmp_path):
    """OMP_NUM_THREADS=2 without --threads runs 2 threads per rank (single process and under
    mpiexec) and the store, `info` and `info --json` say so; --threads overrides it."""
    sweep = tmp_path / "tiny.toml"
    sweep.write_text(TINY)
    omp2 = env_without_omp(OMP_NUM_THREADS="2")
    cases = [(None, [], (1, 2, 1)), (2, [], (2, 2, 1)), (None, ["--threads", "1"], (1, 1, 1))]
    stores = []
    for ranks, args, expected in cases:
        store = tmp_path / f"omp{len(stores)}.h5"
        rcsweep("run", sweep, "-o", store, "-q", *args, ranks=ranks, env=omp2, check=0)
        assert layout(store) == expected, (ranks, args)
        stores.append(store)
    for store, (_, _, (ranks, threads, _)) in zip(stores, cases):
        info = rcsweep("info", store, check=0).stdout
        assert f"last run {ranks} MPI ranks x {threads} threads\n" in info, info
        data = json.loads(rcsweep("info", "--json", store, check=0).stdout)
        assert (data["mpi_ranks"], data["threads"], data["blas_threads"]) == (ranks, threads, 1)
        assert_same(stores[0], store, f"{ranks} x {threads}")


@pytest.mark.parametrize("args,name,launch,omp", [
    (["--threads", "0"], "--threads", None, None),
    (["--threads", "abc"], "--threads", None, None),
    (["--threads", "2", "--blas-threads", "2"], "--blas-threads", None, None),
    (["--threads", "2", "--blas-threads", "2"], "--blas-threads", "mpiexec", None),
    (["--threads", "2", "--blas-threads", "2"], "--blas-threads", "-n", None),
    (["--blas-threads", "2"], "--blas-threads", None, "2"),
], ids=["threads-0", "threads-abc", "blas-threads", "blas-threads-mpiexec", "blas-threads-n", "blas-threads-omp"])
def test_bad_thread_options_exit_2_before_any_store(tmp_path, args, name, launch, omp):
    """A bad --threads, or --blas-threads above 1 with more than one thread per rank (--threads,
    or OMP_NUM_THREADS without it): exit 2, the error names the option (rank 0 alone under MPI),
    and nothing is written."""
    store = tmp_path / "bad.h5"
    if launch == "-n":
        args = ["-n", "2", "--mpiexec", MPIEXEC_CMD, *args]
    env = env_without_omp(**({"OMP_NUM_THREADS": omp} if omp else {}))
    proc = rcsweep("run", DATA / "threads.toml", "-o", store, *args, ranks=2 if launch == "mpiexec" else None, env=env)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {name}: "), proc.stderr
    assert list(tmp_path.iterdir()) == []  # no store, no temporary, no lock file


def test_run_help_lists_threads_with_its_default():
    out = rcsweep("run", "--help", check=0).stdout
    assert re.search(r"^\s+--threads INT", out, re.M), out
    assert "default: OMP_NUM_THREADS, else 1" in out


def test_a_layout_with_more_threads_than_cores_is_warned_about_with_the_numbers(tmp_path):
    """More threads than cores (ranks x threads above this machine's cores): `run -n` says so once,
    before mpiexec starts, with what it does about it; a single process and `plan --cores` for more
    cores than this machine's say so too. The results are the same as on one thread."""
    cores = os.cpu_count()
    sweep = tmp_path / "tiny.toml"
    sweep.write_text(TINY)
    over = f"2 ranks x {cores} threads = {2 * cores} threads on {cores} core{'s' * (cores > 1)}: oversubscribed, " \
           "each thread gets half a core"
    proc = rcsweep("run", "-n", 2, "--mpiexec", MPIEXEC_CMD, sweep, "-o", tmp_path / "n2.h5", "-q", "--threads", cores,
                   env=env_without_omp(), check=0)
    warnings = [line for line in proc.stderr.splitlines() if "oversubscribed" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {over}; "), proc.stderr
    if cores > 1:  # threads above one: the launcher unbinds the ranks and lets idle threads sleep
        assert "--bind-to none" in warnings[0] and "OMP_WAIT_POLICY=PASSIVE" in warnings[0], proc.stderr
    one = rcsweep("run", sweep, "-o", tmp_path / "one.h5", "-q", "--threads", 2 * cores, env=env_without_omp(),
                  check=0)
    assert f"warning: 1 rank x {2 * cores} threads = {2 * cores} threads on {cores} core" in one.stderr, one.stderr
    assert one.stderr.count("oversubscribed") == 1, one.stderr
    rcsweep("run", sweep, "-o", tmp_path / "ref.h5", "-q", "--threads", 1, env=env_without_omp(), check=0)
    assert_same(tmp_path / "ref.h5", tmp_path / "n2.h5", f"2 x {cores}")
    assert_same(tmp_path / "ref.h5", tmp_path / "one.h5", f"1 x {2 * cores}")
    plan = rcsweep("plan", sweep, "--cores", 2 * cores, check=0)
    assert re.search(rf"^warning +{2 * cores} ranks x 1 thread = {2 * cores} threads on {cores} cores?: "
                     rf"oversubscribed, each thread gets half a core \(this machine's cores; --cores {2 * cores} is "
                     rf"more\)", plan.stdout, re.M), plan.stdout


def test_a_layout_that_fits_the_cores_is_not_warned_about(tmp_path):
    cores = os.cpu_count()
    sweep = tmp_path / "tiny.toml"
    sweep.write_text(TINY)
    runs = [rcsweep("run", "-n", 1, "--mpiexec", MPIEXEC_CMD, sweep, "-o", tmp_path / "n1.h5", "-q", "--threads", cores,
                    env=env_without_omp(), check=0),
            rcsweep("run", sweep, "-o", tmp_path / "one.h5", "-q", "--threads", cores, env=env_without_omp(), check=0),
            rcsweep("plan", sweep, check=0), rcsweep("plan", sweep, "--cores", cores, "--threads", cores, check=0)]
    for proc in runs:
        assert "oversubscribed" not in proc.stdout + proc.stderr, proc.args


def test_plan_emit_warns_when_cores_exceed_the_schedulers_nodes(tmp_path):
    """`plan --emit slurm --cores C` with C above the cores sinfo reports of a node: the job's
    ranks x threads per node would outnumber them, said on stderr with the numbers; none when they
    fit. The script is written all the same."""
    sweep = tmp_path / "tiny.toml"
    sweep.write_text(TINY)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 2\n")
    (bin_dir / "sinfo").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    over = rcsweep("plan", sweep, "--emit", "slurm", "--cores", 4, env=env, check=0)
    assert over.stdout.startswith("#!"), over.stdout
    assert re.search(r"^warning: 4 ranks x 1 thread = 4 threads on 2 cores: oversubscribed, each thread gets half a "
                     r"core \(a node's cores as sinfo reports them; --cores 4 is more\)", over.stderr, re.M), over.stderr
    fits = rcsweep("plan", sweep, "--emit", "slurm", "--cores", 2, env=env, check=0)
    assert "oversubscribed" not in fits.stderr, fits.stderr
