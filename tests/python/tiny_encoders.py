"""Tiny Hugging Face-style encoder checkpoints for the encoder tests: config.json and
model.safetensors of BERT (with the "bert." prefix of a model with a head, and without: a saved base
model), RoBERTa and ALBERT, a few layers of width 32 to 64 over a vocabulary of 50, their weights
drawn by NumPy with a large spread (so that a wrong sign, transpose or eps shows), stored as F32,
F64, F16 or BF16; and token files with padding.

The tensor names and config keys are Hugging Face's (transformers' BertModel, RobertaModel and
AlbertModel state dicts and PretrainedConfig.to_json_file), written here from their published
layout, not from rcsweep's table: docs/ENCODERS.md "Checkpoint folders".

    /usr/bin/python3 tests/python/tiny_encoders.py OUT_DIR   # every case of CASES in OUT_DIR/<name>
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np

# dtype name -> how NumPy stores it (BF16 by hand: the high half of a float32)
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8"}


def to_bf16_bits(values):
    """float64 -> bfloat16 bits, rounded to nearest even (as torch rounds), as uint16."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (array, dtype name)}; written in name order, the data area 8-byte aligned."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        array, dtype = tensors[name]
        array = np.asarray(array)
        raw = to_bf16_bits(array).tobytes() if dtype == "BF16" else \
            np.ascontiguousarray(array, dtype=DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def stored_value(array, dtype):
    """The float64 value a reader gets back from `array` stored as `dtype`."""
    if dtype == "BF16":
        return (to_bf16_bits(array).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(array).astype(DTYPES[dtype]).astype(np.float64)


def config(family, d, heads, layers, intermediate, vocab=50, max_positions=40, **extra):
    """A config.json as transformers writes it for `family` ("bert", "roberta", "albert")."""
    c = {"architectures": [{"bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM",
                            "albert": "AlbertForMaskedLM"}[family]],
         "model_type": family, "hidden_size": d, "num_attention_heads": heads, "intermediate_size": intermediate,
         "num_hidden_layers": layers, "vocab_size": vocab, "max_position_embeddings": max_positions,
         "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0,
         "initializer_range": 0.02, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
         "position_embedding_type": "absolute", "torch_dtype": "float32", "transformers_version": "4.40.0",
         "classifier_dropout": None, "use_cache": True}
    if family == "roberta":
        c.update(type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    if family == "albert":
        c.update(embedding_size=d // 2, num_hidden_groups=1, inner_group_num=1, hidden_act="gelu_new",
                 bos_token_id=2, eos_token_id=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        c.pop("use_cache")
    c.update(extra)
    return c


def _draw(rng, shape, std, mean=0.0):
    return mean + std * rng.standard_normal(shape)


def state_dict(cfg, rng, std=0.3, prefix=None):
    """{name: float64 array} with Hugging Face's names for cfg (a config dict), weights N(0, std^2),
    biases and LayerNorm betas N(0, (std/2)^2) and gammas 1 + N(0, (std/2)^2): far from the
    published initialisation on purpose, so that every parameter matters."""
    family = cfg["model_type"]
    p = f"{family}." if prefix is None else prefix
    d, inter, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    E = cfg.get("embedding_size", d) if family == "albert" else d
    sd = {}

    def linear(name, n_out, n_in):
        sd[name + ".weight"] = _draw(rng, (n_out, n_in), std)
        sd[name + ".bias"] = _draw(rng, (n_out,), std / 2)

    def norm(name, n):
        sd[name + ".weight"] = _draw(rng, (n,), std / 2, 1.0)
        sd[name + ".bias"] = _draw(rng, (n,), std / 2)

    emb = p + "embeddings."
    sd[emb + "word_embeddings.weight"] = _draw(rng, (V, E), 0.5)
    sd[emb + "position_embeddings.weight"] = _draw(rng, (cfg["max_position_embeddings"], E), 0.5)
    sd[emb + "token_type_embeddings.weight"] = _draw(rng, (cfg["type_vocab_size"], E), 0.5)
    norm(emb + "LayerNorm", E)
    if family == "albert":
        linear(p + "encoder.embedding_hidden_mapping_in", d, E)
        for g in range(cfg["num_hidden_groups"]):
            for inner in range(cfg["inner_group_num"]):
                q = f"{p}encoder.albert_layer_groups.{g}.albert_layers.{inner}."
                for name in ("query", "key", "value", "dense"):
                    linear(q + "attention." + name, d, d)
                norm(q + "attention.LayerNorm", d)
                linear(q + "ffn", inter, d)
                linear(q + "ffn_output", d, inter)
                norm(q + "full_layer_layer_norm", d)
    else:
        for i in range(cfg["num_hidden_layers"]):
            q = f"{p}encoder.layer.{i}."
            for name in ("query", "key", "value"):
                linear(q + "attention.self." + name, d, d)
            linear(q + "attention.output.dense", d, d)
            norm(q + "attention.output.LayerNorm", d)
            linear(q + "intermediate.dense", inter, d)
            linear(q + "output.dense", d, inter)
            norm(q + "output.LayerNorm", d)
    return sd


def extras(cfg, rng, prefix):
    """Tensors real checkpoints carry that the encoder does not use: the pooler, the masked-LM head,
    BERT's position_ids buffer (I64)."""
    d, V = cfg["hidden_size"], cfg["vocab_size"]
    out = {prefix + "pooler.dense.weight": (_draw(rng, (d, d), 0.3), "F32"),
           prefix + "pooler.dense.bias": (_draw(rng, (d,), 0.3), "F32"),
           "cls.predictions.bias": (_draw(rng, (V,), 0.3), "F32"),
           prefix + "embeddings.position_ids": (np.arange(cfg["max_position_embeddings"])[None, :], "I64")}
    return out


def token_excerpts(rng, vocab, lengths, avoid=()):
    """Excerpts of the given lengths, ids uniform over the vocabulary but `avoid`."""
    allowed = np.array([i for i in range(vocab) if i not in set(avoid)])
    return [rng.choice(allowed, size=n).tolist() for n in lengths]


def write_tokens(path, excerpts, comment="synthetic token ids of the tiny test checkpoints"):
    lines = [f"# {comment}"] + [" ".join(map(str, e)) for e in excerpts]
    Path(path).write_text("\n".join(lines) + "\n")


# name -> (config arguments, dtype, prefix (None: the family's), extras, token lengths)
CASES = {
    "bert_f32": (dict(family="bert", d=32, heads=4, layers=2, intermediate=64), "F32", None, True,
                 [12, 9, 1, 5]),
    "bert_base_f64": (dict(family="bert", d=48, heads=4, layers=3, intermediate=80, hidden_act="gelu_new",
                           layer_norm_eps=1e-6, pad_token_id=3), "F64", "", False, [10, 4, 10]),
    "bert_relu_f16": (dict(family="bert", d=32, heads=4, layers=2, intermediate=48, hidden_act="relu"), "F16",
                      None, False, [7, 3]),
    "roberta_f32": (dict(family="roberta", d=64, heads=4, layers=2, intermediate=96), "F32", None, True,
                    [11, 6, 2]),
    "roberta_bf16": (dict(family="roberta", d=32, heads=4, layers=3, intermediate=64, max_positions=20),
                     "BF16", None, False, [17, 8]),
    "albert_f32": (dict(family="albert", d=32, heads=4, layers=3, intermediate=64), "F32", None, True,
                   [9, 5, 1]),
    "albert_groups_f64": (dict(family="albert", d=48, heads=4, layers=3, intermediate=72, embedding_size=24,
                               num_hidden_groups=2, hidden_act="gelu"), "F64", None, False, [8, 8, 3]),
}


def write_case(folder, name, seed=0):
    """Writes CASES[name] into `folder` (config.json, model.safetensors, tokens.txt); returns the
    config dict."""
    args, dtype, prefix, with_extras, lengths = CASES[name]
    args = dict(args)
    family = args.pop("family")
    cfg = config(family, args.pop("d"), args.pop("heads"), args.pop("layers"), args.pop("intermediate"), **args)
    rng = np.random.default_rng([seed, sorted(CASES).index(name)])
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pfx = f"{family}." if prefix is None else prefix
    tensors = {k: (v, dtype) for k, v in state_dict(cfg, rng, prefix=pfx).items()}
    if with_extras:
        tensors.update(extras(cfg, rng, pfx))
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    write_safetensors(folder / "model.safetensors", tensors, {"format": "pt"})
    # RoBERTa: real tokens avoid the padding id (Hugging Face finds padding by its id)
    avoid = (cfg["pad_token_id"],) if family == "roberta" else ()
    write_tokens(folder / "tokens.txt", token_excerpts(rng, cfg["vocab_size"], lengths, avoid))
    return cfg


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    for case in CASES:
        write_case(Path(sys.argv[1]) / case, case)
        print(Path(sys.argv[1]) / case)
