"""rcsweep run --dump-weights and scripts/rcsweep_recompute.py: small sweeps of every
mixer and component are dumped through the command line (some under MPI), recomputed by the
independent NumPy script and must agree with the store to 1e-10; a too-large dump is refused
before any work; the script must catch a corrupted weight, mixer, input or metric."""
import shutil
import subprocess

import h5py
import numpy as np
import pytest

from conftest import SOURCE, rcsweep

SCRIPT = SOURCE / "scripts" / "rcsweep_recompute.py"
TOL = 1e-10

# Every mixer, every gap_fix, every norm, the gate, the MLP, several heads, lambda != 0, value
# inits, carried (power-of-two rescaled) and uncarried stacks.
SWEEPS = {
    # attention: softmax with 2 heads and perp, relu, sigmoid; outliers; layernorm, rms
    "attention": ("""
[sweep]
name = "attention"
seed = 7
replicates = 2

[model]
T = 8
d = 8
depth = 3
value_scale = "inv_sqrt_d"

[axes]
mixer = ["softmax", "relu", "sigmoid"]

[[zip]]
heads = [1, 2, 1, 1]
d_qk = [0, 4, 0, 0]
gap_fix = ["none", "perp", "outliers", "none"]
norm = ["none", "rms", "layernorm", "rms"]
value_init = ["gaussian", "orthogonal", "identity", "gaussian"]
lambda = [0.0, 0.5, 1.0, -0.7]
gate = ["none", "none", "none", "silu"]
""", 2),
    # input-independent mixers without a norm (carried at unit scale), markov with outliers, MLP
    "linear": ("""
[sweep]
name = "linear"
seed = 3
replicates = 1

[model]
T = 6
d = 6
depth = 4
input = "sphere"
alpha = 0.9
state_dim = 4

[axes]
mixer = ["markov", "identity", "uniform", "lti"]

[[zip]]
gap_fix = ["none", "perp", "outliers"]
lambda = [0.5, 1.0, 0.2]
heads = [1, 2, 1]
mlp = ["none", "relu", "none"]
""", None),
    # state-space mixers: ssd with gaussian and identity B, C; s4d; gate, MLP, norms
    "ssm": ("""
[sweep]
name = "ssm"
seed = 11
replicates = 1

[model]
T = 10
d = 6
depth = 3
input = "gaussian"
alpha = 0.8
state_dim = 4

[axes]
mixer = ["ssd", "s4d"]

[[zip]]
bc_init = ["gaussian", "identity", "gaussian", "gaussian"]
norm = ["rms", "none", "layernorm", "none"]
gate = ["none", "silu", "none", "none"]
mlp = ["relu", "none", "none", "relu"]
lambda = [1.0, 0.5, 0.0, 0.3]
input_scale = [1.0, 0.5, 1.0, 1.0]
""", 2),
    # a mixer written in the sweep file
    "matrix": ("""
[sweep]
name = "matrix"
seed = 5
replicates = 2

[model]
mixer = "matrix"
mixer_matrix = [[0.5, 0.1, 0.0, 0.2, 0.2], [0.3, 0.3, 0.1, 0.0, 0.3], [0.0, 0.2, 0.6, 0.1, 0.1],
                [0.25, 0.25, 0.25, 0.25, 0.0], [1.0, -0.5, 0.2, 0.1, 0.2]]
T = 5
d = 6
depth = 4

[axes]
value_init = ["identity", "gaussian"]

[[zip]]
gap_fix = ["none", "perp"]
norm = ["none", "rms"]
lambda = [0.5, -0.3]
""", None),
}
EXPECTED_MIXERS = {"softmax", "relu", "sigmoid", "markov", "identity", "uniform", "ssd", "lti", "matrix", "s4d"}


def recompute(store, *extra):
    """Run the recomputation script with Debian's interpreter (it has h5py and numpy)."""
    return subprocess.run(["/usr/bin/python3", str(SCRIPT), str(store), *extra], capture_output=True, text=True,
                          timeout=300)


def run_dump(tmp_path, name, ranks, *extra):
    text, _ = SWEEPS[name]
    sweep = tmp_path / f"{name}.toml"
    sweep.write_text(text)
    store = tmp_path / f"{name}.h5"
    proc = rcsweep("run", sweep, "-o", store, "--dump-weights", *extra, ranks=ranks, check=0)
    assert "--dump-weights: /dump holds" in proc.stderr
    return store


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """Every sweep of SWEEPS run once with --dump-weights (the MPI ones on 2 ranks)."""
    base = tmp_path_factory.mktemp("dump")
    return {name: run_dump(base, name, ranks) for name, (_, ranks) in SWEEPS.items()}


def test_sweeps_cover_every_mixer_and_component(dumped):
    mixers, parts = set(), set()
    for store in dumped.values():
        with h5py.File(store, "r") as f:
            pts = f["points"][...]
            for p in pts:
                mixers.add(p["mixer"].decode())
                parts |= {f"norm={p['norm'].decode()}", f"gap_fix={p['gap_fix'].decode()}",
                          f"gate={p['gate'].decode()}", f"mlp={p['mlp'].decode()}",
                          f"bc_init={p['bc_init'].decode()}"}
                if p["heads"] > 1:
                    parts.add("heads>1")
                if p["lambda"] != 0:
                    parts.add("lambda!=0")
    assert mixers == EXPECTED_MIXERS
    for want in ("norm=rms", "norm=layernorm", "norm=none", "gap_fix=perp", "gap_fix=outliers", "gate=silu",
                 "mlp=relu", "bc_init=identity", "bc_init=gaussian", "heads>1", "lambda!=0"):
        assert want in parts


@pytest.mark.parametrize("name", list(SWEEPS))
def test_dump_holds_every_task_and_its_weights(dumped, name):
    with h5py.File(dumped[name], "r") as f:
        n_tasks, L = int(f.attrs["n_tasks"]), int(f.attrs["max_depth"])
        assert (f["tasks"]["status"][...] == 1).all()
        assert sorted(f["dump"]) == sorted(f"task_{t}" for t in range(n_tasks))
        assert int(f["dump"].attrs["tasks"]) == n_tasks
        for t in range(n_tasks):
            g = f["dump"][f"task_{t}"]
            p = f["points"][int(f["tasks"]["point"][t])]
            T, d = int(p["T"]), int(p["d"])
            assert int(g.attrs["layers"]) == L
            for l in range(L + 1):
                assert g[f"X_{l}"].shape == (T, d)
                assert "log2_scale" in g[f"X_{l}"].attrs
            layer = g["layer_1"]
            mixer = p["mixer"].decode()
            if mixer == "s4d":
                assert layer["s4d_K"].shape == (T, d) and "M_h0" not in layer
            else:
                for h in range(int(p["heads"])):
                    assert layer[f"M_h{h}"].shape == (T, T)
                    assert layer[f"W_V_h{h}"].shape == (d, d)
            if mixer in ("softmax", "relu", "sigmoid"):
                d_qk = int(p["d_qk"]) or d
                assert layer["W_Q_h0"].shape == (d, d_qk) and layer["W_K_h0"].shape == (d, d_qk)
            assert ("W_G" in layer) == (p["gate"].decode() == "silu")
            assert ("W_1" in layer) == (p["mlp"].decode() == "relu")
            assert ("M_raw_h0" in layer) == (p["gap_fix"].decode() == "outliers" and
                                             mixer in ("softmax", "relu", "sigmoid", "ssd"))
            assert ("W_B_h0" in layer) == (mixer == "ssd" and p["bc_init"].decode() == "gaussian")


@pytest.mark.parametrize("name", list(SWEEPS))
def test_numpy_recomputation_agrees_to_1e_10(dumped, name):
    proc = recompute(dumped[name], "--tol", str(TOL))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("OK:"), proc.stdout
    with h5py.File(dumped[name], "r") as f:
        n_tasks = int(f.attrs["n_tasks"])
    assert f"OK: {n_tasks} dumped tasks" in proc.stdout


def test_carried_stacks_are_dumped_as_carried(dumped):
    """Without a norm a linear stack is carried at unit scale; the dump keeps the exponent."""
    with h5py.File(dumped["linear"], "r") as f:
        scales = [int(f["dump"][g][f"X_{l}"].attrs["log2_scale"]) for g in f["dump"] for l in range(5)]
        X = f["dump/task_0/X_4"][...]
    assert any(s != 0 for s in scales)
    assert 0.5 <= np.abs(X).max() < 1.0


def test_diverged_tasks_get_no_dump(tmp_path):
    sweep = tmp_path / "div.toml"
    # a selective SSM without norm grows doubly exponentially from a large input and overflows;
    # from a small one it stays finite
    sweep.write_text("""
[sweep]
name = "div"
seed = 1

[model]
mixer = "ssd"
bc_init = "identity"
input = "gaussian"
alpha = 0.5
lambda = 1.0
T = 4
d = 4
depth = 12

[axes]
input_scale = [3.0, 0.1]
""")
    store = tmp_path / "div.h5"
    proc = rcsweep("run", sweep, "-o", store, "--dump-weights", "-q")
    with h5py.File(store, "r") as f:
        status = f["tasks"]["status"][...]
        dumped_tasks = sorted(int(g[5:]) for g in f["dump"])
    assert 3 in status and 1 in status, status  # one diverged, one done
    assert proc.returncode == 0, proc.stderr  # a diverged task is an outcome, not a failure
    assert dumped_tasks == [t for t in range(len(status)) if status[t] == 1]
    assert recompute(store).returncode == 0


def test_too_large_dump_is_refused_before_any_work(tmp_path):
    sweep = tmp_path / "big.toml"
    sweep.write_text("""
[sweep]
name = "big"
replicates = 8

[model]
T = 512
d = 512
depth = 6
""")
    store = tmp_path / "big.h5"
    proc = rcsweep("run", sweep, "-o", store, "--dump-weights", ranks=2, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--dump-weights" in proc.stderr and "256.0 MiB" in proc.stderr
    assert proc.stderr.count("error:") == 1  # reported once, not per rank
    assert not store.exists()


def test_help_documents_the_flag():
    out = rcsweep("run", "--help", check=0).stdout
    assert "--dump-weights" in out and "256 MiB" in out
    proc = recompute("--help")
    assert proc.returncode == 0 and "--tol" in proc.stdout


def test_dump_of_a_finished_store_replaces_the_old_dump(tmp_path):
    text, _ = SWEEPS["matrix"]
    sweep = tmp_path / "m.toml"
    sweep.write_text(text)
    store = tmp_path / "m.h5"
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    assert recompute(store).returncode == 2  # no /dump yet
    with h5py.File(store, "r") as f:
        assert "dump" not in f
    for _ in range(2):  # nothing left to compute: the dump alone, then replaced
        rcsweep("run", sweep, "-o", store, "-q", "--dump-weights", check=0)
        proc = recompute(store)
        assert proc.returncode == 0, proc.stdout
    with h5py.File(store, "r") as f:
        assert len(f["dump"]) == int(f.attrs["n_tasks"])


def corrupt(path, fn):
    with h5py.File(path, "r+") as f:
        fn(f)


def scale_entry(f, name, factor):
    ds = f[name]
    a = ds[...]
    a.flat[1] *= factor
    ds[...] = a


@pytest.mark.parametrize("name,what,column", [
    ("attention", lambda f: scale_entry(f, "dump/task_3/layer_2/W_Q_h1", 1 + 1e-7), "X"),  # recomputed mixer
    ("ssm", lambda f: scale_entry(f, "dump/task_0/layer_1/W_C_h0", 1 + 1e-7), "X"),  # ssd weights
    ("linear", lambda f: scale_entry(f, "dump/task_0/layer_3/M_h0", 1 + 1e-7), "X"),  # a markov mixer
    ("linear", lambda f: scale_entry(f, "dump/task_4/layer_2/M_h1", 1 + 1e-7), "M"),  # identity is not I
    ("ssm", lambda f: scale_entry(f, "dump/task_7/layer_3/s4d_K", 1 + 1e-7), "X"),
    ("matrix", lambda f: scale_entry(f, "dump/task_5/X_0", 1 + 1e-7), "X"),  # the input
    ("attention", lambda f: scale_entry(f, "dump/task_6/layer_1/W_G", 1 + 1e-7), "X"),  # the gate
    ("linear", lambda f: scale_entry(f, "dump/task_1/layer_4/W_1", 1 + 1e-7), "X"),  # the MLP
    ("matrix", lambda f: f["layers/sr_cov"].__setitem__((2, 3), f["layers/sr_cov"][2, 3] * (1 + 1e-8)),
     "sr_cov"),  # a stored metric
])
def test_recomputation_detects_a_corrupted_dump(dumped, tmp_path, name, what, column):
    store = tmp_path / "corrupt.h5"
    shutil.copy(dumped[name], store)
    corrupt(store, what)
    proc = recompute(store)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = [l for l in proc.stdout.splitlines() if l.startswith("FAIL task")]
    assert len(fails) == 1, proc.stdout
    assert f" {column} " in fails[0], fails[0]
