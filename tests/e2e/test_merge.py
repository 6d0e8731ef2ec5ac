"""rcsweep merge: shards of one sweep (run --shard i/n) in any order give one store equal to a
single run's; a missing, duplicated, unfinished or foreign shard is refused with nothing written."""
import shutil

import h5py
import numpy as np
import pytest

from conftest import DATA, assert_same_results, rcsweep

SWEEP = DATA / "grad.toml"  # gradients (all depths), several mixers: every dataset family


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    single = d / "single.h5"
    rcsweep("run", SWEEP, "-o", single, "-q", check=0)
    paths = []
    for i in range(3):
        paths.append(d / f"shard{i}.h5")
        rcsweep("run", SWEEP, "-o", paths[-1], "--shard", f"{i}/3", "-q", ranks=2 if i == 1 else None, check=0)
    return single, paths


def test_shards_in_any_order_merge_to_the_single_run_store(tmp_path, shards):
    single, paths = shards
    merged = []
    for order in ([0, 1, 2], [2, 0, 1]):
        out = tmp_path / f"merged_{''.join(map(str, order))}.h5"
        proc = rcsweep("merge", out, *[paths[i] for i in order], check=0)
        assert "merged 3 shards" in proc.stderr
        assert_same_results(out, single)
        merged.append(out)
    with h5py.File(merged[0], "r") as a, h5py.File(merged[1], "r") as b:
        assert np.array_equal(a["tasks"][...], b["tasks"][...])  # wall_s and rank too
        assert a.attrs["plan_hash"] == b.attrs["plan_hash"] and a.attrs["finished"] != ""
    info = rcsweep("info", merged[0], check=0)
    assert "100.0% finished" in info.stdout


@pytest.mark.parametrize("case", ["missing", "duplicated", "foreign", "unfinished", "exists"])
def test_bad_shard_sets_are_refused_and_nothing_is_written(tmp_path, shards, case):
    _, paths = shards
    out = tmp_path / "out.h5"
    if case == "missing":
        args, message = [paths[0], paths[2]], "tasks are finished in no shard"
    elif case == "duplicated":
        args, message = [paths[0], paths[1], paths[1], paths[2]], "is finished in both"
    elif case == "foreign":
        other = tmp_path / "other.h5"
        rcsweep("run", DATA / "kill.toml", "-o", other, "-q", "--shard", "0/40", check=0)
        args, message = [paths[0], other, paths[1], paths[2]], f"{other} is from another sweep (plan hash"
    elif case == "unfinished":
        partial = tmp_path / "partial.h5"
        shutil.copy(paths[1], partial)
        with h5py.File(partial, "r+") as f:  # a shard whose run was killed: some tasks pending
            tasks = f["tasks"][...]
            tasks["status"][tasks["status"] == 1] = 0
            f["tasks"][...] = tasks
        args, message = [paths[0], partial, paths[2]], "a shard is missing or not finished"
    else:
        out.write_bytes(b"keep me")
        args, message = list(paths), f"{out} exists; pass --overwrite to replace it"
    proc = rcsweep("merge", out, *args, check=2)
    assert message in proc.stderr, proc.stderr
    if case == "exists":
        assert out.read_bytes() == b"keep me"
        rcsweep("merge", out, *paths, "--overwrite", check=0)
    else:
        assert not out.exists()
