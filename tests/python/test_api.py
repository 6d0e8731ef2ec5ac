"""The Python way in (rcsweep_tools.api, rcsweep_tools.export): a sweep built from Python values is
the same sweep as the file a user would write, runs on 2 ranks through the command line, grows,
reports the engine's own configuration errors, and exports to csv and netCDF with the same numbers
as the store. Adaptive replicates from a dict; every run and plan option as a keyword argument
whose command line the engine accepts (and an unknown one a TypeError); threads=2 bitwise equal to
threads=1; exit codes 3 (data and a warning with the counts), 4 and 1 from `run` and `Job.wait`;
the spellings of the `lambda` dimension that FIGURES.md documents."""
import json
import os
import signal
import subprocess
import tempfile
import time
import warnings
from datetime import timedelta

import h5py
import numpy as np
import pytest
import xarray as xr

from conftest import BIN, MPIEXEC, PYTHON, SCRIPTS, SOURCE
from rcsweep_tools import (Job, RcsweepError, RunStopped, Sweep, SweepConfigError, TaskOutcomeWarning, export,
                           load, replicate_stats, tidy)

os.environ["RCSWEEP_BIN"] = BIN
os.environ.setdefault("RCSWEEP_MPIEXEC", MPIEXEC)


def width_sweep(replicates=2):
    return Sweep("api", seed=7, replicates=replicates, model={"mixer": "softmax", "depth": 4, "T": 8},
                 axes={"d": [8, 16], "lambda": np.array([0.0, 0.5])}, zips=[{"norm": ["none", "rms"]}],
                 output={"spectra": "last"})


def test_package_gives_the_api_and_the_figures():
    import rcsweep_tools
    for name in ("load", "tidy", "spectrum", "Sweep", "export"):
        assert callable(getattr(rcsweep_tools, name))
    assert "mtg-fig1" in rcsweep_tools.FIGURES and rcsweep_tools.figures.FIGURES is rcsweep_tools.FIGURES


def test_sweep_text_is_a_valid_sweep_file_with_every_value():
    text = width_sweep().toml()
    assert 'mixer = "softmax"' in text and "lambda = [0.0, 0.5]" in text and "[[zip]]" in text
    plan = width_sweep().plan(cores=2)
    assert plan.points == 8 and plan.tasks == 16 and plan.bundles is not None
    assert "sweep \"api\"" in str(plan)


def test_run_on_two_ranks_returns_the_dataset_and_grows(tmp_path):
    store = tmp_path / "api.h5"
    ds = width_sweep().run(store, ranks=2)
    assert (store.with_suffix(".toml")).exists()
    assert dict(ds.sizes)["replicate"] == 2 and int((ds.status == 1).sum()) == 16
    assert int(ds.attrs["mpi_ranks"]) == 2  # which rank got which task depends on timing
    ds3 = width_sweep(replicates=3).run(store, ranks=2)  # more replicates: the store grows
    assert int((ds3.status == 1).sum()) == 24
    assert np.array_equal(ds3.sr_x.isel(replicate=slice(0, 2)).values, ds.sr_x.values, equal_nan=True)
    # the same sweep written by hand and run by the command line gives the same numbers
    by_hand = tmp_path / "by_hand.toml"
    by_hand.write_text(width_sweep(replicates=3).toml())
    subprocess.run([BIN, "run", str(by_hand), "-o", str(tmp_path / "by_hand.h5"), "-q"], check=True)
    assert np.array_equal(load(tmp_path / "by_hand.h5").sr_x.values, ds3.sr_x.values, equal_nan=True)


def test_configuration_errors_are_the_engines_with_their_keys(tmp_path):
    bad = Sweep("bad", model={"mixer": "softmax", "depth": 2, "T": 8, "d": 8, "lamda": 0.5})
    with pytest.raises(SweepConfigError) as e:
        bad.run(tmp_path / "bad.h5")
    assert e.value.returncode == 2 and "model.lamda" in str(e.value) and "lambda" in str(e.value)
    assert not (tmp_path / "bad.h5").exists()
    with pytest.raises(TypeError):
        Sweep("x", model={"T": object()}).toml()


def test_export_csv_and_netcdf_hold_the_stores_numbers(tmp_path):
    store = tmp_path / "api.h5"
    width_sweep().run(store)
    csv = export(store, tmp_path / "api.csv")
    table = tidy(store)
    import pandas as pd
    back = pd.read_csv(csv)
    assert len(back) == len(table)
    assert np.allclose(back["sr_x"].to_numpy(), table["sr_x"].to_numpy(), rtol=1e-15, equal_nan=True)
    nc = export(store, tmp_path / "api.nc")
    with xr.open_dataset(nc) as a:
        b = load(store)
        assert np.array_equal(a["sr_x"].values, b["sr_x"].values, equal_nan=True)
        assert a.attrs["plan_hash"] == b.attrs["plan_hash"]
    # the command: parquet without pyarrow/fastparquet is refused (exit 2) with what to do
    proc = subprocess.run([PYTHON, str(SCRIPTS / "rcsweep_export.py"), str(store), "--format", "parquet",
                           "-o", str(tmp_path / "api.parquet")], capture_output=True, text=True)
    try:
        import pyarrow  # noqa: F401
        has_parquet = True
    except ImportError:
        try:
            import fastparquet  # noqa: F401
            has_parquet = True
        except ImportError:
            has_parquet = False
    if has_parquet:
        assert proc.returncode == 0 and (tmp_path / "api.parquet").exists()
    else:
        assert proc.returncode == 2 and "export csv or netcdf instead" in proc.stderr
    # the same through the program: rcsweep export runs the toolkit's command
    proc = subprocess.run([BIN, "export", str(store), "-o", str(tmp_path / "via-rcsweep.csv")], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert pd.read_csv(tmp_path / "via-rcsweep.csv").equals(back)
    missing = subprocess.run([PYTHON, str(SCRIPTS / "rcsweep_export.py"), str(tmp_path / "none.h5")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")


ADAPTIVE = {"min": 4, "max": 20, "step": 2, "targets": [{"metric": "sr_cov", "layer": "last", "rel_se": 0.02}]}
# the same rule as docs/CONFIG.md writes it by hand
ADAPTIVE_BY_HAND = """[sweep]
name = "adaptive"
seed = 3

[model]
mixer = "softmax"
depth = 3
T = 8
d = 8

[axes]
lambda = [0.0, 0.5, 1.0]

[sweep.replicates]
min = 4          # every point runs replicates 0..3 first
max = 20
step = 2
targets = [
  { metric = "sr_cov", layer = "last", rel_se = 0.02 },
]
"""


def adaptive_sweep(**rule):
    return Sweep("adaptive", seed=3, replicates={**ADAPTIVE, **rule},
                 model={"mixer": "softmax", "depth": 3, "T": 8, "d": 8}, axes={"lambda": [0.0, 0.5, 1.0]})


def tiny(name="tiny", replicates=2, **model):
    return Sweep(name, seed=5, replicates=replicates, model={"mixer": "softmax", "depth": 2, "T": 4, "d": 4, **model},
                 axes={"lambda": [0.0, 1.0]})


def plan_hash(path, *overrides):
    out = subprocess.run([BIN, "plan", str(path), *overrides], capture_output=True, text=True, check=True).stdout
    return out.split("(plan ")[1].split(",")[0]


def test_adaptive_replicates_from_a_dict_run_end_to_end(tmp_path):
    sw = adaptive_sweep()
    text = sw.toml()
    assert "[sweep.replicates]" in text and "replicates = " not in text.split("[sweep.replicates]")[0]
    assert '  { metric = "sr_cov", layer = "last", rel_se = 0.02 },' in text
    # the written file is the sweep of the hand-written one (same plan hash) and plan reads it as adaptive
    written = sw.write(tmp_path / "written.toml")
    (tmp_path / "by_hand.toml").write_text(ADAPTIVE_BY_HAND)
    assert plan_hash(written) == plan_hash(tmp_path / "by_hand.toml")
    plan = subprocess.run([BIN, "plan", str(written)], capture_output=True, text=True, check=True).stdout
    assert "3 x 4 to 20 replicates (adaptive, step 2) = 12 to 60 tasks" in plan
    p = sw.plan(ranks=2)
    assert p.adaptive and (p.tasks_min, p.tasks_max, p.tasks, p.points) == (12, 60, 60, 3)

    ds = sw.run(tmp_path / "adaptive.h5")
    st = replicate_stats(ds)
    n = st["n_done"].values
    assert np.all((n >= 4) & (n <= 20)) and len(set(n.tolist())) > 1 and n.min() < 20, n
    assert np.array_equal(st["n_done"] + st["n_not_needed"], np.full(3, 20))
    assert np.all((n - 4) % 2 == 0)  # min, then steps of 2
    with h5py.File(tmp_path / "adaptive.h5", "r") as f:
        assert int((f["tasks"]["status"] == 4).sum()) == 60 - n.sum()
        assert "[sweep.replicates]" in f.attrs["config"]
    # growing the rule (a larger max) from Python grows the store, keeping every finished task
    ds2 = adaptive_sweep(max=30).run(tmp_path / "adaptive.h5")
    assert dict(ds2.sizes)["replicate"] == 30
    assert np.array_equal(ds2.sr_cov.isel(replicate=slice(0, 4)).values, ds.sr_cov.isel(replicate=slice(0, 4)).values)
    # overrides reach the rule's keys
    assert plan_hash(written, "sweep.replicates.max=30") == adaptive_sweep(max=30).plan().text.split("(plan ")[1][:16]
    with pytest.raises(TypeError, match="replicates"):
        Sweep("x", replicates="many").toml()


def same_bits(x, y):
    """Numbers bitwise equal (NaN included); strings and compound rows field by field."""
    if x.dtype.names:
        return x.dtype.names == y.dtype.names and all(same_bits(x[n], y[n]) for n in x.dtype.names)
    if x.dtype.kind == "O" or y.dtype.kind == "O":
        return x.shape == y.shape and x.ravel().tolist() == y.ravel().tolist()
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def test_threads_two_give_bitwise_the_store_of_one_thread(tmp_path):
    sw = Sweep("threads", seed=4, replicates=3, model={"mixer": "softmax", "depth": 4, "T": 16, "d": 16},
               axes={"lambda": [0.0, 0.5], "gap_fix": ["none", "perp"]}, output={"spectra": "last"})
    one = sw.run(tmp_path / "one.h5", threads=1)
    two = sw.run(tmp_path / "two.h5", threads=2)
    assert int(one.attrs["threads"]) == 1 and int(two.attrs["threads"]) == 2
    with h5py.File(tmp_path / "one.h5", "r") as a, h5py.File(tmp_path / "two.h5", "r") as b:
        names = []
        a.visititems(lambda k, o: names.append(k) if isinstance(o, h5py.Dataset) else None)
        assert any(k.startswith("layers/") for k in names) and any(k.startswith("spectra/") for k in names)
        for k in names:
            if k in ("tasks", "provenance/platform"):
                continue
            assert same_bits(a[k][...], b[k][...]), k
        assert np.array_equal(a["tasks"]["status"], b["tasks"]["status"])


def test_unknown_keywords_raise_type_error_naming_them(tmp_path):
    sw = tiny()
    with pytest.raises(TypeError, match=r"'thread'.*did you mean 'threads'"):
        sw.run(tmp_path / "x.h5", thread=2)
    with pytest.raises(TypeError, match="'timelimit'"):
        sw.run_command(tmp_path / "x.h5", timelimit="1h")
    with pytest.raises(TypeError, match=r"'rank'.*did you mean 'ranks'"):
        sw.plan(rank=2)
    with pytest.raises(TypeError, match="'acount'"):
        sw.submit(tmp_path / "x.h5", acount="lab")
    assert not (tmp_path / "x.h5").exists() and not (tmp_path / "x.toml").exists()  # nothing started
    with pytest.raises(ValueError, match="exclude"):
        sw.run(tmp_path / "x.h5", resume=True, overwrite=True)


def info(store):
    return json.loads(subprocess.run([BIN, "info", "--json", str(store)], capture_output=True, text=True,
                                     check=True).stdout)


def test_every_run_option_builds_a_command_line_the_engine_accepts(tmp_path, capsys):
    sw = tiny()
    a = tmp_path / "a.h5"
    cmd = sw.run_command(a, 2, threads=2, blas_threads=1, gemm_library="openblas",
                         overrides={"model.T": 2, "axes.lambda": [0, 0.5]},
                         resume=True, shard=(0, 2), reuse=[tmp_path / "old.h5"], retry_failed=True,
                         time_limit=timedelta(hours=2), grace=5, mem_per_rank="1G", dump_weights=True)
    assert cmd[:5] == [BIN, "run", str(tmp_path / "a.toml"), "-o", str(a)]
    assert cmd[-3:] == ["--", "model.T=2", "axes.lambda=[0, 0.5]"]  # the overrides last, after `--`
    for part in (["-n", "2", "--mpiexec"], ["--threads", "2"],
                 ["--blas-threads", "1"], ["--gemm-library", "openblas"], ["--resume"], ["--shard", "0/2"], ["--reuse", str(tmp_path / "old.h5")],
                 ["--retry-failed"], ["--time-limit", "7200s"], ["--grace", "5.0"], ["--mem-per-rank", "1G"],
                 ["--dump-weights"], ["-q"]):
        assert any(cmd[i:i + len(part)] == part for i in range(len(cmd))), part
    assert "-q" not in sw.run_command(a, progress=True) and "-q" not in sw.run_command(a, quiet=False)
    with pytest.raises(ValueError, match="gemm_library"):
        sw.run_command(a, gemm_library="mkl")

    # each option run by the engine (a 4 x 4 stack of 2 layers: a fraction of a second each)
    ds = sw.run(a, overrides={"model.T": 2, "axes.lambda": [0.0, 0.25, 1.0]}, time_limit=3600, grace=5,
                mem_per_rank=2 ** 30, blas_threads=1, gemm_library="openblas")
    assert list(ds["lambda"].values) == [0.0, 0.25, 1.0] and int(ds.T) == 2
    assert info(a)["overrides"] == ["model.T=2", "axes.lambda=[0.0, 0.25, 1.0]"]
    ds = sw.run(a, overrides=["model.T=2", "axes.lambda=[0.0,0.25,1.0]"], resume=True, time_limit="2h")
    assert int((ds.status == 1).sum()) == 6
    with pytest.raises(SweepConfigError):  # resume needs the same sweep after overrides
        sw.run(a, resume=True)
    ds = sw.run(a, overwrite=True, mem_per_rank="512M", retry_failed=True, progress=True)
    assert "[rcsweep]" in capsys.readouterr().err  # progress streamed
    assert list(ds["lambda"].values) == [0.0, 1.0] and int((ds.status == 1).sum()) == 4
    s0 = sw.run(tmp_path / "s0.h5", shard=(0, 2), load=False)
    s1 = sw.run(tmp_path / "s1.h5", shard="1/2", load=False)
    assert info(s0)["tasks"]["done"] == 2 and info(s1)["tasks"]["done"] == 2
    grown = tiny(replicates=3).run(tmp_path / "grown.h5", reuse=[a], load=False)
    assert info(grown)["reused"] and info(grown)["tasks"]["done"] == 6
    sw.run(tmp_path / "dump.h5", dump_weights=True, args=["--grace", "1"])
    with h5py.File(tmp_path / "dump.h5", "r") as f:
        assert "dump" in f
    two = sw.run(tmp_path / "two.h5", ranks=2, threads=1)
    assert int(two.attrs["mpi_ranks"]) == 2
    two = sw.run(tmp_path / "two_explicit.h5", ranks=2, overwrite=True,
                 mpiexec=[MPIEXEC, "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else []))
    assert int(two.attrs["mpi_ranks"]) == 2
    with pytest.raises(SweepConfigError, match="mem-per-rank"):
        sw.run(tmp_path / "bad.h5", mem_per_rank="lots")

    # plan: the layout of ranks x threads, a shard, memory, overrides, a store
    p = sw.plan(ranks=2, threads=1)
    assert (p.ranks, p.threads) == (2, 1)
    p = sw.plan(ranks=1, threads=2, mem_per_rank="1G", mem_per_node="4G")
    assert (p.ranks, p.threads) == (1, 2) and "1.0 GiB" in p.text
    assert sw.plan(shard=(0, 2)).text and sw.plan(cores=2).ranks == 2
    assert sw.plan(overrides={"axes.lambda": [0, 0.5, 1]}).points == 3
    assert "resumes it, 0 of 4 tasks left" in sw.plan(store=a).store
    assert "grows it" in tiny(replicates=3).plan(store=a).store
    with pytest.raises(ValueError, match="cores"):
        sw.plan(cores=4, ranks=2)


# softmax with perp and no norm vanishes in float64 at layer 3 for T = 128 (MODELS.md): an outcome
VANISH = Sweep("vanish", seed=2025, replicates=2, model={"mixer": "softmax", "input": "orthonormal", "T": 128, "d": 128,
                                                          "depth": 3, "sigma_qk": "inv_sqrt_d", "gap_fix": "perp"})


def test_vanished_tasks_are_outcomes_returned_without_a_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # vanished: an outcome of the stack, no warning
        ds = VANISH.run(tmp_path / "vanish.h5")
    assert np.all(ds.status.values == 5) and np.all(np.isfinite(ds.sr_cov.isel(layer=slice(0, 3)).values))
    with pytest.warns(TaskOutcomeWarning, match=r"2 vanished of 2 tasks") as w:  # unless asked to fail
        VANISH.run(tmp_path / "vanish.h5", fail_on_diverged=True)
    assert w[0].message.counts["vanished"] == 2


def test_exit_3_returns_the_data_and_warns_with_the_failed_count(tmp_path, monkeypatch):
    store = tmp_path / "failed.h5"
    tiny().run(store)
    with h5py.File(store, "r+") as f:  # a task that failed (an error in the engine)
        tasks = f["tasks"][...]
        tasks["status"][1] = 2
        f["tasks"][...] = tasks
    engine = fake_bin(tmp_path, "rcsweep3", f'[[ $1 == run ]] && exit 3; exec {BIN} "$@"')
    monkeypatch.setenv("RCSWEEP_BIN", str(engine))
    with pytest.warns(TaskOutcomeWarning, match=r"1 failed of 4 tasks.*retry_failed=True") as w:
        ds = tiny().run(store)
    assert w[0].message.counts["failed"] == 1 and int((ds.status == 2).sum()) == 1


def fake_bin(tmp_path, name, body):
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    f = d / name
    f.write_text("#!/bin/bash\n" + body + "\n")
    f.chmod(0o755)
    return f


def test_exit_codes_4_and_1_raise_and_no_warning_when_all_done(tmp_path, monkeypatch):
    sw = tiny()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all done: no warning
        sw.run(tmp_path / "done.h5")
    for code, error, says in ((4, RunStopped, "resume"), (1, RcsweepError, "exited with 1")):
        fake = fake_bin(tmp_path, f"rcsweep{code}",
                        f'[[ $1 == run ]] && {{ echo "error: a message" >&2; exit {code}; }}; exec {BIN} "$@"')
        monkeypatch.setenv("RCSWEEP_BIN", str(fake))
        with pytest.raises(error, match=says) as e:
            sw.run(tmp_path / "done.h5")
        assert e.value.returncode == code and "a message" in str(e.value)
        if code == 4:
            assert e.value.store == tmp_path / "done.h5"


def test_job_wait_takes_exit_3_as_finished(tmp_path, monkeypatch):
    vanish = Sweep("vanish", seed=2025, replicates=1, model={"mixer": "softmax", "input": "orthonormal", "T": 128,
                                                              "d": 128, "depth": 3, "sigma_qk": "inv_sqrt_d",
                                                              "gap_fix": "perp"})
    store = tmp_path / "vanish.h5"
    vanish.run(store)
    fake_bin(tmp_path, "squeue", "exit 0")  # the job has left the queue
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    job = Job("42", store, tmp_path / "vanish.slurm.sh")
    for state, code, outcome in (("FAILED", 3, "data"), ("COMPLETED", 0, "data"), ("FAILED", 4, RunStopped),
                                 ("FAILED", 1, RcsweepError), ("TIMEOUT", 0, RcsweepError)):
        fake_bin(tmp_path, "scontrol", f'echo "JobId=42 JobName=vanish JobState={state} ExitCode={code}:0"')
        if outcome == "data":
            assert int((job.wait(poll=0).status == 5).sum()) == 1
        else:
            with pytest.raises(outcome, match=state):
                job.wait(poll=0)


def test_submit_writes_the_options_into_the_job_script(tmp_path, monkeypatch):
    log = tmp_path / "sbatch.log"
    fake_bin(tmp_path, "sbatch", f'echo "$@" > {log}; echo "RCSWEEP_ARGS=$RCSWEEP_ARGS" >> {log}; echo "77;cluster"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    job = tiny().submit(tmp_path / "job.h5", nodes=1, cores=4, hours=2, overrides={"model.T": 2}, account="lab",
                        partition="short", qos="normal", directives=["--constraint=zen4"], exclusive=True,
                        run_args=["--retry-failed"], sbatch_args=["--hold"])
    assert job.job_id == "77"
    script = (tmp_path / "job.slurm.sh").read_text()
    for line in ("#SBATCH --account=lab", "#SBATCH --partition=short", "#SBATCH --qos=normal",
                 "#SBATCH --constraint=zen4", "#SBATCH --exclusive", "'model.T=2'"):
        assert line in script, line
    called = log.read_text()
    assert called.startswith("--parsable --hold ") and str(tmp_path / "job.toml") in called
    assert "RCSWEEP_ARGS=--retry-failed" in called


def test_the_lambda_spellings_documented_in_figures_md_work(tmp_path):
    text = (SOURCE / "docs" / "FIGURES.md").read_text()
    section = text[text.index("**A dimension named `lambda`.**"):]
    block = section[section.index("```python\n") + 10:]
    block = block[:block.index("```")]
    store = tiny("lam", replicates=2).run(tmp_path / "lam.h5", load=False)
    names = {"load": load, "tidy": tidy}
    exec(compile(block.replace('"quick.h5"', repr(str(store))), "FIGURES.md", "exec"), names)
    ds, df = names["ds"], names["df"]
    assert list(names["ds"]["lambda"].values) == [0.0, 1.0]
    assert "lambda" not in names["one"].dims and float(names["one"]["lambda"]) == 1.0
    assert names["one"].identical(ds.sel(**{"lambda": 1.0}))
    assert list(names["big"]["lambda"].values) == [1.0]
    assert len(names["rows"]) == len(df) // 2 and names["rows"].equals(names["same"])
    assert set(names["means"].index.get_level_values("lambda")) == {0.0, 1.0}
    for wrong in ("ds.lambda", "ds.sel(lambda=1.0)"):
        with pytest.raises(SyntaxError):
            compile(wrong, "<user>", "eval")
    with pytest.raises(SyntaxError):
        df.query("lambda == 1")


INTERRUPTED = r"""
import signal, sys
sys.path.insert(0, sys.argv[2])
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background process ignores SIGINT otherwise
from rcsweep_tools import Sweep
sw = Sweep("long", seed=1, replicates=40, model={"mixer": "softmax", "depth": 40, "T": 128, "d": 128},
           axes={"lambda": [0.0, 0.5, 1.0]})
print("running", flush=True)
try:
    sw.run(sys.argv[1])
except KeyboardInterrupt as e:
    print("KeyboardInterrupt:", e, flush=True)
"""


def test_an_interrupt_stops_the_run_cleanly(tmp_path):
    """A notebook's stop button (SIGINT to Python only): rcsweep stops cleanly, the store keeps the
    finished tasks (the same call resumes them) and KeyboardInterrupt is raised."""
    store = tmp_path / "long.h5"
    child = subprocess.Popen([PYTHON, "-c", INTERRUPTED, str(store), str(SCRIPTS)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(SCRIPTS)})
    assert child.stdout.readline().strip() == "running"
    deadline = time.monotonic() + 30
    while not store.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and "KeyboardInterrupt: rcsweep stopped (exit 4)" in out, out
    counts = info(store)["tasks"]
    assert counts["done"] > 0 and counts["pending"] > 0 and counts["done"] + counts["pending"] == 120


def test_on_event_gets_every_event_of_the_run_as_it_comes(tmp_path):
    events = []
    ds = tiny("events").run(tmp_path / "ev.h5", on_event=events.append)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished" and "progress" in kinds, kinds
    assert events[0]["tasks"] == 4 and events[-1]["done"] == 4 and events[-1]["exit_code"] == 0
    assert [e for e in events if e["event"] == "progress"][-1]["fraction"] == 1.0
    assert int((ds.status == 1).sum()) == 4


def test_an_error_in_on_event_is_raised_after_the_run(tmp_path):
    def fail(ev):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        tiny("evfail").run(tmp_path / "evfail.h5", on_event=fail)
    assert info(tmp_path / "evfail.h5")["tasks"]["done"] == 4  # the run itself went on


def test_progress_true_draws_a_bar_from_the_events(tmp_path, capsys):
    tiny("bar").run(tmp_path / "bar.h5", progress=True)
    err = capsys.readouterr().err
    assert "rcsweep: 100.0%|" in err and "4/4 tasks" in err, err  # tqdm's bar, at its end
    assert "[rcsweep] writing" in err and "% of work" not in err  # the notes stay text


def test_the_bar_without_tqdm_is_a_line_per_event():
    from rcsweep_tools.events import ProgressBar
    import io
    out = io.StringIO()
    bar = ProgressBar(stream=out, use_tqdm=False)
    bar({"event": "started"})
    bar({"event": "progress", "tasks_done": 1, "tasks_total": 4, "fraction": 0.25, "eta_s": 100.0,
         "eta_is_bound": True, "last": False})
    bar({"event": "progress", "tasks_done": 4, "tasks_total": 4, "fraction": 1.0, "eta_s": None, "last": True})
    assert out.getvalue() == ("[rcsweep]  25.0% of work, 1/4 tasks, ETA at most 1m40s\n"
                              "[rcsweep] 100.0% of work, 4/4 tasks, ETA ?\n")


# -- one boundary for programs: overrides are KEY=VALUE pairs after `--`, nothing becomes an option --

def test_overrides_that_are_not_key_value_pairs_are_refused_before_anything_runs(tmp_path):
    sw = tiny("inj")
    store = tmp_path / "inj.h5"
    sw.run(store, load=False)
    before = (store.stat().st_ino, store.stat().st_mtime_ns)
    marker = tmp_path / "marker"
    for bad in (["--overwrite=true"], ["--ranks=2", f"--mpiexec=touch {marker}"], "--overwrite=true",
                {"--overwrite": True}, ["-n=2"], [" --overwrite=true"], ["model.T"], ["=3"], ["model..T=2"],
                ["model.T[x]=1"], ["+model.T=1"], ["~model.T="], ["1.T=2"], ["model T=2"], [3], ["model.T=1\0"],
                {"model.T[": 1}, {3: 1}):
        with pytest.raises(ValueError, match="override") as e:
            sw.run(store, overrides=bad, load=False)
        shown = bad if isinstance(bad, str) else next(iter(bad))
        assert repr(shown)[1:-1][:8] in str(e.value), (bad, str(e.value))
        with pytest.raises(ValueError, match="override"):
            sw.plan(overrides=bad)
        with pytest.raises(ValueError, match="override"):
            sw.plan(store=store, overrides=bad)
    assert (store.stat().st_ino, store.stat().st_mtime_ns) == before and not marker.exists()
    # the pairs the command line's grammar takes are passed after `--`, as given or as TOML
    ok = ["zip[0].T=[4,8]", "zip.0.T=[4,8]", "axes.lambda[1]=0.75", "model.mixer=markov", "sweep.name=a b",
          "model.x-y=-1", " model.T = 2"]
    cmd = sw.run_command(store, overrides=ok)
    assert cmd[-len(ok) - 1:] == ["--", *ok]
    cmd = sw.run_command(store, overrides={"model.T": 2, "axes.lambda": [0, 0.5]}, args=["--grace", "1"])
    assert cmd[-5:] == ["--grace", "1", "--", "model.T=2", "axes.lambda=[0, 0.5]"]
    assert "--" not in sw.run_command(store)
    assert sw.plan_command(tmp_path / "s.toml", overrides=["model.T=2"])[-2:] == ["--", "model.T=2"]
    ds = sw.run(store, overrides={"model.T": 2}, overwrite=True)
    assert int(ds.T) == 2 and info(store)["overrides"] == ["model.T=2"]


def test_no_other_keyword_reaches_the_command_line_as_an_option(tmp_path, monkeypatch):
    sw = tiny("opt")
    monkeypatch.chdir(tmp_path)
    ds = sw.run("-dash.h5")  # a store (and its sweep file) whose name starts with '-'
    assert int((ds.status == 1).sum()) == 4 and (tmp_path / "-dash.toml").exists()
    assert "resumes it" in sw.plan(store="-dash.h5").store
    before = (tmp_path / "-dash.h5").stat().st_ino
    with pytest.raises(TypeError, match="args"):  # one string would be split into characters
        sw.run("-dash.h5", args="--overwrite")
    marker = tmp_path / "marker"
    for args, keyword in ((["--mpiexec", f"touch {marker}", "-n", "2"], "mpiexec"), (["-n2"], "ranks"),
                          (["--overwrite"], "overwrite"), (["-qo", "x.h5"], "progress"), (["-o", "x.h5"], "store"),
                          (["--output=x.h5"], "store"),
                          (["--", "model.T=2"], "overrides")):
        with pytest.raises(ValueError, match=keyword):
            sw.run("-dash.h5", args=args)
    with pytest.raises(ValueError, match="overrides"):
        sw.plan(args=["--", "model.T=2"])
    for kw in ({"shard": "--overwrite"}, {"time_limit": "--overwrite"}, {"mem_per_rank": "--overwrite"}):
        with pytest.raises((ValueError, SweepConfigError)):
            sw.run("-dash.h5", **kw)
    assert (tmp_path / "-dash.h5").stat().st_ino == before and not marker.exists()


# -- the event stream's reader: any bytes, any callback, the pipes always drained --

def run_child(code, cwd, timeout=90, env=()):
    """Run Python `code` (rcsweep_tools importable) in a process group of its own: (exit code,
    stdout, stderr). A hang fails the test (the group is killed) instead of stalling the suite."""
    proc = subprocess.Popen([PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(SCRIPTS), **dict(env)}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the run hung ({timeout} s): stdout {out[-2000:]!r}\nstderr {err[-2000:]!r}")
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


# An engine that first writes more than a pipe holds of bytes that are not UTF-8, on both streams:
# text lines, events whose strings hold such bytes, and raw bytes on stderr.
NOISY = r"""if [[ $1 == run ]]; then
  head -c 200000 /dev/zero | tr '\0' '\377' >&2
  for i in $(seq 3000); do printf '\xff\xfe not utf-8 \xc3\n{"event":"note","text":"caf\xe9"}\n'; done
fi
exec %s "$@"
"""

TINY_CHILD = """import sys
from rcsweep_tools import Sweep
sw = Sweep("child", seed=5, replicates=1, model={"mixer": "softmax", "depth": 2, "T": 4, "d": 4},
           axes={"lambda": [0.0, 1.0]})
"""


def test_the_event_reader_survives_any_bytes_on_both_streams(tmp_path):
    engine = fake_bin(tmp_path, "noisy", NOISY % BIN)
    code = TINY_CHILD + """events = []
sw.run(sys.argv[1] if len(sys.argv) > 1 else "noisy.h5", on_event=events.append, progress=True, load=False)
notes = [e for e in events if e["event"] == "note"]
print("events", len(notes), notes[0]["text"] == "caf\\ufffd", events[-1]["event"])
"""
    # progress=True echoes the text lines to a stdout that only takes ASCII
    rc, out, err = run_child(code, tmp_path, env={"RCSWEEP_BIN": str(engine), "PYTHONIOENCODING": "ascii"})
    assert rc == 0, err[-3000:]
    assert out.splitlines()[-1] == "events 3000 True finished", out[-2000:]
    assert "not utf-8" in out and info(tmp_path / "noisy.h5")["tasks"]["done"] == 2


def test_on_event_with_a_store_path_that_is_not_utf8(tmp_path):
    code = TINY_CHILD + """import os
events = []
store = os.fsdecode(b"caf\\xe9.h5")
sw.run(store, on_event=events.append, load=False)
print("events", events[0]["event"], events[-1]["event"], events[-1]["exit_code"])
"""
    rc, out, err = run_child(code, tmp_path)
    assert rc == 0 and out.splitlines()[-1] == "events started finished 0", (out, err[-3000:])
    assert (tmp_path / os.fsdecode(b"caf\xe9.h5")).exists()


# More events than a pipe holds, before the run's own.
FLOOD = r"""if [[ $1 == run ]]; then
  for i in $(seq 3000); do printf '{"event":"note","text":"a note of the run, %%d"}\n' $i; done
fi
exec %s "$@"
"""


def test_a_callback_that_raises_anything_never_stalls_the_run(tmp_path):
    engine = fake_bin(tmp_path, "flood", FLOOD % BIN)
    code = TINY_CHILD + """class Stop(BaseException):
    pass
calls = []
def stop(ev):
    calls.append(ev)
    raise Stop("from the callback")
try:
    sw.run("stop.h5", on_event=stop, load=False)
except Stop as e:
    print("raised after the run:", e, len(calls))
"""
    rc, out, err = run_child(code, tmp_path, env={"RCSWEEP_BIN": str(engine)})
    assert rc == 0 and out.splitlines()[-1] == "raised after the run: from the callback 1", (out, err[-3000:])
    assert info(tmp_path / "stop.h5")["tasks"]["done"] == 2


# -- files beside the store: never overwrite one it did not write; errors name the user's files --

def test_a_sweep_file_beside_the_store_that_it_did_not_write_is_kept(tmp_path):
    sw = tiny("beside")
    store = tmp_path / "beside.h5"
    mine = tmp_path / "beside.toml"
    mine.write_text("# my own notes\n")
    for call in (lambda: sw.run(store), lambda: sw.plan(store=store), lambda: sw.submit(store)):
        with pytest.raises(FileExistsError, match=r"beside\.toml.*overwrite_sweep_file=True"):
            call()
        assert mine.read_text() == "# my own notes\n" and not store.exists()
    # a symbolic link is not followed, nor replaced without being asked
    target = tmp_path / "elsewhere.toml"
    target.write_text("# elsewhere\n")
    mine.unlink()
    mine.symlink_to(target)
    with pytest.raises(FileExistsError, match=r"beside\.toml.*symbolic link"):
        sw.run(store)
    assert target.read_text() == "# elsewhere\n" and not store.exists()
    ds = sw.run(store, overwrite_sweep_file=True)  # asked: the link is replaced by the sweep file
    assert int((ds.status == 1).sum()) == 4 and target.read_text() == "# elsewhere\n" and not mine.is_symlink()
    # the file it wrote is rewritten when the sweep grows; once edited by hand it is kept
    assert int((tiny("beside", replicates=3).run(store).status == 1).sum()) == 6
    text = mine.read_text()
    mine.write_text(text.replace("seed = 5", "seed = 6"))
    with pytest.raises(FileExistsError, match="beside.toml"):
        tiny("beside", replicates=4).run(store)
    assert "seed = 6" in mine.read_text()
    # a file that cannot be written is named, not the temporary it is written through
    with pytest.raises(FileNotFoundError) as e:
        sw.run(tmp_path / "none" / "beside.h5")
    assert str(tmp_path / "none" / "beside.toml") in str(e.value) and ".tmp" not in str(e.value)
    # a file with exactly the sweep (as Sweep.write writes it) is used as it is
    other = tmp_path / "same.toml"
    sw.write(other)
    sw.run(tmp_path / "same.h5", load=False)
    assert other.read_text() == sw.toml()


def test_plan_names_the_sweeps_file_not_a_temporary(tmp_path, monkeypatch):
    sw = tiny("named")
    p = sw.plan(cores=2)
    assert "rcsweep-" not in p.text and tempfile.gettempdir() not in p.text, p.text
    # no file to name (the temporary is gone): the suggestion is the run call, which writes named.toml
    assert "suggested     sweep.run('named.h5', ranks=2)   (one rank per core" in p.text, p.text
    assert p.command is None and p.suggested == {"ranks": 2, "threads": 1}
    # with a store, the sweep file plan wrote beside it, which the command names
    store = tmp_path / "named.h5"
    q = sw.plan(cores=2, store=store)
    assert q.command[q.command.index("run") + 1] == str(tmp_path / "named.toml") and (tmp_path / "named.toml").exists()
    assert f"rcsweep run {tmp_path / 'named.toml'} -o {store}" in q.text and q.store_action == "start"
    # an engine error that names the sweep file names the sweep's, not the temporary
    fake = fake_bin(tmp_path, "names", """echo "error: cannot read sweep file '$2': too large" >&2; exit 2""")
    monkeypatch.setenv("RCSWEEP_BIN", str(fake))
    with pytest.raises(SweepConfigError) as e:
        sw.plan()
    assert "'named.toml'" in str(e.value) and "rcsweep-" not in str(e.value), str(e.value)
    assert not [f for f in os.listdir(tempfile.gettempdir()) if f.startswith("rcsweep-") and f.endswith(".toml")
                and os.stat(os.path.join(tempfile.gettempdir(), f)).st_mtime > time.time() - 60]


def test_plan_is_the_engines_json(tmp_path):
    """Plan holds `rcsweep plan --json`'s object (no parsing of the text): its numbers are those of
    the command line's JSON for the same sweep file."""
    sw = width_sweep()
    p = sw.plan(cores=2)
    written = sw.write(tmp_path / "api.toml")
    d = json.loads(subprocess.run([BIN, "plan", str(written), "--cores", "2", "--json"], capture_output=True,
                                  text=True, check=True).stdout)
    for key in ("plan_hash", "points", "tasks", "bundles", "grid", "memory", "layout", "schedule", "store_bytes"):
        assert p.data[key] == d[key], key
    assert (p.tasks, p.points, p.ranks, p.threads, p.plan_hash) == (16, 8, 2, 1, d["plan_hash"])
    assert p.core_seconds == d["work"]["core_seconds"] and p.peak_bytes == d["memory"]["peak_bytes"]
    assert p.layout == f"{d['layout']['text']} per node: {d['layout']['reason']}" and p.layout in p.text


def test_a_sweep_comes_back_from_its_file_and_its_store(tmp_path):
    """Sweep.from_toml and Sweep.from_store give the sweep that wrote them: the same plan hash, so
    a run of it resumes the store; from_toml the same Sweep."""
    sw = Sweep("back", seed=9, replicates=2, model={"mixer": "softmax", "depth": 3, "T": 8, "d": 8},
               axes={"lambda": [0.0, 0.5]}, zips=[{"norm": ["none", "rms"], "sigma_qk": [1.0, "inv_sqrt_d"]}],
               output={"spectra": "last"})
    again = Sweep.from_toml(sw.write(tmp_path / "written.toml"))
    assert again == sw and again.plan().plan_hash == sw.plan().plan_hash
    ad = adaptive_sweep()
    assert Sweep.from_toml(ad.write(tmp_path / "ad.toml")) == ad
    store = tmp_path / "back.h5"
    sw.run(store, overrides={"model.depth": 4}, load=False)  # the store's sweep has the override's effect
    stored = Sweep.from_store(store)
    with h5py.File(store, "r") as f:
        hash_in_store = f.attrs["plan_hash"]
        hash_in_store = hash_in_store.decode() if isinstance(hash_in_store, bytes) else str(hash_in_store)
    assert stored.name == "back" and stored.model["depth"] == 4 and stored.axes == {"lambda": [0.0, 0.5]}
    assert stored.plan().plan_hash == hash_in_store != sw.plan().plan_hash
    resumed = stored.plan(store=store)  # the sweep file beside the store becomes the stored sweep's
    assert resumed.store_action == "resume" and "resumes it, 0 of 8 tasks left" in resumed.store
    # not a sweep file, not a store: named
    (tmp_path / "bad.toml").write_text("[sweep\nname = 1\n")
    with pytest.raises(ValueError, match="bad.toml"):
        Sweep.from_toml(tmp_path / "bad.toml")
    (tmp_path / "odd.toml").write_text('[sweep]\nname = "x"\n[extra]\na = 1\n')
    with pytest.raises(ValueError, match="'extra'"):
        Sweep.from_toml(tmp_path / "odd.toml")
    (tmp_path / "junk.h5").write_bytes(b"junk")
    with pytest.raises(SweepConfigError):
        Sweep.from_store(tmp_path / "junk.h5")


def test_the_bar_takes_progress_events_that_lack_or_garble_fields():
    from rcsweep_tools.events import ProgressBar, parse_event
    import io
    out = io.StringIO()
    bar = ProgressBar(stream=out, use_tqdm=False)
    bar({"event": "progress"})
    bar({"event": "progress", "tasks_done": 1, "fraction": "x", "eta_s": float("nan")})
    assert out.getvalue() == "[rcsweep]   0.0% of work, ?/? tasks, ETA ?\n[rcsweep]   0.0% of work, 1/? tasks, ETA ?\n"
    assert parse_event(b'{"event": "note", "text": "caf\xe9"}') == {"event": "note", "text": "caf\ufffd"}


def test_strings_cannot_leave_their_toml_string():
    import tomllib
    name = 'x"\n[model]\nT = 99\r\x1b\\ \x7f\t\u00e9'
    text = Sweep(name, model={"mixer": name, 'odd "key"': 1}).toml()
    doc = tomllib.loads(text)
    assert doc["sweep"]["name"] == name and doc["model"] == {"mixer": name, 'odd "key"': 1}


def test_a_slow_callback_never_holds_the_pipe(tmp_path):
    """on_event blocks on the first event until the run is over (its store complete): the run
    still ends (nothing waits on the callback), and the callback gets every event afterwards."""
    engine = fake_bin(tmp_path, "flood", FLOOD % BIN)
    code = TINY_CHILD + f"""import json, subprocess, time
events = []
def slow(ev):
    if not events:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = subprocess.run([{BIN!r}, "info", "--json", "slow.h5"], capture_output=True, text=True)
            if r.returncode == 0 and json.loads(r.stdout)["tasks"]["done"] == 2:
                events.append("the run ended meanwhile")
                break
            time.sleep(0.1)
    events.append(ev)
sw.run("slow.h5", on_event=slow, load=False)
print(events[0], len([e for e in events[1:] if e["event"] == "note"]), events[-1]["event"])
"""
    rc, out, err = run_child(code, tmp_path, env={"RCSWEEP_BIN": str(engine)})
    assert rc == 0 and out.splitlines()[-1] == "the run ended meanwhile 3000 finished", (out, err[-3000:])
