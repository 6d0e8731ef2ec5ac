"""The metric registry (src/metrics/registry.hpp) is the one list of per-layer metrics
(docs/CONTRIBUTING.md "Worked path: add a metric"):

- a store's /layers datasets are its entries, with their descriptions; the toolkit's labels carry
  the registry's units, and the metrics recompute.py recomputes are registry entries;
- the toolkit takes names, descriptions and statuses from the store: a store holding a metric it
  does not know (one added to the registry later, without a new schema version) loads with that
  metric (load, tidy, replicate_stats, export), and rcsweep info, run, rcsweep-summary and
  rcsweep-recompute accept it (docs/SCHEMA.md "Adding a metric");
- a metric is named (as a string) in few files outside src/metrics/: PLACES lists them per
  metric (a new paper figure adds its module to the metrics it plots, nothing else does); a new
  metric may be named in at most NEW_METRIC_PLACES.
"""
import re
import shutil
import subprocess

import h5py
import numpy as np
import pytest

import named_places
from conftest import BIN, PYTHON, SCRIPTS, SOURCE
from metric_registry import default_metric_names, metric_names, metric_registry

from rcsweep_tools import load, tidy
from rcsweep_tools.export import export
from rcsweep_tools.load import LAYER_METRICS, METRICS, STATUS, open_store, replicate_stats, task_statuses

SWEEP = """
[sweep]
name = "registry"
seed = 3
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


@pytest.fixture(scope="module")
def store(run_sweep):
    return run_sweep(SWEEP, args=("--dump-weights",))


@pytest.fixture(scope="module")
def extended(store, tmp_path_factory):
    """The store with a metric no reader knows, `bar` (= 2 fro, described and listed as computed),
    and beside it a dataset of another shape, which no reader takes for a metric."""
    path = tmp_path_factory.mktemp("registry") / "extended.h5"
    shutil.copy(store, path)
    with h5py.File(path, "r+") as f:
        layers = f["layers"]
        d = layers.create_dataset("bar", data=2.0 * layers["fro"][...], dtype="<f8")
        d.attrs["description"] = "twice ||X_l||_F, a metric added after this toolkit"
        layers.create_dataset("not_a_metric", data=np.arange(3, dtype="<i8"))
        layers.attrs["computed"] = layers.attrs["computed"] + " bar"
    return path


def test_the_store_holds_the_registry(store):
    registry = metric_registry()
    with h5py.File(store, "r") as f:
        assert list(f["layers"]) == sorted(metric_names())
        for name, description, _, _ in registry:
            assert f["layers"][name].attrs["description"] == description, name
        assert f["layers"].attrs["computed"] == " ".join(default_metric_names())  # res_best is opt-in


def test_the_toolkit_follows_the_registry():
    registry = metric_registry()
    names = [name for name, _, _, _ in registry]
    # schema 2's metrics, which check_store requires, are the registry's first ones
    assert list(LAYER_METRICS) == names[:len(LAYER_METRICS)]
    for name, _, units, _ in registry:
        if name in METRICS:  # labels for plots: the registry's units
            assert METRICS[name][2] == units, name
    from rcsweep_tools import recompute
    assert set(recompute.METRICS) <= set(names)


def test_load_reads_names_descriptions_and_statuses_from_the_store(store):
    ds = load(store)
    registry = metric_registry()
    for name, description, units, _ in registry:
        assert ds[name].attrs["description"] == description and ds[name].attrs["units"] == units
    with open_store(store) as f:
        assert task_statuses(f) == STATUS  # a store of this rcsweep names every status
        members = h5py.check_enum_dtype(f["tasks"].dtype.fields["status"][0])
    assert ds["status"].attrs["long_name"] == "task status: " + ", ".join(
        f"{c} {n.replace('_', ' ')}" for n, c in sorted(members.items(), key=lambda m: m[1]))


def test_task_statuses_are_the_enumeration_of_the_store(tmp_path):
    enum = h5py.enum_dtype({"pending": 0, "done": 1}, basetype="i1")
    path = tmp_path / "tasks.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("tasks", data=np.zeros(2, dtype=[("id", "<u8"), ("status", enum)]))
    with h5py.File(path, "r") as f:
        assert task_statuses(f) == {0: "pending", 1: "done"}
    with h5py.File(path, "w") as f:
        f.create_dataset("tasks", data=np.zeros(2, dtype=[("id", "<u8"), ("status", "i1")]))
    with h5py.File(path, "r") as f:
        assert task_statuses(f) == STATUS  # no enumeration: schema 2's


def test_a_metric_the_toolkit_does_not_know_is_read(store, extended, tmp_path):
    ds, base = load(extended), load(store)
    assert "bar" in ds and "not_a_metric" not in ds
    assert list(ds.data_vars)[:len(metric_names()) + 1] == metric_names() + ["bar"]
    np.testing.assert_array_equal(ds["bar"].values, 2.0 * base["fro"].values)
    assert ds["bar"].attrs["description"] == "twice ||X_l||_F, a metric added after this toolkit"
    assert ds["bar"].attrs["long_name"] == ds["bar"].attrs["description"] and ds["bar"].attrs["symbol"] == "bar"
    for name in base.data_vars:  # the rest as before
        assert ds[name].identical(base[name]), name
    table = tidy(extended)
    np.testing.assert_array_equal(table["bar"].values, 2.0 * tidy(store)["fro"].values)
    stats = replicate_stats(extended)
    assert "bar" in stats and "bar_se" in stats
    out = export(extended, tmp_path / "extended.csv")
    assert "bar" in out.read_text().splitlines()[0].split(",")


def test_the_commands_accept_a_metric_they_do_not_know(extended, tmp_path):
    info = subprocess.run([BIN, "info", str(extended)], capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP)
    again = subprocess.run([BIN, "run", str(sweep), "-o", str(extended), "-q", "--dump-weights"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr  # the store is complete: nothing to compute
    with h5py.File(extended, "r") as f:
        assert "bar" in f["layers"]
    summary = subprocess.run([PYTHON, str(SCRIPTS / "rcsweep_summary.py"), str(extended), "--metric", "bar",
                              "--png", str(tmp_path / "s.png")], capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert (tmp_path / "s.png").stat().st_size > 0
    recompute = subprocess.run([PYTHON, str(SCRIPTS / "rcsweep_recompute.py"), str(extended)],
                               capture_output=True, text=True, timeout=300)
    assert recompute.returncode == 0, recompute.stdout + recompute.stderr
    assert "note: not recomputed (this script does not know them): bar" in recompute.stdout
    assert recompute.stdout.splitlines()[-1].startswith("OK:")


# ---- the files that name a metric ----------------------------------------------------------------

REGISTRY_DIR = "src/metrics/"
# Outside the registry and the computation (src/metrics/): the toolkit's plot labels and ranges
# (load.py) and its own recomputation (recompute.py), the metrics the figures and the summary
# table show, and the engine's uses of log_fro (divergence) and mu_rel (lambda-skip's bound).
_LABELS = {"scripts/rcsweep_tools/load.py", "scripts/rcsweep_tools/recompute.py"}
_ENCODER_FIGURES = "scripts/rcsweep_tools/figures/encoders.py"
PLACES = {
    "fro": _LABELS | {"scripts/rcsweep_tools/figures/lambda_skip.py"},
    "log_fro": _LABELS | {"src/sweep/service.cpp", "src/models/task_runner.cpp"},
    "s1": _LABELS,
    "s2": _LABELS,
    "sr_cov": _LABELS | {"src/config/sweep_spec.hpp", "scripts/rcsweep_tools/analytic.py", _ENCODER_FIGURES,
                         "scripts/rcsweep_tools/figures/mind_the_gap.py", "scripts/rcsweep_tools/api.py",
                         "scripts/rcsweep_tools/summary.py", "scripts/rcsweep_tools/extrapolate.py"},
    "sr_x": _LABELS | {"scripts/rcsweep_tools/analytic.py", "scripts/rcsweep_tools/figures/mind_the_gap.py",
                       "scripts/rcsweep_tools/summary.py", "scripts/rcsweep_tools/extrapolate.py"},
    "mu": _LABELS | {"scripts/rcsweep_tools/figures/lambda_skip.py"},
    "mu_rel": _LABELS | {"src/models/task_runner.cpp", "scripts/rcsweep_tools/figures/lambda_skip.py", _ENCODER_FIGURES,
                         "scripts/rcsweep_tools/figures/mamba2.py", "scripts/rcsweep_tools/summary.py"},
    "res_rel": _LABELS | {"scripts/rcsweep_tools/figures/dong.py", _ENCODER_FIGURES},
    "m_s1": _LABELS,
    "m_s2": _LABELS,
    "m_gap": _LABELS | {"scripts/rcsweep_tools/summary.py", _ENCODER_FIGURES},
    "m_fro": _LABELS,
}
# A new metric: its registry entry and computation (src/metrics/), and at most its plot label
# (load.py's METRICS) and its NumPy recomputation (recompute.py), both optional.
NEW_METRIC_PLACES = 2


def sources():
    files = sorted((SOURCE / "src").rglob("*.[ch]pp")) + sorted((SOURCE / "scripts").rglob("*.py"))
    return {str(f.relative_to(SOURCE)): f.read_text() for f in files}


def places(metric, files):
    """The files outside src/metrics/ that name `metric` as a string ("name" or 'name')."""
    return named_places.places(files, re.compile(r"[\"']" + re.escape(metric) + r"[\"']"), REGISTRY_DIR)


def place_problems(names, files, listed, new_limit):
    return named_places.place_problems(names, lambda m: places(m, files), listed, new_limit, "metric",
                                       lambda m: f"the metric {m}", REGISTRY_DIR,
                                       "read the registry (or the store) instead")


def test_a_metric_is_named_only_where_the_registry_does_not_reach():
    problems = place_problems(metric_names(), sources(), PLACES, NEW_METRIC_PLACES)
    assert not problems, "\n".join(problems)


def test_the_count_can_fail():
    files = {"x/a.cpp": '"foo"', "x/b.py": "'foo'", "x/c.cpp": 'x = "foo";', REGISTRY_DIR + "registry.hpp":
             '{"foo", "d", "1", Part::signal_top}', "x/d.cpp": '"foobar"'}
    assert len(place_problems(["foo"], files, {}, 2)) == 1
    assert place_problems(["foo"], files, {}, 3) == []
    assert len(place_problems(["foo"], files, {"foo": {"x/a.cpp"}}, 3)) == 2
    assert len(place_problems(["foo"], files, {"foo": {"x/a.cpp", "x/b.py", "x/c.cpp", "x/e.py"}}, 3)) == 1


def test_the_registry_parses():
    text = ('inline constexpr std::array<MetricInfo, 2> layer_metrics = {{\n'
            '    {"a", "one \\"quoted\\"", "X", Part::signal_norm},\n    {"b", "two", "1",\n     Part::mixer_top},\n}};')
    assert metric_registry(text) == [("a", 'one \\"quoted\\"', "X", "signal_norm"), ("b", "two", "1", "mixer_top")]
    with pytest.raises(AssertionError):
        metric_registry(text.replace("2>", "3>"))
