"""Bundles cut into slices across ranks (docs/SCALING.md, "Units of work"): `plan` and `run` print
the expected rank utilisation and warn when ranks would idle; a scan of lambda (one bundle) runs on
both ranks of `mpiexec -n 2`, bitwise equal to one rank."""
import re

import h5py
import numpy as np

from conftest import assert_same_results, rcsweep

LAMBDAS = ", ".join(f"{-1 + 0.2 * i:.1f}" for i in range(16))


def scan(tmp_path, lambdas=LAMBDAS, depth=64):
    """A scan of lambda at T = d = 128, one replicate: one bundle (about 1.5 s on one core)."""
    path = tmp_path / "scan.toml"
    path.write_text(f"""
[sweep]
name = "scan"
seed = 3
replicates = 1
[model]
mixer = "softmax"
T = 128
d = 128
depth = {depth}
norm = "layernorm"
[axes]
lambda = [{lambdas}]
""")
    return path


def test_plan_prints_the_expected_utilisation_of_its_ranks(tmp_path):
    out = rcsweep("plan", scan(tmp_path), "--cores", "2", check=0).stdout
    assert "bundles       1 " in out
    assert "mpiexec -n 2 " in out
    assert "ranks 2: expected utilisation " in out
    assert re.search(r"\(units: \d+ slices of 1 bundle", out), out
    assert "warning" not in out


def test_plan_warns_when_ranks_would_idle(tmp_path):
    out = rcsweep("plan", scan(tmp_path, "0.0, 0.5, 1.0", depth=4), "--cores", "8", check=0).stdout
    assert "mpiexec -n 3 " in out  # no more ranks than tasks
    uneven = tmp_path / "uneven.toml"
    uneven.write_text("""
[sweep]
name = "uneven"
seed = 1
replicates = 1
[model]
depth = 4
[[zip]]
T = [16, 24, 32, 256]
d = [16, 24, 32, 256]
""")
    out = rcsweep("plan", uneven, "--cores", "4", check=0).stdout
    assert "ranks 4: expected utilisation " in out
    warning = [line for line in out.splitlines() if line.startswith("warning")]
    assert warning and "ranks will idle" in warning[0] and "keeps" in warning[0], out


def test_run_warns_when_there_are_fewer_tasks_than_ranks(tmp_path):
    proc = rcsweep("run", scan(tmp_path, "0.0, 1.0", depth=2), "-o", tmp_path / "s.h5", ranks=3, check=0)
    assert "[rcsweep] ranks 3: expected utilisation " in proc.stderr
    assert "[rcsweep] warning: only 2 tasks for 3 ranks: 1 rank will have nothing to do" in proc.stderr
    assert "run with -n 2" in proc.stderr


def test_one_bundle_runs_on_both_ranks_bitwise_equal_to_one_rank(tmp_path):
    sweep = scan(tmp_path)
    one, two = tmp_path / "np1.h5", tmp_path / "np2.h5"
    rcsweep("run", sweep, "-o", one, "-q", ranks=1, check=0)
    proc = rcsweep("run", sweep, "-o", two, ranks=2, check=0)
    assert "16 tasks in 1 bundles to run on 2 ranks" in proc.stderr
    assert re.search(r"\[rcsweep\] ranks 2: expected utilisation \d+% \(units: \d+ slices of 1 bundle", proc.stderr)
    assert "warning" not in proc.stderr
    with h5py.File(two, "r") as f:
        ranks = f["tasks"]["rank"]
    assert set(np.unique(ranks)) == {0, 1}
    assert_same_results(one, two)
