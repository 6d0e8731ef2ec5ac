"""Sweep.submit (rcsweep_tools.api) on the test's one-node Slurm: the job script `plan --emit slurm`
writes, submitted with sbatch; Job.wait returns the store, equal bitwise to a direct run."""
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
