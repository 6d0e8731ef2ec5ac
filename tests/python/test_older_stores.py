"""The toolkit and a store made before a metric of the registry (docs/SCHEMA.md "Adding a metric"):

- the core metrics (the registry's first n_core_metrics, src/metrics/registry.hpp) are the
  toolkit's LAYER_METRICS, which every store has: a store without one is refused as damaged;
- a store without a later metric loads without it (load, tidy, replicate_stats, export,
  rcsweep-plot, rcsweep-summary; rcsweep-recompute compares the others): layer_metrics lists only
  what the store holds;
- every /layers dataset carries its registry entry's `units`, which labels a metric the toolkit
  does not know; a store without the attribute loads as before.

The later metric is the first registry metric after the core ones (res_best); while there was none,
the tests took the last core one by lowering the core count (RCSWEEP_TEST_CORE_METRICS, which the
engine and the toolkit both read).
"""
import re
import shutil
import subprocess

import h5py
import numpy as np
import pytest

from conftest import BIN, PYTHON, SCRIPTS, plot_main
from metric_registry import REGISTRY, metric_registry, metric_names

from rcsweep_tools import load, tidy
from rcsweep_tools.export import export
from rcsweep_tools.load import LAYER_METRICS, METRICS, StoreInvalid, core_metrics, layer_metrics, open_store, \
    replicate_stats

SWEEP = """
[sweep]
name = "older"
seed = 5
replicates = 2
[model]
mixer = "markov"
input = "orthonormal"
sigma_A = 1.0
depth = 2
[axes]
T = [4, 6]
d = [8]
"""
ENV = "RCSWEEP_TEST_CORE_METRICS"


def n_core_metrics():
    """n_core_metrics of src/metrics/registry.hpp."""
    return int(re.search(r"n_core_metrics\s*=\s*(\d+)\s*;", REGISTRY.read_text()).group(1))


def later_metric():
    """(a metric after the core ones, the core count to set for it or None): the first registry
    metric after the core ones, or while there is none the last core metric with one core metric
    fewer."""
    names, n = metric_names(), n_core_metrics()
    return (names[n], None) if n < len(names) else (names[n - 1], n - 1)


def without(store, path, name):
    """A copy of `store` at `path` as a store made before metric `name`: no /layers/<name>, and
    `computed` without it."""
    shutil.copy(store, path)
    with h5py.File(path, "r+") as f:
        del f["layers"][name]
        f["layers"].attrs["computed"] = " ".join(m for m in f["layers"].attrs["computed"].split() if m != name)
    return path


@pytest.fixture(scope="module")
def store(run_sweep):
    return run_sweep(SWEEP)


@pytest.fixture
def older(store, tmp_path, monkeypatch):
    """(the store without a later metric, that metric's name), the core count lowered for it."""
    name, core = later_metric()
    if core is not None:
        monkeypatch.setenv(ENV, str(core))
    return without(store, tmp_path / "older.h5", name), name


def test_the_core_metrics_are_the_registrys_first():
    n = n_core_metrics()
    assert 1 <= n <= len(metric_names())
    assert list(LAYER_METRICS) == metric_names()[:n]  # what check_store requires
    assert core_metrics() == LAYER_METRICS


def test_the_test_core_count_can_only_lower_it(monkeypatch):
    for value, want in (("3", LAYER_METRICS[:3]), ("1", LAYER_METRICS[:1]), (str(len(LAYER_METRICS)), LAYER_METRICS),
                        ("0", LAYER_METRICS), (str(len(LAYER_METRICS) + 1), LAYER_METRICS), ("-1", LAYER_METRICS),
                        ("3x", LAYER_METRICS), ("", LAYER_METRICS), ("\u0663", LAYER_METRICS)):
        monkeypatch.setenv(ENV, value)
        assert core_metrics() == want, value


def test_a_store_without_a_core_metric_is_refused(store, tmp_path):
    for name in (LAYER_METRICS[0], LAYER_METRICS[-1]):
        path = without(store, tmp_path / f"no_{name}.h5", name)
        line = f"{path}: damaged rcsweep store (/layers/{name} is missing)"
        with pytest.raises(StoreInvalid) as e:
            load(path)
        assert str(e.value) == line
        proc = subprocess.run([BIN, "info", str(path)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and f"error: {line}\n" in proc.stderr, proc.stderr


def test_fewer_core_metrics_still_require_those(store, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(len(LAYER_METRICS) - 1))
    name = LAYER_METRICS[-2]
    path = without(store, tmp_path / "no_core.h5", name)
    with pytest.raises(StoreInvalid, match=re.escape(f"damaged rcsweep store (/layers/{name} is missing)")):
        load(path)


def test_a_store_without_a_later_metric_loads_without_it(store, older, tmp_path):
    path, name = older
    ds, base = load(path), load(store)
    assert name not in ds and name in base
    for var in base.data_vars:  # everything else as in the store that has it
        if var != name:
            assert ds[var].identical(base[var]), var
    with open_store(path) as f:
        assert name not in layer_metrics(f)
    with open_store(store) as f:
        assert name in layer_metrics(f)  # listed where the store has it
    table, full = tidy(path), tidy(store)
    assert name not in table.columns and list(table.columns) == [c for c in full.columns if c != name]
    assert table.equals(full.drop(columns=[name]))
    stats = replicate_stats(path)
    assert name not in stats and f"{name}_se" not in stats and "sr_cov" in stats
    out = export(path, tmp_path / "older.csv")
    assert name not in out.read_text().splitlines()[0].split(",")


def test_the_commands_read_a_store_without_a_later_metric(older, tmp_path):
    """The same through the commands (the environment carries a lowered core count to them)."""
    path, name = older
    info = subprocess.run([BIN, "info", str(path)], capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    csv = tmp_path / "older.csv"
    proc = subprocess.run([BIN, "export", str(path), "-o", str(csv)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert name not in csv.read_text().splitlines()[0].split(",")
    summary = subprocess.run([PYTHON, str(SCRIPTS / "rcsweep_summary.py"), str(path), "--metric", "sr_cov",
                              "--png", str(tmp_path / "s.png")], capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    code, _, err = plot_main(path, "--y", "sr_cov", "--hue", "T", "-o", tmp_path / "sr.png")
    assert code == 0 and (tmp_path / "sr.png").stat().st_size > 0, err


def test_recompute_compares_what_a_store_without_a_later_metric_has(run_sweep, tmp_path, monkeypatch):
    name, core = later_metric()
    if core is not None:
        monkeypatch.setenv(ENV, str(core))
    path = without(run_sweep(SWEEP, args=("--dump-weights",)), tmp_path / "dumped.h5", name)
    proc = subprocess.run([PYTHON, str(SCRIPTS / "rcsweep_recompute.py"), str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK:")


def test_a_later_metric_the_store_has_is_checked(older, store, tmp_path):
    _, name = older
    path = tmp_path / "wrong.h5"
    shutil.copy(store, path)
    with h5py.File(path, "r+") as f:
        shape = f["layers"][name].shape
        del f["layers"][name]
        f["layers"].create_dataset(name, data=np.zeros(shape, dtype="<i8"))
    line = f"{path}: damaged rcsweep store (/layers/{name} is not a float64 dataset)"
    with pytest.raises(StoreInvalid) as e:
        load(path)
    assert str(e.value) == line
    proc = subprocess.run([BIN, "info", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"error: {line}\n" in proc.stderr, proc.stderr


def test_every_metric_carries_its_units(store, tmp_path):
    ds = load(store)
    with h5py.File(store, "r") as f:
        for name, _, units, _ in metric_registry():
            assert f["layers"][name].attrs["units"] == units, name
            assert ds[name].attrs["units"] == units, name
    # A store made before the attribute loads as before.
    plain = tmp_path / "no_units.h5"
    shutil.copy(store, plain)
    with h5py.File(plain, "r+") as f:
        for name in f["layers"]:
            del f["layers"][name].attrs["units"]
    again = load(plain)
    for name in metric_names():
        assert again[name].identical(ds[name]), name
    # A metric the toolkit does not know: labelled with the store's units.
    extended = tmp_path / "extended.h5"
    shutil.copy(store, extended)
    with h5py.File(extended, "r+") as f:
        d = f["layers"].create_dataset("bar", data=2.0 * f["layers"]["fro"][...], dtype="<f8")
        d.attrs["description"] = "twice ||X_l||_F, a metric added after this toolkit"
        d.attrs["units"] = "X"
        f["layers"].create_dataset("baz", data=f["layers"]["sr_cov"][...], dtype="<f8")
    assert "bar" not in METRICS
    loaded = load(extended)
    assert loaded["bar"].attrs["units"] == "X" and loaded["baz"].attrs["units"] == "1"
