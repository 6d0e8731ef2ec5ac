"""rcsweep_tools.catalog: every store under some folders as a DataFrame, filtered by parameter
values, reading only what the stores say about themselves; damaged files refused by name while the
listing goes on; HDF5 files that are not stores left out. `rcsweep ls`, the same as a command, is
tested in tests/e2e/test_ls.py."""
import shutil

import h5py
import numpy as np
import pytest

from rcsweep_tools import catalog
from rcsweep_tools.catalog import main

BASE = """[sweep]
name = "{name}"
seed = 3
{replicates}

[model]
mixer = "{mixer}"
depth = 3
{size}
norm = "{norm}"

[axes]
lambda = [0.0, 0.5, 1.0]
{extra}
"""
ADAPTIVE = ('[sweep.replicates]\nmin = 2\nmax = 6\nstep = 2\n'
            'targets = [{ metric = "sr_cov", layer = "last", rel_se = 0.5 }]')


@pytest.fixture(scope="module")
def lab(run_sweep, tmp_path_factory):
    def base(size="T = 8\nd = 8", **kw):
        return BASE.format(size=size, **kw)

    """A folder of stores as a lab keeps them: nested folders, an adaptive sweep, a zip, a shard
    (pending tasks), a damaged copy, an HDF5 file of another program, a .h5 that is not HDF5."""
    root = tmp_path_factory.mktemp("lab")
    stores = {
        "a/softmax_rms.h5": base(name="sm", replicates="replicates = 2", mixer="softmax", norm="rms", extra=""),
        "a/b/ssd_layernorm.h5": base(name="ssd", replicates="replicates = 2", mixer="ssd", norm="layernorm",
                                     size="d = 8", extra="T = [4, 8]"),
        "c/adaptive.h5": base(name="ad", replicates=ADAPTIVE, mixer="softmax", norm="none", extra=""),
        "c/zipped.h5": base(name="zip", replicates="replicates = 1", mixer="softmax", norm="none", size="T = 8",
                            extra='\n[[zip]]\nd = [8, 16]\nsigma_qk = [0.5, 1.0]'),
    }
    for rel, text in stores.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(run_sweep(text), root / rel)
    shard = run_sweep(base(name="sm", replicates="replicates = 2", mixer="softmax", norm="rms", extra=""),
                      args=("--shard", "0/2"))
    shutil.copy(shard, root / "c" / "shard0.h5")
    damaged = root / "c" / "damaged.h5"
    shutil.copy(root / "a/softmax_rms.h5", damaged)
    with h5py.File(damaged, "r+") as f:
        f.attrs["n_tasks"] = np.uint64(7)  # not points x replicates
    with h5py.File(root / "weights.h5", "w") as f:
        f["w"] = np.zeros(3)
    (root / "notes.h5").write_text("not HDF5")
    (root / "readme.txt").write_text("no store")
    return root


def test_every_store_is_a_row_with_what_it_is_and_how_far(lab):
    df = catalog(lab)
    ok = df[df["refused"].isna()].set_index("sweep", drop=False)
    assert sorted(ok.index) == ["ad", "sm", "sm", "ssd", "zip"]
    ssd = ok.loc["ssd"]
    assert ssd["axes"] == {"lambda": [0.0, 0.5, 1.0], "T": [4, 8]}
    assert ssd["fixed"]["mixer"] == "ssd" and ssd["fixed"]["norm"] == "layernorm" and "lambda" not in ssd["fixed"]
    assert ssd["n_tasks"] == 12 and ssd["done"] == 12 and ssd["pending"] == 0
    assert len(ssd["plan_hash"]) == 16 and ssd["version"] and ssd["created"] and ssd["host"]
    assert ssd["finished"] and ssd["size_bytes"] == (lab / "a/b/ssd_layernorm.h5").stat().st_size
    zipped = ok.loc["zip"]
    assert zipped["axes"] == {"lambda": [0.0, 0.5, 1.0], "d": [8, 16], "sigma_qk": [0.5, 1.0]}
    ad = ok.loc["ad"]
    assert ad["done"] + ad["not_needed"] == ad["n_tasks"] == 18 and ad["not_needed"] > 0
    shard = df[df["path"].str.endswith("shard0.h5")].iloc[0]
    assert shard["done"] == 3 and shard["pending"] == 3
    # the other program's HDF5 file and the text files are not listed
    assert not df["path"].str.contains("weights|readme").any()


def test_damaged_files_are_refused_by_name_and_the_listing_goes_on(lab):
    df = catalog(lab)
    refused = df.attrs["refused"]
    assert set(refused) == {str(lab / "c" / "damaged.h5"), str(lab / "notes.h5")}
    assert refused[str(lab / "c" / "damaged.h5")].startswith(f"{lab / 'c' / 'damaged.h5'}: damaged rcsweep store (")
    assert "n_tasks" in refused[str(lab / "c" / "damaged.h5")]
    assert refused[str(lab / "notes.h5")] == f"{lab / 'notes.h5'}: not an HDF5 file"
    rows = df[df["refused"].notna()]
    assert set(rows["path"]) == set(refused) and rows["sweep"].isna().all()
    assert (df["refused"].isna()).sum() == 5  # the others are all listed


@pytest.mark.parametrize("where, sweeps", [
    ("mixer=ssd", ["ssd"]),
    (["mixer=ssd", "norm=layernorm"], ["ssd"]),
    (["mixer=softmax", "norm=rms"], ["sm", "sm"]),
    ("norm=rms,layernorm", ["sm", "sm", "ssd"]),
    ("lambda=0.50", ["ad", "sm", "sm", "ssd", "zip"]),  # swept: among the values, as numbers
    ("T=4", ["ssd"]),
    ("T=8", ["ad", "sm", "sm", "ssd", "zip"]),  # fixed at 8, or 8 among the swept values
    ("sigma_qk=0.5", ["zip"]),  # a zip member
    ({"d": 16}, ["zip"]),
    ("sweep=ad", ["ad"]),
    ("mixer=mamba", []),
])
def test_where_keeps_the_stores_with_those_values(lab, where, sweeps):
    df = catalog(lab, where=where)
    assert sorted(df.loc[df["refused"].isna(), "sweep"]) == sweeps


def test_a_key_no_store_knows_is_an_error(lab):
    with pytest.raises(ValueError, match="no listed store has a parameter 'mixr'"):
        catalog(lab, where="mixr=ssd")
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        catalog(lab, where="mixer")


def test_only_what_a_store_says_about_itself_is_read(lab, monkeypatch):
    opened = []
    original = h5py.Group.__getitem__

    def spy(self, name):
        obj = original(self, name)
        opened.append(obj.name)
        return obj

    monkeypatch.setattr(h5py.Group, "__getitem__", spy)
    assert (catalog(lab)["refused"].isna()).sum() == 5
    # /tasks (its status column) and /provenance (its hosts); never /layers, /theory, /spectra, /points
    assert "/tasks" in opened and set(opened) <= {"/", "/tasks", "/provenance"}, sorted(set(opened))


def test_many_stores_are_listed_quickly(lab, tmp_path):
    import time
    src = lab / "a/softmax_rms.h5"
    for i in range(200):
        shutil.copy(src, tmp_path / f"s{i:03d}.h5")
    start = time.monotonic()
    df = catalog(tmp_path, where="norm=rms")
    elapsed = time.monotonic() - start
    assert len(df) == 200 and df["refused"].isna().all()
    assert elapsed < 20, elapsed  # some ms a store
    start = time.monotonic()
    assert main([str(tmp_path)]) == 0  # the table too
    assert time.monotonic() - start < 20


def test_the_command_prints_a_table_and_exits_2_when_some_were_refused(lab, capsys):
    assert main([str(lab), "--where", "mixer=ssd"]) == 2  # the damaged ones are named, the listing goes on
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["STORE", "SWEEP", "PLAN", "AXES"]
    assert len(lines) >= 2 and "ssd_layernorm.h5" in lines[1] and "lambda=0,0.5,1; T=4,8" in lines[1]
    assert "12/12 done" in lines[1]
    assert f"refused {lab / 'c' / 'damaged.h5'}: damaged rcsweep store (" in err
    assert "1 store where mixer=ssd; 2 refused" in err
    assert main([str(lab / "a")]) == 0
    out, _ = capsys.readouterr()
    assert "norm" in out.splitlines()[0].split()  # the fixed parameter in which the stores listed differ
    assert main([str(lab / "nowhere")]) == 2
    assert main(["--where", "mixer=ssd", str(lab / "a")]) == 0  # a folder after the conditions
    out, err = capsys.readouterr()
    assert "ssd_layernorm.h5" in out and "1 store where mixer=ssd" in err
    assert main([str(lab), "--where", "nope=1"]) == 2


def test_a_store_of_an_older_rcsweep_is_listed(lab, tmp_path):
    """Without what older stores lack (overrides, blas_threads, /provenance and its hosts, the later
    metrics, the sixth status): listed like the others."""
    old = tmp_path / "old.h5"
    shutil.copy(lab / "a/softmax_rms.h5", old)
    with h5py.File(old, "r+") as f:
        for name in ("overrides", "blas_threads"):
            del f.attrs[name]
        del f["provenance"]
        del f["layers/res_best"]
    df = catalog(tmp_path)
    row = df.iloc[0]
    assert row["refused"] is None and row["sweep"] == "sm" and row["done"] == 6 and row["hosts"] == []
    assert row["host"]  # the root attribute
