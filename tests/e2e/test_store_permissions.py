"""The store keeps the user's permissions (docs/GUARANTEES.md "File modes and owners"): a new store
gets the mode any new file gets (the umask, a directory's default ACL) and a setgid directory's
group; --overwrite, growth and `merge --overwrite` keep the replaced store's mode, ACL, group (for a
user who is a member of it) and, as root, owner, and a store its user may not write is not
replaced. A store another program holds open with HDF5's file lock (h5py in a notebook) is neither
resumed nor replaced under it: the refusal says what holds it and what to do, and the store is
left as it was."""
import grp
import hashlib
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import BIN, rcsweep

SWEEP = """[sweep]
name = "perm"
seed = 3
replicates = {replicates}
[model]
mixer = "softmax"
depth = 2
[axes]
lambda = [0.0, 0.5]
[[zip]]
T = [8]
d = [8]
"""
OTHER_UID = 4242  # no such user needed: root may give a file any uid

# HDF5's file locking on, whatever the site sets, in rcsweep and in the h5py holder alike.
ENV = {k: v for k, v in os.environ.items() if k != "HDF5_USE_FILE_LOCKING"}


def sweep(tmp_path, replicates=1):
    path = tmp_path / f"perm{replicates}.toml"
    path.write_text(SWEEP.format(replicates=replicates))
    return path


def with_umask(mask):
    return lambda: os.umask(mask)


def run(*args, umask=0o022, check=None):
    return rcsweep(*args, check=check, preexec_fn=with_umask(umask), env=ENV)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def other_group():
    """A group that is not root's: 'users' where it exists."""
    try:
        return grp.getgrnam("users").gr_gid
    except KeyError:
        return 100


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("mask,want", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664), (0o077, 0o600)],
                         ids=["022", "027", "002", "077"])
def test_a_new_store_has_the_mode_the_umask_gives_any_new_file(tmp_path, mask, want):
    store = tmp_path / "new.h5"
    run("run", sweep(tmp_path), "-o", store, "-q", umask=mask, check=0)
    assert mode(store) == want, oct(mode(store))
    # A merge into a new file too.
    shards = [tmp_path / f"s{i}.h5" for i in range(2)]
    for i, s in enumerate(shards):
        run("run", sweep(tmp_path), "-o", s, "--shard", f"{i}/2", "-q", umask=mask, check=0)
        assert mode(s) == want
    merged = tmp_path / "merged.h5"
    run("merge", merged, *shards, umask=mask, check=0)
    assert mode(merged) == want, oct(mode(merged))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner and group needs root")
@pytest.mark.parametrize("how", ["overwrite", "growth", "merge"])
def test_a_replaced_store_keeps_its_mode_group_and_owner(tmp_path, how):
    store = tmp_path / "kept.h5"
    run("run", sweep(tmp_path), "-o", store, "-q", check=0)
    gid = other_group()
    os.chown(store, OTHER_UID, gid)
    os.chmod(store, 0o640)
    inode = os.stat(store).st_ino
    if how == "overwrite":
        run("run", sweep(tmp_path), "-o", store, "--overwrite", "-q", umask=0o077, check=0)
    elif how == "growth":
        proc = run("run", sweep(tmp_path, replicates=2), "-o", store, umask=0o077, check=0)
        assert "grown to this sweep" in proc.stderr
    else:
        shards = [tmp_path / f"s{i}.h5" for i in range(2)]
        for i, s in enumerate(shards):
            run("run", sweep(tmp_path), "-o", s, "--shard", f"{i}/2", "-q", check=0)
        run("merge", store, *shards, "--overwrite", umask=0o077, check=0)
    st = os.stat(store)
    assert st.st_ino != inode  # replaced, not rewritten in place
    assert stat.S_IMODE(st.st_mode) == 0o640, oct(st.st_mode)
    assert (st.st_uid, st.st_gid) == (OTHER_UID, gid)
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]


@pytest.mark.parametrize("old_mode", [0o600, 0o664, 0o444], ids=["600", "664", "444"])
def test_overwrite_keeps_the_mode_whatever_the_umask(tmp_path, old_mode):
    store = tmp_path / "m.h5"
    run("run", sweep(tmp_path), "-o", store, "-q", check=0)
    os.chmod(store, old_mode)
    run("run", sweep(tmp_path), "-o", store, "--overwrite", "-q", umask=0o027, check=0)
    assert mode(store) == old_mode, oct(mode(store))


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another group needs root (or a second group)")
def test_a_new_store_in_a_setgid_directory_gets_the_directory_group(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    gid = other_group()
    os.chown(shared, -1, gid)
    os.chmod(shared, 0o2775)
    store = shared / "s.h5"
    run("run", sweep(tmp_path), "-o", store, "-q", umask=0o002, check=0)
    st = os.stat(store)
    assert st.st_gid == gid
    assert stat.S_IMODE(st.st_mode) == 0o664, oct(st.st_mode)
    # Replaced, it keeps the group it had, not the directory's.
    os.chown(store, -1, 0)
    run("run", sweep(tmp_path), "-o", store, "--overwrite", "-q", umask=0o002, check=0)
    assert os.stat(store).st_gid == 0


NOBODY = 65534


@pytest.fixture
def open_dir():
    """A directory any user may write (tmp_path's parents are root's alone); skips when user
    nobody cannot run the binary (a build tree inside a private directory)."""
    try:
        subprocess.run([BIN, "--version"], capture_output=True, check=True, preexec_fn=as_nobody([]), timeout=60)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"user nobody cannot run {BIN}: {e}")
    d = tempfile.mkdtemp(prefix="rcsweep-perm-", dir="/tmp")
    os.chmod(d, 0o777)
    yield Path(d)
    shutil.rmtree(d)


def as_nobody(groups, mask=0o022):
    def become():
        os.setgroups(groups)
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        os.umask(mask)
    return become


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
@pytest.mark.parametrize("member", [True, False], ids=["member", "not-a-member"])
def test_a_user_keeps_the_group_he_is_a_member_of_and_never_grants_another_group(open_dir, member):
    """Not root: the owner becomes the user who replaces the store; its group is kept when that
    user is a member of it, else the replacement has the user's group and no group permissions."""
    store = open_dir / "g.h5"
    gid = other_group()
    toml = sweep(open_dir)
    become = as_nobody([gid] if member else [])
    rcsweep("run", toml, "-o", store, "-q", check=0, preexec_fn=become, env=ENV)
    os.chown(store, NOBODY, gid)
    os.chmod(store, 0o664)
    rcsweep("run", toml, "-o", store, "--overwrite", "-q", check=0, preexec_fn=become, env=ENV)
    st = os.stat(store)
    assert st.st_uid == NOBODY
    if member:
        assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (gid, 0o664), oct(st.st_mode)
    else:
        assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, 0o604), oct(st.st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
@pytest.mark.parametrize("how", ["overwrite", "growth"])
def test_a_store_the_user_may_not_write_is_not_replaced(open_dir, how):
    """Kept read-only (mode 0444), a store is not grown nor overwritten by its owner (root may):
    the replacement would keep the mode, and a resume of it would fail."""
    store = open_dir / "ro.h5"
    become = as_nobody([])
    rcsweep("run", sweep(open_dir), "-o", store, "-q", check=0, preexec_fn=become, env=ENV)
    os.chmod(store, 0o444)
    before, inode = digest(store), os.stat(store).st_ino
    args = ["--overwrite"] if how == "overwrite" else []
    proc = rcsweep("run", sweep(open_dir, replicates=1 if args else 2), "-o", store, *args, "-q", preexec_fn=become,
                   env=ENV)
    assert proc.returncode == 2, proc.stderr
    assert f"error: {store} is not writable for you (mode 0444): " in proc.stderr, proc.stderr
    assert (digest(store), os.stat(store).st_ino, mode(store)) == (before, inode, 0o444)
    assert not [p for p in open_dir.iterdir() if ".partial" in p.name]


ACL_USER_OBJ, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 0x01, 0x04, 0x08, 0x10, 0x20
NO_ID = 0xFFFFFFFF


def acl(*entries):
    """A POSIX ACL in its extended-attribute form: version 2, then (tag, permission, id) entries."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


def set_acl(path, key, value):
    try:
        os.setxattr(path, key, value)
    except OSError as e:
        pytest.skip(f"no POSIX ACLs here: {e}")


def test_a_directory_default_acl_gives_a_new_store_what_it_gives_any_new_file(tmp_path):
    shared = tmp_path / "acl"
    shared.mkdir()
    set_acl(shared, "system.posix_acl_default",
            acl((ACL_USER_OBJ, 6, NO_ID), (ACL_GROUP_OBJ, 4, NO_ID), (ACL_GROUP, 6, 4243), (ACL_MASK, 6, NO_ID),
                (ACL_OTHER, 0, NO_ID)))
    mine = shared / "any_file"
    run("run", sweep(tmp_path), "-o", shared / "s.h5", "-q", umask=0o077, check=0)
    subprocess.run(["touch", mine], check=True, preexec_fn=with_umask(0o077))  # what any program gets
    assert mode(shared / "s.h5") == mode(mine) == 0o660, oct(mode(shared / "s.h5"))
    assert os.getxattr(shared / "s.h5", "system.posix_acl_access") == os.getxattr(mine, "system.posix_acl_access")


def test_a_replaced_store_keeps_its_access_acl(tmp_path):
    store = tmp_path / "a.h5"
    run("run", sweep(tmp_path), "-o", store, "-q", check=0)
    entries = acl((ACL_USER_OBJ, 6, NO_ID), (ACL_GROUP_OBJ, 4, NO_ID), (ACL_GROUP, 4, 4243), (ACL_MASK, 4, NO_ID),
                  (ACL_OTHER, 0, NO_ID))
    set_acl(store, "system.posix_acl_access", entries)
    run("run", sweep(tmp_path, replicates=2), "-o", store, "-q", umask=0o077, check=0)  # growth
    assert os.getxattr(store, "system.posix_acl_access") == entries
    assert mode(store) == 0o640


HOLD = """import sys, time, h5py
f = h5py.File(sys.argv[1], "r")
print("open", flush=True)
time.sleep(60)
"""


@pytest.fixture
def held(tmp_path):
    """A finished store, then open in an h5py process with HDF5's file locking on (a notebook)."""
    store = tmp_path / "held.h5"
    run("run", sweep(tmp_path), "-o", store, "-q", check=0)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store)], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "open"
        yield store
    finally:
        holder.kill()
        holder.wait()


def held_message(store):
    return (f"error: {store} is open in another program that holds HDF5's file lock on it (h5py in a notebook, "
            f"h5dump, HDFView...): close it there, or open it with h5py.File(\"{store}\", \"r\", locking=False), "
            "and run again")


@pytest.mark.parametrize("how", ["resume", "growth", "overwrite", "merge"])
def test_a_store_open_in_h5py_is_neither_resumed_nor_replaced_under_it(tmp_path, held, how):
    store = held
    before = digest(store)
    inode = os.stat(store).st_ino
    if how == "resume":
        proc = run("run", sweep(tmp_path), "-o", store, "-q")
    elif how == "growth":
        proc = run("run", sweep(tmp_path, replicates=2), "-o", store, "-q")
    elif how == "overwrite":
        proc = run("run", sweep(tmp_path), "-o", store, "--overwrite", "-q")
    else:
        shards = [tmp_path / f"s{i}.h5" for i in range(2)]
        for i, s in enumerate(shards):
            run("run", sweep(tmp_path), "-o", s, "--shard", f"{i}/2", "-q", check=0)
        proc = run("merge", store, *shards, "--overwrite")
    assert proc.returncode == 2, proc.stderr
    assert held_message(store) in proc.stderr, proc.stderr
    assert "is another rcsweep writing it" not in proc.stderr
    assert os.stat(store).st_ino == inode
    assert digest(store) == before
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]


@pytest.mark.parametrize("how", ["resume", "growth"])
def test_run_n_refuses_a_store_open_in_h5py_before_mpiexec_starts(tmp_path, held, how):
    """`rcsweep run -n 2` says it as a single process does, before mpiexec starts (no banners)."""
    store = held
    before = digest(store)
    marker = tmp_path / "mpiexec-started"
    mpiexec = tmp_path / "mpiexec.sh"
    mpiexec.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec mpiexec --oversubscribe --allow-run-as-root "$@"\n')
    mpiexec.chmod(0o755)
    proc = run("run", "-n", "2", "--mpiexec", str(mpiexec), sweep(tmp_path, replicates=1 if how == "resume" else 2),
               "-o", store, "-q")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(held_message(store)), proc.stderr
    assert not marker.exists()
    assert digest(store) == before


def test_a_store_open_in_h5py_without_locking_is_replaced(tmp_path):
    """h5py.File(path, "r", locking=False) is what the refusal suggests: then growth goes ahead."""
    store = tmp_path / "free.h5"
    run("run", sweep(tmp_path), "-o", store, "-q", check=0)
    code = HOLD.replace('"r")', '"r", locking=False)')
    holder = subprocess.Popen([sys.executable, "-c", code, str(store)], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "open"
        run("run", sweep(tmp_path, replicates=2), "-o", store, "-q", check=0)
    finally:
        holder.kill()
        holder.wait()
