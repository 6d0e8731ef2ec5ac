"""Sweep.submit (rcsweep_tools.api) on the test's one-node Slurm: the job script `plan --emit slurm`
writes, submitted with sbatch; Job.wait returns the store, equal bitwise to a direct run; with
shards=3 an array of 3 elements whose merge job Job.wait waits for."""
import sys

from conftest import BIN, SOURCE, assert_same_results, e2e

sys.path.insert(0, str(SOURCE / "scripts"))
from rcsweep_tools import Sweep  # noqa: E402


def test_submit_then_wait_returns_the_store(slurm, monkeypatch, tmp_path):
    for k, v in slurm.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("RCSWEEP_BIN", BIN)
    sweep = Sweep("submitted", seed=3, replicates=2, model={"mixer": "softmax", "depth": 3, "T": 8, "d": 8},
                  axes={"lambda": [0.0, 1.0]})
    work = slurm.root / "work"
    job = sweep.submit(work / "submitted.h5", nodes=1, cores=2, hours=0.1)
    ds = job.wait(timeout=300)
    assert job.state() == "COMPLETED"
    assert int((ds.status == 1).sum()) == 4
    direct = tmp_path / "direct.h5"
    e2e.rcsweep("run", sweep.write(tmp_path / "direct.toml"), "-o", direct, "-q", check=0)
    assert_same_results(work / "submitted.h5", direct)


def test_submit_an_array_of_asked_shards_then_wait_for_its_merge(slurm, monkeypatch, tmp_path):
    for k, v in slurm.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("RCSWEEP_BIN", BIN)
    sweep = Sweep("sharded", seed=5, replicates=3, model={"mixer": "softmax", "depth": 3, "T": 8, "d": 8},
                  axes={"lambda": [0.0, 1.0]})
    work = slurm.root / "work"
    job = sweep.submit(work / "sharded.h5", nodes=1, cores=2, hours=0.085, shards=3)
    assert job.shards == 3 and "#SBATCH --array=0-2" in job.script.read_text()
    ds = job.wait(timeout=300)
    merge = job.merge_job()
    assert merge is not None and job.state() == "COMPLETED"
    assert (work / f"rcsweep-merge-{merge}.out").read_text().count("merged 3 shards") == 1
    assert int((ds.status == 1).sum()) == 6
    direct = tmp_path / "direct.h5"
    e2e.rcsweep("run", sweep.write(tmp_path / "direct.toml"), "-o", direct, "-q", check=0)
    assert_same_results(work / "sharded.h5", direct)
