"""The NumPy reference of the Mamba-2 block and model (mamba2_reference.py) against its own definitions
and a second, torch.nn reference, on tiny mamba_ssm-style checkpoints (tiny_mamba2.py): the SSD's
scan, quadratic and chunked forms agree to 1e-13 relative (several T, chunk lengths that do not
divide T, one and two groups, D per head and per channel) and equal a hand-computed case; the causal
convolution, the gated RMSNorm and softplus equal their formulas; every layer's hidden state equals
a forward built from torch.nn modules with the same weights to 1e-12 relative (where python3-torch
is installed); the random initialisation has mamba_ssm's distributions; the ablations change what
they should; bad configs are refused naming the file and the key; the published configs of
mamba2-130m and mamba2-2.7b (jobs/examples/mamba2/) are read. No rcsweep binary is needed."""
import json
import math
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

RTOL = 1e-12
FORMS_RTOL = 1e-13
EXAMPLES = ROOT / "jobs" / "examples" / "mamba2"


def rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_mamba2")
    for case in tiny_mamba2.CASES:
        tiny_mamba2.write_case(root / case, case)
    return root


def ids_for(model, T, seed=0):
    return np.random.default_rng(seed).integers(0, model.shape.vocab_size, T)


def ssd_inputs(rng, T, H, P, G, N, per_channel_D=False):
    x = rng.standard_normal((T, H, P))
    delta = rng.uniform(0.05, 1.5, (T, H))
    A = -rng.uniform(0.2, 3.0, H)
    B, C = rng.standard_normal((T, G, N)), rng.standard_normal((T, G, N))
    D = rng.standard_normal((H, P)) if per_channel_D else rng.standard_normal(H)
    return x, delta, A, B, C, D


# --- the SSD -----------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 2, 5, 37, 100])
@pytest.mark.parametrize("G", [1, 2])
def test_scan_quadratic_and_chunked_agree(T, G):
    rng = np.random.default_rng([T, G])
    for per_channel_D in (False, True):
        args = ssd_inputs(rng, T, 4, 3, G, 5, per_channel_D)
        y = ref.ssd_scan(*args)
        assert rel(ref.ssd_quadratic(*args), y) <= FORMS_RTOL
        for chunk in (1, 3, 7, 16, 256):  # 3, 7, 16 divide none of the T > 2
            assert rel(ref.ssd_chunked(*args, chunk), y) <= FORMS_RTOL, chunk


def test_the_mixer_matrix_maps_x_to_y():
    rng = np.random.default_rng(3)
    x, delta, A, B, C, D = ssd_inputs(rng, 9, 4, 2, 2, 3)
    M = ref.mixer_matrix(delta, A, B, C, D)
    assert M.shape == (4, 9, 9)
    assert np.all(np.triu(M, 1) == 0)  # causal
    y = ref.ssd_scan(x, delta, A, B, C, D)
    assert rel(np.einsum("hts,shp->thp", M, x), y) <= FORMS_RTOL
    # head h reads group h // 2: heads 0, 1 share B, C (their M differ by the decays and Delta only)
    L0 = ref.decay_matrix(delta[:, 0], A[0])
    assert rel(M[0] - D[0] * np.eye(9), L0 * (C[:, 0] @ B[:, 0].T) * delta[None, :, 0]) <= 1e-15
    L3 = ref.decay_matrix(delta[:, 3], A[3])
    assert rel(M[3] - D[3] * np.eye(9), L3 * (C[:, 1] @ B[:, 1].T) * delta[None, :, 3]) <= 1e-15


def test_the_recurrence_by_hand():
    """T = 3, one head, one channel, d_state 1: the state and the output in closed form."""
    x = np.array([0.7, -1.3, 2.1])
    dl = np.array([0.4, 0.9, 0.25])
    A, D = -1.7, 0.6
    B = np.array([1.2, -0.5, 0.8])
    C = np.array([0.3, 1.1, -0.9])
    a2, a3 = math.exp(dl[1] * A), math.exp(dl[2] * A)
    s1 = dl[0] * B[0] * x[0]
    s2 = a2 * s1 + dl[1] * B[1] * x[1]
    s3 = a3 * s2 + dl[2] * B[2] * x[2]
    want = np.array([C[0] * s1, C[1] * s2, C[2] * s3]) + D * x
    args = (x.reshape(3, 1, 1), dl.reshape(3, 1), np.array([A]), B.reshape(3, 1, 1), C.reshape(3, 1, 1),
            np.array([D]))
    for y in (ref.ssd_scan(*args), ref.ssd_quadratic(*args), ref.ssd_chunked(*args, 2)):
        assert np.allclose(y.ravel(), want, rtol=1e-14, atol=0)
    M = ref.mixer_matrix(*args[1:])[0]
    want_M = np.array([[C[0] * B[0] * dl[0] + D, 0, 0],
                       [C[1] * a2 * B[0] * dl[0], C[1] * B[1] * dl[1] + D, 0],
                       [C[2] * a3 * a2 * B[0] * dl[0], C[2] * a3 * B[1] * dl[1], C[2] * B[2] * dl[2] + D]])
    assert np.allclose(M, want_M, rtol=1e-14, atol=1e-16)


# --- the pieces against their formulas ---------------------------------------------------------

def test_causal_conv1d_against_a_loop():
    rng = np.random.default_rng(5)
    for T, Cn, K in ((1, 3, 4), (6, 5, 4), (11, 2, 2), (3, 4, 5)):
        x, w, b = rng.standard_normal((T, Cn)), rng.standard_normal((Cn, 1, K)), rng.standard_normal(Cn)
        want = np.zeros((T, Cn))
        for t in range(T):
            for c in range(Cn):
                want[t, c] = b[c] + sum(w[c, 0, k] * x[t - (K - 1) + k, c] for k in range(K) if t - (K - 1) + k >= 0)
        assert np.allclose(ref.causal_conv1d(x, w, b), want, rtol=1e-14, atol=1e-15)
        assert np.allclose(ref.causal_conv1d(x, w, None), want - b, rtol=1e-13, atol=1e-14)


def test_softplus_silu_and_the_gated_norm_against_their_formulas():
    v = np.array([-800.0, -30.0, -1.5, 0.0, 0.3, 19.9, 20.0, 20.5, 700.0])
    sp = ref.softplus(v)
    for a, b in zip(v, sp):
        assert b == a if a > 20 else abs(b - math.log1p(math.exp(a))) <= 2e-16 * b, a
    assert np.allclose(ref.softplus(ref.inverse_softplus(np.array([1e-4, 0.01, 0.1, 3.0]))),
                       [1e-4, 0.01, 0.1, 3.0], rtol=1e-13)
    s = np.array([-3.0, 0.0, 2.0])
    assert np.allclose(ref.silu(s), s / (1 + np.exp(-s)), rtol=1e-15)
    rng = np.random.default_rng(6)
    y, z, w = rng.standard_normal((4, 12)), rng.standard_normal((4, 12)), rng.standard_normal(12)
    for groups in (1, 2, 3):
        g = y * (z / (1 + np.exp(-z)))
        want = np.concatenate([g[:, k * 12 // groups:(k + 1) * 12 // groups] /
                               np.sqrt((g[:, k * 12 // groups:(k + 1) * 12 // groups] ** 2).mean(1, keepdims=True)
                                       + 1e-5) for k in range(groups)], axis=1) * w
        assert np.allclose(ref.gated_rms_norm(y, z, w, groups), want, rtol=1e-14, atol=0)
    before = ref.gated_rms_norm(y, z, w, 2, norm_before_gate=True)
    assert np.allclose(before, ref.rms_norm(y, w, groups=2) * ref.silu(z), rtol=1e-15)
    assert np.allclose(ref.rms_norm(y, w), y / np.sqrt((y ** 2).mean(1, keepdims=True) + 1e-5) * w, rtol=1e-15)


# --- a second reference: torch.nn modules ---------------------------------------------------------

def torch_forward(model, ids, lam=1.0, norm=True, gate=True, gated_norm=True):
    """[X_0, ..., X_L, RMSNorm_f(X_L)] from nn.Embedding, nn.Linear, nn.Conv1d (depthwise, padding
    K - 1, cut to T), F.softplus, F.silu and a loop for the scan, in float64."""
    torch = pytest.importorskip("torch")
    F, nn, f64 = torch.nn.functional, torch.nn, torch.float64
    torch.set_num_threads(1)
    s = model.shape
    E, G, N, H, P, K = s.d_inner, s.ngroups, s.d_state, s.nheads, s.headdim, s.d_conv

    def tt(name):
        return torch.tensor(model.t(name), dtype=f64)

    def loaded(module, **params):
        with torch.no_grad():
            for key, value in params.items():
                getattr(module, key).copy_(value)
        return module

    def rms(x, w, groups=1):
        xg = x.reshape(*x.shape[:-1], groups, -1)
        return (xg * torch.rsqrt(xg.pow(2).mean(-1, keepdim=True) + 1e-5)).reshape(x.shape) * w

    with torch.no_grad():
        emb = loaded(nn.Embedding(s.vocab_rows, s.d_model, dtype=f64), weight=tt("backbone.embedding.weight"))
        x = emb(torch.tensor(np.asarray(ids)))
        T = x.shape[0]
        out = [x]
        for i in range(model.layers):
            m = f"backbone.layers.{i}.mixer."
            in_proj = loaded(nn.Linear(s.d_model, s.d_in_proj, bias=False, dtype=f64), weight=tt(m + "in_proj.weight"))
            conv = loaded(nn.Conv1d(s.conv_dim, s.conv_dim, K, groups=s.conv_dim, padding=K - 1, dtype=f64),
                          weight=tt(m + "conv1d.weight"), bias=tt(m + "conv1d.bias"))
            out_proj = loaded(nn.Linear(E, s.d_model, bias=False, dtype=f64), weight=tt(m + "out_proj.weight"))
            u = rms(x, tt(f"backbone.layers.{i}.norm.weight")) if norm else x
            z, xBC, dt = torch.split(in_proj(u), [E, E + 2 * G * N, H], dim=-1)
            xBC = F.silu(conv(xBC.T.unsqueeze(0))[0, :, :T].T)
            xs, B, C = torch.split(xBC, [E, G * N, G * N], dim=-1)
            delta = F.softplus(dt + tt(m + "dt_bias"))
            A, D = -torch.exp(tt(m + "A_log")), tt(m + "D")
            xh = xs.reshape(T, H, P)
            B = B.reshape(T, G, N).repeat_interleave(H // G, dim=1)
            C = C.reshape(T, G, N).repeat_interleave(H // G, dim=1)
            S = torch.zeros(H, P, N, dtype=f64)
            ys = []
            for t in range(T):
                S = torch.exp(delta[t] * A)[:, None, None] * S + \
                    (delta[t][:, None, None] * xh[t][:, :, None]) * B[t][:, None, :]
                ys.append((S * C[t][:, None, :]).sum(-1) + D[:, None] * xh[t])
            y = torch.stack(ys).reshape(T, E)
            if gated_norm:
                y = rms(y * F.silu(z) if gate else y, tt(m + "norm.weight"), G)
            elif gate:
                y = y * F.silu(z)
            x = (lam[i] if isinstance(lam, list) else lam) * x + out_proj(y)
            out.append(x)
        out.append(rms(x, tt("backbone.norm_f.weight")) if norm else x)
    return [o.numpy() for o in out]


@pytest.mark.parametrize("case", sorted(tiny_mamba2.CASES))
def test_every_layer_equals_the_torch_modules(tiny, case):
    pytest.importorskip("torch")
    model = ref.Model.from_folder(tiny / case)
    ids = ids_for(model, 23)
    xs = model.forward(ids=ids)
    want = torch_forward(model, ids)
    assert len(xs) == model.shape.n_layer + 1
    for layer, (a, b) in enumerate(zip(xs + [model.final(xs[-1])], want)):
        assert rel(a, b) <= RTOL, (case, layer)


@pytest.mark.parametrize("ablation", [dict(gate=False), dict(gated_norm=False), dict(norm=False),
                                      dict(lam=0.0), dict(lam=[-0.5, 2.0, 0.3]), dict(lam=-1.0, gate=False)])
def test_ablations_equal_the_torch_modules(tiny, ablation):
    pytest.importorskip("torch")
    model = ref.Model.from_folder(tiny / "mamba2_groups_f64")  # 3 layers, 4 heads, 2 groups
    ids = ids_for(model, 17, seed=1)
    xs = model.forward(ids=ids, **ablation)
    want = torch_forward(model, ids, **ablation)
    final = model.final(xs[-1], norm=ablation.get("norm", True))
    for layer, (a, b) in enumerate(zip(xs + [final], want)):
        assert rel(a, b) <= RTOL, (ablation, layer)


def test_the_torch_comparison_is_sensitive(tiny, monkeypatch):
    """What a wrong block would change shows by far more than the tolerance: heads reading groups
    round-robin (h % G), the convolution's taps reversed, exp in place of softplus, the gated
    norm over all channels instead of per group."""
    pytest.importorskip("torch")
    model = ref.Model.from_folder(tiny / "mamba2_groups_f64")
    ids = ids_for(model, 15, seed=5)
    want = torch_forward(model, ids)[1:]
    assert max(rel(a, b) for a, b in zip(model.forward(ids=ids)[1:], want)) <= RTOL
    wrongs = [("_group_of_heads", lambda H, G: np.arange(H) % G),
              ("causal_conv1d", lambda x, w, b, f=ref.causal_conv1d: f(x, w[:, :, ::-1], b)),
              ("softplus", np.exp),
              ("gated_rms_norm", lambda y, z, w, groups, **k: ref.rms_norm(y * ref.silu(z), w))]
    for name, wrong in wrongs:
        with monkeypatch.context() as m:
            m.setattr(ref, name, wrong)
            got = model.forward(ids=ids)[1:]
        assert max(rel(a, b) for a, b in zip(got, want)) > 1000 * RTOL, name


# --- the model ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(tiny_mamba2.CASES))
def test_the_three_ssd_forms_agree_in_the_model(tiny, case):
    model = ref.Model.from_folder(tiny / case)
    ids = ids_for(model, 41, seed=2)
    xs = model.forward(ids=ids)
    for form, chunk in (("quadratic", None), ("chunked", 8), ("chunked", 13), ("chunked", None)):
        ys = model.forward(ids=ids, ssd=form, chunk=chunk)
        for layer in range(1, len(xs)):
            assert rel(ys[layer], xs[layer]) <= FORMS_RTOL, (form, chunk, layer)


def test_the_folders_are_read_as_written(tiny):
    """Every dtype's values come back as the writer stored them; lm_head is ignored; the shapes
    follow the config."""
    for case, (args, dtype, lm_head) in tiny_mamba2.CASES.items():
        cfg = tiny_mamba2.config(**args)
        tensors = tiny_mamba2.state_dict(cfg, np.random.default_rng([0, sorted(tiny_mamba2.CASES).index(case)]))
        model = ref.Model.from_folder(tiny / case)
        s = model.shape
        assert 2 <= s.n_layer <= 4 and 32 <= s.d_model <= 64 and 8 <= s.d_state <= 16 and 2 <= s.nheads <= 4
        assert model.t("backbone.embedding.weight").shape == (64, s.d_model)  # 50 rounded up to 16
        assert ("lm_head.weight" in model.tensors) == lm_head
        for name, value in tensors.items():
            assert np.array_equal(model.t(name), tiny_mamba2.stored_value(value, dtype)), (case, name)
    assert {c[0].get("ngroups", 1) for c in tiny_mamba2.CASES.values()} == {1, 2}


def test_ablations_change_what_they_should(tiny):
    model = ref.Model.from_folder(tiny / "mamba2_f64")
    ids = ids_for(model, 12, seed=3)
    xs = model.forward(ids=ids)
    # lambda = 1 with everything on is the published pre-norm block
    for layer in range(model.layers):
        u = ref.rms_norm(xs[layer], model.t(f"backbone.layers.{layer}.norm.weight"))
        assert np.array_equal(xs[layer + 1], xs[layer] + model.mixer(layer, u))
    assert all(np.array_equal(a, b) for a, b in zip(xs, model.forward(ids=ids, lam=[1.0, 1.0])))
    for off in (dict(gate=False), dict(gated_norm=False), dict(norm=False)):
        ys = model.forward(ids=ids, **off)
        assert np.array_equal(ys[0], xs[0]) and rel(ys[1], xs[1]) > 1e-3, off
    # lambda = 0: each layer's output is the mixer's of its normed input, the residual gone
    zs = model.forward(ids=ids, lam=0.0)
    for layer in range(model.layers):
        u = ref.rms_norm(zs[layer], model.t(f"backbone.layers.{layer}.norm.weight"))
        assert np.array_equal(zs[layer + 1], model.mixer(layer, u))
    # the first layer is linear in its lambda (X_0 fixed): X_1(lam) - X_1(0) = lam X_0, negative too
    for lam in (-0.7, 0.5, 3.0):
        assert rel(model.forward(ids=ids, lam=[lam, 1.0])[1] - zs[1], lam * xs[0]) <= 1e-14
    # gate off: the gated norm normalises y alone; gated norm off: y * SiLU(z)
    u = ref.rms_norm(xs[0], model.t("backbone.layers.0.norm.weight"))
    i = model.ssm_inputs(0, u)
    y = ref.ssd_scan(i["x"], i["delta"], i["A"], i["B"], i["C"], i["D"]).reshape(12, -1)
    w_out, w_n = model.t("backbone.layers.0.mixer.out_proj.weight"), model.t("backbone.layers.0.mixer.norm.weight")
    assert rel(model.mixer(0, u, gate=False), ref.rms_norm(y, w_n) @ w_out.T) <= 1e-14
    assert rel(model.mixer(0, u, gated_norm=False), (y * ref.silu(i["z"])) @ w_out.T) <= 1e-14
    assert rel(model.mixer(0, u, gate=False, gated_norm=False), y @ w_out.T) <= 1e-14
    with pytest.raises(ValueError, match="3 lambdas for 2 layers"):
        model.forward(ids=ids, lam=[1, 1, 1])


def test_an_input_matrix_instead_of_ids_and_fewer_layers(tiny):
    model = ref.Model.from_folder(tiny / "mamba2_f32")
    ids = ids_for(model, 10)
    xs = model.forward(ids=ids)
    assert all(np.array_equal(a, b) for a, b in zip(xs, model.forward(x=model.embed(ids))))
    assert all(np.array_equal(a, b) for a, b in zip(xs[:3], model.forward(ids=ids, layers=2)))
    with pytest.raises(ValueError, match="5 layers: the model has 4"):
        model.forward(ids=ids, layers=5)
    with pytest.raises(ValueError, match=r"\[0, 64\)"):
        model.forward(ids=[0, 64])


def test_hidden_states_are_finite_up_to_T_256(tiny):
    for model in (ref.Model.from_folder(tiny / "mamba2_groups_f64"),
                  ref.Model.random(tiny_mamba2.config(d_model=32, n_layer=4, d_state=16, headdim=16, ngroups=2), 4)):
        ids = ids_for(model, 256, seed=4)
        xs = model.forward(ids=ids)
        assert all(np.isfinite(x).all() for x in xs) and np.isfinite(model.final(xs[-1])).all()
        ys = model.forward(ids=ids, ssd="chunked", chunk=48)
        assert max(rel(a, b) for a, b in zip(ys[1:], xs[1:])) <= FORMS_RTOL


# --- the random initialisation -----------------------------------------------------------------

def test_random_initialisation_has_mamba_ssm_distributions(tmp_path):
    cfg = tiny_mamba2.config(d_model=64, n_layer=3, d_state=16, headdim=4, ngroups=2)  # 32 heads
    model = ref.Model.random(cfg, seed=11)
    t = model.tensors
    emb = t["backbone.embedding.weight"]
    assert emb.shape == (64, 64) and abs(emb.std() - 0.02) < 0.002 and abs(emb.mean()) < 0.002
    assert np.all(t["backbone.norm_f.weight"] == 1)
    A, dt = [], []
    for i in range(3):
        m = f"backbone.layers.{i}.mixer."
        assert np.all(t[f"backbone.layers.{i}.norm.weight"] == 1) and np.all(t[m + "norm.weight"] == 1)
        assert np.all(t[m + "D"] == 1) and t[m + "D"].shape == (32,)
        for name, bound in (("in_proj.weight", 1 / 8), ("conv1d.weight", 1 / 2), ("conv1d.bias", 1 / 2),
                            ("out_proj.weight", 1 / math.sqrt(128) / math.sqrt(3))):
            v = t[m + name]
            assert np.abs(v).max() <= bound and np.abs(v).max() > 0.9 * bound, name  # U(-bound, bound)
            assert abs(v.var() - bound ** 2 / 3) < 0.2 * bound ** 2 / 3, name
        A.append(np.exp(t[m + "A_log"]))
        dt.append(ref.softplus(t[m + "dt_bias"]))
    A, dt = np.concatenate(A), np.concatenate(dt)
    assert A.min() >= 1 and A.max() <= 16 and A.min() < 2 and A.max() > 14  # U(1, 16)
    assert dt.min() >= 0.001 * (1 - 1e-12) and dt.max() <= 0.1 * (1 + 1e-12)
    assert abs(np.log(dt).mean() - 0.5 * (math.log(0.001) + math.log(0.1))) < 0.5  # log-uniform
    # the floor: dt below dt_init_floor is raised to it
    floored = ref.Model.random(tiny_mamba2.config(d_model=64, n_layer=1, d_state=8, headdim=4, dt_min=1e-5,
                                                  dt_max=1e-3, dt_init_floor=1e-4), seed=2)
    d = ref.softplus(floored.t("backbone.layers.0.mixer.dt_bias"))
    assert d.min() >= 1e-4 * (1 - 1e-9) and np.sum(np.abs(d - 1e-4) < 1e-12) >= 5 and d.max() > 2e-4
    # the same seed gives the same bits, another seed other numbers; saved weights run the same
    again = ref.Model.random(cfg, seed=11)
    assert all(np.array_equal(t[k], again.tensors[k]) for k in t)
    assert not np.array_equal(t["backbone.layers.0.mixer.in_proj.weight"],
                              ref.Model.random(cfg, seed=12).t("backbone.layers.0.mixer.in_proj.weight"))
    tiny_mamba2.write_folder(tmp_path / "saved", cfg, t)
    ids = ids_for(model, 9)
    assert all(np.array_equal(a, b) for a, b in
               zip(model.forward(ids=ids), ref.Model.from_folder(tmp_path / "saved").forward(ids=ids)))


# --- configs -----------------------------------------------------------------------------------

def test_the_published_configs_are_read():
    for name, d, L, H, E in (("mamba2-130m", 768, 24, 24, 1536), ("mamba2-2.7b", 2560, 64, 80, 5120)):
        s = ref.read_config(EXAMPLES / name)
        assert (s.d_model, s.n_layer, s.nheads, s.d_inner) == (d, L, H, E), name
        assert (s.d_state, s.d_conv, s.expand, s.headdim, s.ngroups, s.chunk_size) == (128, 4, 2, 64, 1, 256)
        assert (s.vocab_size, s.vocab_rows) == (50277, 50288)
        assert s.A_init_range == (1.0, 16.0) and (s.dt_min, s.dt_max, s.dt_init_floor) == (0.001, 0.1, 1e-4)
        assert s.rmsnorm and not s.norm_before_gate and s.tie_embeddings
        assert s.d_in_proj == 2 * E + 2 * 128 + H and s.conv_dim == E + 256


BAD = [  # (change to a good config, the key the message names, words of the reason)
    (lambda c: c.pop("d_model"), "d_model", "missing"),
    (lambda c: c.pop("ssm_cfg"), "ssm_cfg", "missing"),
    (lambda c: c["ssm_cfg"].pop("layer"), "ssm_cfg.layer", "Mamba1"),
    (lambda c: c["ssm_cfg"].update(layer="Mamba1"), "ssm_cfg.layer", "'Mamba1' is not \"Mamba2\""),
    (lambda c: c["ssm_cfg"].update(d_stat=8), "ssm_cfg.d_stat", "not a key"),
    (lambda c: c["ssm_cfg"].update(headdim=24), "ssm_cfg.headdim", "does not divide"),
    (lambda c: c["ssm_cfg"].update(ngroups=3), "ssm_cfg.ngroups", "does not divide the 4 heads"),
    (lambda c: c["ssm_cfg"].update(d_ssm=32), "ssm_cfg.d_ssm", "gated MLP"),
    (lambda c: c.update(d_intermediate=128), "d_intermediate", "MLP"),
    (lambda c: c.update(attn_layer_idx=[1]), "attn_layer_idx", "attention"),
    (lambda c: c.update(rms_norm=False), "rms_norm", "LayerNorm"),
    (lambda c: c.update(n_layer=0), "n_layer", "positive integer"),
    (lambda c: c.clear() or c.update(model_type="mamba2", hidden_size=32), "model_type", "transformers"),
]


@pytest.mark.parametrize("k", range(len(BAD)))
def test_bad_configs_are_refused_naming_file_and_key(tmp_path, k):
    change, key, why = BAD[k]
    cfg = tiny_mamba2.config(d_model=32, n_layer=2, d_state=8, headdim=16)
    ref.Shape.of(cfg)  # the good one is read
    change(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ref.ConfigError) as e:
        ref.read_config(tmp_path)
    assert str(e.value).startswith(f"{path}: {key}: ") and why in str(e.value), str(e.value)


def test_missing_files_and_tensors_are_refused(tmp_path, tiny):
    with pytest.raises(ref.ConfigError, match="no such file"):
        ref.read_config(tmp_path / "nothing")
    cfg = tiny_mamba2.config(d_model=32, n_layer=2, d_state=8, headdim=16)
    tensors = tiny_mamba2.state_dict(cfg, np.random.default_rng(0))
    del tensors["backbone.layers.1.mixer.A_log"]
    tiny_mamba2.write_folder(tmp_path / "a", cfg, tensors)
    with pytest.raises(ValueError, match=r"a: tensor backbone.layers.1.mixer.A_log is missing"):
        ref.Model.from_folder(tmp_path / "a")
    tensors = tiny_mamba2.state_dict(cfg, np.random.default_rng(0))
    tensors["backbone.layers.0.mixer.in_proj.weight"] = tensors["backbone.layers.0.mixer.in_proj.weight"].T
    tiny_mamba2.write_folder(tmp_path / "b", cfg, tensors)
    with pytest.raises(ValueError, match=r"in_proj.weight has shape \[32, 148\], the config gives \[148, 32\]"):
        ref.Model.from_folder(tmp_path / "b")


def test_the_command_line(tiny, tmp_path):
    folder = tiny / "mamba2_bf16"
    (tmp_path / "ids.txt").write_text("# ids\n3 1 4 1 5\n9 2 6\n")
    run = [sys.executable, str(HERE / "mamba2_reference.py")]
    p = subprocess.run(run + [str(folder), str(tmp_path / "ids.txt"), str(tmp_path / "h.npy")], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    model = ref.Model.from_folder(folder)
    xs = model.forward(ids=[3, 1, 4, 1, 5, 9, 2, 6])
    assert np.array_equal(np.load(tmp_path / "h.npy"), np.stack(xs + [model.final(xs[-1])]))
    p = subprocess.run(run + [str(folder), "7", str(tmp_path / "r.npy"), "--random", "3"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert np.load(tmp_path / "r.npy").shape == (4, 7, 32)
    p = subprocess.run(run + [str(folder)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "MODEL_DIR" in p.stderr
