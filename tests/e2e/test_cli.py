"""The command line as a user runs it: help, plan, run, info, bad input, MPI layouts."""
import os
import subprocess

import h5py
import numpy as np
import pytest

from conftest import BIN, DATA, SOURCE, assert_same_results, rcsweep

QUICK = SOURCE / "jobs" / "examples" / "quick.toml"


@pytest.mark.parametrize("cmd,words", [
    ([], ["run", "plan", "info", "merge"]),
    (["run"], ["--output", "--resume", "--overwrite", "--shard", "--threads", "--blas-threads", "--grace",
               "--time-limit", "--retry-failed", "--mem-per-rank", "SIGUSR1", "Exit codes", "4 stopped"]),
    (["plan"], ["computes nothing", "--cores", "--mem-per-rank"]),
    (["info"], ["store"]),
    (["merge"], ["--shard", "shards", "--overwrite", "exactly", "once"]),
])
def test_help_explains_every_command(cmd, words):
    proc = rcsweep(*cmd, "--help", check=0)
    for w in words:
        assert w in proc.stdout, f"'{w}' missing from {cmd} --help"


def test_no_subcommand_is_a_usage_error():
    assert rcsweep().returncode == 2


def test_plan_reports_tasks_cost_memory_and_layout():
    out = rcsweep("plan", QUICK, check=0).stdout
    assert "36 x 3 replicates = 108 tasks" in out
    for w in ("GFLOP", "peak memory", "suggested", "mpiexec -n", "layers        0..12"):
        assert w in out


def test_run_info_and_h5py_xarray_readers(tmp_path):
    store = tmp_path / "quick.h5"
    proc = rcsweep("run", QUICK, "-o", store, ranks=2, check=0)
    assert "108 done" in proc.stderr
    info = rcsweep("info", store, check=0).stdout
    assert "100.0% finished: 108 done" in info
    assert "mixer, d, lambda, gap_fix" in info
    import xarray as xr

    with h5py.File(store, "r") as f:
        assert f.attrs["format"] in ("rcsweep", b"rcsweep")
        assert int(f.attrs["schema_version"]) == 2
        assert int(f.attrs["mpi_ranks"]) == 2
        sr = f["layers/sr_cov"][...]
        assert sr.shape == (108, 13)
        assert np.all(np.isfinite(sr))
        assert np.allclose(sr[:, 0], 32)  # orthonormal input: sr_cov of X_0 X_0^T = I_T is T
        da = xr.DataArray(sr, dims=("task", "layer"), coords={"layer": f["axes/layer"][...]})
        assert list(da.layer.values) == list(range(13))
        points = f["points"][...]
        tasks = f["tasks"][...]
        # the grid: mixer is the slowest axis, gap_fix the fastest
        assert [p.decode() for p in points["mixer"][:2]] == ["softmax", "softmax"]
        assert points["idx_gap_fix"][1] == 1
        assert np.array_equal(tasks["id"], np.arange(108))
        assert set(tasks["rank"]) <= {0, 1}


def test_results_are_bitwise_equal_at_1_2_3_ranks(tmp_path):
    stores = []
    for n in (1, 2, 3):
        s = tmp_path / f"np{n}.h5"
        rcsweep("run", QUICK, "-o", s, "-q", ranks=n, check=0)
        stores.append(s)
    assert_same_results(stores[0], stores[1])
    assert_same_results(stores[0], stores[2])


def test_default_output_name_and_second_run_has_nothing_to_do(tmp_path):
    rcsweep("run", QUICK, "-q", cwd=tmp_path, check=0)
    assert (tmp_path / "quick.h5").exists()
    proc = rcsweep("run", QUICK, cwd=tmp_path, check=0)
    assert "0 tasks in 0 bundles" in proc.stderr and "108 already finished" in proc.stderr


def test_mismatched_sweep_file_is_refused_and_store_untouched(tmp_path):
    store = tmp_path / "a.h5"
    rcsweep("run", QUICK, "-o", store, "-q", check=0)
    before = store.read_bytes()
    other = tmp_path / "other.toml"
    other.write_text(QUICK.read_text().replace("lambda = [0.0, 0.5, 1.0]", "lambda = [0.0, 0.5, 2.0]"))
    proc = rcsweep("run", other, "-o", store, ranks=2)
    assert proc.returncode == 2
    assert "different sweep file" in proc.stderr
    assert store.read_bytes() == before
    # --overwrite replaces it
    rcsweep("run", other, "-o", store, "--overwrite", "-q", check=0)
    with h5py.File(store, "r") as f:
        assert 2.0 in f["axes/lambda"][...]


def test_resume_flag_requires_an_existing_store(tmp_path):
    proc = rcsweep("run", QUICK, "-o", tmp_path / "missing.h5", "--resume")
    assert proc.returncode == 2
    assert "nothing to resume" in proc.stderr


def test_shards_cover_the_plan_without_overlap(tmp_path):
    a, b = tmp_path / "s0.h5", tmp_path / "s1.h5"
    rcsweep("run", QUICK, "-o", a, "--shard", "0/2", "-q", check=0)
    rcsweep("run", QUICK, "-o", b, "--shard", "1/2", "-q", check=0)
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        sa, sb = fa["tasks"]["status"][...], fb["tasks"]["status"][...]
        assert np.all((sa == 1) != (sb == 1))  # every task done in exactly one shard
        assert np.all(sa[0::2] == 1) and np.all(sb[1::2] == 1)


def test_info_on_a_file_that_is_not_a_store(tmp_path):
    bad = tmp_path / "junk.h5"
    bad.write_text("not hdf5")
    proc = rcsweep("info", bad)
    assert proc.returncode != 0
    assert "error:" in proc.stderr and "junk.h5" in proc.stderr


def test_summary_script_prints_table_and_writes_plot(tmp_path):
    import subprocess
    import sys

    store, png = tmp_path / "q.h5", tmp_path / "q.png"
    rcsweep("run", QUICK, "-o", store, "-q", check=0)
    proc = subprocess.run([sys.executable, str(SOURCE / "scripts" / "rcsweep_summary.py"), str(store),
                           "--png", str(png)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == f"wrote {png}"
    lines = lines[:-1]
    assert lines[0].split()[:4] == ["mixer", "d", "lambda", "gap_fix"]
    assert "sr_cov@L12" in lines[0]
    assert len(lines) == 2 + 36  # header, rule, one row per grid point
    with h5py.File(store, "r") as f:  # the table's first cell is the mean over replicates
        sr = f["layers/sr_cov"][:3, 12]
    assert lines[2].split()[4] == f"{sr.mean():.4g}"
    assert png.stat().st_size > 20000
    bad = subprocess.run([sys.executable, str(SOURCE / "scripts" / "rcsweep_summary.py"), str(store),
                          "--metric", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown metric" in bad.stderr


def test_mistyped_command_names_the_closest_and_every_error_says_error():
    proc = rcsweep("runn", QUICK)
    assert proc.returncode == 2 and "error: unknown command 'runn'; did you mean 'run'?" in proc.stderr
    assert "run plan info merge export ls calibrate" in proc.stderr
    proc = rcsweep("zzz")
    assert proc.returncode == 2 and "did you mean" not in proc.stderr and proc.stderr.startswith("error: ")
    for args in (["run"], ["run", QUICK, "--blas-threads", "0"], ["plan", QUICK, "--bogus"], ["--bogus"]):
        proc = rcsweep(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("error: "), (args, proc.stderr)


def test_info_json_is_the_store_as_one_object(tmp_path):
    import json
    store = tmp_path / "q.h5"
    rcsweep("run", QUICK, "-o", store, "-q", check=0)
    data = json.loads(rcsweep("info", "--json", store, check=0).stdout)
    with h5py.File(store, "r") as f:
        assert data["n_tasks"] == int(f.attrs["n_tasks"]) == data["tasks"]["done"]
        assert data["plan_hash"] == f.attrs["plan_hash"] and data["config"] == f.attrs["config"]
    assert data["platforms"][0]["tasks"] == data["n_tasks"] and "/layers/sr_x" in data["datasets"]
    assert data["overrides"] == [] and data["reused"] == []


def test_commands_without_mpi_run_once_under_mpiexec(tmp_path):
    proc = rcsweep("plan", QUICK, ranks=2, check=0)
    assert proc.stdout.count("sweep \"") == 1
    proc = rcsweep("info", "--json", "/nonexistent.h5", ranks=2)
    assert proc.stderr.count("no such file") == 1


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_threads_bound_by_openmp_are_not_taken_for_threads_sharing_a_core(tmp_path):
    # OMP_PLACES/OMP_PROC_BIND bind the main thread to its first place as the program starts: the
    # rank still has both cores (its places); confined to one core (taskset) it is warned about
    sweep = tmp_path / "t.toml"
    sweep.write_text('[sweep]\nname = "t"\nreplicates = 2\n[model]\nT = 8\nd = 8\ndepth = 2\n')
    env = {**os.environ, "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    warning = "warning: a rank may use only 1 core but runs 2 threads"
    bound = rcsweep("run", sweep, "--threads", 2, "-o", tmp_path / "a.h5", "-q", check=0, env=env)
    assert warning not in bound.stderr, bound.stderr
    one = subprocess.run(["taskset", "-c", str(min(os.sched_getaffinity(0))), BIN, "run", str(sweep), "--threads", "2",
                          "-o", str(tmp_path / "b.h5"), "-q"], capture_output=True, text=True, env=env, timeout=300)
    assert one.returncode == 0, one.stderr
    assert warning in one.stderr, one.stderr
    assert_same_results(tmp_path / "a.h5", tmp_path / "b.h5")
