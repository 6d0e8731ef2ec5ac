"""rcsweep_tools.load refuses what `rcsweep info` and `run` refuse (docs/SCHEMA.md "What a store must
be"): stores the engine makes, then edited with h5py into soft and external links, values kept in
another file, float32 or big-endian values, /tasks without a field or with a field of another type,
and not_needed in a fixed sweep, each give the same line from load() (StoreInvalid, a ValueError)
and from `rcsweep info`; the store as made loads. Below: the sweep description kept in a store
(/axes, /points, the stored sweep, attribute sizes), refused alike by every reader."""
import importlib
import shutil
import subprocess

import h5py
import numpy as np
import pytest

from conftest import BIN

from rcsweep_tools import StoreInvalid, load

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
    with pytest.raises(StoreInvalid) as refused:
        load(path)
    assert str(refused.value).startswith(f"{path}: damaged rcsweep store (")
    assert phrase in str(refused.value)
    info = subprocess.run([BIN, "info", str(path)], capture_output=True, text=True)
    assert info.returncode == 2 and f"error: {refused.value}\n" in info.stderr, info.stderr
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


# ---- the sweep description kept in a store: /axes, /points, the stored sweep, attribute sizes ----
# Every reader refuses the same crafted store with the same line: `rcsweep info`, `rcsweep run
# --resume`, `rcsweep merge` (exit 2, "error: LINE"), load/tidy/replicate_stats/open_store
# (StoreInvalid, message LINE), rcsweep-summary, rcsweep-plot and rcsweep export (exit 2, LINE on
# stderr), where LINE is "STORE: damaged rcsweep store (REASON)".

GRID = """
[sweep]
name = "grid"
seed = 7
replicates = 2
[model]
T = 4
depth = 2
[axes]
mixer = ["softmax", "markov"]
d = [4, 6]
lambda = [0.0, 1.0]
"""
GRID_POINTS = 8


def fnv1a(text):
    h = 14695981039346656037
    for c in text.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def h5edit(change):
    """An edit of the store at `path` with h5py."""
    def make(path):
        with h5py.File(path, "r+") as f:
            change(f)
    return make


def zero_bytes(*names):
    """Overwrite the stored values of contiguous datasets with zero bytes, as a creation
    interrupted between allocating and writing them leaves them."""
    def make(path):
        with h5py.File(path, "r") as f:
            spans = [(f[n].id.get_offset(), f[n].id.get_storage_size()) for n in names]
        data = bytearray(path.read_bytes())
        for offset, size in spans:
            data[offset:offset + size] = bytes(size)
        path.write_bytes(bytes(data))
    return make


def replace_axis(name, make_dataset, keep_dim=True):
    def change(f):
        dim = f["axes"][name].attrs["dim"]
        del f["axes"][name]
        d = make_dataset(f["axes"], name)
        if keep_dim:
            d.attrs["dim"] = dim
    return h5edit(change)


def stored_config(change, rehash=True):
    """Change the `config` attribute, and (rehash) plan_hash with it, as a forger would."""
    def edit(f):
        text = change(f.attrs["config"])
        f.attrs["config"] = text
        if rehash:
            f.attrs["plan_hash"] = fnv1a(text)
    return h5edit(edit)


def min_abc(text):
    return text.replace("replicates = 2\n", "") + (
        '\n[sweep.replicates]\nmin = "abc"\nmax = 2\nstep = 1\ntargets = [{ metric = "sr_cov", rel_se = 0.1 }]\n')


def tasks_field(field, row, value):
    def change(f):
        rows = f["tasks"][...]
        rows[field][row] = value
        f["tasks"][...] = rows
    return h5edit(change)


def points_field(field, row, value):
    def change(f):
        rows = f["points"][...]
        rows[field][row] = value
        f["points"][...] = rows
    return h5edit(change)


def compound(g, name):
    return g.create_dataset(name, data=np.zeros(2, dtype=[("a", "<i8"), ("b", "<f8")]))


def huge(g, name):  # 10^11 int64 values claimed, none stored
    return g.create_dataset(name, shape=(10**11,), dtype="<i8", chunks=(10**6,))


def huge_in_small_chunks(g, name):  # 10^11 values in chunks of 10: more chunks than a store has
    return g.create_dataset(name, shape=(10**11,), dtype="<i8", chunks=(10,))


def flipped_chunk_size(path):
    """One bit flipped in the stored size of /layers/fro's first chunk (HDF5 1.10 keeps no checksum
    there)."""
    import struct

    with h5py.File(path, "r") as f:
        info = f["layers/fro"].id.get_chunk_info(0)
    data = bytearray(path.read_bytes())
    field = struct.pack("<Q", info.size)
    for at in [i for i in range(len(data)) if data.startswith(field, i)]:
        data[at + 2] ^= 1
        path.write_bytes(bytes(data))
        with h5py.File(path, "r") as f:
            if f["layers/fro"].id.get_chunk_info(0).size != info.size:
                return
        data[at + 2] ^= 1
    raise AssertionError("no stored chunk size found")


def invalid_utf8(g, name):
    d = g.create_dataset(name, shape=(2,), dtype=h5py.string_dtype("utf-8"))
    d[...] = np.array([b"\xff\xfe", b"markov"], dtype=object)
    return d


# (id, edit(path), REASON)
DESCRIPTION_CASES = [
    ("zeroed axis", zero_bytes("axes/d"), "/axes/d differs from the stored sweep at value 0"),
    ("axes and points zeroed", zero_bytes("axes/mixer", "axes/d", "axes/lambda", "axes/layer", "points"),
     "/axes/mixer differs from the stored sweep at value 0"),
    ("compound axis", replace_axis("d", compound), "/axes/d is not an int64 dataset"),
    ("order names a missing axis", h5edit(lambda f: f["axes"].attrs.__setitem__("order", "mixer,d,lambda,sigma_A")),
     "/axes attribute 'order' does not list the stored sweep's axes (mixer,d,lambda)"),
    ("axis of 10^11 values", replace_axis("d", huge),
     "/axes/d is 100000000000, but the stored sweep has 2 values"),
    ("axis of 10^11 values in 10^10 chunks", replace_axis("d", huge_in_small_chunks),
     "/axes/d does not fit the file: it has more chunks than a store makes"),
    ("a chunk's stored size flipped", flipped_chunk_size,
     "/layers/fro does not fit the file: its chunk at (0, 0) takes 65920 bytes at byte"),
    ("50 MB string attribute", h5edit(lambda f: f.attrs.__setitem__("host", "x" * 50_000_000)),
     "attribute 'host' is 50000000 bytes long, more than the 4096 it may have"),
    ('min = "abc" in the stored sweep', stored_config(min_abc),
     "attribute 'config' (the stored sweep) is not a valid sweep file: sweep.replicates.min: must be an integer "
     'from 2 to 1000000, got a string "abc"'),
    ("stored sweep edited, plan hash not", stored_config(min_abc, rehash=False),
     "attribute 'config' (the stored sweep) does not hash to plan_hash"),
    ("axis without its dim", h5edit(lambda f: f["axes/d"].attrs.__delitem__("dim")),
     "/axes/d attribute 'dim' is missing"),
    ("axis not UTF-8", replace_axis("mixer", invalid_utf8), "/axes/mixer value 0 is not valid UTF-8"),
    ("task of a point outside the grid", tasks_field("point", 3, 99),
     "/tasks row 3: id, point or replicate is not task 3's (id = point x replicates + replicate)"),
    ("points out of grid order", points_field("idx_lambda", 0, 1), "/points row 0 is not grid point 0 (idx_lambda)"),
    ("point value changed", points_field("lambda", 1, 5.0), "/points row 1: lambda differs from the stored sweep's point"),
    ("replicates a string", h5edit(lambda f: f.attrs.__setitem__("replicates", "2")),
     "attribute 'replicates' is not an integer"),
    ("n_points of another grid", h5edit(lambda f: f.attrs.__setitem__("n_points", np.uint64(GRID_POINTS * 2))),
     f"attribute 'n_points' = {GRID_POINTS * 2}, but the stored sweep has {GRID_POINTS} points"),
]


@pytest.fixture(scope="module")
def grid(run_sweep, tmp_path_factory):
    folder = tmp_path_factory.mktemp("grid")
    sweep = folder / "grid.toml"
    sweep.write_text(GRID)
    return sweep, run_sweep(GRID)


def refusals(path, sweep, tmp):
    """What each reader says of the store at `path`: {reader: (refused, text)}."""
    import contextlib
    import importlib
    import io

    from conftest import plot_main

    from rcsweep_tools import replicate_stats, tidy
    export_module = importlib.import_module("rcsweep_tools.export")
    from rcsweep_tools import summary
    from rcsweep_tools.load import open_store

    out = {}
    for name, args in (("info", ["info", path]), ("run --resume", ["run", sweep, "-o", path, "--resume", "-q"]),
                       ("merge", ["merge", tmp / "merged.h5", path])):
        proc = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, errors="replace", timeout=60)
        out[name] = (proc.returncode == 2, proc.stderr)
    for name, reader in (("load", load), ("tidy", tidy), ("replicate_stats", replicate_stats),
                         ("open_store", lambda p: open_store(p).close())):
        try:
            reader(path)
            out[name] = (False, "accepted")
        except StoreInvalid as e:
            out[name] = (isinstance(e, ValueError), str(e))
        except Exception as e:  # noqa: BLE001 - a raw error is what this test looks for
            out[name] = (False, f"{type(e).__name__}: {e}")
    for name, main in (("rcsweep-summary", summary.main),
                       ("rcsweep export", lambda a: export_module.main([*a, "-o", str(tmp / "x.csv")]))):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main([str(path)])
            except SystemExit as e:
                code = e.code
            except Exception as e:  # noqa: BLE001
                code, err = 1, io.StringIO(f"{type(e).__name__}: {e}")
        out[name] = (code == 2, err.getvalue())
    code, _, err = plot_main(path, "--y", "sr_cov", "-o", tmp / "x.png")
    out["rcsweep-plot"] = (code == 2, err)
    return out



@pytest.mark.parametrize("case_id,edit,reason", DESCRIPTION_CASES, ids=[c[0] for c in DESCRIPTION_CASES])
def test_every_reader_refuses_the_same_store_with_the_same_line(tmp_path, grid, case_id, edit, reason):
    sweep, made = grid
    path = tmp_path / "store.h5"
    shutil.copy(made, path)
    edit(path)
    before = path.read_bytes()
    line = f"{path}: damaged rcsweep store ({reason}"
    said = refusals(path, sweep, tmp_path)
    wrong = {reader: text for reader, (refused, text) in said.items() if not refused or line not in text}
    assert not wrong, f"expected every reader to refuse with {line!r}; these did not:\n" + "\n".join(
        f"  {reader}: {text.strip()[:300]}" for reader, text in wrong.items())
    assert path.read_bytes() == before
    assert not (tmp_path / "merged.h5").exists()


def test_the_grid_store_as_made_is_read_by_every_reader(tmp_path, grid):
    sweep, made = grid
    path = tmp_path / "store.h5"
    shutil.copy(made, path)
    said = refusals(path, sweep, tmp_path)
    assert not any(refused for reader, (refused, _) in said.items() if reader not in ("merge",)), said
    ds = load(path)
    assert list(ds["d"].values) == [4, 6] and list(ds["mixer"].values) == ["softmax", "markov"]


def test_a_message_of_any_bytes_loads(tmp_path, grid):
    """A task's message is the engine's text, not checked: bytes that are not UTF-8 are replaced."""
    _, made = grid
    path = tmp_path / "store.h5"
    shutil.copy(made, path)
    tasks_field("message", 0, b"bad \xff byte")(path)
    assert load(path)["message"].values.ravel()[0] == "bad \ufffd byte"


def test_the_point_parameters_are_the_registrys(made):
    """load.py's INT/FLOAT/CHOICE_PARAMS (how /axes and /points store each parameter) are the
    writer's: every /points field of a fresh store is in one of them with that type."""
    load_module = importlib.import_module("rcsweep_tools.load")
    with h5py.File(made, "r") as f:
        dt = f["points"].dtype
    params = [n for n in dt.names if not n.startswith("idx_")]
    assert sorted(params) == sorted(load_module.INT_PARAMS + load_module.FLOAT_PARAMS + load_module.CHOICE_PARAMS)
    for n in params:
        want = "<i8" if n in load_module.INT_PARAMS else "<f8" if n in load_module.FLOAT_PARAMS else "|S16"
        assert dt.fields[n][0].str == want, n


def test_what_the_check_does_not_look_at_is_not_read_raw(tmp_path, grid):
    """Datasets beside the documented ones (an extra /layers or /axes entry of any type) are not
    read by load() and rcsweep-summary; whatever load() cannot read is a StoreInvalid, never a raw
    error."""
    import contextlib
    import io

    from rcsweep_tools import summary

    _, made = grid
    path = tmp_path / "store.h5"
    shutil.copy(made, path)
    with h5py.File(path, "r+") as f:
        f["layers"].create_dataset("extra", data=np.zeros(3, dtype=[("a", "<i8")]))
        d = f["axes"].create_dataset("extra", data=np.zeros(2, dtype=[("a", "<i8")]))
        d.attrs["dim"] = "d"
    ds = load(path)
    assert "extra" not in ds.data_vars
    with contextlib.redirect_stdout(io.StringIO()) as out:
        summary.main([str(path)])
    assert "sr_cov@L2" in out.getvalue()
    with h5py.File(path, "r+") as f:
        del f["theory/S"]
        f["theory"].create_dataset("S", data=np.zeros(16, dtype=[("a", "<i8")]))
    with pytest.raises(StoreInvalid) as refused:
        load(path)
    assert str(refused.value).startswith(f"{path}: damaged rcsweep store (")


def test_the_commands_exit_2_with_the_line(tmp_path, grid):
    """`rcsweep export` (the toolkit run by the engine) and rcsweep-summary as commands: exit 2,
    the store's line on stderr, nothing written."""
    from conftest import PYTHON, SCRIPTS

    _, made = grid
    path = tmp_path / "store.h5"
    shutil.copy(made, path)
    zero_bytes("axes/d")(path)
    line = f"{path}: damaged rcsweep store (/axes/d differs from the stored sweep at value 0)"
    for cmd in ([BIN, "export", str(path), "-o", str(tmp_path / "out.csv")],
                [PYTHON, str(SCRIPTS / "rcsweep_summary.py"), str(path)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and f"error: {line}\n" in proc.stderr, (cmd, proc.returncode, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.h5"]


def test_attributes_beside_the_checked_ones_are_not_read(tmp_path, grid):
    """A root attribute the schema does not have (here not UTF-8) and a description of 5 MB:
    `rcsweep info` accepts the store and load() reads it (without them), as neither is used."""
    _, made = grid
    path = tmp_path / "store.h5"
    shutil.copy(made, path)
    with h5py.File(path, "r+") as f:
        f.attrs.create("note", np.array(b"\xff\xfe", dtype=h5py.string_dtype("utf-8")))
        f["layers/fro"].attrs["description"] = "x" * 5_000_000
    assert subprocess.run([BIN, "info", str(path)], capture_output=True).returncode == 0
    ds = load(path)
    assert "note" not in ds.attrs and "description" not in ds["fro"].attrs
    assert ds.attrs["plan_hash"] and "description" in ds["log_fro"].attrs
