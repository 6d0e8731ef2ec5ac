"""rcsweep_tools.load refuses what `rcsweep info` and `run` refuse (docs/SCHEMA.md "What a store must
be"): stores the engine makes, then edited with h5py into soft and external links, values kept in
another file, float32 or big-endian values, /tasks without a field or with a field of another type,
and not_needed in a fixed sweep, each give a ValueError naming the problem, from load() and from
`rcsweep info` alike; the store as made loads."""
import shutil
import subprocess

import h5py
import numpy as np
import pytest

from conftest import BIN

from rcsweep_tools import load

SWEEP = """
[sweep]
name = "valid"
seed = 5
replicates = 2
[model]
T = 4
d = 6
depth = 2
[axes]
lambda = [0.0, 1.0]
"""
N_TASKS, N_LAYERS = 4, 3
HARD_LINKS_ONLY = "every object of a store is its own, reached by hard links only"


def replace(name, data):
    def edit(f, folder):
        del f[name]
        f.create_dataset(name, data=data)
    return edit


def soft_link(name, target):
    def edit(f, folder):
        del f[name]
        f[name] = h5py.SoftLink(target)
    return edit


def external_link(f, folder):
    shutil.copy(folder / "store.h5", folder / "victim.h5")
    del f["tasks"]
    f["tasks"] = h5py.ExternalLink("victim.h5", "/tasks")


def external_storage(f, folder):
    (folder / "values.bin").write_bytes(bytes(8 * N_TASKS))
    del f["theory/S"]
    f.create_dataset("theory/S", shape=(N_TASKS,), dtype="<f8", external=[(str(folder / "values.bin"), 0, 8 * N_TASKS)])


def tasks_with(change):
    def edit(f, folder):
        rows = f["tasks"][...]
        fields = change([(n, rows.dtype.fields[n][0]) for n in rows.dtype.names])
        new = np.zeros(rows.shape, np.dtype(fields))
        for n, _ in fields:
            new[n] = rows[n]
        del f["tasks"]
        f.create_dataset("tasks", data=new)
    return edit


def not_needed(f, folder):
    rows = f["tasks"][...]
    rows["status"][1] = 4
    f["tasks"][...] = rows


# (id, edit(f, folder), the phrase load's ValueError and info's error both contain)
CASES = [
    ("soft link", soft_link("layers/fro", "/layers/log_fro"),
     f"/layers/fro is a soft link to /layers/log_fro: {HARD_LINKS_ONLY}"),
    ("external link", external_link, f"/tasks is an external link to victim.h5:/tasks: {HARD_LINKS_ONLY}"),
    ("external storage", external_storage, "/theory/S keeps its values outside the store"),
    ("float32 layers", replace("layers/fro", np.zeros((N_TASKS, N_LAYERS), "f4")), "/layers/fro is"),
    ("big-endian layers", replace("layers/fro", np.zeros((N_TASKS, N_LAYERS), ">f8")), "/layers/fro is"),
    ("float32 theory", replace("theory/C_M", np.zeros(N_TASKS, "f4")), "/theory/C_M is"),
    ("int32 platform", replace("provenance/platform", np.zeros(N_TASKS, "i4")), "/provenance/platform is"),
    ("tasks without wall_s", tasks_with(lambda fs: [x for x in fs if x[0] != "wall_s"]),
     "/tasks has no 'wall_s' field"),
    ("rank of float64", tasks_with(lambda fs: [(n, "f8" if n == "rank" else t) for n, t in fs]),
     "/tasks field 'rank' is"),
    ("status a plain int8", tasks_with(lambda fs: [(n, "i1" if n == "status" else t) for n, t in fs]),
     "/tasks field 'status' is"),
    ("not_needed in a fixed sweep", not_needed,
     "task 1 is not_needed, but its sweep has no adaptive replicates ([sweep.replicates])"),
]


@pytest.fixture(scope="module")
def made(run_sweep):
    return run_sweep(SWEEP)


def test_the_store_as_made_loads(made):
    ds = load(made)
    assert int((ds.status == 1).sum()) == N_TASKS


@pytest.mark.parametrize("case_id,edit,phrase", CASES, ids=[c[0] for c in CASES])
def test_load_refuses_what_info_refuses(tmp_path, made, case_id, edit, phrase):
    path = tmp_path / "store.h5"
    shutil.copy(made, path)
    with h5py.File(path, "r+") as f:
        edit(f, tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError) as refused:
        load(path)
    assert f"{path}: not a valid rcsweep store: " in str(refused.value)
    assert phrase in str(refused.value)
    info = subprocess.run([BIN, "info", str(path)], capture_output=True, text=True)
    assert info.returncode == 2 and phrase in info.stderr, info.stderr
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before
