"""The Python way in (rcsweep_tools.api, rcsweep_tools.export): a sweep built from Python values is
the same sweep as the file a user would write, runs on 2 ranks through the command line, grows,
reports the engine's own configuration errors, and exports to csv and netCDF with the same numbers
as the store."""
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from conftest import BIN, PYTHON, SCRIPTS
from rcsweep_tools import Sweep, SweepConfigError, export, load, tidy

os.environ["RCSWEEP_BIN"] = BIN


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
