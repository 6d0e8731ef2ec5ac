"""An independent NumPy forward of the BERT-family encoders, the reference the C++ encoder block is
tested against (tests/python/test_encoder_reference.py; docs/ENCODERS.md).

Written from the papers (BERT, arXiv:1810.04805; RoBERTa, arXiv:1907.11692; ALBERT,
arXiv:1909.11942) and the semantics of Hugging Face's published modules (BertModel, RobertaModel,
AlbertModel in eval mode), not from rcsweep's C++: its own safetensors reader (F64, F32, F16, BF16),
its own config reading, its own tensor names. In float64 throughout:

    X_0 = LN(word[id] + position[pos] + type[0])                 (ALBERT: then X_0 W_in^T + b_in)
    A   = LN(lambda_a X + concat_h softmax(Q_h K_h^T / sqrt(d_h) + mask) V_h  W_O^T + b_O)
    Y   = LN(lambda_m A + act(A W_1^T + b_1) W_2^T + b_2)

with Q = X W_Q^T + b_Q (likewise K, V), LN affine with the config's eps and the biased variance,
padded keys (and, when causal, later keys) masked to probability 0, positions 0..T-1 (RoBERTa:
pad_token_id + the count of non-padding ids up to and including the token, padding at
pad_token_id), ALBERT's layer i
using group int(i / (layers / groups)) and applying its inner_group_num layers in turn. The
published block is lambda_a = lambda_m = 1 with the MLP and the norms.

    /usr/bin/python3 tests/python/encoder_reference.py MODEL_DIR TOKENS OUT.npy   # same layout as the
                                                         # C++ tool: excerpts x (layers+1) x T x d
"""
import json
import math
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover - scipy is in Debian's python3-scipy
    _erf = np.vectorize(math.erf, otypes=[np.float64])

# safetensors dtypes this reader converts to float64
_FLOATS = {"F64": "<f8", "F32": "<f4", "F16": "<f2"}
_OTHERS = {"I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def read_safetensors(path):
    """{name: float64 array} of a safetensors file (float tensors; integer ones as they are)."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        chunk, dtype, shape = data[begin:end], entry["dtype"], entry["shape"]
        if dtype in _FLOATS:
            a = np.frombuffer(chunk, dtype=_FLOATS[dtype]).astype(np.float64)
        elif dtype == "BF16":
            a = (np.frombuffer(chunk, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            a = np.frombuffer(chunk, dtype=_OTHERS[dtype]).copy()
        out[name] = a.reshape(shape)
    return out


def read_folder_tensors(folder):
    """Every tensor of a model folder: model.safetensors, else the shards of its index."""
    folder = Path(folder)
    if (folder / "model.safetensors").exists():
        return read_safetensors(folder / "model.safetensors")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        out.update(read_safetensors(folder / shard))
    return out


@dataclass
class Shape:
    """The hyperparameters the forward needs, from a config.json dict (Hugging Face's keys and
    defaults)."""
    family: str
    d: int
    heads: int
    intermediate: int
    layers: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    act: str
    pad: int
    embedding_size: int
    groups: int = 1
    inner: int = 1

    @staticmethod
    def of(cfg):
        family = cfg["model_type"]
        albert = family == "albert"
        return Shape(family=family, d=cfg["hidden_size"], heads=cfg["num_attention_heads"],
                     intermediate=cfg["intermediate_size"], layers=cfg["num_hidden_layers"],
                     vocab=cfg["vocab_size"], max_positions=cfg["max_position_embeddings"],
                     type_vocab=cfg["type_vocab_size"], eps=cfg.get("layer_norm_eps", 1e-12),
                     act=cfg.get("hidden_act", "gelu_new" if albert else "gelu"),
                     pad=cfg.get("pad_token_id", 1 if family == "roberta" else 0),
                     embedding_size=cfg["embedding_size"] if albert else cfg["hidden_size"],
                     groups=cfg.get("num_hidden_groups", 1) if albert else 1,
                     inner=cfg.get("inner_group_num", 1) if albert else 1)


def activation(name, x):
    if name == "gelu":  # x Phi(x), Phi with the error function (torch's exact GELU)
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return np.maximum(x, 0.0)
    raise ValueError(f"activation {name!r} is not in the reference")


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as torch.nn.LayerNorm
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


class Model:
    """A model folder's config.json and tensors, with the prefix its names carry."""

    def __init__(self, folder):
        folder = Path(folder)
        self.config = json.loads((folder / "config.json").read_text())
        self.shape = Shape.of(self.config)
        self.tensors = read_folder_tensors(folder)
        family = self.shape.family
        word = "embeddings.word_embeddings.weight"
        found = [p for p in (f"{family}.", "") if p + word in self.tensors]
        if len(found) != 1:
            raise ValueError(f"{folder}: no single prefix for {word}: {found}")
        self.prefix = found[0]

    def t(self, name):
        return self.tensors[self.prefix + name]

    def norm(self, name, x, on=True):
        if not on:
            return x
        g = self.tensors.get(self.prefix + name + ".weight", self.tensors.get(self.prefix + name + ".gamma"))
        b = self.tensors.get(self.prefix + name + ".bias", self.tensors.get(self.prefix + name + ".beta"))
        return layer_norm(x, g, b, self.shape.eps)

    def lin(self, name, x):
        return x @ self.t(name + ".weight").T + self.t(name + ".bias")

    # --- the forward -------------------------------------------------------------------------

    def positions(self, ids):
        s = self.shape
        if s.family == "roberta":  # transformers' create_position_ids_from_input_ids
            mask = (np.asarray(ids) != s.pad).astype(np.int64)
            return np.cumsum(mask) * mask + s.pad
        return np.arange(len(ids))

    def embed(self, ids, types=None):
        """X_0 (T x d) of the ids (padding included)."""
        ids = np.asarray(ids)
        types = np.zeros_like(ids) if types is None else np.asarray(types)
        e = "embeddings."
        # transformers' order: (word + token type) + position
        x = (self.t(e + "word_embeddings.weight")[ids] + self.t(e + "token_type_embeddings.weight")[types]) + \
            self.t(e + "position_embeddings.weight")[self.positions(ids)]
        x = self.norm(e + "LayerNorm", x)
        if self.shape.family == "albert":
            x = self.lin("encoder.embedding_hidden_mapping_in", x)
        return x

    def attention(self, names, x, real, causal):
        """The attention branch: concat_h softmax(Q_h K_h^T / sqrt(d_h) + mask) V_h, then W_O, b_O."""
        s = self.shape
        T, dh = x.shape[0], s.d // s.heads
        q, k, v = (self.lin(names[r], x).reshape(T, s.heads, dh).transpose(1, 0, 2) for r in ("q", "k", "v"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        allowed = np.broadcast_to(np.asarray(real, dtype=bool)[None, :], (T, T))
        if causal:
            allowed = allowed & np.tri(T, dtype=bool)
        scores = np.where(allowed[None], scores, -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p = p / p.sum(axis=-1, keepdims=True)
        context = (p @ v).transpose(1, 0, 2).reshape(T, s.d)
        return self.lin(names["o"], context)

    def block(self, names, x, real, lam_a=1.0, lam_m=1.0, mlp=True, norm=True, causal=False):
        a = self.norm(names["norm_a"], lam_a * x + self.attention(names, x, real, causal), norm)
        if not mlp:
            return a
        h = activation(self.shape.act, self.lin(names["in"], a))
        return self.norm(names["norm_m"], lam_m * a + self.lin(names["out"], h), norm)

    def block_names(self, layer, depth):
        """The tensor names of block `layer` (0-based) of a stack of `depth`: a list of one dict per
        layer it applies (ALBERT: the inner layers of its group)."""
        s = self.shape
        if s.family == "albert":
            g = int(layer / (depth / s.groups))  # transformers' AlbertTransformer
            out = []
            for inner in range(s.inner):
                p = f"encoder.albert_layer_groups.{g}.albert_layers.{inner}."
                out.append({"q": p + "attention.query", "k": p + "attention.key", "v": p + "attention.value",
                            "o": p + "attention.dense", "norm_a": p + "attention.LayerNorm", "in": p + "ffn",
                            "out": p + "ffn_output", "norm_m": p + "full_layer_layer_norm"})
            return out
        p = f"encoder.layer.{layer}."
        return [{"q": p + "attention.self.query", "k": p + "attention.self.key", "v": p + "attention.self.value",
                 "o": p + "attention.output.dense", "norm_a": p + "attention.output.LayerNorm",
                 "in": p + "intermediate.dense", "out": p + "output.dense", "norm_m": p + "output.LayerNorm"}]

    def forward(self, ids, real=None, layers=None, **ablation):
        """[X_0, X_1, ..., X_layers] (each T x d) of one excerpt; `real` (default: every token)
        masks padded keys; `layers` (default: the config's) blocks, ALBERT's groups spread over
        them; ablation: lam_a, lam_m, mlp, norm, causal (see block)."""
        real = np.ones(len(ids), dtype=bool) if real is None else np.asarray(real, dtype=bool)
        layers = self.shape.layers if layers is None else layers
        xs = [self.embed(ids)]
        for layer in range(layers):
            x = xs[-1]
            for names in self.block_names(layer, layers):
                x = self.block(names, x, real, **ablation)
            xs.append(x)
        return xs


def read_tokens(path):
    """The excerpts of a token file (one per line, '#' comments and blank lines skipped)."""
    out = []
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            out.append([int(t) for t in line.split()])
    return out


def forward_all(model, excerpts, layers=None, **ablation):
    """excerpts x (layers+1) x T x d, each excerpt padded to the longest with pad_token_id."""
    T = max(len(e) for e in excerpts)
    out = []
    for e in excerpts:
        ids = list(e) + [model.shape.pad] * (T - len(e))
        real = [True] * len(e) + [False] * (T - len(e))
        out.append(np.stack(model.forward(ids, real, layers=layers, **ablation)))
    return np.stack(out)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    m = Model(sys.argv[1])
    np.save(sys.argv[3], forward_all(m, read_tokens(sys.argv[2])))
