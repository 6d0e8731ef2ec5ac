"""Schema checks of an rcsweep store (docs/SCHEMA.md), through h5py and xarray.

The store is given by the environment variable RCSWEEP_TEST_STORE; ctest sets it to a store that
make_test_store writes with fake results, and the engine's end-to-end tests to a store the engine
really computed. Run by hand:  RCSWEEP_TEST_STORE=out.h5 /usr/bin/python3 -m pytest -q tests/python
"""
import os
import re

import pytest

from metric_registry import metric_names

np = pytest.importorskip("numpy")
h5py = pytest.importorskip("h5py")

STORE = os.environ.get("RCSWEEP_TEST_STORE")
pytestmark = pytest.mark.skipif(
    not STORE, reason="RCSWEEP_TEST_STORE is not set: point it at an rcsweep store (.h5) to check its schema")

METRICS = metric_names()  # the registry's (src/metrics/registry.hpp), in storage order
THEORY = ["C_M", "S", "lambda_min", "a_star", "b", "bound_applies", "bound_holds", "bound_reason"]
PARAMS_INT = ["T", "d", "depth", "heads", "d_qk"]
PARAMS_FLOAT = ["sigma_qk", "sigma_A", "lambda", "skip_scale", "sigma_v"]
PARAMS_CHOICE = ["mixer", "input", "norm", "gap_fix", "value_init", "value_scale"]
PENDING, DONE, FAILED, DIVERGED = 0, 1, 2, 3


@pytest.fixture(scope="module")
def f():
    with h5py.File(STORE, "r") as handle:
        yield handle


@pytest.fixture(scope="module")
def sizes(f):
    return int(f.attrs["n_tasks"]), int(f.attrs["n_points"]), int(f.attrs["max_depth"])


def test_root_attributes(f):
    a = f.attrs
    assert a["format"] == "rcsweep"
    assert int(a["schema_version"]) == 2
    for name in ["rcsweep_version", "git_commit", "config", "plan_hash", "created", "finished",
                 "blas", "hdf5_version", "host", "sweep_name", "overrides"]:
        assert isinstance(a[name], str), name  # h5py reads them as str, not bytes
    assert re.fullmatch(r"[0-9a-f]{16}", a["plan_hash"])
    assert "[sweep]" in a["config"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", a["hdf5_version"])
    for name in ["mpi_ranks", "threads", "replicates", "n_points", "n_tasks"]:
        assert int(a[name]) >= 1, name
    assert int(a["max_depth"]) >= 0
    assert int(a["seed"]) >= 0
    assert int(a["n_tasks"]) == int(a["n_points"]) * int(a["replicates"])


def test_layers_shape_and_dtype(f, sizes):
    n_tasks, _, max_depth = sizes
    assert sorted(f["layers"].keys()) == sorted(METRICS)
    for m in METRICS:
        d = f["layers"][m]
        assert d.shape == (n_tasks, max_depth + 1), m
        assert d.dtype == np.float64, m
        assert isinstance(d.attrs["description"], str) and d.attrs["description"], m


def test_theory(f, sizes):
    n_tasks, _, _ = sizes
    assert sorted(f["theory"].keys()) == sorted(THEORY)
    status = f["tasks"]["status"]
    for name in THEORY:
        d = f["theory"][name]
        assert d.shape == (n_tasks,), name
        assert d.dtype == np.float64, name
        assert isinstance(d.attrs["description"], str) and d.attrs["description"], name
        v = d[...]
        assert np.isnan(v[status != DONE]).all(), name
    for name in ["bound_applies", "bound_holds"]:
        v = f["theory"][name][...]
        assert set(np.unique(v[~np.isnan(v)])) <= {0.0, 1.0}, name
        assert not np.isnan(v[status == DONE]).any(), name


def test_tasks(f, sizes):
    n_tasks, n_points, _ = sizes
    t = f["tasks"][...]
    assert t.shape == (n_tasks,)
    assert set(t.dtype.names) == {"id", "point", "replicate", "status", "wall_s", "rank", "message"}
    assert h5py.check_enum_dtype(f["tasks"].dtype["status"]) == {
        "pending": 0, "done": 1, "failed": 2, "diverged": 3, "not_needed": 4, "vanished": 5}
    assert f["tasks"].attrs["status_values"] == "0=pending,1=done,2=failed,3=diverged,4=not_needed,5=vanished"
    np.testing.assert_array_equal(t["id"], np.arange(n_tasks))
    assert set(np.unique(t["status"])) <= {PENDING, DONE, FAILED, DIVERGED}
    assert (t["point"] < n_points).all()
    replicates = int(f.attrs["replicates"])
    np.testing.assert_array_equal(t["id"], t["point"] * replicates + t["replicate"])
    pending = t["status"] == PENDING
    assert (t["rank"][pending] == -1).all()
    assert np.isnan(t["wall_s"][pending]).all()
    assert (t["rank"][~pending] >= 0).all()
    assert (t["wall_s"][~pending] >= 0).all()
    # A pending task has no rows; a done task has every layer's norm.
    log_fro = f["layers/log_fro"][...]
    assert np.isnan(log_fro[pending]).all()
    assert np.isfinite(log_fro[t["status"] == DONE]).all()


def test_points(f, sizes):
    _, n_points, max_depth = sizes
    p = f["points"][...]
    assert p.shape == (n_points,)
    for name in PARAMS_INT:
        assert p.dtype[name] == np.int64, name
    for name in PARAMS_FLOAT:
        assert p.dtype[name] == np.float64, name
    for name in PARAMS_CHOICE:
        assert p.dtype[name] == np.dtype("S16"), name
    assert (p["depth"] <= max_depth).all()
    assert (p["T"] >= 1).all() and (p["d"] >= 1).all()


def test_axes(f, sizes):
    _, _, max_depth = sizes
    axes = f["axes"]
    np.testing.assert_array_equal(axes["layer"][...], np.arange(max_depth + 1))
    assert axes["layer"].dtype == np.int64
    order = axes.attrs["order"]
    names = [n for n in order.split(",") if n]
    assert sorted(names) == sorted(k for k in axes.keys() if k != "layer")
    p = f["points"][...]
    for name in names:
        ax = axes[name]
        dim = ax.attrs["dim"]
        if name == "depth":
            assert dim == "layer"
            assert (ax[...] <= max_depth).all()
            continue
        idx = p["idx_" + dim]
        assert idx.min() >= 0 and idx.max() == len(ax) - 1, name
        values = ax[...]
        if ax.dtype.kind in "iuf":
            np.testing.assert_array_equal(p[name], values[idx], err_msg=name)
        elif p.dtype[name].kind == "S":  # a choice axis, stored as strings
            got = [v.decode() for v in p[name]]
            want = [v.decode() if isinstance(v, bytes) else v for v in values[idx]]
            assert got == want, name
        # else: a scale axis with "inv_sqrt_d" entries (strings) resolved to numbers in /points
    # Plain one-parameter dimensions are HDF5 dimension scales.
    for name in names:
        if name != "depth" and axes[name].attrs["dim"] == name:
            assert h5py.h5ds.is_scale(axes[name].id), name
    assert h5py.h5ds.is_scale(axes["layer"].id)


def test_spectra(f, sizes):
    n_tasks, _, max_depth = sizes
    x = f["spectra/x_sv"][...]
    off = f["spectra/x_sv_offset"][...]
    length = f["spectra/x_sv_length"][...]
    assert off.shape == (n_tasks, max_depth + 1) and off.dtype == np.int64
    assert length.shape == (n_tasks,) and length.dtype == np.int64
    assert ((off == -1) | ((off >= 0) & (off + length[:, None] <= len(x)))).all()
    status = f["tasks"]["status"]
    for t in np.flatnonzero(status == DONE):
        for l in np.flatnonzero(off[t] >= 0):
            sv = x[off[t, l]: off[t, l] + length[t]]
            assert np.isfinite(sv).all(), (t, l)
            assert (np.diff(sv) <= 0).all(), (t, l)  # descending
            assert abs(np.sum(sv ** 2) - 1.0) < 1e-12, (t, l)  # unit Frobenius norm
    for t in np.flatnonzero(status == PENDING):
        for l in np.flatnonzero(off[t] >= 0):
            assert np.isnan(x[off[t, l]: off[t, l] + length[t]]).all()


def test_mixer_spectra(f, sizes):
    """/spectra/m_sv, m_eig_re, m_eig_im, m_offset, m_length (stores made since mixer_spectra)."""
    if "m_sv" not in f["spectra"]:
        pytest.skip("store made before mixer spectra")
    n_tasks, _, max_depth = sizes
    g = f["spectra"]
    assert g.attrs["mixer_stored"] in ("none", "last", "all")
    sv, re_, im = g["m_sv"][...], g["m_eig_re"][...], g["m_eig_im"][...]
    off, length = g["m_offset"][...], g["m_length"][...]
    for ds in (sv, re_, im):
        assert ds.dtype == np.float64 and ds.shape == sv.shape and ds.ndim == 1
    assert off.shape == (n_tasks, max_depth + 1) and off.dtype == np.int64
    assert length.shape == (n_tasks,) and length.dtype == np.int64
    T = f["points"]["T"][f["tasks"]["point"]]
    assert (length == T).all()
    assert (off[:, 0] == -1).all()  # layer 0 has no mixer
    assert ((off == -1) | ((off >= 0) & (off + length[:, None] <= len(sv)))).all()
    stored = g.attrs["mixer_stored"]
    layers = np.arange(max_depth + 1)
    want = {"none": layers < 0, "last": (layers == max_depth) & (layers >= 1), "all": layers >= 1}[stored]
    assert ((off >= 0) == want[None, :]).all()
    status = f["tasks"]["status"]
    m_fro = f["layers/m_fro"][...]
    for t in np.flatnonzero(status == DONE):
        for l in np.flatnonzero(off[t] >= 0):
            s = slice(off[t, l], off[t, l] + length[t])
            v, z = sv[s], re_[s] + 1j * im[s]
            assert np.isfinite(v).all() and np.isfinite(z).all(), (t, l)
            assert (np.diff(v) <= 0).all(), (t, l)  # descending
            assert (np.diff(np.abs(z)) <= 1e-12 * max(1.0, np.abs(z[0]))).all(), (t, l)  # by modulus
            assert np.allclose(np.sort_complex(z), np.sort_complex(np.conj(z))), (t, l)  # conjugate pairs
            assert abs(np.sum(v ** 2) / m_fro[t, l] ** 2 - 1.0) < 1e-10, (t, l)  # ||M||_F
    for t in np.flatnonzero(status == PENDING):
        for l in np.flatnonzero(off[t] >= 0):
            s = slice(off[t, l], off[t, l] + length[t])
            assert np.isnan(sv[s]).all() and np.isnan(re_[s]).all() and np.isnan(im[s]).all()


def test_xarray_view(f, sizes):
    xr = pytest.importorskip("xarray")
    n_tasks, _, max_depth = sizes
    tasks = f["tasks"][...]
    points = f["points"][...]
    da = xr.DataArray(f["layers/sr_cov"][...], dims=("task", "layer"),
                      coords={"layer": f["axes/layer"][...]})
    assert da.sizes == {"task": n_tasks, "layer": max_depth + 1}
    np.testing.assert_array_equal(da.coords["layer"].values, np.arange(max_depth + 1))
    assert da.sel(layer=max_depth).shape == (n_tasks,)

    ds = xr.Dataset({m: (("task", "layer"), f["layers"][m][...]) for m in METRICS},
                    coords={"task": tasks["id"], "layer": f["axes/layer"][...],
                            "replicate": ("task", tasks["replicate"]),
                            "status": ("task", tasks["status"]),
                            "lambda": ("task", points["lambda"][tasks["point"]]),
                            "T": ("task", points["T"][tasks["point"]])})
    assert set(ds.data_vars) == set(METRICS)
    done = ds.where(ds.status == DONE, drop=True)
    mean = done["log_fro"].groupby("replicate").mean()
    assert mean.sizes["layer"] == max_depth + 1
    assert np.isfinite(done["log_fro"].values).all()
