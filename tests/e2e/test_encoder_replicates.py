"""Encoder sweeps use the replicate machinery of the stack unchanged (docs/ENCODERS.md "In a
sweep": replicate r is excerpt r): shards of a sweep merge into the store of a single run, bitwise;
adaptive replicates draw excerpts in order and stop at the rule; a rule whose max exceeds the
token file's excerpts is refused before any work."""
import h5py
import numpy as np

from conftest import assert_same_results, rcsweep
from test_encoder_sweep import EXCERPTS, write_sweep


def test_shards_merge_to_the_single_run(tmp_path):
    sweep = write_sweep(tmp_path, "bert_f32")
    single = tmp_path / "single.h5"
    rcsweep("run", sweep, "-o", single, "-q", check=0)
    shards = [tmp_path / f"shard{i}.h5" for i in range(2)]
    for i, shard in enumerate(shards):
        rcsweep("run", sweep, "-o", shard, "-q", "--shard", f"{i}/2", check=0)
    merged = tmp_path / "merged.h5"
    rcsweep("merge", merged, *reversed(shards), check=0)
    assert_same_results(single, merged)


ADAPTIVE = """
[sweep.replicates]
min = 2
max = {max}
step = 1
targets = [{{ metric = "sr_x", layer = "last", rel_se = {rel_se} }}]
"""


def adaptive_sweep(tmp_path, max_replicates, rel_se):
    sweep = write_sweep(tmp_path, "bert_f32")
    text = sweep.read_text().replace("replicates = 3\n", "")
    head, rest = text.split("[model]", 1)
    sweep.write_text(head + ADAPTIVE.format(max=max_replicates, rel_se=rel_se) + "[model]" + rest)
    return sweep


def test_adaptive_replicates_stop_at_the_rule(tmp_path):
    """A loose target stops every point at min = 2 excerpts; an unreachable one runs the third
    excerpt at every point whose first two differ (a point whose values agree to rounding, as
    collapsed stacks do, has an SE within any target)."""
    for rel_se in (1e9, 1e-12):
        folder = tmp_path / f"rel_se_{rel_se}"
        folder.mkdir()
        store = folder / "adaptive.h5"
        rcsweep("run", adaptive_sweep(folder, len(EXCERPTS), rel_se), "-o", store, "-q", check=0)
        with h5py.File(store, "r") as f:
            tasks, sr_x = f["tasks"][...], f["layers"]["sr_x"][...]
        done = tasks["status"] == 1
        assert np.all(done | (tasks["status"] == 4)), tasks  # done or not needed
        ran = np.bincount(tasks["point"][done].astype(np.int64))
        points = np.arange(len(ran))
        first_two_differ = np.array([abs(sr_x[p * len(EXCERPTS), -1] - sr_x[p * len(EXCERPTS) + 1, -1])
                                     > 1e-9 * abs(sr_x[p * len(EXCERPTS), -1]) for p in points])
        expected = np.where(first_two_differ, 3, 2) if rel_se < 1 else np.full(len(ran), 2)
        assert np.array_equal(ran, expected), (ran, expected)
        assert first_two_differ.any()


def test_a_rule_beyond_the_excerpts_is_refused(tmp_path):
    store = tmp_path / "adaptive.h5"
    proc = rcsweep("run", adaptive_sweep(tmp_path, len(EXCERPTS) + 1, 0.1), "-o", store, "-q", check=2)
    assert "sweep.replicates" in proc.stderr and "excerpt" in proc.stderr, proc.stderr
    assert not store.exists()
