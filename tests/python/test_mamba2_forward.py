"""rcsweep's Mamba-2 block (src/models/mamba2/) against the independent NumPy reference
(mamba2_reference.py) on tiny mamba_ssm checkpoints (tiny_mamba2.py): X_0 .. X_L and the final normed
output, through the test tool tests/tools/mamba2_forward.cpp, agree to 1e-12 relative for 2 to 4
layers, d_model 32 to 64, d_state 8 to 16, 2 to 4 heads, 1 and 2 groups, stored as F64, F32 and BF16;
with D per channel, biases, norm_before_gate, no gated norm, no conv bias and a dt limit; for every
ablation (lambda 0, -0.5 and 2, no norm, no gate, no gated norm), every SSD form and a chunk that
does not divide T; from a given X_0; with the random initialisation saved by the tool (mamba_ssm's
names, run by the reference); against a torch.nn forward where python3-torch is installed. Hostile
checkpoints, configs and inputs are refused with exit code 2 naming the tensor, the key or the file.

$RCSWEEP_MAMBA2_FORWARD is the tool (ctest python.mamba2 sets it; by hand: build the target
mamba2_forward, then run pytest here)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import mamba2_reference as ref  # noqa: E402
import tiny_mamba2  # noqa: E402
from tiny_encoders import write_safetensors  # noqa: E402

TOOL = Path(os.environ.get("RCSWEEP_MAMBA2_FORWARD", ROOT / "build" / "tests" / "python" / "mamba2_forward"))
RTOL = 1e-12
EXAMPLES = ROOT / "jobs" / "examples" / "mamba2"
T = 23


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    assert TOOL.exists(), f"{TOOL} is missing: build the target mamba2_forward or set RCSWEEP_MAMBA2_FORWARD"
    root = tmp_path_factory.mktemp("tiny_mamba2")
    for case in tiny_mamba2.CASES:
        tiny_mamba2.write_case(root / case, case)
    ids = np.random.default_rng(8).integers(0, 64, T)  # 64 rows: vocab 50 padded to 16, padding rows too
    (root / "ids.txt").write_text("# token ids\n" + " ".join(map(str, ids[:10])) + "\n" +
                                  " ".join(map(str, ids[10:])) + "\n")
    return root


def tool(folder, ids, out, *options, ok=True):
    p = subprocess.run([str(TOOL), str(folder), str(ids), str(out), *map(str, options)], capture_output=True,
                       text=True, timeout=60)
    if ok:
        assert p.returncode == 0, f"{p.args} -> {p.returncode}\n{p.stderr}"
        return np.load(out)
    return p


def reference(model, ids=None, x=None, norm=True, **options):
    """(L + 2) x T x d: X_0 .. X_L and the final output, as the tool writes them."""
    xs = model.forward(ids=ids, x=x, norm=norm, **options)
    return np.stack(xs + [model.final(xs[-1], norm=norm)])


def worst_error(got, want):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.isfinite(got).all()
    return max(np.linalg.norm(a - b) / np.linalg.norm(b) for a, b in zip(got, want))


def ids_of(tiny):
    return ref.read_ids(tiny / "ids.txt")


@pytest.mark.parametrize("case", sorted(tiny_mamba2.CASES))
def test_every_layer_and_the_output_match_the_reference(tiny, tmp_path, case):
    got = tool(tiny / case, tiny / "ids.txt", tmp_path / "h.npy")
    model = ref.Model.from_folder(tiny / case)
    assert got.shape == (model.layers + 2, T, model.shape.d_model)
    assert worst_error(got, reference(model, ids_of(tiny))) <= RTOL


ABLATIONS = {  # tool options -> the reference's
    "lambda_0": (("--lambda", 0), dict(lam=0.0)),
    "lambda_negative": (("--lambda", -0.5), dict(lam=-0.5)),
    "lambda_2": (("--lambda", 2), dict(lam=2.0)),
    "no_norm": (("--no-norm",), dict(norm=False)),
    "no_gate": (("--no-gate",), dict(gate=False)),
    "no_gated_norm": (("--no-gated-norm",), dict(gated_norm=False)),
    "mixer_only": (("--lambda", 0, "--no-norm", "--no-gate", "--no-gated-norm"),
                   dict(lam=0.0, norm=False, gate=False, gated_norm=False)),
    "fewer_layers": (("--layers", 1), dict(layers=1)),
}


@pytest.mark.parametrize("ablation", sorted(ABLATIONS))
def test_every_ablation_matches_the_reference(tiny, tmp_path, ablation):
    folder = tiny / "mamba2_groups_f64"  # 3 layers, 4 heads, 2 groups
    options, kwargs = ABLATIONS[ablation]
    got = tool(folder, tiny / "ids.txt", tmp_path / "h.npy", *options)
    assert worst_error(got, reference(ref.Model.from_folder(folder), ids_of(tiny), **kwargs)) <= RTOL


@pytest.mark.parametrize("form", [("scan",), ("quadratic",), ("chunked",), ("chunked", 7), ("chunked", 1)])
@pytest.mark.parametrize("case", ["mamba2_f32", "mamba2_groups_f64"])
def test_every_ssd_form_matches_the_reference(tiny, tmp_path, case, form):
    options = ["--ssd", form[0]] + (["--chunk", form[1]] if len(form) > 1 else [])  # 7 does not divide T = 23
    got = tool(tiny / case, tiny / "ids.txt", tmp_path / "h.npy", *options)
    want = reference(ref.Model.from_folder(tiny / case), ids_of(tiny), ssd="scan")
    assert worst_error(got, want) <= RTOL


def variant_folder(folder, dtype, seed=0, **ssm):
    """A tiny model with ssm_cfg switches tiny_mamba2's CASES do not have: D per channel, biases,
    no conv bias, no gated norm; the tensors those need drawn, the ones they remove dropped."""
    cfg = tiny_mamba2.config(d_model=32, n_layer=2, d_state=8, headdim=16, ngroups=2, **ssm)  # 4 heads
    rng = np.random.default_rng(seed)
    t = tiny_mamba2.state_dict(cfg, rng)
    s = ref.Shape.of(cfg)
    for i in range(s.n_layer):
        m = f"backbone.layers.{i}.mixer."
        if s.D_has_hdim:
            t[m + "D"] = 1 + rng.normal(0, 0.3, s.d_inner)
        if s.bias:
            t[m + "in_proj.bias"] = rng.normal(0, 0.2, s.d_in_proj)
            t[m + "out_proj.bias"] = rng.normal(0, 0.2, s.d_model)
        if not s.conv_bias:
            del t[m + "conv1d.bias"]
        if not s.rmsnorm:
            del t[m + "norm.weight"]
    tiny_mamba2.write_folder(folder, cfg, t, dtype)
    return folder


VARIANTS = {
    "D_per_channel_bias_norm_before_gate": (dict(D_has_hdim=True, bias=True, norm_before_gate=True), "F64"),
    "no_gated_norm_no_conv_bias": (dict(rmsnorm=False, conv_bias=False), "F32"),
    "dt_limit": (dict(dt_limit=[0.2, 0.6], bias=True), "BF16"),  # softplus(dt + dt_bias) spreads over (0, 2)
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_ssm_cfg_switches_match_the_reference(tmp_path, variant):
    ssm, dtype = VARIANTS[variant]
    folder = variant_folder(tmp_path / "m", dtype, **ssm)
    model = ref.Model.from_folder(folder)
    ids = np.random.default_rng(4).integers(0, 50, 19)
    (tmp_path / "ids.txt").write_text(" ".join(map(str, ids)) + "\n")
    for options, kwargs in (((), {}), (("--ssd", "quadratic", "--no-gate"), dict(gate=False)),
                            (("--chunk", 5, "--lambda", -0.5), dict(lam=-0.5))):
        got = tool(folder, tmp_path / "ids.txt", tmp_path / "h.npy", *options)
        assert worst_error(got, reference(model, ids, **kwargs)) <= RTOL, options


def test_an_input_matrix_instead_of_token_ids(tiny, tmp_path):
    folder = tiny / "mamba2_groups_f64"
    x0 = np.random.default_rng(3).standard_normal((31, 48))
    np.save(tmp_path / "x0.npy", x0)
    got = tool(folder, tmp_path / "x0.npy", tmp_path / "h.npy", "--ssd", "chunked", "--chunk", 8)
    assert np.array_equal(got[0], x0)
    assert worst_error(got, reference(ref.Model.from_folder(folder), x=x0)) <= RTOL


def test_the_comparison_is_sensitive(tiny, tmp_path, monkeypatch):
    """What a wrong block would change shows by far more than the tolerance: heads reading groups
    round-robin, the convolution's taps reversed, the gate after the norm, the gated norm over all
    channels, one Linear weight transposed."""
    folder = tiny / "mamba2_groups_f64"
    got = tool(folder, tiny / "ids.txt", tmp_path / "h.npy")
    model = ref.Model.from_folder(folder)
    ids = ids_of(tiny)
    assert worst_error(got, reference(model, ids)) <= RTOL
    wrongs = [("_group_of_heads", lambda H, G: np.arange(H) % G),
              ("causal_conv1d", lambda x, w, b, f=ref.causal_conv1d: f(x, w[:, :, ::-1], b)),
              ("gated_rms_norm", lambda y, z, w, groups, f=ref.gated_rms_norm, **k: f(y, z, w, groups, True)),
              ("gated_rms_norm", lambda y, z, w, groups, **k: ref.rms_norm(y * ref.silu(z), w))]
    for name, wrong in wrongs:
        with monkeypatch.context() as m:
            m.setattr(ref, name, wrong)
            assert worst_error(got, reference(model, ids)) > 1e3 * RTOL, name
    w = "backbone.layers.1.mixer.out_proj.weight"
    model.tensors[w] = model.tensors[w].reshape(-1)[::-1].reshape(model.tensors[w].shape)
    assert worst_error(got, reference(model, ids)) > 1e3 * RTOL


# --- the random initialisation -------------------------------------------------------------------

@pytest.mark.parametrize("case, layers", [("mamba2_groups_f64", None), ("mamba2_bf16", 5)])
def test_random_weights_run_as_saved(tiny, tmp_path, case, layers):
    folder = tiny / case
    saved = tmp_path / "saved"
    options = ["--random", 7, 3, "--save-weights", saved] + (["--layers", layers] if layers else [])
    got = tool(folder, tiny / "ids.txt", tmp_path / "h.npy", *options)
    model = ref.Model.from_folder(saved)
    assert worst_error(got, reference(model, ids_of(tiny))) <= RTOL
    # mamba_ssm's names and shapes: those the reference's own initialisation draws
    s = model.shape
    want = ref.random_tensors(s, np.random.default_rng(0), layers)
    assert {k: v.shape for k, v in model.tensors.items()} == {k: v.shape for k, v in want.items()}
    for name, t in model.tensors.items():
        if name.endswith(("norm.weight", "norm_f.weight", ".D")):
            assert (t == 1).all(), name
    A = np.concatenate([np.exp(model.t(f"backbone.layers.{i}.mixer.A_log")) for i in range(model.layers)])
    dt = np.concatenate([ref.softplus(model.t(f"backbone.layers.{i}.mixer.dt_bias")) for i in range(model.layers)])
    assert A.min() >= 1 and A.max() <= 16
    assert dt.min() >= 0.001 * (1 - 1e-12) and dt.max() <= 0.1 * (1 + 1e-12)
    # out_proj: U(-b, b), b = 1 / sqrt(d_inner) / sqrt(n_layer), whatever the depth run
    W = model.t("backbone.layers.0.mixer.out_proj.weight")
    assert np.abs(W).max() <= 1 / np.sqrt(s.d_inner * s.n_layer) and np.abs(W).max() > 0.9 / np.sqrt(
        s.d_inner * s.n_layer)
    # the same seed and draw give the same bits; another draw other numbers
    again = tool(folder, tiny / "ids.txt", tmp_path / "a.npy", *options[:3], *(["--layers", layers] if layers else []))
    assert np.array_equal(again, got)
    other = tool(folder, tiny / "ids.txt", tmp_path / "o.npy", "--random", 7, 4)
    assert not np.any(other[0] == got[0])


def test_the_published_configs_run_at_initialisation(tmp_path):
    """mamba2-130m and mamba2-2.7b's config.json (jobs/examples/mamba2/) drive the tool's random
    weights: the embedding N(0, 0.02^2), one block, finite."""
    (tmp_path / "ids.txt").write_text("50276 0 1 2 50287\n")  # the last a padding row (50277 -> 50288)
    for name, d in (("mamba2-130m", 768), ("mamba2-2.7b", 2560)):
        got = tool(EXAMPLES / name, tmp_path / "ids.txt", tmp_path / "h.npy", "--random", 1, 0, "--layers", 1)
        assert got.shape == (3, 5, d) and np.isfinite(got).all(), name
        assert 0.015 < got[0].std() < 0.025, name
        assert not np.array_equal(got[1], got[0]), name


# --- the torch.nn reference ----------------------------------------------------------------------

@pytest.mark.parametrize("case, options, lam, flags", [
    ("mamba2_f64", (), 1.0, {}),
    ("mamba2_f32", (), 1.0, {}),
    ("mamba2_groups_f64", ("--lambda", -0.5, "--no-gate"), -0.5, dict(gate=False)),
])
def test_every_layer_equals_the_torch_modules(tiny, tmp_path, case, options, lam, flags):
    pytest.importorskip("torch")
    import test_mamba2_reference  # its torch.nn forward (nn.Linear, nn.Conv1d, F.softplus, a loop)
    model = ref.Model.from_folder(tiny / case)
    got = tool(tiny / case, tiny / "ids.txt", tmp_path / "h.npy", *options)
    want = np.stack(test_mamba2_reference.torch_forward(model, ids_of(tiny), lam=lam, **flags))
    assert worst_error(got, want) <= RTOL


# --- refusals ------------------------------------------------------------------------------------

def hostile(folder, change, dtype="F32"):
    """tiny case mamba2_f64's config and tensors, `change`d ({name: (array, dtype)} and the config)."""
    cfg = tiny_mamba2.config(d_model=32, n_layer=2, d_state=8, headdim=16)
    tensors = {k: (v, dtype) for k, v in tiny_mamba2.state_dict(cfg, np.random.default_rng(1)).items()}
    change(cfg, tensors)
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    write_safetensors(folder / "model.safetensors", tensors)
    return folder


HOSTILE = [  # (change, words of stderr)
    (lambda c, t: t.pop("backbone.layers.1.mixer.A_log"),
     'tensor "backbone.layers.1.mixer.A_log" is missing (A_log of layer 1)'),
    (lambda c, t: t.update({"backbone.layers.0.mixer.in_proj.weight":
                            (t["backbone.layers.0.mixer.in_proj.weight"][0].T, "F32")}),
     'tensor "backbone.layers.0.mixer.in_proj.weight" has shape [32, 148], expected [148, 32]'),
    (lambda c, t: t.update({"backbone.layers.0.mixer.conv1d.weight":
                            (t["backbone.layers.0.mixer.conv1d.weight"][0][:, 0, :], "F32")}),
     'tensor "backbone.layers.0.mixer.conv1d.weight" has shape [80, 4], expected [80, 1, 4]'),
    (lambda c, t: t.update({"backbone.norm_f.weight": (np.arange(32), "I64")}),
     'tensor "backbone.norm_f.weight" has dtype I64, not a float'),
    (lambda c, t: t.update({"backbone.layers.0.mixer.in_proj.bias": (np.zeros(148), "F32")}),
     'tensor "backbone.layers.0.mixer.in_proj.bias" is present, but ssm_cfg.bias is false'),
    (lambda c, t: c.update(pad_vocab_size_multiple=8),
     'tensor "backbone.embedding.weight" has shape [64, 32], expected [56, 32]'),
    (lambda c, t: c["ssm_cfg"].update(layer="Mamba1"), 'key "ssm_cfg.layer" is "Mamba1"'),
    (lambda c, t: c["ssm_cfg"].update(ngroups=3), 'key "ssm_cfg.ngroups" is 3, which does not divide the 4 heads'),
    (lambda c, t: c.pop("n_layer"), 'key "n_layer" is missing'),
    (lambda c, t: c.update(attn_layer_idx=[0]), 'key "attn_layer_idx" is [0]'),
]


@pytest.mark.parametrize("k", range(len(HOSTILE)))
def test_hostile_checkpoints_are_refused_naming_the_tensor_or_key(tiny, tmp_path, k):
    change, words = HOSTILE[k]
    folder = hostile(tmp_path / "m", change)
    p = tool(folder, tiny / "ids.txt", tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and words in p.stderr, p.stderr
    assert str(folder) in p.stderr
    assert not (tmp_path / "o.npy").exists()


def test_bad_inputs_and_options_are_refused(tiny, tmp_path):
    folder = tiny / "mamba2_f64"  # 2 layers, d_model 32, 64 embedding rows
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\n3 64\n")
    p = tool(folder, bad, tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and f"{bad}: line 2, token 2: id 64 is not below the vocabulary size 64" in p.stderr
    bad.write_text("1 2 x\n")
    p = tool(folder, bad, tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and str(bad) in p.stderr, p.stderr
    np.save(tmp_path / "x.npy", np.zeros((4, 33)))
    p = tool(folder, tmp_path / "x.npy", tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and "not T x d_model = T x 32" in p.stderr, p.stderr
    np.save(tmp_path / "x.npy", np.zeros((4, 32), dtype=np.float32))
    p = tool(folder, tmp_path / "x.npy", tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and "'<f8'" in p.stderr, p.stderr
    p = tool(folder, tiny / "ids.txt", tmp_path / "o.npy", "--layers", 3, ok=False)
    assert p.returncode == 2 and "--layers 3: the checkpoint has 2 layers" in p.stderr, p.stderr
    for options, words in ((("--bogus",), "unknown option --bogus"), (("--ssd", "fast"), "--ssd: 'fast'"),
                           (("--chunk", 0), "--chunk"), (("--save-weights", tmp_path / "w"), "for --random"),
                           (("--lambda", "x"), "--lambda: 'x'")):
        p = tool(folder, tiny / "ids.txt", tmp_path / "o.npy", *options, ok=False)
        assert p.returncode == 2 and words in p.stderr, (options, p.stderr)
    p = tool(tmp_path / "nowhere", tiny / "ids.txt", tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and "nowhere" in p.stderr, p.stderr
    assert not (tmp_path / "o.npy").exists()
