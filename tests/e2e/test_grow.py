"""Sweeps that grow: a changed sweep file run against its old store, or with --reuse OLD.h5,
copies every finished task whose results cannot have changed and computes only the rest; the
result equals a fresh run of the larger sweep bitwise, also after kills. What cannot be reused is
refused with the differences, and the old store is left as it was."""
import hashlib
import os
import random
import re
import signal
import subprocess
import time

import h5py
import numpy as np

from conftest import BIN, assert_same_results, mpi_prefix, rcsweep
from test_kill_resume import using
from workload import Watched

BASE = """[sweep]
name = "grow"
seed = 3
replicates = {replicates}
[model]
mixer = "softmax"
depth = 6
{model}
[axes]
lambda = {lambdas}
[[zip]]
T = {T}
d = {d}
[output]
spectra = "last"
"""


def write(path, replicates=2, lambdas="[0.0, 0.5]", T="[8, 16]", d="[8, 16]", model=""):
    path.write_text(BASE.format(replicates=replicates, lambdas=lambdas, T=T, d=d, model=model))
    return path


def rows(store):
    with h5py.File(store, "r") as f:
        return f["tasks"][...]


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fresh(tmp_path, sweep):
    out = tmp_path / ("fresh-" + sweep.stem + ".h5")
    rcsweep("run", sweep, "-o", out, "-q", check=0)
    return out


def test_more_replicates_axis_values_and_zip_entries_grow_the_store_in_place(tmp_path):
    small = write(tmp_path / "small.toml")
    store = tmp_path / "study.h5"
    rcsweep("run", small, "-o", store, "-q", ranks=2, check=0)
    before = rows(store)
    big = write(tmp_path / "big.toml", replicates=3, lambdas="[0.0, 0.25, 0.5]", T="[8, 16, 24]", d="[8, 16, 24]")
    outlook = rcsweep("plan", big, "-o", store, check=0).stdout  # what the run will do
    assert f"a run grows it, copying {len(before)} finished tasks and computing {27 - len(before)}" in outlook
    assert "sweep.replicates: 2 -> 3" in outlook
    assert f"rcsweep run {big} -o {store}   (" in outlook  # the suggested command names this store
    proc = rcsweep("run", big, "-o", store, ranks=2, check=0)
    assert "sweep.replicates: 2 -> 3" in proc.stderr
    assert "axes.lambda: [0.0, 0.5] -> [0.0, 0.25, 0.5]" in proc.stderr
    assert "zip[0].T: [8, 16] -> [8, 16, 24]" in proc.stderr
    assert f"grown to this sweep: {len(before)} finished tasks copied" in proc.stderr
    assert f"{3 * 3 * 3 - len(before)} tasks in" in proc.stderr  # only the new ones are computed
    assert_same_results(store, fresh(tmp_path, big))
    # The old results were copied, not recomputed: their wall times are in the grown store.
    assert set(before["wall_s"].tolist()) <= set(rows(store)["wall_s"].tolist())
    with h5py.File(store, "r") as f:
        assert "8 tasks from" in f.attrs["reused"]
    assert not list(tmp_path.glob("study.h5.partial*"))  # the temporary it was built in is gone
    info = rcsweep("info", store, check=0).stdout
    assert "reused        8 tasks from" in info


def test_reuse_copies_what_fits_into_a_new_store_and_leaves_the_old_one(tmp_path):
    old = tmp_path / "old.h5"
    rcsweep("run", write(tmp_path / "a.toml"), "-o", old, "-q", check=0)
    old_digest = digest(old)
    # lambda 0.5 dropped, 1.0 added: the lambda = 0 tasks fit (2 points x 2 replicates).
    other = write(tmp_path / "b.toml", lambdas="[0.0, 1.0]")
    assert "a run refuses it (--reuse it into another -o to copy the 4 that fit)" in rcsweep(
        "plan", other, "-o", old, check=0).stdout
    proc = rcsweep("run", other, "-o", old, "-q", check=2)  # in place it would lose the lambda = 0.5 tasks
    assert "4 of its 8 finished tasks are not tasks of this sweep" in proc.stderr
    assert "axes.lambda: [0.0, 0.5] -> [0.0, 1.0]" in proc.stderr
    assert "--reuse" in proc.stderr
    assert digest(old) == old_digest and not list(tmp_path.glob("old.h5.partial*"))
    new = tmp_path / "new.h5"
    proc = rcsweep("run", other, "-o", new, "--reuse", old, check=0)
    assert "--reuse " + str(old) + ": copied 4 finished tasks (4 of its finished tasks are not tasks" in proc.stderr
    assert "4 tasks in" in proc.stderr
    assert digest(old) == old_digest
    assert_same_results(new, fresh(tmp_path, other))


def test_what_changes_every_task_is_refused_with_the_differences(tmp_path):
    old = tmp_path / "old.h5"
    rcsweep("run", write(tmp_path / "a.toml"), "-o", old, "-q", check=0)
    old_digest = digest(old)
    for change, line in [("seed = 4", "sweep.seed: 3 -> 4"),
                         ("depth = 7", "largest depth L_max (every task runs to it): 6 -> 7")]:
        text = (tmp_path / "a.toml").read_text().replace(change.split()[0] + " = " +
                                                           ("3" if "seed" in change else "6"), change)
        changed = tmp_path / "changed.toml"
        changed.write_text(text)
        proc = rcsweep("run", changed, "-o", old, "-q", check=2)
        assert line in proc.stderr and "changes every task's results" in proc.stderr, proc.stderr
        assert "none of its results fits this sweep" in proc.stderr
        proc = rcsweep("run", changed, "-o", tmp_path / "new.h5", "--reuse", old, "-q", check=2)
        assert line in proc.stderr, proc.stderr
        assert not (tmp_path / "new.h5").exists()  # refused before anything is written
    assert digest(old) == old_digest
    # A depth label below L_max is only a label: everything is reused.
    labels = tmp_path / "labels.toml"
    labels.write_text((tmp_path / "a.toml").read_text().replace("depth = 6\n", "").replace(
        "[axes]\n", "[axes]\ndepth = [2, 6]\n"))
    proc = rcsweep("run", labels, "-o", old, check=0)
    assert "grown to this sweep: 8 finished tasks copied" in proc.stderr
    assert "0 tasks in" in proc.stderr


def test_killed_while_growing_or_computing_then_resumed_equals_a_fresh_run(tmp_path):
    small = write(tmp_path / "small.toml", replicates=2, T="[16, 24]", d="[16, 24]", model="norm = \"rms\"")
    big = write(tmp_path / "big.toml", replicates=6, lambdas="[0.0, 0.25, 0.5, 0.75]", T="[16, 24]", d="[16, 24]",
                model="norm = \"rms\"")
    reference = fresh(tmp_path, big)
    rng = random.Random(15)
    kills = 0
    for attempt in range(3):
        store = tmp_path / f"study{attempt}.h5"
        rcsweep("run", small, "-o", store, "-q", check=0)
        for k in range(2):  # the first kill at a random time around the growth, then at a share of the work
            w = Watched(mpi_prefix(2) + [BIN, "run", big, "-o", store])
            if k == 0:
                try:
                    w.proc.wait(timeout=rng.uniform(0.1, 1.5))
                    running = False
                except subprocess.TimeoutExpired:
                    running = True
            else:
                running = w.wait_until(lambda w: w.work >= rng.uniform(0.0, 0.8))
            if running:
                os.killpg(w.pid, signal.SIGKILL)
                kills += 1
            w.proc.wait(timeout=120)
            deadline = time.time() + 60  # every rank gone (they follow their launcher within seconds)
            while using(str(store)):
                assert time.time() < deadline, using(str(store), report=True)
                time.sleep(0.1)
            assert store.exists()  # the old store or the grown one, never neither
            with h5py.File(store, "r") as f:
                assert f["tasks"].shape[0] in (2 * 2 * 2, 6 * 4 * 2)
        rcsweep("run", big, "-o", store, "-q", ranks=2, check=0)
        assert_same_results(store, reference)
        assert np.sum(rows(store)["status"] == 1) == 2 * 4 * 6
    assert kills >= 3, "the runs finished too early to test anything"


def test_input_file_sweeps_grow_too(tmp_path):
    with h5py.File(tmp_path / "emb.h5", "w") as f:
        f["X"] = np.random.default_rng(1).standard_normal((8, 8))
    model = 'input = "file"\ninput_path = "emb.h5"'
    small = write(tmp_path / "small.toml", T="[8]", d="[8]", model=model)
    store = tmp_path / "file.h5"
    rcsweep("run", small, "-o", store, "-q", check=0)
    big = write(tmp_path / "big.toml", replicates=3, T="[8]", d="[8]", model=model)
    proc = rcsweep("run", big, "-o", store, check=0)
    assert "grown to this sweep: 4 finished tasks copied" in proc.stderr
    assert_same_results(store, fresh(tmp_path, big))


def test_overrides_grow_a_store_like_an_edited_file(tmp_path):
    """`run SWEEP sweep.replicates=4 axes.lambda=[...]` against the store of SWEEP: the same growth."""
    small = write(tmp_path / "small.toml")
    store = tmp_path / "study.h5"
    rcsweep("run", small, "-o", store, "-q", check=0)
    proc = rcsweep("run", small, "sweep.replicates=4", "axes.lambda=[0.0,0.5,1.0]", "-o", store, check=0)
    assert "grown to this sweep: 8 finished tasks copied" in proc.stderr
    assert_same_results(store, fresh(tmp_path, write(tmp_path / "big.toml", replicates=4, lambdas="[0.0, 0.5, 1.0]")))
    info = rcsweep("info", store, check=0).stdout
    assert "sweep.replicates=4" in info and "reused        8 tasks from" in info


def test_array_job_shards_grow_through_the_merged_store(tmp_path):
    """Shards of a grown sweep take from the merged old store only their own tasks (--reuse), so that
    their merge finishes every task exactly once and equals a fresh run; a shard store does not grow
    in place when that would strand results in other shards."""
    small = write(tmp_path / "small.toml")
    big = write(tmp_path / "big.toml", replicates=3, lambdas="[0.0, 0.25, 0.5]")
    old = [tmp_path / f"old{i}.h5" for i in range(2)]
    for i, shard in enumerate(old):
        rcsweep("run", small, "-o", shard, "--shard", f"{i}/2", "-q", check=0)
    proc = rcsweep("run", big, "-o", old[0], "--shard", "0/2", "-q", check=2)
    assert "belong to other shards of the grown sweep" in proc.stderr
    merged = tmp_path / "old.h5"
    rcsweep("merge", merged, *old, check=0)
    new = [tmp_path / f"new{i}.h5" for i in range(2)]
    copied = 0
    for i, shard in enumerate(new):
        proc = rcsweep("run", big, "-o", shard, "--shard", f"{i}/2", "--reuse", merged, check=0)
        copied += int(re.search(r"copied (\d+) finished tasks", proc.stderr).group(1))
        assert "belong to other shards" in proc.stderr
    assert copied == 8  # every old task, once
    rcsweep("merge", tmp_path / "new.h5", *new, check=0)
    assert_same_results(tmp_path / "new.h5", fresh(tmp_path, big))
