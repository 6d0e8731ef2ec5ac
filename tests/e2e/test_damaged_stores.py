"""Damaged and wrong stores (docs/ERRORS.md): `rcsweep info STORE` and
`rcsweep run SWEEP -o STORE` (with and without --resume) refuse each with its exact exit code and
message, never crash (killed by a signal) or hang, and leave the file exactly as it was;
`--overwrite` replaces it when asked."""
import hashlib
import os
import shutil
import struct
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import BIN, DATA, SOURCE, mpi_prefix

SWEEP = """
[sweep]
name = "dmg"
seed = 3
replicates = 2
[model]
T = 4
d = 8
depth = 3
[axes]
lambda = [0.0, 1.0]
"""
N_TASKS, N_LAYERS = 4, 4


def cli(*args, ranks=None, timeout=60):
    """Run rcsweep; output decoded leniently (a damaged store may hold any bytes)."""
    proc = subprocess.run(mpi_prefix(ranks) + [BIN, *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=timeout)
    assert proc.returncode >= 0, f"rcsweep {args} was killed by signal {-proc.returncode}:\n{proc.stderr}"
    return proc


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The sweep file, a store made from it, and another sweep file (different seed)."""
    folder = tmp_path_factory.mktemp("made")
    sweep, other = folder / "dmg.toml", folder / "other.toml"
    sweep.write_text(SWEEP)
    other.write_text(SWEEP.replace("seed = 3", "seed = 4"))
    store = folder / "real.h5"
    proc = cli("run", sweep, "-o", store, "-q")
    assert proc.returncode == 0, proc.stderr
    with h5py.File(store, "r") as f:
        hashes = {"real": f.attrs["plan_hash"]}
    hashes["other"] = cli("plan", other).stdout.split("(plan ")[1][:16]
    assert hashes["real"] != hashes["other"]
    return {"sweep": sweep, "other": other, "store": store, "hash": hashes}


# ---- ways to damage a store: each writes `path` from the real store `real` ------------------------

def write_bytes(data):
    return lambda real, path: path.write_bytes(data(real.read_bytes()))


def flip(offset_of, bit):
    """Flip one bit at the byte offset_of(real_path, bytes) returns."""
    def make(real, path):
        data = bytearray(real.read_bytes())
        data[offset_of(real, data)] ^= 1 << bit
        path.write_bytes(bytes(data))
    return make


def with_h5py(edit):
    """Copy the real store and change it with h5py."""
    def make(real, path):
        shutil.copy(real, path)
        with h5py.File(path, "r+") as f:
            edit(f)
    return make


def chunk_offset(real, _):
    with h5py.File(real, "r") as f:
        return f["layers/fro"].id.get_chunk_info(0).byte_offset + 8  # row 0, layer 1


def status_byte(real, _):
    with h5py.File(real, "r") as f:
        tasks = f["tasks"]
        return tasks.id.get_offset() + tasks.dtype.itemsize * 1 + tasks.dtype.fields["status"][1]  # task 1


def root_object_header(_, data):
    return bytes(data).index(b"OHDR", 48) + 10  # the first object header after the superblock


def global_heap_object(text):
    """Offset of the size field of the global-heap object that holds `text` (a variable-length
    string attribute; HDF5 global heap collections have no checksum)."""
    def offset(_, data):
        data = bytes(data)
        pos = data.find(b"GCOL")
        while pos >= 0:
            size = struct.unpack_from("<Q", data, pos + 8)[0]
            p = pos + 16
            while p + 16 <= pos + size:
                index, _, _, length = struct.unpack_from("<HHIQ", data, p)
                if index == 0:
                    break
                if data[p + 16:p + 16 + length] == text:
                    return p + 8 + 4  # byte 4 of the 8-byte size: the size grows by 2^32 or more
                p += 16 + (length + 7) // 8 * 8
            pos = data.find(b"GCOL", pos + 4)
        raise AssertionError(f"no global heap object holds {text!r}")
    return offset


def set_attr(name, value):
    return with_h5py(lambda f: f.attrs.__setitem__(name, value))


def replace_dataset(name, data):
    def edit(f):
        del f[name]
        f.create_dataset(name, data=data)
    return edit


def shorter_tasks(f):
    rows = f["tasks"][...]
    del f["tasks"]
    f.create_dataset("tasks", data=rows[:3])


def invalid_status(real, path):
    data = bytearray(real.read_bytes())
    data[status_byte(real, data)] = 7
    path.write_bytes(bytes(data))


def set_status(value, task=1):
    """Poke `value` into the status byte of `task` (HDF5 enums are written as their raw byte)."""
    def make(real, path):
        data = bytearray(real.read_bytes())
        with h5py.File(real, "r") as f:
            tasks = f["tasks"]
            data[tasks.id.get_offset() + tasks.dtype.itemsize * task + tasks.dtype.fields["status"][1]] = value
        path.write_bytes(bytes(data))
    return make


def soft_link(name, target):
    def edit(f):
        del f[name]
        f[name] = h5py.SoftLink(target)
    return edit


def tasks_with_fields(change):
    """/tasks rewritten with the fields `change(fields)` returns (a list of (name, dtype))."""
    def edit(f):
        rows = f["tasks"][...]
        fields = change([(name, rows.dtype.fields[name][0]) for name in rows.dtype.names])
        new = np.zeros(rows.shape, np.dtype(fields))
        for name, _ in fields:
            if name in rows.dtype.names:
                new[name] = rows[name]
        del f["tasks"]
        f.create_dataset("tasks", data=new)
    return edit


def zeroed(*names):
    """The stored values of contiguous datasets overwritten with zero bytes: what a creation
    interrupted between allocating and writing them left (older rcsweeps)."""
    def make(real, path):
        with h5py.File(real, "r") as f:
            spans = [(f[n].id.get_offset(), f[n].id.get_storage_size()) for n in names]
        data = bytearray(real.read_bytes())
        for offset, size in spans:
            data[offset:offset + size] = bytes(size)
        path.write_bytes(bytes(data))
    return make


def plain_hdf5(_, path):
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(5.0)
        f.attrs["title"] = "someone else's data"


# (id, damage, (info exit code, info stderr phrase), (run exit code, run stderr phrase)); "{p}" is the
# store's path. Exit code 0 for info means the damage cannot be seen there (the phrase is then in stdout).
DAMAGED = "{p}: damaged HDF5 file ("
STORE = "{p}: damaged rcsweep store ("
CASES = [
    ("empty file", write_bytes(lambda b: b""), (2, "{p}: not an HDF5 file"), (2, "{p}: not an HDF5 file")),
    ("random bytes", write_bytes(lambda b: np.random.default_rng(1).bytes(70000)),
     (2, "{p}: not an HDF5 file"), (2, "{p}: not an HDF5 file")),
    ("text file", write_bytes(lambda b: SWEEP.encode()), (2, "{p}: not an HDF5 file"), (2, "{p}: not an HDF5 file")),
    ("cut after the signature", write_bytes(lambda b: b[:8]),
     (2, DAMAGED + "bad byte number in an address"), (2, DAMAGED + "bad byte number in an address")),
    ("cut inside the superblock", write_bytes(lambda b: b[:40]),
     (2, DAMAGED + "incorrect metadata checksum"), (2, DAMAGED + "incorrect metadata checksum")),
    ("cut after the superblock", write_bytes(lambda b: b[:100]),
     (2, DAMAGED + "truncated file: eof = 100,"), (2, DAMAGED + "truncated file: eof = 100,")),
    ("cut in half", write_bytes(lambda b: b[:len(b) // 2]),
     (2, DAMAGED + "truncated file: eof = "), (2, DAMAGED + "truncated file: eof = ")),
    ("last byte missing", write_bytes(lambda b: b[:-1]),
     (2, DAMAGED + "truncated file: eof = "), (2, DAMAGED + "truncated file: eof = ")),
    ("bit flip in the superblock", flip(lambda real, data: 20, 4),
     (2, DAMAGED + "incorrect metadata checksum"), (2, DAMAGED + "incorrect metadata checksum")),
    ("bit flip in the root object header", flip(root_object_header, 0),
     (2, STORE + "H5Aexists format: incorrect metadata checksum"),
     (2, STORE + "H5Aexists format: incorrect metadata checksum")),
    # Raw data carries no checksum in HDF5: a flipped metric value is read back as it is.
    ("bit flip in a dataset's data", flip(chunk_offset, 6),
     (0, "100.0% finished: 4 done"), (0, "")),
    ("invalid status in /tasks", invalid_status,
     (2, STORE + "task 1 has an invalid status (not one of 0=pending,1=done,2=failed,3=diverged,4=not_needed,5=vanished))"),
     (2, STORE + "task 1 has an invalid status (not one of 0=pending,1=done,2=failed,3=diverged,4=not_needed,5=vanished))")),
    # The host name attribute's global heap object. HDF5 1.10 copies a global heap object of
    # corrupted size out of bounds (SIGSEGV), so info, and run before a resume, read the store in a
    # child process and report such a crash as damage. (damage None: build() finds the object
    # holding this machine's host name.)
    ("corrupt global heap read by info", None,
     (2, "{p}: damaged HDF5 file (reading it crashed the HDF5 library: Segmentation fault)"),
     (2, "{p}: damaged HDF5 file (reading it crashed the HDF5 library: Segmentation fault)")),
    ("plain HDF5 file", plain_hdf5,
     (2, "{p} is not an rcsweep store (no 'format' attribute)"),
     (2, "{p} is not an rcsweep store (no 'format' attribute)")),
    ("format attribute removed", with_h5py(lambda f: f.attrs.__delitem__("format")),
     (2, "{p} is not an rcsweep store (no 'format' attribute)"),
     (2, "{p} is not an rcsweep store (no 'format' attribute)")),
    ("format attribute changed", set_attr("format", "netcdf"),
     (2, "{p} is not an rcsweep store (format = 'netcdf')"), (2, "{p} is not an rcsweep store (format = 'netcdf')")),
    ("format attribute not a string", set_attr("format", np.int32(7)),
     (2, STORE + "attribute 'format' is not a string)"), (2, STORE + "attribute 'format' is not a string)")),
    ("schema version 3", set_attr("schema_version", np.int32(3)),
     (2, "{p}: schema version 3, this rcsweep reads 2"), (2, "{p}: schema version 3, this rcsweep reads 2")),
    ("schema version 1", set_attr("schema_version", np.int32(1)),
     (2, "{p}: schema version 1, this rcsweep reads 2"), (2, "{p}: schema version 1, this rcsweep reads 2")),
    ("plan hash missing", with_h5py(lambda f: f.attrs.__delitem__("plan_hash")),
     (2, STORE + "attribute 'plan_hash' is missing)"), (2, STORE + "attribute 'plan_hash' is missing)")),
    ("/tasks with 3 rows", with_h5py(shorter_tasks),
     (2, STORE + "/tasks has 3 rows, expected 4)"), (2, STORE + "/tasks has 3 rows, expected 4)")),
    ("/tasks not a task table", with_h5py(replace_dataset("tasks", np.zeros(N_TASKS))),
     (2, STORE + "/tasks is not a task table (no 'status' field))"),
     (2, STORE + "/tasks is not a task table (no 'status' field))")),
    ("/tasks removed", with_h5py(lambda f: f.__delitem__("tasks")),
     (2, STORE + "/tasks is missing)"), (2, STORE + "/tasks is missing)")),
    ("/layers/mu of the wrong shape", with_h5py(replace_dataset("layers/mu", np.zeros((N_TASKS, N_LAYERS - 1)))),
     (2, STORE + "/layers/mu is 4 x 3 but must be 4 x 4)"), (2, STORE + "/layers/mu is 4 x 3 but must be 4 x 4)")),
    ("/layers/fro of integers", with_h5py(replace_dataset("layers/fro", np.zeros((N_TASKS, N_LAYERS), "i4"))),
     (2, STORE + "/layers/fro is not a float64 dataset)"), (2, STORE + "/layers/fro is not a float64 dataset)")),
    ("/theory/S of the wrong shape", with_h5py(replace_dataset("theory/S", np.zeros(N_TASKS - 1))),
     (2, STORE + "/theory/S is 3 but must be 4)"), (2, STORE + "/theory/S is 3 but must be 4)")),
    # A store is what SCHEMA.md says: hard links only, the documented types and fields, statuses
    # that fit the sweep (external links: test_links_out_of_the_store_are_refused_and_nothing_is_written).
    ("/layers/fro a soft link", with_h5py(soft_link("layers/fro", "/layers/log_fro")),
     (2, STORE + "/layers/fro is a soft link to /layers/log_fro: every object of a store is its own, reached by "
                 "hard links only)"),
     (2, STORE + "/layers/fro is a soft link to /layers/log_fro: every object of a store is its own, reached by "
                 "hard links only)")),
    ("/tasks a dangling soft link", with_h5py(soft_link("tasks", "/nowhere")),
     (2, STORE + "/tasks is a soft link to /nowhere: every object of a store is its own, reached by hard links "
                 "only)"),
     (2, STORE + "/tasks is a soft link to /nowhere: every object of a store is its own, reached by hard links "
                 "only)")),
    ("/layers/fro of float32", with_h5py(replace_dataset("layers/fro", np.zeros((N_TASKS, N_LAYERS), "f4"))),
     (2, STORE + "/layers/fro is not a float64 dataset)"), (2, STORE + "/layers/fro is not a float64 dataset)")),
    ("/layers/fro big-endian", with_h5py(replace_dataset("layers/fro", np.zeros((N_TASKS, N_LAYERS), ">f8"))),
     (2, STORE + "/layers/fro is not a float64 dataset)"), (2, STORE + "/layers/fro is not a float64 dataset)")),
    ("/theory/C_M of float32", with_h5py(replace_dataset("theory/C_M", np.zeros(N_TASKS, "f4"))),
     (2, STORE + "/theory/C_M is not a float64 dataset)"), (2, STORE + "/theory/C_M is not a float64 dataset)")),
    ("/spectra/m_offset of int32", with_h5py(replace_dataset("spectra/m_offset", np.zeros((N_TASKS, N_LAYERS), "i4"))),
     (2, STORE + "/spectra/m_offset is not an int64 dataset)"),
     (2, STORE + "/spectra/m_offset is not an int64 dataset)")),
    ("/tasks without wall_s", with_h5py(tasks_with_fields(lambda fs: [x for x in fs if x[0] != "wall_s"])),
     (2, STORE + "/tasks has no 'wall_s' field)"), (2, STORE + "/tasks has no 'wall_s' field)")),
    ("/tasks without message", with_h5py(tasks_with_fields(lambda fs: [x for x in fs if x[0] != "message"])),
     (2, STORE + "/tasks has no 'message' field)"), (2, STORE + "/tasks has no 'message' field)")),
    ("/tasks rank of float64", with_h5py(tasks_with_fields(lambda fs: [(n, "f8" if n == "rank" else t) for n, t in fs])),
     (2, STORE + "/tasks field 'rank' is not int32)"), (2, STORE + "/tasks field 'rank' is not int32)")),
    ("/tasks status a plain int8", with_h5py(tasks_with_fields(lambda fs: [(n, "i1" if n == "status" else t)
                                                                           for n, t in fs])),
     (2, STORE + "/tasks field 'status' is not an int8 enumeration of statuses)"),
     (2, STORE + "/tasks field 'status' is not an int8 enumeration of statuses)")),
    # The sweep description kept in the store (more in tests/python/test_load_validation.py, where
    # every reader is given the same stores).
    ("/axes and /points zeroed", zeroed("axes/lambda", "axes/layer", "points"),
     (2, STORE + "/axes/lambda differs from the stored sweep at value 1)"),
     (2, STORE + "/axes/lambda differs from the stored sweep at value 1)")),
    ("plan hash not the stored sweep's", set_attr("plan_hash", "0123456789abcdef"),
     (2, STORE + "attribute 'config' (the stored sweep) does not hash to plan_hash 0123456789abcdef"),
     (2, STORE + "attribute 'config' (the stored sweep) does not hash to plan_hash 0123456789abcdef")),
    ("a 50 MB attribute", set_attr("blas", "x" * 50_000_000),
     (2, STORE + "attribute 'blas' is 50000000 bytes long, more than the 4096 it may have)"),
     (2, STORE + "attribute 'blas' is 50000000 bytes long, more than the 4096 it may have)")),
    ("not_needed in a fixed sweep", set_status(4),
     (2, STORE + "task 1 is not_needed, but its sweep has no adaptive replicates ([sweep.replicates]))"),
     (2, STORE + "task 1 is not_needed, but its sweep has no adaptive replicates ([sweep.replicates]))")),
]
assert len(CASES) >= 10
REFUSED = [c for c in CASES if c[2][0] == 2]


def build(case_id, damage, made, path):
    if damage is None:  # the global heap case needs the store's own host name
        with h5py.File(made["store"], "r") as f:
            host = f.attrs["host"].encode()
        damage = flip(global_heap_object(host), 3)
    damage(made["store"], path)


@pytest.mark.parametrize("case_id,damage,info_expect,run_expect", CASES, ids=[c[0] for c in CASES])
def test_info_refuses_damage_and_leaves_the_file_alone(tmp_path, made, case_id, damage, info_expect, run_expect):
    path = tmp_path / "store.h5"
    build(case_id, damage, made, path)
    before = digest(path)
    proc = cli("info", path)
    code, phrase = info_expect
    assert proc.returncode == code, proc.stderr
    if code == 0:
        assert phrase in proc.stdout
    else:
        assert f"error: {phrase.format(p=path)}" in proc.stderr, proc.stderr
        assert proc.stdout == ""
    assert digest(path) == before


@pytest.mark.parametrize("flags", [["--resume"], []], ids=["--resume", "no-flag"])
@pytest.mark.parametrize("case_id,damage,info_expect,run_expect", CASES, ids=[c[0] for c in CASES])
def test_run_refuses_damage_and_leaves_the_file_alone(tmp_path, made, case_id, damage, info_expect, run_expect,
                                                      flags):
    path = tmp_path / "store.h5"
    build(case_id, damage, made, path)
    before = digest(path)
    proc = cli("run", made["sweep"], "-o", path, "-q", *flags)
    code, phrase = run_expect
    assert proc.returncode == code, proc.stderr
    if code == 2:
        assert f"error: {phrase.format(p=path)}" in proc.stderr, proc.stderr
        assert digest(path) == before  # a refused store is never touched
        assert sorted(p.name for p in tmp_path.iterdir()) == ["store.h5"]
    else:  # damage a resume does not read: every task is already done, nothing to run
        assert proc.stderr == ""
        assert cli("info", path).returncode == info_expect[0]  # the run left info's verdict as it was


@pytest.mark.parametrize("case_id,damage,info_expect,run_expect", REFUSED, ids=[c[0] for c in REFUSED])
def test_merge_refuses_damage_and_leaves_the_file_alone(tmp_path, made, case_id, damage, info_expect, run_expect):
    path = tmp_path / "store.h5"
    build(case_id, damage, made, path)
    before = digest(path)
    out = tmp_path / "merged.h5"
    proc = cli("merge", out, path)
    assert proc.returncode == 2, proc.stderr
    assert f"error: {info_expect[1].format(p=path)}" in proc.stderr, proc.stderr
    assert digest(path) == before
    assert not out.exists()


def external_links(real, folder):
    """store.h5 whose /tasks and /layers/fro are external links to victim.h5, a store of the same
    sweep with every task pending (a run that followed the links would compute and write them there)."""
    victim, path = folder / "victim.h5", folder / "store.h5"
    shutil.copy(real, victim)
    with h5py.File(victim, "r+") as f:
        rows = f["tasks"][...]
        rows["status"] = 0
        f["tasks"][...] = rows
    shutil.copy(real, path)
    with h5py.File(path, "r+") as f:
        for name in ("tasks", "layers/fro"):
            del f[name]
            f[name] = h5py.ExternalLink("victim.h5", "/" + name)
    return path, victim


def test_links_out_of_the_store_are_refused_and_nothing_is_written(tmp_path, made):
    path, victim = external_links(made["store"], tmp_path)
    before = {p: digest(p) for p in (path, victim)}
    message = (f"error: {path}: damaged rcsweep store (/layers/fro is an external link to victim.h5:/layers/fro: "
               "every object of a store is its own, reached by hard links only)")
    runs = [("info", path), ("info", "--json", path), ("merge", tmp_path / "merged.h5", path),
            ("run", made["sweep"], "-o", path, "-q"), ("run", made["sweep"], "-o", path, "-q", "--resume"),
            ("run", made["other"], "-o", path, "-q"),  # another plan: growth reads the store first
            ("run", made["sweep"], "-o", tmp_path / "new.h5", "-q", "--reuse", path)]
    for args in runs:
        proc = cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert {p: digest(p) for p in (path, victim)} == before, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.h5", "victim.h5"]


def flipped_chunk_size(real, path):
    """`real` with tasks 2 and 3 pending and one bit flipped in the stored size of a /layers
    dataset's chunk, which HDF5 1.10 reads without a checksum: a run that trusted it would write
    the other datasets' rows, then fail on this one ("addr overflow"). Returns the dataset's name."""
    shutil.copy(real, path)
    with h5py.File(path, "r+") as f:
        rows = f["tasks"][...]
        rows["status"][2:] = 0
        f["tasks"][...] = rows
    data = bytearray(path.read_bytes())
    with h5py.File(path, "r") as f:
        sizes = {f"layers/{m}": f["layers"][m].id.get_chunk_info(0).size for m in f["layers"]}
    field = struct.pack("<Q", N_TASKS * N_LAYERS * 8)
    at = data.find(field)
    while at >= 0:
        data[at + 2] ^= 1
        path.write_bytes(bytes(data))
        with h5py.File(path, "r") as f:
            changed = [n for n in sizes if f[n].id.get_chunk_info(0).size != sizes[n]]
        if changed:
            return changed[0]
        data[at + 2] ^= 1
        at = data.find(field, at + 1)
    raise AssertionError("no stored chunk size found")


def test_a_chunk_that_does_not_fit_is_refused_before_anything_is_written(tmp_path, made):
    path = tmp_path / "store.h5"
    name = flipped_chunk_size(made["store"], path)
    before = digest(path)
    phrase = f"error: {path}: damaged rcsweep store (/{name} does not fit the file: its chunk at (0, 0) takes 65664 bytes"
    for args in (("info", path), ("run", made["sweep"], "-o", path, "-q", "--resume"),
                 ("run", made["sweep"], "-o", path, "-q"), ("merge", tmp_path / "merged.h5", path)):
        proc = cli(*args)
        assert proc.returncode == 2 and phrase in proc.stderr, (args, proc.stderr)
        assert digest(path) == before, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.h5"]


def test_not_needed_fits_an_adaptive_sweep_only_from_its_min(tmp_path):
    """not_needed is a status of adaptive sweeps, for replicates at or above the rule's min."""
    sweep = tmp_path / "adaptive.toml"
    sweep.write_text(SWEEP.replace("replicates = 2\n", "[sweep.replicates]\nmin = 2\nmax = 3\nstep = 1\n"
                                   "targets = [{ metric = \"sr_cov\", rel_se = 1e-9 }]\n"))
    store = tmp_path / "store.h5"
    proc = cli("run", sweep, "-o", store, "-q")
    assert proc.returncode == 0, proc.stderr
    assert cli("info", store).returncode == 0
    bad = tmp_path / "bad.h5"
    set_status(4, task=1)(store, bad)  # replicate 1 of point 0: below min = 2, always run
    before = digest(bad)
    message = (f"error: {bad}: damaged rcsweep store (task 1 is not_needed, but its replicate 1 is below the "
               "adaptive rule's min = 2, which always runs)")
    for args in (("info", bad), ("run", sweep, "-o", bad, "-q", "--resume"), ("merge", tmp_path / "m.h5", bad)):
        proc = cli(*args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
        assert digest(bad) == before
    good = tmp_path / "good.h5"
    set_status(4, task=2)(store, good)  # replicate 2: the rule may have found it not needed
    proc = cli("info", good)
    assert proc.returncode == 0 and "1 not needed" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("case_id", ["empty file", "random bytes", "cut inside the superblock", "cut in half",
                                     "bit flip in the superblock", "plain HDF5 file", "schema version 3",
                                     "/tasks with 3 rows", "/layers/mu of the wrong shape"])
def test_overwrite_replaces_a_damaged_store(tmp_path, made, case_id):
    (_, damage, _, _), = [c for c in CASES if c[0] == case_id]
    path = tmp_path / "store.h5"
    build(case_id, damage, made, path)
    proc = cli("run", made["sweep"], "-o", path, "-q", "--overwrite")
    assert proc.returncode == 0, proc.stderr
    info = cli("info", path)
    assert info.returncode == 0, info.stderr
    assert f"plan {made['hash']['real']}, schema 2" in info.stdout
    assert "100.0% finished: 4 done" in info.stdout


def test_store_of_another_plan_is_refused_naming_both_hashes_then_overwritten(tmp_path, made):
    path = tmp_path / "store.h5"
    shutil.copy(made["store"], path)
    before = digest(path)
    real, other = made["hash"]["real"], made["hash"]["other"]
    for flags in (["--resume"], []):
        proc = cli("run", made["other"], "-o", path, "-q", *flags)
        assert proc.returncode == 2, proc.stderr
        assert (f"error: {path} (sweep 'dmg', plan hash {real}) was made from a different sweep file "
                f"(plan hash {other}), and none of its results fits this sweep") in proc.stderr
        assert "sweep.seed: 3 -> 4   (changes every task's results)" in proc.stderr
        assert "write a new store (another -o) or pass --overwrite" in proc.stderr
        assert digest(path) == before
    assert cli("info", path).returncode == 0  # a store of another plan is still a good store
    proc = cli("run", made["other"], "-o", path, "-q", "--overwrite")
    assert proc.returncode == 0, proc.stderr
    info = cli("info", path)
    assert f"plan {other}, schema 2" in info.stdout and "100.0% finished: 4 done" in info.stdout


def test_a_directory_is_not_a_store(tmp_path, made):
    path = tmp_path / "out.h5"
    path.mkdir()
    (path / "keep").write_text("x")
    proc = cli("info", path)
    assert proc.returncode == 2 and f"error: {path}: not a regular file" in proc.stderr
    for flags in (["--resume"], []):
        proc = cli("run", made["sweep"], "-o", path, "-q", *flags)
        assert proc.returncode == 2 and f"error: {path}: not a regular file" in proc.stderr
    proc = cli("run", made["sweep"], "-o", path, "-q", "--overwrite")
    assert proc.returncode == 2
    assert f"error: {path} is a directory, not a store; --overwrite replaces only a file" in proc.stderr
    assert [p.name for p in path.iterdir()] == ["keep"]


def test_missing_store(tmp_path, made):
    path = tmp_path / "none.h5"
    proc = cli("info", path)
    assert proc.returncode == 2 and f"error: {path}: no such file" in proc.stderr
    proc = cli("run", made["sweep"], "-o", path, "-q", "--resume")
    assert proc.returncode == 2
    assert f"error: {path} does not exist: nothing to resume (drop --resume to start it)" in proc.stderr
    assert not path.exists()


@pytest.mark.parametrize("flags", [[], ["--overwrite"]], ids=["new", "--overwrite"])
def test_unwritable_locations(tmp_path, made, flags):
    missing = tmp_path / "no" / "such" / "folder" / "out.h5"
    proc = cli("run", made["sweep"], "-o", missing, "-q", *flags)
    assert proc.returncode == 2
    assert f"error: cannot create {missing}: directory {missing.parent} does not exist" in proc.stderr
    assert not (tmp_path / "no").exists()
    proc = cli("run", made["sweep"], "-o", "/proc/rcsweep_test.h5", "-q", *flags)
    assert proc.returncode == 2
    assert "error: cannot make the writer lock /proc/rcsweep_test.h5.lock of /proc/rcsweep_test.h5" in proc.stderr
    assert "No such file or directory" in proc.stderr


def test_damaged_store_under_mpi_is_refused_once(tmp_path, made):
    path = tmp_path / "store.h5"
    path.write_bytes(made["store"].read_bytes()[:100])
    before = digest(path)
    proc = cli("run", made["sweep"], "-o", path, "-q", ranks=2)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count(f"error: {path}: damaged HDF5 file (truncated file: eof = 100,") == 1
    assert digest(path) == before


def test_run_on_a_corrupt_global_heap_of_the_plan_hash(tmp_path, made):
    """HDF5 1.10.8 copies a global heap object of corrupted size out of bounds in H5Aread (SIGSEGV):
    `run` reads a store to resume in a child process first and refuses it as damaged."""
    path = tmp_path / "store.h5"
    flip(global_heap_object(made["hash"]["real"].encode()), 3)(made["store"], path)
    assert cli("info", path).returncode == 2
    proc = cli("run", made["sweep"], "-o", path, "-q", "--resume")  # asserts it was not killed by a signal
    assert proc.returncode == 2 and "damaged" in proc.stderr


def test_a_store_that_makes_hdf5_loop_forever_is_refused_after_the_read_timeout(tmp_path):
    """A zero-size free object in a global heap makes HDF5 1.10.8 loop forever (fuzzer finding,
    docs/FUZZING.md): info and run give up after the read timeout (120 s; 2 s here)."""
    path = tmp_path / "hang.h5"
    path.write_bytes((SOURCE / "tests/fuzz/regressions/store/hdf5-1.10-global-heap-free-object-size-0-hangs.h5")
                     .read_bytes())
    env = {**os.environ, "RCSWEEP_STORE_READ_TIMEOUT": "2"}
    for args in (["info", path], ["run", DATA / "kill.toml", "-o", path, "--resume"]):
        start = time.time()
        proc = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "damaged HDF5 file (reading it did not finish within 2 s)" in proc.stderr
        assert time.time() - start < 20
