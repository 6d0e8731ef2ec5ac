"""rcsweep_tools.load / tidy / spectrum on stores the engine makes in the test run: shapes,
coordinates (axes, zip members, resolved scale axes), values equal to the raw h5py datasets,
NaN for tasks a --shard run did not do and for pending tasks, merged shards, gradients, spectra,
and reading a store another process holds open for writing."""
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import BIN, SCRIPTS, SOURCE

from rcsweep_tools import load, tidy
from rcsweep_tools.load import METRICS, spectrum

sys.path.append(str(SOURCE / "tests" / "e2e"))
import workload  # noqa: E402  (sweeps sized for this machine's speed)

SWEEP = """
[sweep]
name = "loader"
seed = 7
replicates = 2
[model]
mixer = "markov"
input = "orthonormal"
sigma_A = 1.0
[axes]
gap_fix = ["none", "perp"]
skip_scale = [1.0, "inv_sqrt_d"]
depth = [2, 3]
[[zip]]
T = [4, 8, 6]
d = [8, 16, 6]
[output]
spectra = "all"
mixer_spectra = "last"
gradients = "all"
"""
GRID = {"gap_fix": 2, "skip_scale": 2, "zip0": 3}
LAYERS = ["fro", "log_fro", "s1", "s2", "sr_cov", "sr_x", "mu", "mu_rel", "res_rel",
          "m_s1", "m_s2", "m_gap", "m_fro"]
THEORY = ["C_M", "S", "lambda_min", "a_star", "b", "bound_applies", "bound_holds", "bound_reason"]


@pytest.fixture(scope="module")
def store(run_sweep):
    return run_sweep(SWEEP, ranks=2)


@pytest.fixture(scope="module")
def raw(store):
    out = {}
    with h5py.File(store, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset) else None)
    return out


def by_task(ds, var):
    """ds[var] with the grid and replicate dims flattened back to task id order."""
    tdims = list(ds["status"].dims)
    a = ds[var].transpose(*tdims, ...).values
    ids = ds["task"].transpose(*tdims).values.ravel()
    a = a.reshape((ids.size,) + a.shape[len(tdims):])
    out = np.empty_like(a)
    out[ids] = a
    return out


def test_dimensions_and_coordinates(store):
    ds = load(store)
    assert dict(ds.sizes) == {**GRID, "replicate": 2, "layer": 4, "L": 3}
    assert list(ds["sr_cov"].dims) == ["gap_fix", "skip_scale", "zip0", "replicate", "layer"]
    assert list(ds["gap_fix"].values) == ["none", "perp"]
    assert list(ds["skip_scale"].values) == ["1.0", "inv_sqrt_d"] or list(ds["skip_scale"].values) == ["1", "inv_sqrt_d"]
    # zip0 is one dimension, its members are coordinates along it
    assert list(ds["zip0"].values) == [0, 1, 2]
    assert ds["T"].dims == ("zip0",) and list(ds["T"].values) == [4, 8, 6]
    assert ds["d"].dims == ("zip0",) and list(ds["d"].values) == [8, 16, 6]
    # the string scale axis has its resolved numbers, which depend on d
    sv = ds["skip_scale_value"].transpose("skip_scale", "zip0").values
    assert np.allclose(sv[0], 1.0) and np.allclose(sv[1], 1 / np.sqrt([8, 16, 6]))
    # constant parameters are scalar coordinates
    assert ds["mixer"].ndim == 0 and str(ds["mixer"].values) == "markov"
    assert float(ds["sigma_A"]) == 1.0 and int(ds["depth"]) == 3
    assert ds.attrs["requested_depths"] == [2, 3]
    assert list(ds["layer"].values) == [0, 1, 2, 3] and list(ds["L"].values) == [1, 2, 3]
    assert list(ds["replicate"].values) == [0, 1]
    assert ds.attrs["sweep_name"] == "loader" and ds.attrs["mpi_ranks"] == 2
    assert ds.attrs["path"] == os.path.abspath(store)
    for m in LAYERS:
        assert ds[m].attrs["long_name"] == METRICS[m][0] and ds[m].attrs["units"] == METRICS[m][2]
        assert ds[m].attrs["description"]  # from the store


def test_values_equal_the_raw_datasets(store, raw):
    ds = load(store)
    assert np.array_equal(by_task(ds, "task"), np.arange(24))
    for m in LAYERS:
        assert np.array_equal(by_task(ds, m), raw[f"layers/{m}"], equal_nan=True), m
    for q in THEORY:
        assert np.array_equal(by_task(ds, f"theory_{q}"), raw[f"theory/{q}"], equal_nan=True), q
    assert np.array_equal(by_task(ds, "status"), raw["tasks"]["status"])
    assert np.all(raw["tasks"]["status"] == 1)
    # point coordinates: task t's T is /points[T][point of t]
    pts = raw["points"][raw["tasks"]["point"]]
    T = ds["T"].broadcast_like(ds["status"])
    assert np.array_equal(by_task(ds.assign(Tb=T), "Tb"), pts["T"])
    gf = ds["gap_fix"].broadcast_like(ds["status"])
    assert list(by_task(ds.assign(g=gf), "g")) == [x.decode() for x in pts["gap_fix"]]
    # an orthonormal input: sr_cov = T at layer 0
    assert np.allclose(ds["sr_cov"].isel(layer=0), ds["T"].broadcast_like(ds["sr_cov"].isel(layer=0)))


def test_gradients(store, raw):
    ds = load(store)
    g = by_task(ds, "grad_log10_g")
    assert g.shape == (24, 4)
    assert np.all(np.isnan(g[:, 0]))
    assert np.array_equal(g[:, 1:], raw["grad/log10_g"])
    ga = by_task(ds, "grad_log10_g_all")
    assert ga.shape == (24, 3, 4) and np.all(np.isnan(ga[:, :, 0]))
    assert np.array_equal(ga[:, :, 1:], raw["grad/log10_g_all"], equal_nan=True)
    assert np.array_equal(by_task(ds, "grad_stderr_all")[:, :, 1:], raw["grad/stderr_all"], equal_nan=True)
    # selection by coordinate: layer l of output depth L
    at = dict(gap_fix="perp", zip0=1, replicate=1, skip_scale=ds["skip_scale"].values[1])
    v = ds["grad_log10_g_all"].sel(**at, L=3, layer=2).item()
    t = int(ds["task"].sel(**at).item())
    assert v == raw["grad/log10_g_all"][t, 2, 1]


def test_spectra(store, raw):
    ds = load(store)
    for t in (0, 5, 23):
        sel = {k: int(v) for k, v in zip(ds["status"].dims, np.unravel_index(t, ds["status"].shape))}
        isel = ds["task"].isel(**sel)
        assert int(isel) == t
        for layer in range(4):
            off, n = raw["spectra/x_sv_offset"][t, layer], raw["spectra/x_sv_length"][t]
            got = spectrum(ds, "x_sv", layer, task=t)
            assert got.shape == (n,) and np.array_equal(got, raw["spectra/x_sv"][off:off + n])
        off, n = raw["spectra/m_offset"][t, 3], raw["spectra/m_length"][t]
        eig = spectrum(ds, "m_eig", 3, task=t)
        assert np.array_equal(eig.real, raw["spectra/m_eig_re"][off:off + n])
        assert np.array_equal(eig.imag, raw["spectra/m_eig_im"][off:off + n])
        assert np.array_equal(spectrum(store, "m_sv", 3, task=t), raw["spectra/m_sv"][off:off + n])
        assert np.all(np.isnan(spectrum(ds, "m_sv", 1, task=t)))  # mixer_spectra = "last"
    # by coordinates: the tasks left unselected stay as leading dimensions
    both = spectrum(ds, "m_sv", 3, gap_fix="none", skip_scale=ds["skip_scale"].values[0], zip0=1)
    assert both.shape == (2, 8)
    with pytest.raises(ValueError, match="different lengths"):
        spectrum(ds, "x_sv", 0, gap_fix="none", replicate=0)


def test_spectra_not_stored_is_a_clear_error(run_sweep):
    s = run_sweep(SWEEP.replace('spectra = "all"', 'spectra = "none"'), args=["--shard", "0/8"])
    with pytest.raises(KeyError, match=r"\[output\] spectra"):
        spectrum(load(s), "x_sv", 1, task=0)


def test_shard_store_has_nan_for_tasks_not_done(run_sweep, store, raw):
    part = run_sweep(SWEEP, args=["--shard", "1/3"])
    ds = load(part)
    st = by_task(ds, "status")
    mine = np.arange(24) % 3 == 1
    assert np.all(st[mine] == 1) and np.all(st[~mine] == 0)
    for m in ("sr_cov", "mu_rel", "m_gap"):
        a = by_task(ds, m)
        assert np.all(np.isnan(a[~mine]))
        assert np.array_equal(a[mine], raw[f"layers/{m}"][mine], equal_nan=True)
    g = by_task(ds, "theory_C_M")
    assert np.all(np.isnan(g[~mine])) and np.array_equal(g[mine], raw["theory/C_M"][mine])
    assert np.all(np.isnan(by_task(ds, "grad_log10_g_all")[~mine]))
    assert np.all(np.isnan(spectrum(ds, "x_sv", 2, task=0)))
    # the tidy table keeps every task, with NaN for those not done
    df = tidy(part)
    assert len(df) == 24 * 4
    assert df.loc[df.status == 0, "sr_cov"].isna().all() and df.loc[df.status == 1, "sr_cov"].notna().all()


def test_merged_shards_load_like_one_run(run_sweep, store, tmp_path):
    shards = [run_sweep(SWEEP, ranks=2, args=["--shard", f"{i}/2"]) for i in range(2)]
    merged = tmp_path / "merged.h5"
    proc = subprocess.run([BIN, "merge", str(merged), *map(str, shards)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    a, b = load(merged), load(store)
    for v in LAYERS + ["theory_C_M", "grad_log10_g_all", "status"]:
        assert np.array_equal(a[v].values, b[v].values, equal_nan=True), v


def test_pending_rows_are_masked(store, tmp_path):
    # a live store may hold partial rows of a task still pending: they must not show
    copy = tmp_path / "pending.h5"
    shutil.copy(store, copy)
    with h5py.File(copy, "r+") as f:
        tasks = f["tasks"][...]
        tasks["status"][[3, 10]] = [0, 2]  # pending (rows present), failed
        f["tasks"][...] = tasks
    ds = load(copy)
    for v in ("sr_cov", "theory_S", "grad_log10_g"):
        a = by_task(ds, v)
        assert np.all(np.isnan(a[[3, 10]])) and not np.any(np.isnan(a[[2, 4, 11]].reshape(3, -1)[:, -1]))
    assert np.all(np.isnan(spectrum(ds, "x_sv", 1, task=3)))


def test_tidy_one_row_per_task_and_layer(store, raw):
    df = tidy(store)
    assert len(df) == 24 * 4
    assert list(df.columns[:3]) == ["task", "point", "gap_fix"]
    for c in ("T", "d", "skip_scale", "skip_scale_value", "zip0", "replicate", "layer", "status"):
        assert c in df.columns, c
    row = df[(df.task == 17) & (df.layer == 2)].iloc[0]
    assert row.point == raw["tasks"]["point"][17] and row.replicate == raw["tasks"]["replicate"][17]
    assert row["T"] == raw["points"]["T"][row.point]
    assert row.gap_fix == raw["points"]["gap_fix"][row.point].decode()
    for m in LAYERS:
        assert np.array_equal(df[m].values.reshape(24, 4), raw[f"layers/{m}"], equal_nan=True), m
    assert np.array_equal(df["theory_b"].values.reshape(24, 4)[:, 0], raw["theory/b"], equal_nan=True)
    assert np.array_equal(df["grad_log10_g"].values.reshape(24, 4)[:, 1:], raw["grad/log10_g"])


def test_reads_a_store_held_open_by_a_writer(store, tmp_path):
    # rcsweep holds an HDF5 file lock while it writes; the loader opens without locking
    copy = tmp_path / "live.h5"
    shutil.copy(store, copy)
    with h5py.File(copy, "r+", locking=True):
        code = (f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); from rcsweep_tools import load;"
                f"ds = load({str(copy)!r}); print(int(ds.status.sum()))")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={k: v for k, v in os.environ.items() if k != "HDF5_USE_FILE_LOCKING"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "24"


def test_the_summary_reads_a_store_held_open_by_a_writer(store, tmp_path):
    # rcsweep-summary reads through the same open_store: a running sweep's table, not a lock error
    copy = tmp_path / "live.h5"
    shutil.copy(store, copy)
    with h5py.File(copy, "r+", locking=True):
        proc = subprocess.run([sys.executable, str(SCRIPTS / "rcsweep_summary.py"), str(copy)], capture_output=True,
                              text=True, timeout=120,
                              env={k: v for k, v in os.environ.items() if k != "HDF5_USE_FILE_LOCKING"})
    assert proc.returncode == 0, proc.stderr
    assert "sr_cov@L" in proc.stdout and " n " in proc.stdout.splitlines()[0] + " "


def test_not_a_store(tmp_path):
    p = tmp_path / "x.h5"
    with h5py.File(p, "w") as f:
        f["a"] = 1
    with pytest.raises(ValueError, match="not an rcsweep store"):
        load(p)


def test_vanished_tasks_keep_the_layers_they_reached(run_sweep):
    # softmax with perp and no norm vanishes in float64 at layer 3 for T = 128 (MODELS.md): an outcome, exit 0
    s = run_sweep("""
[sweep]
name = "vanish"
seed = 2025
replicates = 2
[model]
mixer = "softmax"
input = "orthonormal"
T = 128
d = 128
depth = 3
sigma_qk = "inv_sqrt_d"
gap_fix = "perp"
""", ok=(0,))
    ds = load(s)
    with h5py.File(s, "r") as f:
        raw, st = f["layers/sr_cov"][...], f["tasks"]["status"]
    assert np.all(st == 5)
    assert np.array_equal(by_task(ds, "sr_cov"), raw, equal_nan=True)
    a = by_task(ds, "sr_cov")
    assert np.all(np.isfinite(a[:, :3])) and np.all(np.isnan(a[:, 3]))
    assert np.all(ds["status"].values == 5)
    assert all(m.startswith("vanished at layer 3: every entry of X is zero") for m in ds["message"].values.ravel())


LIVE = """
[sweep]
name = "live"
seed = 5
replicates = 60
[model]
mixer = "softmax"
input = "orthonormal"
T = 64
d = 64
depth = 20
norm = "layernorm"
[axes]
lambda = [0.0, 1.0]
"""


def test_reads_a_sweep_while_rcsweep_writes_it(tmp_path):
    # The writer is paused (SIGSTOP) while it holds the file, mid-run: the loader sees the last
    # flush, done tasks with the rows they will have in the finished store, the others NaN. The
    # sweep takes about 1.5 s here (workload.sized): several flushes to catch on any machine speed.
    import signal
    import time

    sweep = tmp_path / "live.toml"
    text = workload.sized("live", LIVE, "replicates", 1.5, lo=4, probe=32)
    sweep.write_text(text)
    n_tasks = 2 * int(re.search(r"^replicates = (\d+)$", text, re.M).group(1))
    out = tmp_path / "live.h5"
    proc = subprocess.Popen([BIN, "run", str(sweep), "-o", str(out), "-q"])
    partial = None
    try:
        deadline = time.time() + 120
        while proc.poll() is None and time.time() < deadline:
            if out.exists():
                proc.send_signal(signal.SIGSTOP)
                try:
                    ds = load(out)
                    if 0 < int((ds["status"] == 1).sum()) < n_tasks:
                        partial = ds
                        break
                except (OSError, ValueError, KeyError):
                    pass  # being created, or stopped between two writes of a batch: try again
                finally:
                    proc.send_signal(signal.SIGCONT)
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGCONT)
        assert proc.wait(timeout=300) == 0
    assert partial is not None, "the sweep finished before a partial state was read"
    final = load(out)
    done = by_task(partial, "status") == 1
    assert np.all(by_task(final, "status") == 1)
    for v in ("sr_cov", "mu_rel", "m_gap", "theory_C_M"):
        a, b = by_task(partial, v), by_task(final, v)
        assert np.array_equal(a[done], b[done], equal_nan=True), v
        assert np.all(np.isnan(a[~done])), v
