#!/usr/bin/python3
"""Writes the seed corpus of the safetensors harness, tests/fuzz/corpus/safetensors/ (docs/FUZZING.md):
small valid files of every convertible dtype, a sharded pair, edge cases the format allows, one
file per refusal of docs/CHECKPOINTS.md, and config.json texts. Pure Python (struct, json).

    /usr/bin/python3 tests/fuzz/make_safetensors_corpus.py
"""
import json
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus" / "safetensors"


def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)] laid out one after the other."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def raw_header(text, data=b"", length=None):
    text = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    f64 = struct.pack("<4d", 3.141592653589793, -0.0, 5e-324, float("inf"))
    f32 = struct.pack("<4f", 1.5, -2.0, 1e-40, float("nan"))
    f16 = struct.pack("<6H", 0x3C00, 0x8001, 0x7BFF, 0xFC00, 0x7E01, 0x0000)
    bf16 = struct.pack("<4H", 0x3F80, 0x0001, 0x7F80, 0x7FC1)
    seeds = {
        "valid-every-dtype.safetensors": safetensors(
            [("a.f64", "F64", [2, 2], f64), ("b.f32", "F32", [4], f32), ("c.f16", "F16", [3, 2], f16),
             ("d.bf16", "BF16", [1, 4], bf16), ("e.ids", "I64", [2], struct.pack("<2q", 0, 1))],
            metadata={"format": "pt"}),
        "valid-unpadded-unaligned.safetensors": safetensors(
            [("odd", "U8", [1], b"\x07"), ("w", "F32", [2], struct.pack("<2f", 1, 2))], pad=False),
        "valid-scalar-empty-3d.safetensors": safetensors(
            [("s", "F64", [], struct.pack("<d", 2.5)), ("e", "F32", [0, 4], b""),
             ("t", "F16", [2, 1, 2], f16[:8])]),
        "valid-bert-layer.safetensors": safetensors(
            [(f"encoder.layer.0.attention.self.{p}.{k}", "F32", [4, 4] if k == "weight" else [4],
              bytes(64 if k == "weight" else 16)) for p in ("query", "key", "value") for k in ("weight", "bias")]),
        "valid-shard-2-of-2.safetensors": safetensors([("pooler.dense.weight", "BF16", [2, 2], bf16)]),
        "valid-empty-header.safetensors": raw_header("{}"),
        "valid-hole-between-tensors.safetensors": raw_header(
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}',
            bytes(12)),
        "bad-short.safetensors": b"\x05\x00\x00",
        "bad-length-past-end.safetensors": raw_header("{}", length=1000),
        "bad-length-absurd.safetensors": raw_header("{}", length=1 << 40),
        "bad-json.safetensors": raw_header('{"a":{"dtype":"F32",'),
        "bad-not-object.safetensors": raw_header("[1,2,3]"),
        "bad-deep.safetensors": raw_header("[" * 100 + "]" * 100),
        "bad-missing-fields.safetensors": raw_header('{"a":{"shape":[1]},"b":{"dtype":"F32"}}'),
        "bad-types.safetensors": raw_header('{"a":{"dtype":3,"shape":"x","data_offsets":{}}}'),
        "bad-dtype.safetensors": raw_header('{"a":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}}', bytes(4)),
        "bad-shape-negative.safetensors": raw_header('{"a":{"dtype":"F32","shape":[-1,2],"data_offsets":[0,4]}}', bytes(4)),
        "bad-shape-overflow.safetensors": raw_header(
            '{"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,4]}}', bytes(4)),
        "bad-offsets-outside.safetensors": raw_header('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', bytes(8)),
        "bad-offsets-reversed.safetensors": raw_header('{"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}', bytes(8)),
        "bad-size.safetensors": raw_header('{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}}', bytes(8)),
        "bad-overlap.safetensors": raw_header(
            '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
            bytes(12)),
        "bad-metadata.safetensors": raw_header('{"__metadata__":{"format":1}}'),
        "config-bert.json": json.dumps({
            "architectures": ["BertModel"], "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
            "initializer_range": 0.02, "tie_word_embeddings": True, "classifier_dropout": None}, indent=2).encode(),
        "config-mistyped.json": b'{"hidden_size": "768", "layer_norm_eps": [1], "architectures": ["A", 2]}',
    }
    for old in OUT.glob("*"):
        if old.name != "README.md":
            old.unlink()
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)
    print(f"{len(seeds)} seeds in {OUT}")


if __name__ == "__main__":
    main()
