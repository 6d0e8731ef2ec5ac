"""Memory limits (docs/ERRORS.md, docs/SCALING.md "Memory per rank"): the estimate counts depth, so a
deep sweep over --mem-per-rank is refused before any store exists; `plan` prints the number `run`
checks; an address-space limit (RLIMIT_AS, ulimit -v) too small for the run is refused at once
instead of hanging in OpenBLAS; a run that fits the limit works and still stops on SIGTERM."""
import os
import re
import resource
import signal
import time

import pytest

from conftest import BIN, rcsweep
import workload

MiB = 1 << 20

SWEEP = """
[sweep]
name = "mem"
seed = 1
replicates = 1
[model]
T = 4
d = 4
mixer = "softmax"
norm = "rms"
depth = 10
"""


@pytest.fixture
def sweep(tmp_path):
    path = tmp_path / "mem.toml"
    path.write_text(SWEEP)
    return path


def address_limit(nbytes):
    """preexec_fn: this RLIMIT_AS (ulimit -v) for the child."""
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


def one_blas_thread():
    """The environment with one BLAS thread at load (as under mpiexec, which binds a rank to a
    core): the address space then does not depend on this machine's core count."""
    return dict(os.environ, OPENBLAS_NUM_THREADS="1")


def size_of(text):
    number, unit = text.split()
    return float(number) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[unit]


def plan_memory(*args, **kw):
    """(peak memory, address space) per rank as `rcsweep plan` prints them, in bytes."""
    out = rcsweep("plan", *args, check=0, **kw).stdout
    peak = re.search(r"^peak memory +([\d.]+ \w+) per rank", out, re.M).group(1)
    space = re.search(r"^address space ([\d.]+ \w+) per rank", out, re.M).group(1)
    return size_of(peak), size_of(space)


# A bundle of 100 tasks (one per lambda: they share their weights) at the deepest depth a sweep may
# have (docs/CONFIG.md "Limits"): 10^7 layers of results in one bundle.
DEEP = ["model.depth=100000", "axes.lambda=[" + ", ".join(f"{i / 100}" for i in range(100)) + "]"]


def test_a_deep_bundle_is_refused_by_mem_per_rank_before_any_store(tmp_path, sweep):
    store = tmp_path / "deep.h5"
    t0 = time.time()
    proc = rcsweep("run", sweep, *DEEP, "--mem-per-rank", "1G", "-o", store, check=2, timeout=60)
    assert time.time() - t0 < 20
    assert re.search(r"error: --mem-per-rank: the largest bundle \(100 tasks with T = 4, d = 4, 100000 layers\) "
                     r"needs about [\d.]+ GiB per rank, more than the budget of 1.0 GiB \(--mem-per-rank 1G\); "
                     r"the results of its 100001 layers per task take", proc.stderr), proc.stderr
    # 14 metrics and four spectrum lists per layer (208 bytes), and rank 0's two offset tables (16)
    needs = size_of(re.search(r"needs about ([\d.]+ \w+)", proc.stderr).group(1))
    assert 1e7 * 208 < needs < 1e7 * 248, needs
    assert not store.exists()
    peak, _ = plan_memory(sweep, *DEEP, "--mem-per-node", "1T", "--cores", "1")  # one rank, as the run
    assert abs(peak - needs) < 0.001 * needs  # plan prints what run checks


def test_plan_prints_what_run_checks(tmp_path, sweep):
    """--mem-per-rank just below `plan`'s peak memory is refused, just above it runs."""
    depth = "model.depth=100000"
    peak, _ = plan_memory(sweep, depth)
    assert peak > 40 * MiB + 100000 * 200  # the program and the results of every layer
    below = rcsweep("run", sweep, depth, "--mem-per-rank", str(int(peak * 0.99)), "-o", tmp_path / "a.h5", check=2)
    assert "--mem-per-rank: the largest bundle" in below.stderr, below.stderr
    assert not (tmp_path / "a.h5").exists()
    rcsweep("run", sweep, "model.depth=2000", "--mem-per-rank", str(int(plan_memory(sweep, "model.depth=2000")[0] * 1.01)),
            "-o", tmp_path / "b.h5", "-q", check=0)


def test_address_space_limit_too_small_is_refused_at_once(tmp_path, sweep):
    """Under ulimit -v 300 MB OpenBLAS cannot get its buffers: refused (exit 2) naming the limit
    and the estimate, within seconds instead of hanging."""
    store = tmp_path / "as.h5"
    t0 = time.time()
    proc = rcsweep("run", sweep, "-o", store, check=2, timeout=20, preexec_fn=address_limit(300 * MiB))
    assert time.time() - t0 < 20
    assert re.search(r"error: ulimit -v: the largest bundle \(1 task with T = 4, d = 4, 10 layers\) needs about "
                     r"[\d.]+ MiB of address space per rank \(.* for the program, MPI and the BLAS buffers\), more "
                     r"than the limit of 300.0 MiB \(RLIMIT_AS, ulimit -v\)", proc.stderr), proc.stderr
    assert not store.exists()
    # plan says so too, and exits 0 (it sizes jobs for elsewhere)
    out = rcsweep("plan", sweep, check=0, preexec_fn=address_limit(300 * MiB)).stdout
    assert "more than this shell's limit of 300.0 MiB: `rcsweep run` here refuses it" in out, out


def test_a_bad_sweep_file_under_a_small_limit_is_refused_too(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SWEEP.replace("T = 4", "T = -4"))
    proc = rcsweep("run", bad, "-o", tmp_path / "x.h5", check=2, timeout=20, preexec_fn=address_limit(200 * MiB))
    assert "error: ulimit -v: rcsweep run needs about" in proc.stderr, proc.stderr


def test_a_sweep_that_fits_a_modest_limit_runs(tmp_path, sweep):
    env = one_blas_thread()
    _, space = plan_memory(sweep, "model.depth=20000", env=env)
    limit = int(space + 64 * MiB)
    assert limit < 1024 * MiB
    rcsweep("run", sweep, "model.depth=20000", "-o", tmp_path / "fit.h5", "-q", check=0, timeout=60, env=env,
            preexec_fn=address_limit(limit))


def test_sigterm_stops_a_run_under_a_limit(tmp_path, sweep):
    """The stop signals work under an address-space limit: SIGTERM mid-bundle stops the run with
    exit code 4 and the task stays pending."""
    env = one_blas_thread()
    long = ["model.T=64", "model.d=64", "model.depth=100000"]  # minutes of computing: stopped long before
    _, space = plan_memory(sweep, *long, env=env)
    kib = int(space + 64 * MiB) // 1024  # the shell's ulimit -v, then rcsweep in its place (same pid)
    proc = workload.Watched(["bash", "-c", f'ulimit -v {kib} && exec "$0" "$@"', BIN, "run", sweep, *long,
                             "-o", tmp_path / "t.h5", "--grace", "0"], env=env)
    try:
        assert proc.wait_until(lambda w: w.work >= 0.01), proc.err
        t0 = time.time()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:  # a run of minutes left behind would load every later test
            proc.kill()
    assert time.time() - t0 < 10
    assert proc.returncode == 4, err
    assert "stopped by SIGTERM" in err, err


def test_commands_end_under_a_tiny_limit(sweep):
    """Under 200 MiB OpenBLAS's threads started at load (one per further core) cannot get their
    buffers and retry for ever; `plan` and `--version` still end (they exit without waiting for
    them), `run` is refused."""
    for args in (["--version"], ["plan", sweep]):
        rcsweep(*args, check=0, timeout=20, preexec_fn=address_limit(200 * MiB))
    rcsweep("run", sweep, "-o", sweep.with_suffix(".h5"), check=2, timeout=20, preexec_fn=address_limit(200 * MiB))
