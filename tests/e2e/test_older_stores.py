"""rcsweep and a store made before a metric of the registry (docs/SCHEMA.md "Adding a metric"):
`info` reads it, `run` resumes it and adds the metric's dataset (NaN for the tasks finished before,
the values of the tasks run now), `merge` joins it with a shard that has the metric (NaN where it
is unknown); a store without a core metric stays a damaged store, refused with nothing written.

The later metric is the first registry metric after the core ones (res_best, opt-in: the sweep
selects every metric); while there was none, the tests took the last core one by lowering the core
count (RCSWEEP_TEST_CORE_METRICS, src/store/open.cpp required_metrics).
"""
import os
import re
import shutil

import h5py
import numpy as np
import pytest

from conftest import SOURCE, rcsweep, results

SWEEP = """
[sweep]
name = "older"
seed = 11
replicates = 3
[model]
mixer = "softmax"
input = "gaussian"
depth = 3
[axes]
T = [4, 6]
d = [8]
[output]
metrics = ["all", "res_best"]
"""
REGISTRY = SOURCE / "src" / "metrics" / "registry.hpp"


def registry():
    """(the metric names in storage order, n_core_metrics) of src/metrics/registry.hpp."""
    text = REGISTRY.read_text()
    body = re.search(r"layer_metrics\s*=\s*\{\{(.*?)\}\};", text, re.S).group(1)
    names = re.findall(r'\{\s*"([a-z0-9_]+)",', body)
    return names, int(re.search(r"n_core_metrics\s*=\s*(\d+)\s*;", text).group(1))


def later_metric():
    """(a metric after the core ones, the environment that makes it one): the first registry
    metric after the core ones, or while there is none the last core metric with one core metric
    fewer."""
    names, n = registry()
    if n < len(names):
        return names[n], dict(os.environ)
    return names[n - 1], {**os.environ, "RCSWEEP_TEST_CORE_METRICS": str(n - 1)}


def make_older(path, name):
    """The store at `path` as one made before metric `name`: no /layers/<name>, `computed` without it."""
    with h5py.File(path, "r+") as f:
        del f["layers"][name]
        f["layers"].attrs["computed"] = " ".join(m for m in f["layers"].attrs["computed"].split() if m != name)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The sweep run whole, and as the two shards of --shard i/2."""
    d = tmp_path_factory.mktemp("older")
    sweep = d / "older.toml"
    sweep.write_text(SWEEP)
    single = d / "single.h5"
    rcsweep("run", sweep, "-o", single, "-q", check=0)
    shards = [d / f"shard{i}.h5" for i in range(2)]
    for i, path in enumerate(shards):
        rcsweep("run", sweep, "-o", path, "--shard", f"{i}/2", "-q", check=0)
    return sweep, single, shards


def done_in(path):
    with h5py.File(path, "r") as f:
        return f["tasks"]["status"][...] == 1


def assert_as_single_but(path, single, name, unknown):
    """`path` holds the single run's results, but metric `name` is NaN in the rows `unknown`."""
    have, want = results(path), results(single)
    assert have.keys() == want.keys()
    expected = want[f"layers/{name}"].copy()
    expected[unknown] = np.nan
    want[f"layers/{name}"] = expected
    for k in want:
        if have[k].dtype.kind == "f":
            assert np.array_equal(have[k].view(np.uint64), want[k].view(np.uint64)), k
        else:
            assert np.array_equal(have[k], want[k]), k


def test_info_reads_it(stores, tmp_path):
    _, single, _ = stores
    name, env = later_metric()
    path = tmp_path / "older.h5"
    shutil.copy(single, path)
    make_older(path, name)
    info = rcsweep("info", path, env=env, check=0)
    assert "100.0% finished" in info.stdout and f"/layers/{name}" not in info.stdout


def test_a_resume_adds_the_metric(stores, tmp_path):
    sweep, single, shards = stores
    name, env = later_metric()
    path = tmp_path / "older.h5"
    shutil.copy(shards[0], path)  # half the tasks done
    make_older(path, name)
    before = done_in(path)
    assert 0 < before.sum() < before.size
    rcsweep("run", sweep, "-o", path, "-q", env=env, check=0)
    assert done_in(path).all()
    with h5py.File(path, "r") as f:
        d = f["layers"][name]
        assert d.attrs["units"] and d.attrs["description"]
        assert np.isnan(d[...][before]).all()
        assert f["layers"].attrs["computed"] == " ".join(registry()[0])
    # the tasks run now record it: the single run's values; the earlier ones NaN
    assert_as_single_but(path, single, name, before)


def test_merge_gives_the_metric_nan_where_unknown(stores, tmp_path):
    _, single, shards = stores
    name, env = later_metric()
    older = tmp_path / "shard0.h5"
    shutil.copy(shards[0], older)
    make_older(older, name)
    out = tmp_path / "merged.h5"
    rcsweep("merge", out, older, shards[1], env=env, check=0)
    assert_as_single_but(out, single, name, done_in(shards[0]))
    # in the other order too
    out2 = tmp_path / "merged2.h5"
    rcsweep("merge", out2, shards[1], older, env=env, check=0)
    assert_as_single_but(out2, single, name, done_in(shards[0]))


@pytest.mark.parametrize("which", ["first", "last"])
def test_a_store_without_a_core_metric_is_refused(stores, tmp_path, which):
    sweep, _, shards = stores
    names, n = registry()
    _, env = later_metric()
    core = int(env.get("RCSWEEP_TEST_CORE_METRICS", n))
    name = names[0] if which == "first" else names[core - 1]
    path = tmp_path / "damaged.h5"
    shutil.copy(shards[0], path)
    make_older(path, name)
    data = path.read_bytes()
    line = f"{path}: damaged rcsweep store (/layers/{name} is missing)"
    for args in (("info", path), ("run", sweep, "-o", path, "-q"), ("merge", tmp_path / "m.h5", path, shards[1])):
        proc = rcsweep(*args, env=env, check=2)
        assert f"error: {line}\n" in proc.stderr, (args, proc.stderr)
    assert path.read_bytes() == data and not (tmp_path / "m.h5").exists()
