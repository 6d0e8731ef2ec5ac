"""An independent NumPy forward of the Mamba-2 block and model, the reference rcsweep's C++ Mamba-2
block is tested against (tests/python/test_mamba2_reference.py tests the reference itself;
tests/python/test_mamba2_forward.py and tests/e2e/test_mamba2_sweep.py hold the C++ block and a
sweep's layers against it).

Written from the papers (Mamba-2 / SSD: T. Dao, A. Gu, "Transformers are SSMs: Generalized Models
and Efficient Algorithms Through Structured State Space Duality", arXiv:2405.21060; the lambda-skip:
F. Arangath Joseph et al., "Lambda-Skip Connections: the architectural component that prevents Rank
Collapse", arXiv:2410.10609) and from the semantics of the `mamba_ssm` package's modules
(state-spaces/mamba: mamba_ssm.modules.mamba2.Mamba2, mamba_ssm.modules.block.Block,
mamba_ssm.models.mixer_seq_simple.MixerModel and MambaLMHeadModel, the gated norm
mamba_ssm.ops.triton.layernorm_gated.RMSNorm, the SSD reference ssd_minimal_discrete), not from
rcsweep's C++. Its own config reading; safetensors are read by
encoder_reference.py's reader (F64, F32, F16, BF16; sharded folders too). Float64 throughout.

The model (T tokens, d = d_model, E = d_inner = expand d, P = headdim, H = E / P heads, G = ngroups
groups of B and C, N = d_state, K = d_conv; head h reads group g(h) = h // (H / G), as
mamba_ssm's `repeat(B, "b l g n -> b l (g h) n")`):

    X_0 = embedding[ids]                         (or a given T x d matrix)
    X_l = lambda_l X_(l-1) + Mixer_l(RMSNorm_l(X_(l-1)))         l = 1..L; published: lambda_l = 1
    out = RMSNorm_f(X_L)                                          backbone.norm_f

RMSNorm(x) = x / sqrt(mean(x^2) + 1e-5) * w over the d features (mamba_ssm's RMSNorm; MixerModel's
norm_epsilon 1e-5, which MambaLMHeadModel does not change). The mixer of one layer, u = RMSNorm_l(X):

    [z | xBC | dt] = u W_in^T            widths E | E + 2 G N | H  (in_proj rows: z, x, B, C, dt)
    xBC = SiLU(causal depthwise conv1d(xBC))   xBC[t,c] <- b[c] + sum_k w[c,0,k] xBC[t-(K-1)+k, c],
                                                zero before t = 0 (nn.Conv1d, groups = channels,
                                                padding K-1, the first T outputs)
    [x | B | C] = xBC                    widths E | G N | G N
    Delta[t,h] = softplus(dt[t,h] + dt_bias[h])   softplus(v) = v for v > 20 (torch's threshold,
                                                  kept by mamba_ssm's kernels), else log(1 + e^v);
                                                  then clamped to ssm_cfg's dt_limit
    A_h = -exp(A_log[h])
    S_t,h = exp(Delta[t,h] A_h) S_(t-1),h + Delta[t,h] x_t,h B_t,g(h)^T     (P x N; S_(-1) = 0)
    y_t,h = S_t,h C_t,g(h) + D_h x_t,h          (D per channel when ssm_cfg.D_has_hdim)
    y = RMSNorm_G(y * SiLU(z)) * w_norm          the gated norm (RMSNormGated, norm_before_gate =
                                                  False, eps 1e-5, mean over groups of E / G
                                                  channels); norm_before_gate = True:
                                                  RMSNorm_G(y) * w_norm * SiLU(z); ssm_cfg
                                                  rmsnorm = False: y * SiLU(z), no norm
    Mixer = y W_out^T                            (biases on in_proj and out_proj when ssm_cfg.bias)

The SSD three ways, equal to rounding (ssd_scan, ssd_quadratic, ssd_chunked): per head
y_h = M_h x_h + D_h x_h with the T x T mixer matrix (mixer_matrix)

    M_h[t,s] = L_h[t,s] (C_t,g . B_s,g) Delta[s,h],   L_h[t,s] = exp(sum_(r=s+1..t) Delta[r,h] A_h)
               for s <= t, 0 above the diagonal     (SSD paper's M_ji = C_j^T A_(j:i) B-bar_i with
               the discretised B-bar_s = Delta_s B_s: Delta belongs to M, not to the input x);

the chunked form (chunk length Q, the last chunk shorter when Q does not divide T) applies M within
each chunk and carries the state S between chunks (the SSD paper's state passing, §6).

Conventions taken, and from where. Checked against the source of state-spaces/mamba (commit
e9594ce): MambaConfig's and Mamba2.__init__'s defaults, d_in_proj = 2 d_inner + 2 G N + H and the
split z | xBC | dt, conv_dim, the dt initialisation with its floor and the inverse softplus, A_log =
log U(A_init_range), D, the gated norm RMSNorm(d_ssm, eps = 1e-5, group_size = d_ssm / ngroups) as
rms_norm_ref computes it (the gate before the norm unless norm_before_gate), z applied in the scan
when rmsnorm is false, the kernels' softplus only for dt <= 20 and then the clamp to dt_limit, head
h reading group h // (H / G), and _init_weights' out_proj kaiming_uniform divided by
sqrt(n_residuals_per_layer n_layer) with one residual per layer without an MLP. The published
config.json files of jobs/examples/mamba2/ are not in that repository (they are on the model hub)
and were written from the published hyperparameters:
- config.json is MambaLMHeadModel's MambaConfig: d_model, n_layer, vocab_size, ssm_cfg (with
  layer "Mamba2"; absent keys take Mamba2.__init__'s defaults: d_state 128, d_conv 4, expand 2,
  headdim 64, ngroups 1, A_init_range [1, 16], dt_min 0.001, dt_max 0.1, dt_init_floor 1e-4,
  dt_limit [0, inf], rmsnorm true, norm_before_gate false, D_has_hdim false, bias false, conv_bias
  true, chunk_size 256), d_intermediate (0: no MLP), attn_layer_idx (empty), rms_norm (true),
  residual_in_fp32, fused_add_norm (both change rounding only, not the float64 function),
  pad_vocab_size_multiple (the embedding has vocab_size rounded up to it rows), tie_embeddings
  (the LM head is not used here). Refused: a missing d_model, n_layer, vocab_size, ssm_cfg or
  ssm_cfg.layer (mamba_ssm would build Mamba1), another layer, hybrid attention layers, an MLP,
  LayerNorm models, d_ssm other than d_inner, unknown ssm_cfg keys, Hugging Face transformers'
  own Mamba2Config layout (model_type "mamba2"). Published folders ship pytorch_model.bin:
  scripts/convert_checkpoint.py writes model.safetensors from it, names kept. The configs of
  mamba2-130m and mamba2-2.7b in jobs/examples/mamba2/ are written from the published
  hyperparameters (ssm_cfg {"layer": "Mamba2"}, the rest Mamba2's defaults), not downloaded.
- Tensors: backbone.embedding.weight, backbone.layers.{i}.norm.weight,
  backbone.layers.{i}.mixer.{in_proj.weight, conv1d.weight (C x 1 x K), conv1d.bias, dt_bias,
  A_log, D, norm.weight, out_proj.weight}, backbone.norm_f.weight; lm_head.weight is ignored.
- Hidden state of layer l: X_l, the residual stream after l blocks (mamba_ssm carries it as the
  pair hidden_states + residual, summed in the next Block or before norm_f; Hugging Face's
  Mamba2Block returns it summed). X_0 is the embedding; the final normed output is separate.
- The lambda-skip (lambda-skip §5: an SSM layer with additive lambda-skip is Y = lambda X +
  SSM(X)) is put on the skip of the pre-norm block: X_l = lambda_l X_(l-1) + Mixer_l(RMSNorm_l(X_(l-1))),
  the norm inside the branch only; lambda = 1 is the published block, lambda = 0 removes the
  residual (X_l = Mixer_l(RMSNorm_l(X_(l-1)))), any real lambda, negative included, one per model
  or one per layer. Ablations: gate (SiLU(z) on or off; off: the gated norm normalises y alone),
  norm (the blocks' pre-norms and norm_f on or off), gated_norm (off: y * SiLU(z), mamba_ssm's
  rmsnorm = False path).

Random initialisation (random_tensors), as MambaLMHeadModel draws it (torch's generator is not
reproduced: numpy's Generator, seeded): embedding N(0, 0.02^2) (_init_weights); in_proj and
out_proj PyTorch's nn.Linear default U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform, a =
sqrt(5)), out_proj then divided by sqrt(n_layer) (_init_weights' rescale_prenorm_residual, one
residual per layer), biases (if any) 0; conv1d weight and bias U(-1/sqrt(K), 1/sqrt(K)) (fan_in =
K for a depthwise convolution; U(-conv_init, conv_init) for the weight when ssm_cfg.conv_init is
set); dt = exp(U(log dt_min, log dt_max)) clamped below by dt_init_floor, dt_bias = dt + log(-expm1(-dt))
(the inverse softplus); A_log = log U(A_init_range); D = 1; every norm weight 1.

    /usr/bin/python3 tests/python/mamba2_reference.py MODEL_DIR IDS OUT.npy [--random SEED]
        IDS: a file of token ids (whitespace separated, '#' comments), or "T" for a T x d_model
        standard normal X_0 drawn with the seed (default 0); --random draws the weights from
        MODEL_DIR's config.json. OUT.npy: (L + 2) x T x d_model: X_0 .. X_L, then RMSNorm_f(X_L).
"""
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encoder_reference import read_folder_tensors  # noqa: E402  (its own safetensors reader)

EPS = 1e-5  # MixerModel's norm_epsilon and RMSNormGated's eps
SOFTPLUS_THRESHOLD = 20.0

# Mamba2.__init__'s defaults (ssm_cfg keys the forward or the initialisation reads)
SSM_DEFAULTS = {"d_state": 128, "d_conv": 4, "conv_init": None, "expand": 2, "headdim": 64, "d_ssm": None,
                "ngroups": 1, "A_init_range": [1, 16], "D_has_hdim": False, "rmsnorm": True,
                "norm_before_gate": False, "dt_min": 0.001, "dt_max": 0.1, "dt_init_floor": 1e-4,
                "dt_limit": [0.0, math.inf], "bias": False, "conv_bias": True, "chunk_size": 256,
                "use_mem_eff_path": True}
# MambaConfig's keys other than the required ones, with their defaults
TOP_DEFAULTS = {"d_intermediate": 0, "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True,
                "residual_in_fp32": True, "fused_add_norm": True, "pad_vocab_size_multiple": 8,
                "tie_embeddings": True}
REQUIRED = ("d_model", "n_layer", "vocab_size", "ssm_cfg")


class ConfigError(ValueError):
    """A config.json the reference does not read; the message names the file and the key."""


@dataclass
class Shape:
    """The hyperparameters of a mamba_ssm config.json (MambaConfig with a Mamba2 ssm_cfg)."""
    d_model: int
    n_layer: int
    vocab_size: int
    vocab_rows: int
    d_state: int
    d_conv: int
    expand: int
    headdim: int
    ngroups: int
    d_inner: int
    nheads: int
    chunk_size: int
    rmsnorm: bool = True
    norm_before_gate: bool = False
    D_has_hdim: bool = False
    bias: bool = False
    conv_bias: bool = True
    dt_limit: tuple = (0.0, math.inf)
    A_init_range: tuple = (1.0, 16.0)
    dt_min: float = 0.001
    dt_max: float = 0.1
    dt_init_floor: float = 1e-4
    conv_init: float = None
    tie_embeddings: bool = True
    config: dict = field(default_factory=dict, repr=False)

    @property
    def conv_dim(self):
        return self.d_inner + 2 * self.ngroups * self.d_state

    @property
    def d_in_proj(self):
        return 2 * self.d_inner + 2 * self.ngroups * self.d_state + self.nheads

    @staticmethod
    def of(cfg, where="config.json"):
        """Shape of a config dict; ConfigError naming `where` and the key for what is not read."""
        def bad(key, why):
            return ConfigError(f"{where}: {key}: {why}")

        if not isinstance(cfg, dict):
            raise ConfigError(f"{where}: not a JSON object")
        if "model_type" in cfg and "d_model" not in cfg:
            raise bad("model_type", f"{cfg['model_type']!r}: Hugging Face transformers' config layout is not read; "
                      "the reference reads mamba_ssm's config.json (d_model, n_layer, ssm_cfg)")
        for key in REQUIRED:
            if key not in cfg:
                raise bad(key, "missing (a mamba_ssm MambaConfig needs d_model, n_layer, vocab_size, ssm_cfg)")
        ssm = cfg["ssm_cfg"]
        if not isinstance(ssm, dict):
            raise bad("ssm_cfg", "not a JSON object")
        if "layer" not in ssm:
            raise bad("ssm_cfg.layer", "missing (mamba_ssm then builds Mamba1; the reference runs \"Mamba2\")")
        if ssm["layer"] != "Mamba2":
            raise bad("ssm_cfg.layer", f"{ssm['layer']!r} is not \"Mamba2\"")
        unknown = sorted(set(ssm) - set(SSM_DEFAULTS) - {"layer"})
        if unknown:
            raise bad("ssm_cfg." + unknown[0], "not a key the reference knows (Mamba2's arguments)")
        top = {**TOP_DEFAULTS, **cfg}
        if top["d_intermediate"] not in (0, None):
            raise bad("d_intermediate", f"{top['d_intermediate']}: blocks with an MLP are not in the reference")
        if top["attn_layer_idx"]:
            raise bad("attn_layer_idx", "hybrid models with attention layers are not in the reference")
        if top["rms_norm"] is not True:
            raise bad("rms_norm", "LayerNorm models are not in the reference (Mamba-2 uses RMSNorm)")
        s = {**SSM_DEFAULTS, **ssm}
        for key in ("d_model", "n_layer", "vocab_size", "pad_vocab_size_multiple"):
            if not isinstance(top[key], int) or isinstance(top[key], bool) or top[key] < 1:
                raise bad(key, f"{top[key]!r} is not a positive integer")
        for key in ("d_state", "d_conv", "expand", "headdim", "ngroups", "chunk_size"):
            if not isinstance(s[key], int) or isinstance(s[key], bool) or s[key] < 1:
                raise bad("ssm_cfg." + key, f"{s[key]!r} is not a positive integer")
        d_inner = s["expand"] * top["d_model"]
        if s["d_ssm"] is not None and s["d_ssm"] != d_inner:
            raise bad("ssm_cfg.d_ssm", f"{s['d_ssm']} != d_inner {d_inner}: the gated MLP part is not in the reference")
        if d_inner % s["headdim"]:
            raise bad("ssm_cfg.headdim", f"{s['headdim']} does not divide d_inner = expand * d_model = {d_inner}")
        nheads = d_inner // s["headdim"]
        if nheads % s["ngroups"]:
            raise bad("ssm_cfg.ngroups", f"{s['ngroups']} does not divide the {nheads} heads")
        lo, hi = s["A_init_range"]
        if not 0 < lo <= hi:
            raise bad("ssm_cfg.A_init_range", f"{[lo, hi]}: needs 0 < low <= high")
        if not 0 < s["dt_min"] <= s["dt_max"]:
            raise bad("ssm_cfg.dt_min", f"{s['dt_min']}, dt_max {s['dt_max']}: needs 0 < dt_min <= dt_max")
        pad = top["pad_vocab_size_multiple"]
        V = top["vocab_size"]
        return Shape(d_model=top["d_model"], n_layer=top["n_layer"], vocab_size=V, vocab_rows=-(-V // pad) * pad,
                     d_state=s["d_state"], d_conv=s["d_conv"], expand=s["expand"], headdim=s["headdim"],
                     ngroups=s["ngroups"], d_inner=d_inner, nheads=nheads, chunk_size=s["chunk_size"],
                     rmsnorm=bool(s["rmsnorm"]), norm_before_gate=bool(s["norm_before_gate"]),
                     D_has_hdim=bool(s["D_has_hdim"]), bias=bool(s["bias"]), conv_bias=bool(s["conv_bias"]),
                     dt_limit=(float(s["dt_limit"][0]), float(s["dt_limit"][1])),
                     A_init_range=(float(lo), float(hi)), dt_min=float(s["dt_min"]), dt_max=float(s["dt_max"]),
                     dt_init_floor=float(s["dt_init_floor"]), conv_init=s["conv_init"],
                     tie_embeddings=bool(top["tie_embeddings"]), config=cfg)


def read_config(folder):
    """Shape of MODEL_DIR/config.json (or of a config.json path)."""
    path = Path(folder)
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        cfg = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not JSON: {e}") from None
    return Shape.of(cfg, str(path))


# --- the pieces -------------------------------------------------------------------------------

def softplus(v):
    """torch.nn.functional.softplus (beta 1, threshold 20): v above 20, else log(1 + e^v)."""
    v = np.asarray(v, dtype=np.float64)
    return np.where(v > SOFTPLUS_THRESHOLD, v, np.log1p(np.exp(np.minimum(v, SOFTPLUS_THRESHOLD))))


def inverse_softplus(v):
    """v + log(-expm1(-v)): softplus of it is v (mamba_ssm's dt_bias)."""
    return v + np.log(-np.expm1(-v))


def silu(v):
    with np.errstate(over="ignore"):
        return v / (1.0 + np.exp(-v))


def rms_norm(x, w, eps=EPS, groups=1):
    """x / sqrt(mean(x^2) + eps) * w, the mean over each of `groups` equal slices of the last axis."""
    shape = x.shape
    xg = x.reshape(*shape[:-1], groups, shape[-1] // groups)
    xg = xg / np.sqrt((xg * xg).mean(axis=-1, keepdims=True) + eps)
    out = xg.reshape(shape)
    return out if w is None else out * w


def gated_rms_norm(y, z, w, groups, eps=EPS, norm_before_gate=False):
    """RMSNormGated: norm_before_gate False (Mamba-2's): RMSNorm_G(y * SiLU(z)) * w; True:
    RMSNorm_G(y) * w * SiLU(z); z None: no gate."""
    if z is None:
        return rms_norm(y, w, eps, groups)
    if norm_before_gate:
        return rms_norm(y, w, eps, groups) * silu(z)
    return rms_norm(y * silu(z), w, eps, groups)


def causal_conv1d(x, w, b):
    """Depthwise causal convolution of x (T x C) with w (C x 1 x K) and b (C or None):
    out[t,c] = b[c] + sum_k w[c,0,k] x[t-(K-1)+k, c], x zero before t = 0."""
    T, C = x.shape
    K = w.shape[-1]
    w = w.reshape(C, K)
    padded = np.concatenate([np.zeros((K - 1, C)), x], axis=0)
    out = np.zeros((T, C)) if b is None else np.broadcast_to(b, (T, C)).copy()
    for k in range(K):
        out += w[:, k] * padded[k:k + T]
    return out


def _group_of_heads(nheads, ngroups):
    return np.arange(nheads) // (nheads // ngroups)


def _per_head(B, nheads):
    """B (T x G x N) -> T x H x N, head h reading group h // (H / G)."""
    return B[:, _group_of_heads(nheads, B.shape[1]), :]


def _skip(x, D):
    """D x with D per head (H) or per channel (H x P)."""
    D = np.asarray(D, dtype=np.float64)
    return x * (D[None, :, None] if D.ndim == 1 else D[None])


def segsum(a):
    """T x T: [t, s] = sum_(r=s+1..t) a[r] for s <= t, -inf above the diagonal (each entry its own
    sum, no difference of cumulative sums)."""
    T = a.shape[0]
    rep = np.where(np.tri(T, k=-1, dtype=bool), np.broadcast_to(a[:, None], (T, T)), 0.0)
    out = np.cumsum(rep, axis=0)
    return np.where(np.tri(T, dtype=bool), out, -np.inf)


def decay_matrix(delta_h, A_h):
    """L_h (T x T): exp(sum_(r=s+1..t) Delta[r] A_h) for s <= t, else 0."""
    return np.exp(segsum(np.asarray(delta_h) * A_h))


def ssd_scan(x, delta, A, B, C, D):
    """The recurrence. x: T x H x P, delta: T x H, A: H, B, C: T x G x N, D: H or H x P -> y (T x H x P)."""
    T, H, P = x.shape
    Bh, Ch = _per_head(B, H), _per_head(C, H)
    S = np.zeros((H, P, B.shape[2]))
    y = np.empty_like(x)
    for t in range(T):
        S = np.exp(delta[t] * A)[:, None, None] * S + (delta[t][:, None] * x[t])[:, :, None] * Bh[t][:, None, :]
        y[t] = np.einsum("hpn,hn->hp", S, Ch[t])
    return y + _skip(x, D)


def mixer_matrix(delta, A, B, C, D=None):
    """H x T x T: M_h[t,s] = L_h[t,s] (C_t . B_s) Delta[s,h] (the group of head h), plus D_h on the
    diagonal when D (per head) is given."""
    T, H = delta.shape
    Bh, Ch = _per_head(B, H), _per_head(C, H)
    M = np.stack([decay_matrix(delta[:, h], A[h]) * (Ch[:, h] @ Bh[:, h].T) * delta[None, :, h]
                  for h in range(H)])
    if D is not None:
        D = np.asarray(D, dtype=np.float64)
        if D.ndim != 1:
            raise ValueError("D per channel (D_has_hdim) has no single T x T matrix per head")
        M = M + D[:, None, None] * np.eye(T)[None]
    return M


def ssd_quadratic(x, delta, A, B, C, D):
    """y_h = M_h x_h + D_h x_h, M_h the T x T mixer matrix (the attention-like form)."""
    M = mixer_matrix(delta, A, B, C)
    return np.einsum("hts,shp->thp", M, x) + _skip(x, D)


def ssd_chunked(x, delta, A, B, C, D, chunk):
    """The chunked state-passing form: M within each chunk of `chunk` steps (the last one shorter),
    the state S carried from chunk to chunk."""
    T, H, P = x.shape
    Bh, Ch = _per_head(B, H), _per_head(C, H)
    S = np.zeros((H, P, B.shape[2]))
    y = np.empty_like(x)
    for a in range(0, T, chunk):
        b = min(a + chunk, T)
        dA = delta[a:b] * A  # Q x H
        cum = np.cumsum(dA, axis=0)  # sum_(r=a..t)
        M = mixer_matrix(delta[a:b], A, B[a:b], C[a:b])
        y[a:b] = np.einsum("hts,shp->thp", M, x[a:b])
        # the carried state, decayed to each step of the chunk, read by C
        y[a:b] += np.exp(cum)[:, :, None] * np.einsum("hpn,thn->thp", S, Ch[a:b])
        # the state after the chunk: decay of S over the chunk plus the chunk's own inputs
        to_end = np.exp(cum[-1][None, :] - cum)  # sum_(r=s+1..b-1)
        S = np.exp(cum[-1])[:, None, None] * S + np.einsum("sh,shp,shn->hpn", to_end * delta[a:b], x[a:b], Bh[a:b])
    return y + _skip(x, D)


SSD = {"scan": ssd_scan, "quadratic": ssd_quadratic, "chunked": ssd_chunked}


# --- the model ---------------------------------------------------------------------------------

def random_tensors(shape, rng, layers=None):
    """{name: float64 array}: the reference initialisation (module docstring) of `layers` (default
    n_layer) layers, drawn by numpy's Generator `rng`."""
    s = shape
    L = s.n_layer if layers is None else layers
    t = {"backbone.embedding.weight": rng.normal(0.0, 0.02, (s.vocab_rows, s.d_model)),
         "backbone.norm_f.weight": np.ones(s.d_model)}

    def uniform(bound, size):
        return rng.uniform(-bound, bound, size)

    for i in range(L):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        t[p + "norm.weight"] = np.ones(s.d_model)
        t[m + "in_proj.weight"] = uniform(1 / math.sqrt(s.d_model), (s.d_in_proj, s.d_model))
        conv_bound = s.conv_init if s.conv_init is not None else 1 / math.sqrt(s.d_conv)
        t[m + "conv1d.weight"] = uniform(conv_bound, (s.conv_dim, 1, s.d_conv))
        if s.conv_bias:
            t[m + "conv1d.bias"] = uniform(1 / math.sqrt(s.d_conv), s.conv_dim)
        dt = np.exp(rng.uniform(0, 1, s.nheads) * (math.log(s.dt_max) - math.log(s.dt_min)) + math.log(s.dt_min))
        dt = np.maximum(dt, s.dt_init_floor)
        t[m + "dt_bias"] = inverse_softplus(dt)
        t[m + "A_log"] = np.log(rng.uniform(*s.A_init_range, s.nheads))
        t[m + "D"] = np.ones(s.d_inner if s.D_has_hdim else s.nheads)
        if s.rmsnorm:
            t[m + "norm.weight"] = np.ones(s.d_inner)
        t[m + "out_proj.weight"] = uniform(1 / math.sqrt(s.d_inner), (s.d_model, s.d_inner)) / math.sqrt(L)
        if s.bias:
            t[m + "in_proj.bias"] = np.zeros(s.d_in_proj)
            t[m + "out_proj.bias"] = np.zeros(s.d_model)
    return t


class Model:
    """A Mamba-2 model: its Shape and float64 tensors (mamba_ssm's names)."""

    def __init__(self, shape, tensors, where="tensors"):
        self.shape, self.tensors, self.where = shape, tensors, where
        self.layers = shape.n_layer
        while f"backbone.layers.{self.layers}.norm.weight" in tensors:  # random weights drawn deeper
            self.layers += 1
        self._check()

    @staticmethod
    def from_folder(folder):
        folder = Path(folder)
        return Model(read_config(folder), read_folder_tensors(folder), str(folder))

    @staticmethod
    def random(config, seed=0, layers=None):
        """Weights drawn from a config (a folder, a config.json path or a dict) with
        numpy.random.default_rng(seed)."""
        shape = Shape.of(config) if isinstance(config, dict) else read_config(config)
        return Model(shape, random_tensors(shape, np.random.default_rng(seed), layers), "random")

    def _check(self):
        s = self.shape
        want = {"backbone.embedding.weight": (s.vocab_rows, s.d_model), "backbone.norm_f.weight": (s.d_model,)}
        for i in range(self.layers):
            m = f"backbone.layers.{i}.mixer."
            want[f"backbone.layers.{i}.norm.weight"] = (s.d_model,)
            want.update({m + "in_proj.weight": (s.d_in_proj, s.d_model), m + "conv1d.weight": (s.conv_dim, 1, s.d_conv),
                         m + "dt_bias": (s.nheads,), m + "A_log": (s.nheads,),
                         m + "D": (s.d_inner,) if s.D_has_hdim else (s.nheads,),
                         m + "out_proj.weight": (s.d_model, s.d_inner)})
            if s.conv_bias:
                want[m + "conv1d.bias"] = (s.conv_dim,)
            if s.rmsnorm:
                want[m + "norm.weight"] = (s.d_inner,)
            if s.bias:
                want[m + "in_proj.bias"] = (s.d_in_proj,)
                want[m + "out_proj.bias"] = (s.d_model,)
        for name, shp in want.items():
            if name not in self.tensors:
                raise ValueError(f"{self.where}: tensor {name} is missing")
            if tuple(self.tensors[name].shape) != shp:
                raise ValueError(f"{self.where}: tensor {name} has shape {list(self.tensors[name].shape)}, "
                                 f"the config gives {list(shp)}")

    def t(self, name):
        return self.tensors[name]

    def embed(self, ids):
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.size and (ids.min() < 0 or ids.max() >= self.shape.vocab_rows):
            raise ValueError(f"token ids must be one sequence in [0, {self.shape.vocab_rows})")
        return self.t("backbone.embedding.weight")[ids]

    def ssm_inputs(self, layer, u):
        """The mixer's inputs to the SSD for the normed input u (T x d): a dict of x (T x H x P),
        delta (T x H), A (H), B, C (T x G x N), D, z (T x E)."""
        s = self.shape
        m = f"backbone.layers.{layer}.mixer."
        T, E, GN, H = u.shape[0], s.d_inner, s.ngroups * s.d_state, s.nheads
        zxbcdt = u @ self.t(m + "in_proj.weight").T
        if s.bias:
            zxbcdt = zxbcdt + self.t(m + "in_proj.bias")
        z, xBC, dt = zxbcdt[:, :E], zxbcdt[:, E:2 * E + 2 * GN], zxbcdt[:, 2 * E + 2 * GN:]
        xBC = silu(causal_conv1d(xBC, self.t(m + "conv1d.weight"), self.tensors.get(m + "conv1d.bias")))
        x, B, C = xBC[:, :E], xBC[:, E:E + GN], xBC[:, E + GN:]
        delta = np.clip(softplus(dt + self.t(m + "dt_bias")), *s.dt_limit)
        D = self.t(m + "D")
        return {"x": x.reshape(T, H, s.headdim), "delta": delta, "A": -np.exp(self.t(m + "A_log")),
                "B": B.reshape(T, s.ngroups, s.d_state), "C": C.reshape(T, s.ngroups, s.d_state),
                "D": D.reshape(H, s.headdim) if s.D_has_hdim else D, "z": z}

    def mixer(self, layer, u, gate=True, gated_norm=True, ssd="scan", chunk=None):
        """Mixer_l(u) (T x d) of layer `layer` (0-based)."""
        s = self.shape
        m = f"backbone.layers.{layer}.mixer."
        i = self.ssm_inputs(layer, u)
        args = (i["x"], i["delta"], i["A"], i["B"], i["C"], i["D"])
        y = SSD[ssd](*args, chunk or s.chunk_size) if ssd == "chunked" else SSD[ssd](*args)
        y = y.reshape(u.shape[0], s.d_inner)
        z = i["z"] if gate else None
        if s.rmsnorm and gated_norm:
            y = gated_rms_norm(y, z, self.t(m + "norm.weight"), s.ngroups, norm_before_gate=s.norm_before_gate)
        elif z is not None:
            y = y * silu(z)
        out = y @ self.t(m + "out_proj.weight").T
        return out + self.t(m + "out_proj.bias") if s.bias else out

    def mixer_matrices(self, layer, u):
        """H x T x T: M_h of layer `layer` for the normed input u (D_h on the diagonal when D is
        per head; without D when it is per channel)."""
        i = self.ssm_inputs(layer, u)
        D = i["D"] if np.ndim(i["D"]) == 1 else None
        return mixer_matrix(i["delta"], i["A"], i["B"], i["C"], D)

    def norm(self, name, x, on=True):
        return rms_norm(x, self.t(name)) if on else x

    def block(self, layer, x, lam=1.0, norm=True, **mixer_options):
        """X_l = lam X_(l-1) + Mixer_l(RMSNorm_l(X_(l-1)))."""
        u = self.norm(f"backbone.layers.{layer}.norm.weight", x, norm)
        return lam * x + self.mixer(layer, u, **mixer_options)

    def forward(self, ids=None, x=None, layers=None, lam=1.0, norm=True, gate=True, gated_norm=True,
                ssd="scan", chunk=None):
        """[X_0, X_1, ..., X_layers] (each T x d) of token ids or of a given X_0 = x; lam one
        number or one per layer; the ablations and the SSD form as in block and mixer."""
        if (ids is None) == (x is None):
            raise ValueError("give token ids or an input matrix x, not both")
        layers = self.layers if layers is None else layers
        if layers > self.layers:
            raise ValueError(f"{layers} layers: the model has {self.layers}")
        lams = [float(lam)] * layers if np.ndim(lam) == 0 else [float(v) for v in lam]
        if len(lams) != layers:
            raise ValueError(f"{len(lams)} lambdas for {layers} layers")
        xs = [self.embed(ids) if x is None else np.asarray(x, dtype=np.float64)]
        if xs[0].ndim != 2 or xs[0].shape[1] != self.shape.d_model:
            raise ValueError(f"the input must be T x {self.shape.d_model}")
        for layer in range(layers):
            xs.append(self.block(layer, xs[-1], lams[layer], norm, gate=gate, gated_norm=gated_norm, ssd=ssd,
                                 chunk=chunk))
        return xs

    def final(self, x, norm=True):
        """RMSNorm_f(X_L): the model's output before the LM head."""
        return self.norm("backbone.norm_f.weight", x, norm)


def read_ids(path):
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#")[0]
        out += [int(v) for v in line.split()]
    return out


def main(argv):
    args = list(argv)
    seed = None
    if "--random" in args:
        k = args.index("--random")
        seed = int(args[k + 1])
        del args[k:k + 2]
    if len(args) != 3 or any(a.startswith("-") for a in args):
        sys.exit(__doc__)
    folder, ids, out = args
    model = Model.random(folder, seed) if seed is not None else Model.from_folder(folder)
    if ids.isdigit():
        x0 = np.random.default_rng(seed or 0).standard_normal((int(ids), model.shape.d_model))
        xs = model.forward(x=x0)
    else:
        xs = model.forward(ids=read_ids(ids))
    np.save(out, np.stack(xs + [model.final(xs[-1])]))


if __name__ == "__main__":
    main(sys.argv[1:])
