"""Mamba-2 blocks in a sweep (docs/MAMBA2.md "In a sweep", docs/CONFIG.md "Mamba-2 blocks") through
the command line: a tiny mamba_ssm checkpoint (tests/python/tiny_mamba2.py: d_model 32, 2 layers,
d_state 8, 4 heads of 16 channels) and a token file written here.

- A random-init sweep over lambda (negative too) x depth (beyond the config's n_layer) x gate x
  norm x gated_norm on a Gaussian input: the store is bitwise the same on 1 and 2 MPI ranks, every
  task done, and the ablations give different numbers.
- A checkpoint sweep reading tokens over lambda x gated_norm x gate x norm: every layer's metrics (the signal
  X_l and head 0's mixer matrix M_0) equal those computed in NumPy from the independent reference
  forward (tests/python/mamba2_reference.py) of the same folder; the random init's too, on the
  weights the test tool mamba2_forward draws and saves (--random SEED DRAW --save-weights).
- lambda_layers: each layer its own lambda, as the reference with that profile.
- Refusals before any work, exit code 2, naming the key: norm = "layernorm", a checkpoint deeper
  than n_layer, a missing model folder, d other than d_model, gradients."""
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import BIN, SOURCE, assert_same_results, rcsweep

sys.path.insert(0, str(SOURCE / "tests" / "python"))
import mamba2_reference  # noqa: E402
import tiny_encoders  # noqa: E402
import tiny_mamba2  # noqa: E402

TOOL = Path(os.environ.get("RCSWEEP_MAMBA2_FORWARD", Path(BIN).parent / "tests" / "python" / "mamba2_forward"))
CASE = "mamba2_f64"  # d_model 32, n_layer 2, d_state 8, headdim 16, expand 2: 4 heads, 1 group
SEED, T, REPLICATES = 7, 10, 3
# Token ids below the tiny model's vocabulary of 50; longer than T.
EXCERPTS = [[3, 41, 17, 17, 0, 8, 29, 49, 12, 5, 30], [11, 2, 36, 44, 7, 7, 19, 23, 40, 1, 6, 9],
            [48, 15, 33, 4, 26, 38, 10, 13, 21, 45]]


def write_model(folder):
    cfg = tiny_mamba2.write_case(folder / "model", CASE)
    tiny_encoders.write_tokens(folder / "tokens.txt", EXCERPTS)
    return cfg


def write_sweep(folder, name, model, axes, output="", replicates=REPLICATES):
    sweep = folder / f"{name}.toml"
    sweep.write_text(f"""[sweep]
name = "{name}"
seed = {SEED}
replicates = {replicates}
[model]
block = "mamba2"
model_folder = "model"
T = {T}
d = 32
{model}
[axes]
{axes}
[output]
mixer_spectra = "last"
{output}
""")
    return sweep


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def stored(store, keys):
    """{(values of `keys`..., replicate): {metric: [layer values]}} of done tasks, and the last
    layer's mixer spectra."""
    out, spectra = {}, {}
    with h5py.File(store, "r") as f:
        points, tasks = f["points"][...], f["tasks"][...]
        layers = {name: f["layers"][name][...] for name in f["layers"]}
        m_sv, m_offset = f["spectra"]["m_sv"][...], f["spectra"]["m_offset"][...]
        depth = int(f["axes"]["layer"][-1])
    for task in tasks:
        p = points[task["point"]]
        key = tuple(text(p[k]) if p.dtype[k].kind == "S" else float(p[k]) for k in keys) + (int(task["replicate"]),)
        assert task["status"] == 1, task  # done
        out[key] = {name: values[task["id"]] for name, values in layers.items()}
        offset = m_offset[task["id"]][depth]
        spectra[key] = m_sv[offset:offset + T]
    return out, spectra


def signal_metrics(x):
    """MODELS.md "Metrics" of a signal, from its SVD."""
    s = np.linalg.svd(x, compute_uv=False)
    centred = x - x.mean(axis=0, keepdims=True)
    fro = np.linalg.norm(x)
    return {"fro": fro, "log_fro": math.log(fro), "s1": s[0], "s2": s[1], "sr_cov": (s**4).sum() / s[0]**4,
            "sr_x": (s**2).sum() / s[0]**2, "mu": np.linalg.norm(centred), "mu_rel": np.linalg.norm(centred) / fro}


def mixer_metrics(m):
    s = np.linalg.svd(m, compute_uv=False)
    return {"m_s1": s[0], "m_s2": s[1], "m_gap": s[0] / s[1], "m_fro": np.linalg.norm(m)}


def reference_rows(model, xs, norm=True):
    """Per layer the metrics the store should hold, from the reference forward's hidden states xs:
    X_l's, and head 0's mixer matrix of the block's normed input."""
    rows = [signal_metrics(xs[0])]
    for layer in range(len(xs) - 1):
        u = model.norm(f"backbone.layers.{layer}.norm.weight", xs[layer], norm)
        rows.append({**signal_metrics(xs[layer + 1]), **mixer_metrics(model.mixer_matrices(layer, u)[0])})
    return rows


def compare(rows, metrics, where):
    for layer, expected in enumerate(rows):
        for name, value in expected.items():
            got = metrics[name][layer]
            assert got == pytest.approx(value, rel=1e-9, abs=1e-12), f"{where}: {name} at layer {layer}"
    for name in ("m_s1", "m_s2", "m_gap", "m_fro"):
        assert np.isnan(metrics[name][0]), f"{where}: {name} at layer 0 is not NaN"


# ---- random init: ranks, ablations ---------------------------------------------------------------

RANDOM_AXES = """lambda = [1.0, 0.0, -0.5]
depth = [1, 3]
gate = ["silu", "none"]
norm = ["rms", "none"]
gated_norm = [true, false]"""


@pytest.fixture(scope="module")
def random_sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mamba2_random")
    write_model(folder)
    sweep = write_sweep(folder, "mamba2_random", 'input = "gaussian"', RANDOM_AXES, replicates=2)
    one, two = folder / "one.h5", folder / "two.h5"
    rcsweep("run", sweep, "-o", one, "-q", check=0)
    rcsweep("run", sweep, "-o", two, "-q", ranks=2, check=0)
    return folder, sweep, one, two


def test_random_init_two_ranks_give_the_bits_of_one(random_sweep):
    _, _, one, two = random_sweep
    assert_same_results(one, two)


def test_random_init_every_task_done_and_the_ablations_differ(random_sweep):
    _, _, one, _ = random_sweep
    metrics, spectra = stored(one, ("lambda", "gate", "norm", "gated_norm"))
    assert len(metrics) == 3 * 2 * 2 * 2 * 2
    published = metrics[(1.0, "silu", "rms", "true", 0)]
    assert np.isfinite(published["sr_cov"][:4]).all() and len(published["sr_cov"]) == 4  # layers 0..3
    for key, m in metrics.items():
        same_replicate = metrics[(1.0, "silu", "rms", "true", key[-1])]
        assert np.array_equal(m["fro"][:1], same_replicate["fro"][:1]), key  # the replicate's Gaussian X_0
        if key[:-1] != (1.0, "silu", "rms", "true"):
            assert m["mu_rel"][3] != same_replicate["mu_rel"][3], key
        assert len(spectra[key]) == T and np.all(np.diff(spectra[key]) <= 0), key  # M_0's singular values
    # lambda = 0 without the pre-norm: no skip, X_1 is the mixer's output alone.
    assert metrics[(0.0, "silu", "none", "true", 0)]["fro"][1] != published["fro"][1]


def test_random_init_layers_are_the_reference_forward_of_the_drawn_weights(tmp_path):
    """init = "random", init_draw = -1, tokens: replicate r's weights are draw r of the sweep's seed,
    which mamba2_forward --random SEED r --save-weights writes as a model folder."""
    if not TOOL.exists():
        pytest.skip(f"{TOOL} is missing: build the target mamba2_forward")
    write_model(tmp_path)
    depth = 3  # beyond the config's 2 layers: a fresh draw
    sweep = write_sweep(tmp_path, "mamba2_draws", f'input = "tokens"\ninput_path = "tokens.txt"\ndepth = {depth}\n'
                        'norm = "rms"\ngate = "silu"', "lambda = [1.0, -1.0]")
    store = tmp_path / "draws.h5"
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    metrics, _ = stored(store, ("lambda",))
    for r in range(REPLICATES):
        saved = tmp_path / f"draw{r}"
        (tmp_path / f"ids{r}.txt").write_text(" ".join(map(str, EXCERPTS[r][:T])) + "\n")
        proc = subprocess.run([str(TOOL), str(tmp_path / "model"), str(tmp_path / f"ids{r}.txt"),
                               str(tmp_path / "x.npy"), "--random", str(SEED), str(r), "--layers", str(depth),
                               "--save-weights", str(saved)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        model = mamba2_reference.Model.from_folder(saved)
        for lam in (1.0, -1.0):
            xs = model.forward(ids=EXCERPTS[r][:T], layers=depth, lam=lam)
            compare(reference_rows(model, xs), metrics[(lam, r)], f"random lambda {lam} r {r}")


# ---- checkpoint with tokens against the reference ------------------------------------------------

@pytest.fixture(scope="module")
def checkpoint_sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mamba2_checkpoint")
    write_model(folder)
    sweep = write_sweep(folder, "mamba2_checkpoint",
                        'init = "checkpoint"\ninput = "tokens"\ninput_path = "tokens.txt"\ndepth = 2',
                        'lambda = [1.0, 0.0, -0.5]\ngated_norm = [true, false]\ngate = ["silu", "none"]\n'
                        'norm = ["rms", "none"]', output='spectra = "all"')
    store = folder / "store.h5"
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    return folder, sweep, store


def test_checkpoint_layers_are_the_reference_forwards(checkpoint_sweep):
    folder, _, store = checkpoint_sweep
    model = mamba2_reference.Model.from_folder(folder / "model")
    metrics, spectra = stored(store, ("lambda", "gated_norm", "gate", "norm"))
    for r in range(REPLICATES):
        for lam in (1.0, 0.0, -0.5):
            for gated in ("true", "false"):
                for gate in ("silu", "none"):
                    for norm in ("rms", "none"):
                        xs = model.forward(ids=EXCERPTS[r][:T], layers=2, lam=lam, norm=norm == "rms",
                                           gate=gate == "silu", gated_norm=gated == "true")
                        rows = reference_rows(model, xs, norm=norm == "rms")
                        compare(rows, metrics[(lam, gated, gate, norm, r)],
                                f"checkpoint lambda {lam} gated_norm {gated} gate {gate} norm {norm} r {r}")
    # X_1 itself, not only its metrics: the published block's first layer (the store's fro and s1 at
    # layer 1 pin its norm and top singular value; the mixer spectrum of the last layer is M_0's).
    xs = model.forward(ids=EXCERPTS[0][:T], layers=2)
    u = model.norm("backbone.layers.1.norm.weight", xs[1])
    expected = np.linalg.svd(model.mixer_matrices(1, u)[0], compute_uv=False)
    np.testing.assert_allclose(spectra[(1.0, "true", "silu", "rms", 0)], expected, rtol=1e-9, atol=1e-12)


def test_checkpoint_spectra_of_x_are_the_reference_forwards(checkpoint_sweep):
    """The singular values of X_l / ||X_l||_F at every layer (spectra = "all"), of every task of the
    published ablations and of lambda = -0.5 without the gate and norms: the reference's."""
    folder, _, store = checkpoint_sweep
    model = mamba2_reference.Model.from_folder(folder / "model")
    with h5py.File(store, "r") as f:
        points, tasks = f["points"][...], f["tasks"][...]
        x_sv, offsets = f["spectra"]["x_sv"][...], f["spectra"]["x_sv_offset"][...]
    checked = 0
    for task in tasks:
        p = points[task["point"]]
        setting = (float(p["lambda"]), text(p["gated_norm"]), text(p["gate"]), text(p["norm"]))
        if setting not in ((1.0, "true", "silu", "rms"), (-0.5, "false", "none", "none")):
            continue
        lam, gated, gate, norm = setting
        xs = model.forward(ids=EXCERPTS[int(task["replicate"])][:T], layers=2, lam=lam, norm=norm == "rms",
                           gate=gate == "silu", gated_norm=gated == "true")
        for layer, x in enumerate(xs):
            got = x_sv[offsets[task["id"]][layer]:][:min(T, 32)]
            expected = np.linalg.svd(x / np.linalg.norm(x), compute_uv=False)
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-13, err_msg=f"{setting} layer {layer}")
            checked += 1
    assert checked == 2 * REPLICATES * 3


def test_checkpoint_two_ranks_give_the_bits_of_one(checkpoint_sweep, tmp_path):
    """Each rank maps the checkpoint and converts the layers its bundles need: the same bits."""
    _, sweep, store = checkpoint_sweep
    rcsweep("run", sweep, "-o", tmp_path / "two.h5", "-q", ranks=2, check=0)
    assert_same_results(store, tmp_path / "two.h5")


def test_checkpoint_plan_names_the_block(checkpoint_sweep):
    _, sweep, _ = checkpoint_sweep
    proc = rcsweep("plan", sweep, check=0)
    assert "points        24 x 3 replicates = 72 tasks" in proc.stdout, proc.stdout
    assert "model files mapped" in proc.stdout, proc.stdout  # the checkpoint, mapped once per rank


def test_lambda_layers_are_each_layers_lambda(checkpoint_sweep, tmp_path):
    folder, _, _ = checkpoint_sweep
    sweep = tmp_path / "profile.toml"
    sweep.write_text((folder / "mamba2_checkpoint.toml").read_text()
                     .replace('model_folder = "model"', f'model_folder = "{folder / "model"}"')
                     .replace('input_path = "tokens.txt"', f'input_path = "{folder / "tokens.txt"}"')
                     .replace("[axes]\nlambda = [1.0, 0.0, -0.5]\n", "lambda_layers = [-1.0, 0.5]\n[axes]\n")
                     .replace('gate = ["silu", "none"]\nnorm = ["rms", "none"]\n', 'gate = ["silu"]\nnorm = ["rms"]\n'))
    store = tmp_path / "profile.h5"
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    model = mamba2_reference.Model.from_folder(folder / "model")
    metrics, _ = stored(store, ("gated_norm",))
    assert len(metrics) == 2 * REPLICATES
    for r in range(REPLICATES):
        xs = model.forward(ids=EXCERPTS[r][:T], layers=2, lam=[-1.0, 0.5])
        compare(reference_rows(model, xs), metrics[("true", r)], f"lambda_layers r {r}")


# ---- beside the stack ----------------------------------------------------------------------------

def test_stack_points_beside_mamba2_points_are_the_stacks_alone(tmp_path):
    """A block axis with the stack and Mamba-2 (one bundle per replicate, the same Gaussian X_0):
    the stack's layers are bitwise those of a sweep of the stack alone."""
    write_model(tmp_path)
    head = f"""[sweep]
name = "beside"
seed = {SEED}
replicates = 2
[model]
input = "gaussian"
T = {T}
d = 32
depth = 3
lambda = 1.0
norm = "rms"
"""
    both, alone = tmp_path / "both.toml", tmp_path / "alone.toml"
    both.write_text(head + 'model_folder = "model"\n[[zip]]\nblock = ["stack", "mamba2"]\ngate = ["none", "silu"]\n')
    alone.write_text(head)
    rcsweep("run", both, "-o", tmp_path / "both.h5", "-q", check=0)
    rcsweep("run", alone, "-o", tmp_path / "alone.h5", "-q", check=0)
    mixed, _ = stored(tmp_path / "both.h5", ("block",))
    stack, _ = stored(tmp_path / "alone.h5", ())
    assert len(mixed) == 4 and len(stack) == 2
    for r in range(2):
        for name, values in stack[(r,)].items():
            assert np.array_equal(mixed[("stack", r)][name], values, equal_nan=True), (name, r)
        assert np.array_equal(mixed[("mamba2", r)]["fro"][:1], stack[(r,)]["fro"][:1])  # the same X_0
        assert not np.array_equal(mixed[("mamba2", r)]["fro"], stack[(r,)]["fro"])


# ---- refusals ------------------------------------------------------------------------------------

def refused(sweep, *overrides):
    proc = rcsweep("plan", sweep, "--", *overrides, check=2) if overrides else rcsweep("plan", sweep, check=2)
    return proc.stderr


def test_bad_configs_are_refused_naming_the_key(checkpoint_sweep):
    _, sweep, _ = checkpoint_sweep
    err = refused(sweep, 'model.norm="layernorm"')
    assert 'model.norm: "layernorm" is not a norm of the Mamba-2 block' in err, err
    err = refused(sweep, "model.depth=3")
    assert "model.depth: is 3 but the checkpoint has n_layer = 2" in err, err
    assert 'init = "checkpoint" runs at most its 2 trained blocks' in err, err
    err = refused(sweep, 'model.model_folder="nowhere"')
    assert "model.model_folder: '" in err and "nowhere' is not a folder (no such file or folder)" in err, err
    assert 'block = "mamba2" needs a model folder' in err, err
    err = refused(sweep, "model.d=16")
    assert "model.d: is 16 but the model's d_model is 32" in err, err
    err = refused(sweep, 'model.mlp="model"')
    assert "model.mlp: the Mamba-2 block has no MLP" in err, err
    err = refused(sweep, 'output.gradients="last"')
    assert 'output.gradients: gradient norms are not implemented for block = "mamba2"' in err, err
    # run refuses the same way, before any work: no store.
    proc = rcsweep("run", sweep, "-o", sweep.parent / "never.h5", "--", "model.depth=3", check=2)
    assert "model.depth: is 3" in proc.stderr
    assert not (sweep.parent / "never.h5").exists()


def test_dump_weights_is_refused_before_any_work(checkpoint_sweep, tmp_path):
    """A Mamba-2 block has no weights tape: --dump-weights is refused with exit 2 before a task runs,
    and no store is left."""
    _, sweep, _ = checkpoint_sweep
    store = tmp_path / "dump.h5"
    proc = rcsweep("run", sweep, "-o", store, "--dump-weights", check=2)
    assert '--dump-weights: point 0 has block = "mamba2", which has no weights dump' in proc.stderr, proc.stderr
    assert "docs/MAMBA2.md" in proc.stderr, proc.stderr
    assert not store.exists()


def test_a_config_that_is_not_mamba2_is_refused_naming_file_and_key(tmp_path):
    write_model(tmp_path)
    cfg = (tmp_path / "model" / "config.json").read_text().replace('"Mamba2"', '"Mamba1"')
    (tmp_path / "model" / "config.json").write_text(cfg)
    sweep = write_sweep(tmp_path, "mamba1", 'input = "gaussian"\ndepth = 1', "lambda = [1.0]")
    err = refused(sweep)
    assert "config.json" in err and "layer" in err, err


# ---- the examples --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ls_fig1_mamba2", "ls_fig2_mamba2", "ls_fig3_mamba2"])
def test_the_lambda_skip_examples_plan(name):
    """jobs/examples/ls_fig{1,2,3}_mamba2.toml: Mamba-2 blocks of mamba2-130m's config.json at
    initialisation, planned as written (the folder opened, d = d_model, every point checked): every
    point of the file's axes, each replicate, to the file's depth."""
    path = SOURCE / "jobs" / "examples" / f"{name}.toml"
    sweep = tomllib.loads(path.read_text())
    assert sweep["model"]["block"] == "mamba2" and sweep["model"]["init"] == "random"
    tasks = sweep["sweep"]["replicates"] * math.prod(len(v) for v in sweep.get("axes", {}).values())
    proc = rcsweep("plan", path, check=0)
    assert f"= {tasks} tasks" in proc.stdout, proc.stdout
    assert f"layers        0..{sweep['model']['depth']} per task" in proc.stdout, proc.stdout
