"""Encoder blocks in a sweep (docs/ENCODERS.md "In a sweep") through the command line: a tiny BERT
and RoBERTa checkpoint (tests/python/tiny_encoders.py) and a token file written here, swept over
init, measure and lambda; the store is bitwise the same on 1 and 2 MPI ranks, and every layer's
metrics equal those computed in NumPy from the hidden states of the independent reference forward
(tests/python/encoder_reference.py): the block's output, its attention branch, and head 0's
attention probabilities as the mixer, for the checkpoint and for the random initialisation (its
weights saved by the test tool encoder_forward). A second sweep gives every layer its own lambda
(lambda_layers) and sweeps the causal mask: its layers are the reference's with those settings;
another profile reuses nothing; lambda beside lambda_layers, a profile of the wrong length and a
stack point are refused."""
import math
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import BIN, SOURCE, assert_same_results, rcsweep

sys.path.insert(0, str(SOURCE / "tests" / "python"))
import encoder_reference  # noqa: E402
import test_best_residual  # noqa: E402
import tiny_encoders  # noqa: E402

TOOL = Path(os.environ.get("RCSWEEP_ENCODER_FORWARD", Path(BIN).parent / "tests" / "python" / "encoder_forward"))
SEED, T, DEPTH, REPLICATES = 9, 6, 2, 3
# Token ids below the tiny models' vocabulary of 50, avoiding RoBERTa's padding id 1; longer than T.
EXCERPTS = [[20, 46, 11, 0, 13, 6, 8, 34], [11, 14, 16, 43, 47, 40, 36], [42, 37, 37, 5, 48, 2, 9]]


def write_sweep(folder, case, extra=""):
    """The tiny checkpoint `case`, a token file, and a sweep over init, measure and lambda."""
    cfg = tiny_encoders.write_case(folder / "model", case)
    tiny_encoders.write_tokens(folder / "tokens.txt", EXCERPTS)
    sweep = folder / "encoder.toml"
    sweep.write_text(f"""[sweep]
name = "encoder"
seed = {SEED}
replicates = {REPLICATES}
[model]
block = "encoder"
model_folder = "model"
input = "tokens"
input_path = "tokens.txt"
T = {T}
d = {cfg["hidden_size"]}
heads = {cfg["num_attention_heads"]}
depth = {DEPTH}
lambda_mlp = 1.0
mlp = "model"
norm = "layernorm"
{extra}
[axes]
init = ["random", "checkpoint"]
measure = ["block", "attention"]
lambda = [1.0, 0.0]
[output]
mixer_spectra = "last"
metrics = ["all", "res_best"]
""")
    return sweep


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def stored(store):
    """{(init, measure, lambda, replicate): {metric: [layer values]}}, and the mixer spectra."""
    out, spectra = {}, {}
    with h5py.File(store, "r") as f:
        points, tasks = f["points"][...], f["tasks"][...]
        layers = {name: f["layers"][name][...] for name in f["layers"]}
        m_sv, m_offset = f["spectra"]["m_sv"][...], f["spectra"]["m_offset"][...]
    for task in tasks:
        p = points[task["point"]]
        key = (text(p["init"]), text(p["measure"]), float(p["lambda"]), int(task["replicate"]))
        assert task["status"] == 1, task  # done
        out[key] = {name: values[task["id"]] for name, values in layers.items()}
        offset = m_offset[task["id"]][DEPTH]
        spectra[key] = m_sv[offset:offset + T]
    return out, spectra


def norm_1_inf(a):
    return math.sqrt(np.abs(a).sum(axis=0).max() * np.abs(a).sum(axis=1).max())


def signal_metrics(x, best=True):
    """MODELS.md "Metrics" of a signal, from its SVD; res_best (`best`) by linear programs
    (tests/python/test_best_residual.py)."""
    s = np.linalg.svd(x, compute_uv=False)
    centred = x - x.mean(axis=0, keepdims=True)
    fro = np.linalg.norm(x)
    out = {"fro": fro, "log_fro": math.log(fro), "s1": s[0], "s2": s[1], "sr_cov": (s**4).sum() / s[0]**4,
           "sr_x": (s**2).sum() / s[0]**2, "mu": np.linalg.norm(centred), "mu_rel": np.linalg.norm(centred) / fro,
           "res_rel": norm_1_inf(centred) / norm_1_inf(x)}
    if best:
        out["res_best"] = test_best_residual.exact_minimum(x) / norm_1_inf(x)
    return out


def mixer_metrics(p):
    s = np.linalg.svd(p, compute_uv=False)
    return {"m_s1": s[0], "m_s2": s[1], "m_gap": s[0] / s[1], "m_fro": np.linalg.norm(p)}


def head0(model, names, x):
    """Head 0's attention probabilities of block `names` on x (every token real)."""
    s = model.shape
    dh = s.d // s.heads
    q, k = model.lin(names["q"], x)[:, :dh], model.lin(names["k"], x)[:, :dh]
    scores = q @ k.T / math.sqrt(dh)
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def reference_rows(model, ids, lam, measure):
    """Per layer the metrics the store should hold, from the reference forward's hidden states."""
    xs = model.forward(ids, layers=DEPTH, lam_a=lam, lam_m=1.0, mlp=True, norm=True)
    rows = [signal_metrics(xs[0])]
    for layer in range(DEPTH):
        (names,) = model.block_names(layer, model.shape.layers)
        signal = model.attention(names, xs[layer], np.ones(len(ids), dtype=bool), False) if measure == "attention" \
            else xs[layer + 1]
        rows.append({**signal_metrics(signal), **mixer_metrics(head0(model, names, xs[layer]))})
    return rows


def compare(rows, metrics, where):
    for layer, expected in enumerate(rows):
        for name, value in expected.items():
            got = metrics[name][layer]
            if name == "res_best":  # certified within 1e-4 above the minimum (metrics/best_residual.hpp)
                assert value * (1 - 1e-7) <= got <= value * (1 + 1e-4 + 1e-7), f"{where}: res_best at layer {layer}"
                continue
            assert got == pytest.approx(value, rel=1e-9, abs=1e-12), f"{where}: {name} at layer {layer}"
    for name in ("m_s1", "m_s2", "m_gap", "m_fro"):
        assert np.isnan(metrics[name][0]), f"{where}: {name} at layer 0 is not NaN"


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("encoder_bert")
    sweep = write_sweep(folder, "bert_f32")
    one, two = folder / "one.h5", folder / "two.h5"
    rcsweep("run", sweep, "-o", one, "-q", check=0)
    rcsweep("run", sweep, "-o", two, "-q", ranks=2, check=0)
    return folder, one, two


def test_two_ranks_give_the_bits_of_one(bert):
    _, one, two = bert
    assert_same_results(one, two)


def test_checkpoint_layers_are_the_reference_forwards(bert):
    folder, one, _ = bert
    model = encoder_reference.Model(folder / "model")
    metrics, _ = stored(one)
    for r in range(REPLICATES):
        for lam in (1.0, 0.0):
            for measure in ("block", "attention"):
                rows = reference_rows(model, EXCERPTS[r][:T], lam, measure)
                compare(rows, metrics[("checkpoint", measure, lam, r)], f"checkpoint {measure} lambda {lam} r {r}")


def test_random_layers_are_the_reference_forward_of_the_drawn_weights(bert, tmp_path):
    """init = "random", init_draw = -1: replicate r's weights are draw r of the sweep's seed, which
    encoder_forward --random SEED r --save-weights writes as a model folder."""
    if not TOOL.exists():
        pytest.skip(f"{TOOL} is missing: build the target encoder_forward")
    folder, one, _ = bert
    metrics, _ = stored(one)
    for r in range(REPLICATES):
        saved = tmp_path / f"draw{r}"
        proc = subprocess.run(
            [str(TOOL), str(folder / "model"), str(folder / "tokens.txt"), str(tmp_path / "x.npy"), "--random",
             str(SEED), str(r), "--save-weights", str(saved)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        model = encoder_reference.Model(saved)
        for measure in ("block", "attention"):
            rows = reference_rows(model, EXCERPTS[r][:T], 1.0, measure)
            compare(rows, metrics[("random", measure, 1.0, r)], f"random {measure} r {r}")


def test_mixer_spectra_are_head_zeros_attention(bert):
    folder, one, _ = bert
    model = encoder_reference.Model(folder / "model")
    _, spectra = stored(one)
    ids = EXCERPTS[0][:T]
    xs = model.forward(ids, layers=DEPTH)
    (names,) = model.block_names(DEPTH - 1, model.shape.layers)
    expected = np.linalg.svd(head0(model, names, xs[DEPTH - 1]), compute_uv=False)
    np.testing.assert_allclose(spectra[("checkpoint", "block", 1.0, 0)], expected, rtol=1e-9, atol=1e-12)
    # measure does not change the mixer
    assert np.array_equal(spectra[("checkpoint", "attention", 1.0, 0)], spectra[("checkpoint", "block", 1.0, 0)])


def test_roberta_checkpoint(tmp_path):
    """RoBERTa (BF16 weights, positions after its padding id) through the same sweep, one rank."""
    sweep = write_sweep(tmp_path, "roberta_bf16")
    store = tmp_path / "roberta.h5"
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    model = encoder_reference.Model(tmp_path / "model")
    metrics, _ = stored(store)
    for r in range(REPLICATES):
        rows = reference_rows(model, EXCERPTS[r][:T], 1.0, "block")
        compare(rows, metrics[("checkpoint", "block", 1.0, r)], f"roberta r {r}")


def test_plan_shows_the_mapped_checkpoint(bert):
    folder, _, _ = bert
    proc = rcsweep("plan", folder / "encoder.toml", check=0)
    size = (folder / "model" / "model.safetensors").stat().st_size
    assert "model files mapped" in proc.stdout, proc.stdout
    assert f"{size / 1024:.1f} KiB" in proc.stdout, proc.stdout


@pytest.mark.parametrize("ranks", [None, 2])
def test_dump_weights_is_refused_before_any_work(bert, tmp_path, ranks):
    """An encoder has no weights tape: --dump-weights is refused with exit 2 before a task runs,
    from `run` in one process and from the ranks of `run -n`, and no store is left."""
    folder, _, _ = bert
    store = tmp_path / "dump.h5"
    args = ("run", folder / "encoder.toml", "-o", store, "--dump-weights") + (("-n", ranks) if ranks else ())
    proc = rcsweep(*args, check=2)
    assert '--dump-weights: point 0 has block = "encoder"' in proc.stderr, proc.stderr
    assert "no weights dump" in proc.stderr, proc.stderr
    assert not store.exists()


# ---- one lambda per layer and the causal mask (docs/CONFIG.md "Encoder blocks") ----------------

LAMBDA_LAYERS = [0.5, -1.0]  # the checkpoint's 2 blocks


def write_profile_sweep(folder):
    """The tiny BERT checkpoint with lambda_layers, swept over the mask and lambda_mlp ("lambda":
    each layer's lambda, or 1.0 at every layer)."""
    cfg = tiny_encoders.write_case(folder / "model", "bert_f32")
    tiny_encoders.write_tokens(folder / "tokens.txt", EXCERPTS)
    sweep = folder / "profile.toml"
    sweep.write_text(f"""[sweep]
name = "profile"
seed = {SEED}
replicates = {REPLICATES}
[model]
block = "encoder"
model_folder = "model"
init = "checkpoint"
input = "tokens"
input_path = "tokens.txt"
T = {T}
d = {cfg["hidden_size"]}
heads = {cfg["num_attention_heads"]}
depth = {len(LAMBDA_LAYERS)}
lambda_layers = {LAMBDA_LAYERS}
mlp = "model"
norm = "layernorm"
[axes]
mask = ["none", "causal"]
lambda_mlp = ["lambda", 1.0]
[output]
mixer_spectra = "all"
""")
    return sweep


def head0_masked(model, names, x, causal):
    """head0() with the causal mask: key j masked (probability 0) for query i < j."""
    s = model.shape
    dh = s.d // s.heads
    q, k = model.lin(names["q"], x)[:, :dh], model.lin(names["k"], x)[:, :dh]
    scores = q @ k.T / math.sqrt(dh)
    if causal:
        scores = np.where(np.tri(len(x), dtype=bool), scores, -np.inf)
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def profile_rows(model, ids, lambdas, mlp_lambda, causal):
    """Per layer the metrics of the reference forward whose block l has lam_a = lambdas[l - 1] and
    lam_m = that lambda (mlp_lambda None) or mlp_lambda, causal or not; with head 0's spectrum."""
    real = np.ones(len(ids), dtype=bool)
    x = model.embed(ids)
    rows, spectra = [signal_metrics(x, best=False)], [None]
    for layer, lam in enumerate(lambdas):
        (names,) = model.block_names(layer, model.shape.layers)
        p = head0_masked(model, names, x, causal)
        x = model.block(names, x, real, lam_a=lam, lam_m=lam if mlp_lambda is None else mlp_lambda, causal=causal)
        rows.append({**signal_metrics(x, best=False), **mixer_metrics(p)})
        spectra.append(np.linalg.svd(p, compute_uv=False))
    return rows, spectra


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("encoder_profile")
    sweep = write_profile_sweep(folder)
    store = folder / "profile.h5"
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    return folder, sweep, store


def test_lambda_layers_and_causal_mask_are_the_reference_forwards(profile):
    """Every layer's metrics and head 0's spectrum equal NumPy's forward with block l's lambda_l
    (and lambda_mlp following it or fixed at 1.0), with and without the causal mask."""
    folder, _, store = profile
    model = encoder_reference.Model(folder / "model")
    with h5py.File(store, "r") as f:
        points, tasks = f["points"][...], f["tasks"][...]
        layers = {name: f["layers"][name][...] for name in f["layers"]}
        m_sv, m_offset = f["spectra"]["m_sv"][...], f["spectra"]["m_offset"][...]
        config = f.attrs["config"]
    config = config.decode() if isinstance(config, bytes) else config
    assert "lambda_layers = [0.5, -1.0]\n" in config, config
    assert "\nlambda = " not in config, config
    seen = set()
    for task in tasks:
        assert task["status"] == 1, task  # done
        p = points[task["point"]]
        causal = text(p["mask"]) == "causal"
        mlp_lambda = None if p["idx_lambda_mlp"] == 0 else 1.0  # the axis ["lambda", 1.0]
        r = int(task["replicate"])
        seen.add((causal, mlp_lambda, r))
        rows, spectra = profile_rows(model, EXCERPTS[r][:T], LAMBDA_LAYERS, mlp_lambda, causal)
        metrics = {name: values[task["id"]] for name, values in layers.items()}
        where = f"causal {causal}, lambda_mlp {mlp_lambda}, replicate {r}"
        compare(rows, metrics, where)
        for layer in range(1, len(LAMBDA_LAYERS) + 1):
            offset = m_offset[task["id"]][layer]
            np.testing.assert_allclose(m_sv[offset:offset + T], spectra[layer], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{where}: head 0's spectrum at layer {layer}")
    assert len(seen) == 2 * 2 * REPLICATES
    # The comparison can fail: one lambda for every layer, or no mask, is another forward.
    with h5py.File(store, "r") as f:
        task = next(t for t in f["tasks"][...] if t["point"] == 0 and t["replicate"] == 0)
        sr = f["layers"]["sr_cov"][task["id"]]
    ids = EXCERPTS[0][:T]
    constant, _ = profile_rows(model, ids, [LAMBDA_LAYERS[0]] * len(LAMBDA_LAYERS), None, False)
    assert abs(constant[2]["sr_cov"] - sr[2]) > 1e-6 * abs(sr[2])
    open_rows, _ = profile_rows(model, ids, LAMBDA_LAYERS, None, True)
    assert abs(open_rows[1]["sr_cov"] - sr[1]) > 1e-6 * abs(sr[1])


def test_changed_lambda_layers_reuse_nothing(profile, tmp_path):
    """Another profile changes every task: the store is not grown in place, and the difference is
    named as one that changes every task's results."""
    _, sweep, store = profile
    proc = rcsweep("run", sweep, "-o", store, "-q", "--", "model.lambda_layers=[0.5, 0.0]", check=2)
    assert "model.lambda_layers: [0.5, -1.0] -> [0.5, 0.0]   (changes every task's results)" in proc.stderr, \
        proc.stderr
    assert "none of its results fits this sweep" in proc.stderr, proc.stderr


def test_lambda_layers_refusals_name_the_key(profile):
    """lambda swept beside lambda_layers, a profile of another length than the depth, and a stack
    point: exit 2 before any work, naming the key."""
    _, sweep, _ = profile
    proc = rcsweep("plan", sweep, "--", "axes.lambda=[0, 1]", check=2)
    assert "axes.lambda: is swept, but lambda_layers gives every layer its own lambda" in proc.stderr, proc.stderr
    proc = rcsweep("plan", sweep, "--", "model.lambda_layers=[1.0]", check=2)
    assert "model.lambda_layers: has 1 value but the depth is 2: give exactly one lambda per layer" in proc.stderr, \
        proc.stderr
    proc = rcsweep("plan", sweep, "--", "axes.block=[encoder, stack]", check=2)  # beside the stack's others
    assert 'model.lambda_layers: one lambda per layer is only implemented for block = "encoder"' in proc.stderr, \
        proc.stderr
    # (an axis an override adds comes after the file's)
    assert "at 4 of 8 grid points, e.g. point 1 (mask = none, lambda_mlp = lambda, block = stack)" in proc.stderr, \
        proc.stderr
    assert 'axes.mask: "causal" (the encoder block\'s causal attention mask) is only used with block = "encoder"' \
        in proc.stderr, proc.stderr
