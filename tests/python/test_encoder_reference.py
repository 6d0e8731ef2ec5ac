"""rcsweep's BERT-family encoder block (src/models/encoder/) against the independent NumPy reference
(encoder_reference.py) on tiny Hugging Face checkpoints (tiny_encoders.py): the hidden states of
every layer, through the test tool tests/tools/encoder_forward.cpp, agree to 1e-12 relative on the
real tokens of every excerpt, for BERT (with and without the "bert." prefix), RoBERTa and ALBERT
(one and two layer groups), stored as F32, F64, F16 and BF16, with gelu, gelu_new and relu, for
every ablation; the random initialisation saved by the tool runs the same in the reference and has
the published statistics; padding changes nothing on the real tokens; the example configs of
jobs/examples/models/ have the published sizes and are read by rcsweep. A second reference built
from torch.nn modules runs where torch is installed.

$RCSWEEP_ENCODER_FORWARD is the tool (ctest python.encoders sets it; by hand: build the target
encoder_forward, then run pytest here)."""
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
import encoder_reference as ref  # noqa: E402
import tiny_encoders  # noqa: E402

TOOL = Path(os.environ.get("RCSWEEP_ENCODER_FORWARD", ROOT / "build" / "tests" / "python" / "encoder_forward"))
RTOL = 1e-12
EXAMPLES = ROOT / "jobs" / "examples" / "models"
EXAMPLE_TOKENS = ROOT / "jobs" / "examples" / "tokens" / "excerpts.txt"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    assert TOOL.exists(), f"{TOOL} is missing: build the target encoder_forward or set RCSWEEP_ENCODER_FORWARD"
    root = tmp_path_factory.mktemp("tiny_encoders")
    for case in tiny_encoders.CASES:
        tiny_encoders.write_case(root / case, case)
    return root


def tool(folder, tokens, out, *options, ok=True):
    p = subprocess.run([str(TOOL), str(folder), str(tokens), str(out), *map(str, options)], capture_output=True,
                       text=True, timeout=120)
    if ok:
        assert p.returncode == 0, f"{p.args} -> {p.returncode}\n{p.stderr}"
        return np.load(out)
    return p


def worst_error(got, want, excerpts):
    """Largest over excerpts and layers of |got - want| / |want| (Frobenius) on the real tokens."""
    assert got.shape == want.shape, (got.shape, want.shape)
    worst = 0.0
    for k, e in enumerate(excerpts):
        for layer in range(got.shape[1]):
            a, b = got[k, layer, :len(e)], want[k, layer, :len(e)]
            worst = max(worst, np.linalg.norm(a - b) / np.linalg.norm(b))
    return worst


ABLATIONS = {  # tool options -> the reference's
    "published": ((), {}),
    "lambda": (("--lambda", 0.5, 2), dict(lam_a=0.5, lam_m=2.0)),
    "no_mlp": (("--no-mlp",), dict(mlp=False)),
    "no_norm": (("--no-norm",), dict(norm=False)),
    "causal": (("--causal",), dict(causal=True)),
    "attention_only": (("--no-mlp", "--no-norm", "--lambda", 0, 1), dict(mlp=False, norm=False, lam_a=0.0)),
    "fewer_layers": (("--layers", 1), dict(layers=1)),
}


@pytest.mark.parametrize("case", sorted(tiny_encoders.CASES))
def test_every_layer_matches_the_reference(tiny, tmp_path, case):
    folder = tiny / case
    excerpts = ref.read_tokens(folder / "tokens.txt")
    got = tool(folder, folder / "tokens.txt", tmp_path / "h.npy")
    model = ref.Model(folder)
    want = ref.forward_all(model, excerpts)
    assert got.shape == (len(excerpts), model.shape.layers + 1, max(map(len, excerpts)), model.shape.d)
    assert np.isfinite(got).all()  # padded rows too
    assert worst_error(got, want, excerpts) <= RTOL


@pytest.mark.parametrize("ablation", sorted(ABLATIONS))
@pytest.mark.parametrize("case", ["bert_f32", "roberta_bf16", "albert_groups_f64"])
def test_every_ablation_matches_the_reference(tiny, tmp_path, case, ablation):
    folder = tiny / case
    options, kwargs = ABLATIONS[ablation]
    excerpts = ref.read_tokens(folder / "tokens.txt")
    got = tool(folder, folder / "tokens.txt", tmp_path / "h.npy", *options)
    want = ref.forward_all(ref.Model(folder), excerpts, **kwargs)
    assert worst_error(got, want, excerpts) <= RTOL


def test_albert_runs_deeper_than_its_config_sharing_groups(tiny, tmp_path):
    folder = tiny / "albert_groups_f64"  # 3 layers, 2 groups: 7 layers use groups 0,0,0,0,1,1,1
    excerpts = ref.read_tokens(folder / "tokens.txt")
    got = tool(folder, folder / "tokens.txt", tmp_path / "h.npy", "--layers", 7)
    model = ref.Model(folder)
    assert [int(i / (7 / 2)) for i in range(7)] == [0, 0, 0, 0, 1, 1, 1]
    assert worst_error(got, ref.forward_all(model, excerpts, layers=7), excerpts) <= RTOL
    p = tool(tiny / "bert_f32", folder / "tokens.txt", tmp_path / "x.npy", "--layers", 3, ok=False)
    assert p.returncode == 2 and "--layers 3: the checkpoint has 2 layers" in p.stderr, p.stderr


def test_the_comparison_is_sensitive(tiny, tmp_path):
    """The tolerance catches what a wrong block would change: eps, the GELU's form, the RoBERTa
    positions, the mask, one transposed weight."""
    folder = tiny / "roberta_f32"
    excerpts = ref.read_tokens(folder / "tokens.txt")
    got = tool(folder, folder / "tokens.txt", tmp_path / "h.npy")
    model = ref.Model(folder)
    assert worst_error(got, ref.forward_all(model, excerpts), excerpts) <= RTOL
    wrong = []
    model.shape.eps = 1e-12  # RoBERTa's is 1e-5
    wrong.append(ref.forward_all(model, excerpts))
    model.shape.eps, model.shape.act = 1e-5, "gelu_new"
    wrong.append(ref.forward_all(model, excerpts))
    model.shape.act = "gelu"
    positions = model.positions
    model.positions = lambda ids: np.arange(len(ids))  # BERT's positions
    wrong.append(ref.forward_all(model, excerpts))
    model.positions = positions
    T = max(map(len, excerpts))
    wrong.append(np.stack([np.stack(model.forward(list(e) + [model.shape.pad] * (T - len(e)), None))
                           for e in excerpts]))  # padded keys not masked
    name = model.prefix + "encoder.layer.1.attention.self.value.weight"
    model.tensors[name] = model.tensors[name].T.copy()
    wrong.append(ref.forward_all(model, excerpts))
    for w in wrong:
        assert worst_error(got, w, excerpts) > 1e3 * RTOL


def test_padding_changes_nothing_on_the_real_tokens(tiny, tmp_path):
    folder = tiny / "roberta_f32"
    excerpts = ref.read_tokens(folder / "tokens.txt")
    alone = tmp_path / "alone.txt"
    tiny_encoders.write_tokens(alone, excerpts[1:2])
    padded = tool(folder, folder / "tokens.txt", tmp_path / "a.npy")
    single = tool(folder, alone, tmp_path / "b.npy")
    n = len(excerpts[1])
    assert padded.shape[2] > n == single.shape[2]
    assert np.allclose(padded[1, :, :n], single[0], rtol=0, atol=1e-13 * np.abs(single).max())


def test_refusals_name_the_file_and_exit_2(tiny, tmp_path):
    folder = tiny / "bert_f32"
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\n3 x\n")
    p = tool(folder, bad, tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and f"{bad}: line 2, column 3: token \"x\" is not a token id" in p.stderr, p.stderr
    bad.write_text("1 2\n\n3 50\n")  # vocab_size is 50
    p = tool(folder, bad, tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and f"{bad}: line 3, token 2: id 50 is not below the vocabulary size 50" in p.stderr
    bad.write_text(" ".join(["5"] * 41) + "\n")  # max_position_embeddings is 40
    p = tool(folder, bad, tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and "beyond max_position_embeddings = 40" in p.stderr, p.stderr
    p = tool(tmp_path / "nowhere", folder / "tokens.txt", tmp_path / "o.npy", ok=False)
    assert p.returncode == 2 and "nowhere" in p.stderr, p.stderr
    p = tool(folder, folder / "tokens.txt", tmp_path / "o.npy", "--bogus", ok=False)
    assert p.returncode == 2 and "unknown option --bogus" in p.stderr
    assert not (tmp_path / "o.npy").exists()


# --- the random initialisation -------------------------------------------------------------------

@pytest.mark.parametrize("case", ["bert_f32", "roberta_f32", "albert_groups_f64"])
def test_random_weights_run_as_saved_and_have_the_published_statistics(tiny, tmp_path, case):
    folder = tiny / case
    excerpts = ref.read_tokens(folder / "tokens.txt")
    saved = tmp_path / "saved"
    got = tool(folder, folder / "tokens.txt", tmp_path / "h.npy", "--random", 7, 3, "--save-weights", saved)
    model = ref.Model(saved)
    assert worst_error(got, ref.forward_all(model, excerpts), excerpts) <= RTOL
    cfg = json.loads((folder / "config.json").read_text())
    std, pad = cfg["initializer_range"], model.shape.pad
    weights = []
    for name, t in model.tensors.items():
        if "LayerNorm" in name or "layer_norm" in name:
            assert (t == (1.0 if name.endswith(".weight") else 0.0)).all(), name
        elif name.endswith(".bias"):
            assert (t == 0).all(), name
        else:
            table = t
            if name.endswith("word_embeddings.weight") or (
                    model.shape.family == "roberta" and name.endswith("position_embeddings.weight")):
                assert (t[pad] == 0).all(), f"{name}: the padding row is not zero"
                table = np.delete(t, pad, axis=0)
            assert abs(table.mean()) < 5 * std / np.sqrt(table.size), name
            weights.append(table.ravel() / std)
    z = np.concatenate(weights)
    assert abs(z.std() - 1) < 5 / np.sqrt(z.size) and abs(z.mean()) < 5 / np.sqrt(z.size)
    if model.shape.family != "albert":  # (ALBERT's X_0 is projected after the LayerNorm)
        # X_0 is a LayerNorm with gamma 1 and beta 0: every row has mean 0 and variance v / (v + eps),
        # v the variance of word + position + type, about 3 std^2
        x0 = got[:, 0]
        assert np.abs(x0.mean(axis=-1)).max() < 1e-12
        var = x0.var(axis=-1)
        assert (var <= 1).all() and (var > 1 - 20 * model.shape.eps / std ** 2).all()


def test_random_weights_are_keyed_by_seed_draw_and_layer(tiny, tmp_path):
    folder = tiny / "bert_f32"
    tokens = folder / "tokens.txt"
    a = tool(folder, tokens, tmp_path / "a.npy", "--random", 7, 3)
    b = tool(folder, tokens, tmp_path / "b.npy", "--random", 7, 3)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()
    for other in (("--random", 7, 4), ("--random", 8, 3)):
        assert not np.array_equal(a, tool(folder, tokens, tmp_path / "c.npy", *other))
    deep = tool(folder, tokens, tmp_path / "d.npy", "--random", 7, 3, "--layers", 5)
    assert deep.shape[1] == 6 and np.array_equal(deep[:, :3], b)  # the first layers do not depend on the depth
    ablated = tool(folder, tokens, tmp_path / "e.npy", "--random", 7, 3, "--no-mlp")
    assert np.array_equal(ablated[:, 0], a[:, 0])  # nor the embedding on the ablation


# --- the example configs -------------------------------------------------------------------------

PUBLISHED = {  # d, heads, intermediate, layers, vocab, max positions, token types, eps, act, pad, E
    "bert-base-uncased": (768, 12, 3072, 12, 30522, 512, 2, 1e-12, "gelu", 0, 768),
    "roberta-base": (768, 12, 3072, 12, 50265, 514, 1, 1e-5, "gelu", 1, 768),
    "albert-base-v2": (768, 12, 3072, 12, 30000, 512, 2, 1e-12, "gelu_new", 0, 128),
    "TinyBERT_General_4L_312D": (312, 12, 1200, 4, 30522, 512, 2, 1e-12, "gelu", 0, 312),
}


def test_example_configs_have_the_published_sizes():
    assert sorted(p.name for p in EXAMPLES.iterdir()) == sorted(PUBLISHED)
    for name, want in PUBLISHED.items():
        s = ref.Shape.of(json.loads((EXAMPLES / name / "config.json").read_text()))
        got = (s.d, s.heads, s.intermediate, s.layers, s.vocab, s.max_positions, s.type_vocab, s.eps, s.act, s.pad,
               s.embedding_size)
        assert got == want, name
        assert (s.groups, s.inner) == (1, 1)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_rcsweep_reads_the_example_configs_and_tokens(tmp_path, name):
    """One random block of each published shape on the example token file (TinyBERT: all 32
    excerpts; the 768-wide ones: the first 2)."""
    assert TOOL.exists(), TOOL
    tokens = EXAMPLE_TOKENS
    excerpts = ref.read_tokens(tokens)
    if name != "TinyBERT_General_4L_312D":
        excerpts = excerpts[:2]
        tokens = tmp_path / "two.txt"
        tiny_encoders.write_tokens(tokens, excerpts)
    got = tool(EXAMPLES / name, tokens, tmp_path / "h.npy", "--random", 1, 0, "--layers", 1)
    d = PUBLISHED[name][0]
    assert got.shape == (len(excerpts), 2, max(map(len, excerpts)), d)
    assert np.isfinite(got).all()


# --- a second reference: torch.nn modules ----------------------------------------------------------

def torch_forward(model, ids, real):
    """The published block from torch.nn.Linear, nn.LayerNorm and F.gelu / F.relu, in float64."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    s = model.shape
    dt = torch.float64

    def lin(name):
        w = torch.tensor(model.t(name + ".weight"), dtype=dt)
        m = torch.nn.Linear(w.shape[1], w.shape[0], dtype=dt)
        with torch.no_grad():
            m.weight.copy_(w)
            m.bias.copy_(torch.tensor(model.t(name + ".bias"), dtype=dt))
        return m

    def norm(name, n):
        m = torch.nn.LayerNorm(n, eps=s.eps, dtype=dt)
        with torch.no_grad():
            m.weight.copy_(torch.tensor(model.t(name + ".weight"), dtype=dt))
            m.bias.copy_(torch.tensor(model.t(name + ".bias"), dtype=dt))
        return m

    act = {"gelu": F.gelu, "gelu_new": lambda x: F.gelu(x, approximate="tanh"), "relu": F.relu}[s.act]
    e = "embeddings."
    ids_t = torch.tensor(ids)
    pos = torch.tensor(model.positions(ids))
    x = (torch.tensor(model.t(e + "word_embeddings.weight"))[ids_t] +
         torch.tensor(model.t(e + "position_embeddings.weight"))[pos] +
         torch.tensor(model.t(e + "token_type_embeddings.weight"))[torch.zeros_like(ids_t)])
    x = norm(e + "LayerNorm", model.shape.embedding_size)(x)
    if s.family == "albert":
        x = lin("encoder.embedding_hidden_mapping_in")(x)
    mask = torch.zeros(len(ids), dtype=dt).masked_fill(~torch.tensor(real), torch.finfo(dt).min)
    out = [x]
    for layer in range(s.layers):
        for n in model.block_names(layer, s.layers):
            T, dh = x.shape[0], s.d // s.heads
            q, k, v = (lin(n[r])(x).view(T, s.heads, dh).transpose(0, 1) for r in "qkv")
            p = torch.softmax(q @ k.transpose(1, 2) / dh ** 0.5 + mask, dim=-1)
            a = norm(n["norm_a"], s.d)(x + lin(n["o"])((p @ v).transpose(0, 1).reshape(T, s.d)))
            x = norm(n["norm_m"], s.d)(a + lin(n["out"])(act(lin(n["in"])(a))))
        out.append(x)
    return np.stack([t.detach().numpy() for t in out])


@pytest.mark.parametrize("case", ["bert_f32", "roberta_f32", "albert_f32"])
def test_torch_modules_agree(tiny, tmp_path, case):
    pytest.importorskip("torch")
    folder = tiny / case
    excerpts = ref.read_tokens(folder / "tokens.txt")
    got = tool(folder, folder / "tokens.txt", tmp_path / "h.npy")
    model = ref.Model(folder)
    T = max(map(len, excerpts))
    want = np.stack([torch_forward(model, list(e) + [model.shape.pad] * (T - len(e)),
                                   [True] * len(e) + [False] * (T - len(e))) for e in excerpts])
    assert worst_error(got, want, excerpts) <= 1e-11
