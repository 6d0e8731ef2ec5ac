"""One writer per store (docs/GUARANTEES.md "One writer per store"): two processes that create,
resume, grow, replace (--overwrite) or merge into one store at the same moment, many times at
random offsets, and kills in the middle of a replacement. Whatever happens, the store that exists
afterwards is complete and bitwise equal to an undisturbed run's, or resumes to one; the process
refused exits 2 naming the writer (host and pid); no temporary is left behind, and nothing that
rcsweep did not make is removed."""
import os
import random
import signal
import socket
import stat
import subprocess
import time

import h5py
import pytest

from conftest import BIN, DATA, assert_same_results, rcsweep

SWEEP = DATA / "kill.toml"
BASE = ["sweep.replicates=2"]  # about a third of a second of computing: the runs overlap
GROWN = ["sweep.replicates=3"]
ROUNDS = 8


def start(*args):
    return subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def race(args_a, args_b, rng):
    """Start a, then b after a random 0-150 ms; both (Popen, returncode, stderr) once ended."""
    a = start(*args_a)
    time.sleep(rng.uniform(0.0, 0.15))
    b = start(*args_b)
    out = []
    for p in (a, b):
        _, err = p.communicate(timeout=120)
        out.append((p, p.returncode, err))
    return out


def check_outcomes(outcomes, allowed=(0,)):
    """Each process finished (an allowed exit code) or was refused because the other one writes."""
    host = socket.gethostname()
    codes = []
    for i, (proc, rc, err) in enumerate(outcomes):
        other = outcomes[1 - i][0]
        if rc == 2:
            assert f"is being written by another rcsweep (host {host}, pid {other.pid}" in err, err
        else:
            assert rc in allowed, f"exit {rc}: {err}"
        codes.append(rc)
    assert codes.count(2) < 2, "both refused"


def plan_hash(path):
    with h5py.File(path, "r") as f:
        return f.attrs["plan_hash"]


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if ".partial" in p.name or p.name.endswith(".lock"))


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    d = tmp_path_factory.mktemp("refs")
    refs = {"base": d / "base.h5", "grown": d / "grown.h5", "other": d / "other.h5"}
    rcsweep("run", SWEEP, *BASE, "-o", refs["base"], "-q", check=0)
    rcsweep("run", SWEEP, *GROWN, "-o", refs["grown"], "-q", check=0)
    rcsweep("run", SWEEP, *BASE, "sweep.seed=7", "-o", refs["other"], "-q", check=0)
    for i in range(2):
        refs[f"shard{i}"] = d / f"shard{i}.h5"
        rcsweep("run", SWEEP, *BASE, "--shard", f"{i}/2", "-o", refs[f"shard{i}"], "-q", check=0)
    return refs


def test_two_runs_creating_one_store(tmp_path, references):
    rng = random.Random(1)
    refused = 0
    for k in range(ROUNDS):
        store = tmp_path / f"s{k}.h5"
        outcomes = race(["run", SWEEP, *BASE, "-o", store, "-q"], ["run", SWEEP, *BASE, "-o", store, "-q"], rng)
        check_outcomes(outcomes)
        refused += [rc for _, rc, _ in outcomes].count(2)
        assert_same_results(store, references["base"])
    assert leftovers(tmp_path) == []
    assert refused > 0, "the runs never overlapped: the test did not race them"


def test_two_runs_resuming_one_store(tmp_path, references):
    rng = random.Random(2)
    for k in range(ROUNDS // 2):
        store = tmp_path / f"s{k}.h5"
        store.write_bytes(references["base"].read_bytes())
        with h5py.File(store, "r+") as f:  # a store whose run was killed: a random half pending
            tasks = f["tasks"][...]
            tasks["status"][rng.sample(range(len(tasks)), len(tasks) // 2)] = 0
            f["tasks"][...] = tasks
        check_outcomes(race(["run", SWEEP, *BASE, "-o", store, "-q"], ["run", SWEEP, *BASE, "-o", store, "-q"], rng))
        assert_same_results(store, references["base"])
    assert leftovers(tmp_path) == []


def test_two_runs_growing_one_store_and_growth_while_a_run_writes(tmp_path, references):
    rng = random.Random(3)
    for k in range(ROUNDS // 2):
        store = tmp_path / f"g{k}.h5"
        store.write_bytes(references["base"].read_bytes())
        check_outcomes(race(["run", SWEEP, *GROWN, "-o", store, "-q"], ["run", SWEEP, *GROWN, "-o", store, "-q"], rng))
        assert_same_results(store, references["grown"])
    # A growth started while another run writes the store is refused, and that run's results stay.
    store = tmp_path / "busy.h5"
    outcomes = race(["run", SWEEP, *BASE, "-o", store, "-q"], ["run", SWEEP, *GROWN, "-o", store, "-q"], rng)
    check_outcomes(outcomes)
    rcsweep("run", SWEEP, *GROWN, "-o", store, "-q", check=0)
    assert_same_results(store, references["grown"])
    assert leftovers(tmp_path) == []


def test_two_overwrites_of_one_store(tmp_path, references):
    rng = random.Random(4)
    for k in range(ROUNDS // 2):
        store = tmp_path / f"o{k}.h5"
        store.write_bytes(references["other"].read_bytes())
        args = ["run", SWEEP, *BASE, "-o", store, "-q", "--overwrite"]
        check_outcomes(race(args, args, rng))
        assert_same_results(store, references["base"])
    assert leftovers(tmp_path) == []


def test_a_killed_overwrite_leaves_the_old_store_or_a_resumable_new_one(tmp_path, references):
    """SIGKILL at random moments of `run --overwrite`: the path holds the old store, bitwise, or
    the new one, which the same sweep then completes; the next writer removes the temporary."""
    rng = random.Random(5)
    old_hash = plan_hash(references["other"])
    seen = set()
    for k in range(ROUNDS):
        store = tmp_path / f"k{k}.h5"
        store.write_bytes(references["other"].read_bytes())
        proc = start("run", SWEEP, *BASE, "-o", store, "-q", "--overwrite")
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        old = plan_hash(store) == old_hash
        seen.add(old)
        if old:
            assert_same_results(store, references["other"])
        rcsweep("run", SWEEP, *BASE, "-o", store, "-q", *(["--overwrite"] if old else []), check=0)
        assert_same_results(store, references["base"])
    assert leftovers(tmp_path) == []
    assert seen, "no kill landed"


def test_two_merges_into_one_store_and_a_killed_merge(tmp_path, references):
    rng = random.Random(6)
    shards = [references["shard0"], references["shard1"]]
    before = [s.read_bytes() for s in shards]
    for k in range(ROUNDS // 2):
        out = tmp_path / f"m{k}.h5"
        args = ["merge", out, *shards, "--overwrite"]
        check_outcomes(race(args, args, rng))
        assert_same_results(out, references["base"])
    out = tmp_path / "killed.h5"
    out.write_bytes(references["other"].read_bytes())
    proc = start("merge", out, *shards, "--overwrite")
    time.sleep(rng.uniform(0.0, 0.2))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    merged = plan_hash(out) == plan_hash(shards[0])  # the old file, or the merged one: never half of it
    assert_same_results(out, references["base"] if merged else references["other"])
    rcsweep("merge", out, *shards, "--overwrite", check=0)
    assert_same_results(out, references["base"])
    assert [s.read_bytes() for s in shards] == before
    assert leftovers(tmp_path) == []


def test_a_merge_whose_output_is_a_shard_is_refused_and_writes_nothing(tmp_path, references):
    s0, s1 = tmp_path / "s0.h5", tmp_path / "s1.h5"
    s0.write_bytes(references["shard0"].read_bytes())
    s1.write_bytes(references["shard1"].read_bytes())
    link = tmp_path / "link.h5"
    link.symlink_to(s0.name)
    before = s0.read_bytes()
    for out in (s0, link):
        proc = rcsweep("merge", out, s0, s0, s1, "--overwrite", check=2)
        assert "is both a shard and the output" in proc.stderr
    assert s0.read_bytes() == before and link.is_symlink()
    proc = rcsweep("run", SWEEP, *BASE, "--shard", "0/2", "-o", s0, "--reuse", link, "-q", check=2)
    assert "is the output store itself" in proc.stderr
    assert s0.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_special_files_and_symlinks(tmp_path, references):
    """--overwrite never replaces a device node or a FIFO (refused, exit 2, the node still there);
    a store written through a symlink grows its target and keeps the link."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    nodes = [fifo]
    if os.geteuid() == 0:
        null = tmp_path / "null"
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a copy of /dev/null
        nodes.append(null)
    for node in nodes:
        kind = stat.S_IFMT(node.lstat().st_mode)
        proc = rcsweep("run", SWEEP, *BASE, "-o", node, "-q", "--overwrite", check=2, timeout=30)
        assert "is not a regular file" in proc.stderr
        proc = rcsweep("merge", node, references["shard0"], references["shard1"], "--overwrite", check=2, timeout=30)
        assert "is not a regular file" in proc.stderr
        assert stat.S_IFMT(node.lstat().st_mode) == kind
    real = tmp_path / "data"
    real.mkdir()
    (real / "s.h5").write_bytes(references["base"].read_bytes())
    link = tmp_path / "s.h5"
    link.symlink_to(real / "s.h5")
    rcsweep("run", SWEEP, *GROWN, "-o", link, "-q", check=0)
    assert link.is_symlink() and os.readlink(link) == str(real / "s.h5")
    assert_same_results(real / "s.h5", references["grown"])
    assert leftovers(tmp_path) == [] and leftovers(real) == []


def test_a_failed_overwrite_on_a_full_disk_keeps_the_old_store(tmp_path, references):
    shim = os.environ.get("RCSWEEP_ENOSPC_SHIM")
    if not shim:
        pytest.skip("RCSWEEP_ENOSPC_SHIM not set (run through ctest)")
    store = tmp_path / "full.h5"
    store.write_bytes(references["other"].read_bytes())
    env = {**os.environ, "LD_PRELOAD": shim, "RCSWEEP_ENOSPC_SUFFIX": "full.h5", "RCSWEEP_ENOSPC_AFTER": "4096"}
    proc = subprocess.run([BIN, "run", SWEEP, *BASE, "-o", store, "-q", "--overwrite"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode in (1, 2) and "the disk is full" in proc.stderr, proc.stderr
    assert_same_results(store, references["other"])
    assert leftovers(tmp_path) == []
