"""Gradient norms through the command line: bitwise across rank counts and after a kill, the two
methods agree on linear stacks, and a wrong method is a config error."""
import re

import h5py
import numpy as np

from conftest import DATA, assert_same_results, rcsweep
from test_kill_resume import run_and_kill
import workload

LINEAR = """[sweep]
name = "linear"
seed = 9
replicates = 2
[model]
mixer = "markov"
T = 16
d = 12
depth = 5
input = "gaussian"
[axes]
gap_fix = ["none", "perp"]
[output]
gradients = "all"
grad_method = "{method}"
grad_probes = 200
"""


def test_gradient_store_layout_and_bitwise_across_ranks(tmp_path):
    stores = []
    for ranks in (None, 2, 3):
        out = tmp_path / f"g{ranks}.h5"
        rcsweep("run", DATA / "grad.toml", "-o", out, "-q", ranks=ranks, check=0)
        stores.append(out)
    for other in stores[1:]:
        assert_same_results(stores[0], other)
    with h5py.File(stores[0], "r") as f:
        g = f["grad"]
        assert g.attrs["stored"] == "all" and g.attrs["method"] == "auto" and g.attrs["probes"] == 6
        n, L = f["tasks"].shape[0], f.attrs["max_depth"]
        assert g["log10_g"].shape == (n, L) and g["log10_g_all"].shape == (n, L, L)
        lg, se, allg = g["log10_g"][...], g["stderr"][...], g["log10_g_all"][...]
        assert np.all(np.isfinite(lg)) and np.all(se >= 0)
        np.testing.assert_array_equal(lg, allg[:, L - 1, :])  # the last output depth
        for depth in range(1, L + 1):  # g_{L,l} exists for l <= L only
            assert np.all(np.isfinite(allg[:, depth - 1, :depth]))
            assert np.all(np.isnan(allg[:, depth - 1, depth:]))
        mixer = f["points"]["mixer"][f["tasks"]["point"][...]].astype(str)
        gap = f["points"]["gap_fix"][f["tasks"]["point"][...]].astype(str)
        exact = (mixer == "markov") | (mixer == "lti")  # the linear stacks of grad.toml (lti: lambda 0)
        assert np.all(se[exact] == 0) and np.all(se[~exact] > 0)
        # Mind the Gap Fig. 5: the Markov gradient grows with depth without the fix, not with perp
        # (T = 12, d = 16: by log10 d = 1.2 against log10(d / T) = 0.12 per layer)
        first = allg[:, :, 0]
        slope = (first[:, L - 1] - first[:, 1]) / (L - 2)
        assert np.all(slope[(mixer == "markov") & (gap == "none")] > 0.9)
        assert np.all(np.abs(slope[(mixer == "markov") & (gap == "perp")]) < 0.45)


def test_hutchinson_agrees_with_exact_through_the_cli(tmp_path):
    values = {}
    for method in ("exact", "hutchinson"):
        sweep = tmp_path / f"{method}.toml"
        sweep.write_text(LINEAR.format(method=method))
        out = tmp_path / f"{method}.h5"
        rcsweep("run", sweep, "-o", out, "-q", check=0)
        with h5py.File(out, "r") as f:
            assert f["grad"].attrs["method"] == method
            values[method] = (f["grad/log10_g_all"][...], f["grad/stderr_all"][...])
    exact, zero = values["exact"]
    hutch, se = values["hutchinson"]
    known = np.isfinite(exact)
    assert np.all(zero[known] == 0) and np.all(se[known] > 0) and np.all(se[known] < 0.05)
    z = np.abs(hutch[known] - exact[known]) / se[known]
    assert np.max(z) < 4.5, np.max(z)
    assert 0.3 < np.mean(z) < 1.2  # |N(0,1)| has mean 0.8: the stderr is neither too small nor too big


def test_exact_method_on_a_nonlinear_point_is_a_config_error(tmp_path):
    sweep = tmp_path / "bad.toml"
    sweep.write_text(LINEAR.format(method="exact").replace('mixer = "markov"', 'mixer = "softmax"'))
    out = tmp_path / "bad.h5"
    proc = rcsweep("run", sweep, "-o", out, check=2)
    assert re.search(r"output\.grad_method.*linear stack", proc.stderr), proc.stderr
    assert not out.exists()
    rcsweep("plan", sweep, check=2)


def test_killed_gradient_run_resumes_to_the_same_store(tmp_path):
    sweep = tmp_path / "grad_long.toml"  # grad.toml with about 1.5 s of computing on one core here
    sweep.write_text(workload.sized("grad", (DATA / "grad.toml").read_text(), "replicates", 1.5, lo=8, probe=32))
    reference = tmp_path / "ref.h5"
    rcsweep("run", sweep, "-o", reference, "-q", check=0)
    store = tmp_path / "killed.h5"
    # killed once rank 0 reports 40 % of the work done: mid-run on any machine speed
    killed, _ = run_and_kill(["run", sweep, "-o", store], 2, ("work", 0.4))
    assert killed, "finished before the kill"
    with h5py.File(store, "r") as f:
        done = f["tasks"]["status"][...] == 1
        assert 0 < done.sum() < done.size, "kill should land mid-run"
        assert np.all(np.isfinite(f["grad/log10_g"][...][done]))  # a done task has its gradients
    rcsweep("run", sweep, "-o", store, "-q", ranks=2, check=0)
    assert_same_results(store, reference)
