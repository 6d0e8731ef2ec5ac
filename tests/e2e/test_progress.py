"""Progress on long runs: a single task of many layers shows its progress and an ETA before it
finishes (rank 0 counts its bundle's layers), and the final line says all tasks are done."""
import os
import re

from conftest import rcsweep
import workload

SWEEP = """
[sweep]
name = "progress"
seed = 1
replicates = 1
[model]
mixer = "softmax"
input = "sphere"
T = 512
d = 256
depth = 80
norm = "layernorm"
lambda = 1.0
"""


def test_one_long_task_reports_progress_within_the_task(tmp_path):
    sweep = tmp_path / "p.toml"  # depth for about 1 s here: some 20 progress lines at 0.05 s
    sweep.write_text(workload.sized("progress", SWEEP, "depth", 1.0, lo=10, probe=16))
    env = dict(os.environ, RCSWEEP_PROGRESS_INTERVAL="0.05")
    proc = rcsweep("run", sweep, "-o", tmp_path / "p.h5", check=0, env=env, timeout=600)
    lines = re.findall(r"\[rcsweep\] (\d+)/1 tasks, +([0-9.]+)% of work, elapsed \S+, ETA (\S+)", proc.stderr)
    partial = [(float(p), eta) for done, p, eta in lines if done == "0" and 0.0 < float(p) < 100.0]
    assert partial, proc.stderr  # progress inside the one task, before it is done
    assert all(eta != "?" for _, eta in partial)
    fractions = [p for p, _ in partial]
    assert fractions == sorted(fractions)  # never goes back
    assert lines[-1][0] == "1" and float(lines[-1][1]) == 100.0
