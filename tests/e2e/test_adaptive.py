"""Adaptive replicates ([sweep.replicates] min/max/step/targets): each point's decisions follow the
rule from its own first replicates, and the store is bitwise the same for any rank count, after
kills and resumes, and from shards merged."""
import json
import os
import random
import re

import h5py
import numpy as np
import pytest

import workload
from conftest import DATA, assert_same_results, rcsweep
from test_kill_resume import run_and_kill

TEMPLATE = (DATA / "adaptive.toml").read_text()
MIN, MAX, STEP = 3, 24, 3
# (metric, layer, kind, bound) as in data/adaptive.toml
TARGETS = [("sr_cov", 1, "rel", 0.02), ("mu_rel", 1, "abs", 0.05)]
DONE, DIVERGED, NOT_NEEDED = 1, 3, 4


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """data/adaptive.toml with its depth set for about 2 s of computing on one core here (the
    targets look at layer 1, so the depth changes the cost, not the decisions)."""
    path = tmp_path_factory.mktemp("adaptive") / "adaptive.toml"
    path.write_text(workload.sized("adaptive", TEMPLATE, "depth", 2.0, lo=8, probe=8))
    return path


@pytest.fixture(scope="module")
def reference(sweep):
    path = sweep.parent / "reference.h5"
    rcsweep("run", sweep, "-o", path, "-q", check=0)
    return path


def tasks(path):
    with h5py.File(path, "r") as f:
        return f["tasks"][...], {m: f["layers"][m][...] for m, *_ in TARGETS}


def met(values, kind, bound):
    """The rule's test, recomputed here: SE of the finite values (sd with n - 1) within the bound.
    Returns None when the values are too close to the bound for a different summation order to
    be sure of the answer."""
    v = values[np.isfinite(values)]
    if len(v) < 2:
        return False
    se = np.std(v, ddof=1) / np.sqrt(len(v))
    limit = bound * abs(np.mean(v)) if kind == "rel" else bound
    return None if abs(se - limit) <= 1e-9 * max(limit, 1e-300) else bool(se <= limit)


def test_each_point_stops_where_its_own_replicates_meet_the_targets(reference):
    rows, layers = tasks(reference)
    status = rows["status"].reshape(-1, MAX)
    used = []
    for p, s in enumerate(status):
        n = int(np.sum((s == DONE) | (s == DIVERGED)))
        used.append(n)
        assert n >= MIN and (n - MIN) % STEP == 0 or n == MAX, (p, s)
        assert np.all(np.isin(s[:n], [DONE, DIVERGED])) and np.all(s[n:] == NOT_NEEDED), (p, s)
        for k in list(range(MIN, n, STEP)) + ([n] if n < MAX else []):
            ids = p * MAX + np.arange(k)
            verdicts = [met(layers[m][ids, layer], kind, bound) for m, layer, kind, bound in TARGETS]
            if None in verdicts:
                continue
            assert all(verdicts) == (k == n), (p, k, n, verdicts)
    # The sweep exercises every outcome: points stopping at min, later, and running to max.
    assert min(used) == MIN and max(used) == MAX and any(MIN < n < MAX for n in used), used


def test_bitwise_the_same_at_one_and_three_ranks(tmp_path, sweep, reference):
    out = tmp_path / "np3.h5"
    rcsweep("run", sweep, "-o", out, "-q", ranks=3, check=0)
    assert_same_results(reference, out)


def test_kills_and_resumes_give_the_same_store(tmp_path, sweep, reference):
    rng = random.Random(19)
    store = tmp_path / "killed.h5"
    killed = 0
    for ranks in (2, 3, 1):
        when = ("work", rng.uniform(0.1, 0.9))
        killed += run_and_kill(["run", sweep, "-o", store], ranks, when, rng.choice(["all", "rank0"]))[0]
    assert killed >= 2  # the sweep is long enough to be killed while it runs
    rcsweep("run", sweep, "-o", store, "-q", ranks=2, check=0)
    assert_same_results(reference, store)


def test_shards_merged_equal_one_run(tmp_path, sweep, reference):
    shards = [tmp_path / f"shard{i}.h5" for i in range(3)]
    for i, s in enumerate(shards):
        rcsweep("run", sweep, "-o", s, "-q", "--shard", f"{i}/3", check=0)
        rows, _ = tasks(s)
        mine = rows["point"] % 3 == i  # a point's replicates all in one shard
        assert np.all(rows["status"][~mine] == 0) and np.all(rows["status"][mine] != 0)
    merged = tmp_path / "merged.h5"
    rcsweep("merge", merged, *shards, check=0)
    assert_same_results(reference, merged)


def test_info_plan_and_progress_count_replicates_not_needed(tmp_path, sweep, reference):
    rows, _ = tasks(reference)
    counts = {k: int(np.sum(rows["status"] == v)) for k, v in (("done", DONE), ("not_needed", NOT_NEEDED))}
    info = json.loads(rcsweep("info", reference, "--json", check=0).stdout)
    assert info["tasks"]["not_needed"] == counts["not_needed"] > 0 and info["tasks"]["done"] == counts["done"]
    text = rcsweep("info", reference, check=0).stdout
    assert f"{counts['not_needed']} not needed" in text and "100.0% finished" in text
    plan = rcsweep("plan", sweep, check=0).stdout
    points = len(rows) // MAX
    assert f"{points} x {MIN} to {MAX} replicates (adaptive, step {STEP}) = {points * MIN} to {points * MAX} tasks" in plan
    assert re.search(r"work +\S+ to \S+ GFLOP", plan), plan
    run = rcsweep("run", sweep, "-o", tmp_path / "new.h5", check=0, env={**os.environ, "RCSWEEP_PROGRESS_INTERVAL": "0.01"}).stderr
    assert f"{points * MIN} tasks (+ up to {points * (MAX - MIN)} replicates as the targets need them)" in run, run
    assert f"{counts['not_needed']} replicates not needed" in run, run
    last = re.findall(r"(\d+)/(\d+) tasks, +([0-9.]+)% of work", run)[-1]
    assert int(last[0]) == int(last[1]) == counts["done"] + int(np.sum(rows["status"] == DIVERGED)), run


def test_replicates_equal_those_of_a_fixed_sweep(tmp_path, sweep, reference):
    """Replicate r of a point is the same draw whatever the rule (or none) and max: the adaptive
    store's values are those of a plain `replicates = 6` run of the same grid."""
    fixed_sweep = tmp_path / "fixed.toml"
    text = sweep.read_text()
    text = re.sub(r"^\[sweep\.replicates\].*?(?=^\[model\])", "", text, flags=re.S | re.M)
    fixed_sweep.write_text(text.replace("seed = 11", "seed = 11\nreplicates = 6"))
    fixed = tmp_path / "fixed.h5"
    rcsweep("run", fixed_sweep, "-o", fixed, "-q", check=0)
    with h5py.File(reference, "r") as a, h5py.File(fixed, "r") as f:
        ta, tf = a["tasks"][...], f["tasks"][...]
        rows = tf["point"].astype(np.int64) * MAX + tf["replicate"]  # the same replicate in the adaptive store
        done = ta["status"][rows] == DONE
        assert np.sum(done) >= len(tf) // 2
        for name in a["layers"]:
            x, y = a["layers"][name][...][rows[done]], f["layers"][name][...][done]
            assert np.array_equal(x.view(np.uint64), y.view(np.uint64)), name


def test_time_limits_cut_the_run_into_parts_that_equal_one_run(tmp_path, sweep, reference):
    """Runs under a time limit (a sixth of the computing time, on 2 ranks) stop with exit 4, also
    while workers wait for replicates to be released, and the parts complete the store bitwise."""
    limit = max(0.3, workload.compute_seconds(reference) / 6)
    store, codes = tmp_path / "limited.h5", []
    while not codes or codes[-1] == 4:
        assert len(codes) < 25, codes
        codes.append(rcsweep("run", sweep, "-o", store, "-q", "--time-limit", f"{limit:.2f}s", ranks=2).returncode)
    assert codes[-1] == 0 and len(codes) >= 2, codes
    assert_same_results(reference, store)


def test_a_larger_max_grows_the_store_like_a_fresh_run(tmp_path):
    """Raising max: the old store grows in place (its results kept, the decisions taken again) and
    equals a fresh run of the new sweep."""
    grown, fresh, larger = tmp_path / "grown.h5", tmp_path / "fresh.h5", tmp_path / "larger.toml"
    larger.write_text(TEMPLATE.replace(f"max = {MAX}", f"max = {MAX + 6}"))
    rcsweep("run", DATA / "adaptive.toml", "-o", grown, "-q", check=0)
    proc = rcsweep("run", larger, "-o", grown, check=0)
    assert "grown to this sweep" in proc.stderr, proc.stderr
    rcsweep("run", larger, "-o", fresh, "-q", check=0)
    assert_same_results(fresh, grown)
    rows, _ = tasks(grown)
    assert np.any(rows["replicate"][rows["status"] == DONE] >= MAX)  # replicates beyond the old max ran
