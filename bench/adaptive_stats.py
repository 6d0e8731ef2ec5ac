"""Helpers of bench/run_adaptive_bench.sh (run with /usr/bin/python3: h5py, numpy).

  target STORE METRIC           the worst (largest) relative standard error of the mean of METRIC
                                at the last layer over the points of STORE (finite values, n >= 2)
  adaptive SWEEP REL_SE MIN MAX STEP METRIC
                                SWEEP's text with `replicates = N` replaced by an adaptive rule
                                whose one target is REL_SE on METRIC at the last layer
  report STORE METRIC           tasks computed, replicates per point, worst relative SE
"""
import sys

import h5py
import numpy as np


def per_point(store, metric):
    """Per point: the values of `metric` at the last layer of its done or diverged replicates."""
    with h5py.File(store, "r") as f:
        tasks = f["tasks"][...]
        values = f["layers"][metric][:, -1]
    ran = np.isin(tasks["status"], [1, 3])
    out = {}
    for p in np.unique(tasks["point"]):
        mine = (tasks["point"] == p) & ran
        out[int(p)] = values[mine]
    return out, int(np.sum(ran))


def rel_se(v):
    v = v[np.isfinite(v)]
    if len(v) < 2 or np.mean(v) == 0:
        return np.nan
    return np.std(v, ddof=1) / np.sqrt(len(v)) / abs(np.mean(v))


def worst(store, metric):
    points, _ = per_point(store, metric)
    return np.nanmax([rel_se(v) for v in points.values()])


def main(argv):
    cmd = argv[0]
    if cmd == "target":
        print(f"{worst(argv[1], argv[2]):.6g}")
    elif cmd == "adaptive":
        sweep, target, lo, hi, step, metric = argv[1:]
        text = open(sweep).read()
        lines = [l for l in text.splitlines() if not l.startswith("replicates = ")]
        assert len(lines) == len(text.splitlines()) - 1, "no 'replicates = N' line"
        rule = (f"\n[sweep.replicates]\nmin = {lo}\nmax = {hi}\nstep = {step}\n"
                f'targets = [{{ metric = "{metric}", layer = "last", rel_se = {target} }}]\n')
        print("\n".join(lines) + "\n" + rule)
    elif cmd == "report":
        points, ran = per_point(argv[1], argv[2])
        n = np.array([len(v) for v in points.values()])
        counts = ", ".join(f"{k}: {c}" for k, c in zip(*np.unique(n, return_counts=True)))
        print(f"{ran} tasks computed; replicates per point (n: points) {counts}; "
              f"worst relative SE of {argv[2]} {worst(argv[1], argv[2]):.4g}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
