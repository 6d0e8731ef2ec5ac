"""What rcsweep creates and removes beside a store (docs/GUARANTEES.md "What rcsweep creates and
removes beside a store"): a user's file of any name beside a store survives every command; a
file at the lock's name that rcsweep did not make is refused and left byte for byte; a killed
writer's temporary is removed by the next writer from its lock file's record; a store is one store
whatever name leads to it (hard links, bind mounts, a lock file deleted by a "stale lock" clean-up,
HDF5's own locking off); names up to NAME_MAX work; a store in a directory the user cannot write
is resumed, and what cannot be done there says what it needs."""
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import h5py
import pytest

from conftest import BIN, DATA, assert_same_results, rcsweep

SWEEP = DATA / "kill.toml"
BASE = ["sweep.replicates=2"]  # a fraction of a second of computing
GROWN = ["sweep.replicates=3"]
SLOW = ["sweep.replicates=400"]  # minutes of computing: a writer that is still writing when stopped
STRACE = shutil.which("strace")


def user_files(directory):
    """Files a user keeps beside the store: names a name-pattern clean-up would take."""
    files = {}
    for name in ("res.h5.partial-report", "res.h5.partial-abc123", "res.h5.lockfile", "res.h5.partial-"):
        (directory / name).write_text("mine: " + name)
        files[name] = "mine: " + name
    return files


def assert_kept(directory, files):
    for name, text in files.items():
        assert (directory / name).read_text() == text, name


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if ".partial-" in p.name or p.name.endswith(".lock"))


def start(*args, env=None):
    return subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def wait_for(condition, timeout=60.0):
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.01)


@pytest.fixture
def stopped_writer(tmp_path):
    """A run that has created tmp_path/s.h5 and holds it, stopped (SIGSTOP) while writing; killed
    at the end."""
    procs = []

    def make(store, env=None):
        proc = start("run", SWEEP, *SLOW, "-o", store, "-q", env=env)
        procs.append(proc)
        wait_for(lambda: store.exists() and Path(str(store) + ".lock").exists())
        time.sleep(0.2)  # past the store's creation: computing
        proc.send_signal(signal.SIGSTOP)
        return proc

    yield make
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.send_signal(signal.SIGCONT)
        proc.communicate(timeout=60)


def test_a_users_files_beside_a_store_survive_every_command(tmp_path):
    files = user_files(tmp_path)
    store = tmp_path / "res.h5"
    rcsweep("run", SWEEP, *BASE, "-o", store, "-q", check=0)
    rcsweep("run", SWEEP, *BASE, "-o", store, "-q", check=0)  # resume (nothing left to do)
    assert_kept(tmp_path, files)
    rcsweep("run", SWEEP, *GROWN, "-o", store, "-q", check=0)  # growth
    assert_kept(tmp_path, files)
    rcsweep("run", SWEEP, *BASE, "-o", store, "-q", "--overwrite", check=0)
    assert_kept(tmp_path, files)
    shards = []
    for i in range(2):
        shards.append(tmp_path / f"shard{i}.h5")
        rcsweep("run", SWEEP, *BASE, "--shard", f"{i}/2", "-o", shards[-1], "-q", check=0)
    rcsweep("merge", store, *shards, "--overwrite", check=0)
    assert_kept(tmp_path, files)
    assert leftovers(tmp_path) == ["res.h5.partial-", "res.h5.partial-abc123", "res.h5.partial-report"]


def test_a_store_named_like_a_temporary_survives_a_store_written_beside_it(tmp_path):
    """The issue's reproduction: a.h5.partial-run002 being written while a.h5 is created."""
    first = tmp_path / "a.h5.partial-run002"
    proc = start("run", SWEEP, "sweep.replicates=20", "-o", first, "-q")
    wait_for(first.exists)
    rcsweep("run", SWEEP, "sweep.replicates=1", "-o", tmp_path / "a.h5", "-q", check=0)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    reference = tmp_path / "ref.h5"
    rcsweep("run", SWEEP, "sweep.replicates=20", "-o", reference, "-q", check=0)
    assert_same_results(first, reference)
    with h5py.File(tmp_path / "a.h5", "r") as f:
        assert f.attrs["format"] == "rcsweep"


def test_a_file_at_the_lock_name_that_rcsweep_did_not_make_is_refused_and_left_alone(tmp_path):
    base = tmp_path / "base.h5"
    rcsweep("run", SWEEP, *BASE, "-o", base, "-q", check=0)
    # A copy of a store at t.h5.lock.
    lock = tmp_path / "t.h5.lock"
    shutil.copy(base, lock)
    before = lock.read_bytes()
    proc = rcsweep("run", SWEEP, *BASE, "-o", tmp_path / "t.h5", "-q", check=2)
    assert "t.h5.lock is not a writer lock of rcsweep" in proc.stderr and "move it away" in proc.stderr
    assert lock.read_bytes() == before and not (tmp_path / "t.h5").exists()
    # A hard link of a user's store at t3.h5.lock.
    keep = tmp_path / "keep.h5"
    shutil.copy(base, keep)
    os.link(keep, tmp_path / "t3.h5.lock")
    before = keep.read_bytes()
    for args in (["run", SWEEP, *BASE, "-o", tmp_path / "t3.h5", "-q"], ["merge", tmp_path / "t3.h5", base]):
        proc = rcsweep(*args, check=2)
        assert "t3.h5.lock is not a writer lock of rcsweep" in proc.stderr, proc.stderr
        assert keep.read_bytes() == before and os.stat(keep).st_nlink == 2
    # A store named b.h5.lock held open (locked) by another program: its bytes are never "the holder".
    other = tmp_path / "b.h5.lock"
    shutil.copy(base, other)
    with open(other, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        proc = rcsweep("run", SWEEP, *BASE, "-o", tmp_path / "b.h5", "-q", check=2)
    assert "b.h5.lock is not a writer lock of rcsweep" in proc.stderr
    assert "HDF" not in proc.stderr and all(c == "\n" or " " <= c <= "~" for c in proc.stderr), proc.stderr
    assert other.read_bytes() == base.read_bytes()


@pytest.mark.skipif(STRACE is None, reason="needs strace (its fault injection kills at a chosen system call)")
@pytest.mark.parametrize("moment", ["build", "growth", "overwrite"])
def test_a_killed_writers_temporary_is_removed_by_the_next_writer(tmp_path, moment):
    """SIGKILL inside a system call of the writer (strace's fault injection): while the new store's
    datasets are written, or at the rename that would put a grown or replacing store in place."""
    store = tmp_path / "s.h5"
    files = user_files(tmp_path)
    if moment != "build":
        rcsweep("run", SWEEP, *BASE, "-o", store, "-q", check=0)
    args = {"build": BASE, "growth": GROWN, "overwrite": BASE + ["--overwrite"]}[moment]
    inject = "pwrite64:signal=SIGKILL:when=20" if moment == "build" else "rename:signal=SIGKILL"
    syscall = inject.split(":")[0]
    proc = subprocess.run([STRACE, "-f", "-o", os.devnull, "-e", "trace=" + syscall, "-e", "inject=" + inject, BIN,
                           "run", SWEEP, *args, "-o", store, "-q"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    partial = [p for p in tmp_path.iterdir() if p.name.startswith("s.h5.partial-")]
    assert len(partial) == 1, sorted(p.name for p in tmp_path.iterdir())
    assert (tmp_path / "s.h5.lock").exists()
    rcsweep("run", SWEEP, *(GROWN if moment == "growth" else BASE), "-o", store, "-q",
            *(["--overwrite"] if moment == "overwrite" else []), check=0)
    assert not partial[0].exists(), "the killed writer's temporary is left"
    assert_kept(tmp_path, files)
    assert [n for n in leftovers(tmp_path) if n not in files] == []


def test_a_store_held_by_a_writer_is_refused_under_any_other_name(tmp_path, stopped_writer):
    store = tmp_path / "s.h5"
    stopped_writer(store)
    before = store.stat().st_ino
    # A hard link: growth and --overwrite through it (which HDF5's own lock does not see).
    link = tmp_path / "h.h5"
    os.link(store, link)
    for extra in (GROWN, BASE + ["--overwrite"]):
        proc = rcsweep("run", SWEEP, *extra, "-o", link, "-q", check=2)
        assert "h.h5 is being written by another rcsweep" in proc.stderr, proc.stderr
    proc = rcsweep("merge", link, store, "--overwrite", check=2)  # refused before its shards are looked at
    assert "is being written by another rcsweep" in proc.stderr, proc.stderr
    assert os.stat(link).st_ino == before and store.stat().st_ino == before
    # The lock file deleted by a "stale lock" clean-up, HDF5's own locking off: a resume is refused.
    (tmp_path / "s.h5.lock").unlink()
    env = {**os.environ, "HDF5_USE_FILE_LOCKING": "FALSE"}
    for out in (store, link):
        proc = subprocess.run([BIN, "run", SWEEP, *SLOW, "-o", out, "-q"], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode == 2 and "is being written by another rcsweep" in proc.stderr, proc.stderr


def test_a_bind_mount_of_a_held_store_is_the_same_store(tmp_path, stopped_writer):
    if os.geteuid() != 0:
        pytest.skip("needs root for a bind mount")
    real, alias = tmp_path / "real", tmp_path / "alias"
    real.mkdir()
    alias.mkdir()
    if subprocess.run(["mount", "--bind", real, alias], capture_output=True).returncode != 0:
        pytest.skip("mount --bind is not permitted here")
    try:
        stopped_writer(real / "s.h5")
        (real / "s.h5.lock").unlink()  # also without the lock file
        proc = rcsweep("run", SWEEP, *BASE, "-o", alias / "s.h5", "-q", "--overwrite", check=2)
        assert "is being written by another rcsweep" in proc.stderr, proc.stderr
    finally:
        subprocess.run(["umount", "-l", alias], check=True)


def test_store_names_up_to_name_max_work(tmp_path):
    for n in (241, 255):
        store = tmp_path / ("x" * (n - 3) + ".h5")
        rcsweep("run", SWEEP, *BASE, "-o", store, "-q", check=0)
        rcsweep("run", SWEEP, *GROWN, "-o", store, "-q", check=0)  # growth: a temporary beside it
        rcsweep("run", SWEEP, *GROWN, "-o", store, "-q", "--overwrite", check=0)
        assert store.exists()
    assert leftovers(tmp_path) == []


def test_a_store_in_a_directory_the_user_cannot_write_is_resumed(tmp_path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as another user")
    top = Path(tempfile.mkdtemp(prefix="rcsweep_ro_"))
    try:
        os.chmod(top, 0o755)
        sweep = top / "kill.toml"
        shutil.copy(SWEEP, sweep)
        store = top / "s.h5"
        rcsweep("run", sweep, *BASE, "-o", store, "-q", check=0)
        reference = tmp_path / "ref.h5"
        shutil.copy(store, reference)
        with h5py.File(store, "r+") as f:  # a run that was killed: half its tasks pending
            tasks = f["tasks"][...]
            tasks["status"][: len(tasks) // 2] = 0
            f["tasks"][...] = tasks
        os.chmod(store, 0o666)  # the store writable by the user, its directory not
        as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", BIN]
        if subprocess.run(as_nobody + ["--version"], capture_output=True, cwd="/").returncode != 0:
            pytest.skip("user nobody cannot run " + BIN)
        proc = subprocess.run(as_nobody + ["run", sweep, *BASE, "-o", store, "-q"], capture_output=True, text=True,
                              timeout=120, cwd="/")
        assert proc.returncode == 0, proc.stderr
        assert_same_results(store, reference)
        for extra in (GROWN, BASE + ["--overwrite"]):
            proc = subprocess.run(as_nobody + ["run", sweep, *extra, "-o", store, "-q"], capture_output=True,
                                  text=True, timeout=120, cwd="/")
            assert proc.returncode == 2, proc.stderr
            assert f"needs write access to directory {top}" in proc.stderr, proc.stderr
        assert_same_results(store, reference)
        assert sorted(p.name for p in top.iterdir()) == ["kill.toml", "s.h5"]
    finally:
        shutil.rmtree(top)
