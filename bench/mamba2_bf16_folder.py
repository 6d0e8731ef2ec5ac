#!/usr/bin/python3
"""A mamba_ssm model folder of BF16 weights at a config's shapes, written tensor by tensor.

    /usr/bin/python3 bench/mamba2_bf16_folder.py CONFIG.json OUT_DIR [--seed S]

For bench/mamba2_memory.sh: mamba2-2.7b's shapes (jobs/examples/mamba2/mamba2-2.7b/config.json) make
5.4 GB of BF16, which is streamed to OUT_DIR/model.safetensors one tensor at a time (never the model in
memory). Every tensor of MambaLMHeadModel's state dict (tests/python/mamba2_reference.py's names and
shapes; lm_head tied, not written) with values of the published initialisation's scales: the embedding
N(0, 0.02^2), in_proj U(+-1/sqrt(d_model)), out_proj U(+-1/sqrt(d_inner)) / sqrt(n_layer), conv1d
weight and bias U(+-1/sqrt(d_conv)), dt_bias the inverse softplus of a log-uniform dt in [0.001, 0.1],
A_log = log U(1, 16), D and the norm weights 1. To write fast, the large matrices are windows of one
pool of random BF16 values, each layer's at its own offset: a timing and memory fixture, not a draw
of mamba_ssm's.
"""
import argparse
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))
import mamba2_reference as ref  # noqa: E402


def bf16(x):
    """float values -> BF16 bits (round to nearest even) as uint16."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    s = ref.read_config(args.config)
    rng = np.random.default_rng(args.seed)
    E, H, d, L, K = s.d_inner, s.nheads, s.d_model, s.n_layer, s.d_conv
    pool = bf16(rng.uniform(-1.0, 1.0, 1 << 24))  # windows of it, scaled by a power of two below

    def window(n, offset, scale):
        """n values of the pool from `offset` (wrapping) times `scale` rounded to a power of two."""
        out = np.empty(n, dtype=np.uint16)
        i, o = 0, offset % pool.size
        while i < n:
            m = min(n - i, pool.size - o)
            out[i:i + m] = pool[o:o + m]
            i, o = i + m, 0
        shift = round(math.log2(scale))  # exact in BF16: add to the exponent of the nonzero values
        nonzero = (out & 0x7FFF) != 0
        out[nonzero] = (out[nonzero].astype(np.int32) + (shift << 7)).astype(np.uint16)
        return out

    tensors = []  # (name, shape, producer of its uint16 values)
    tensors.append(("backbone.embedding.weight", (s.vocab_rows, d),
                    lambda: bf16(rng.normal(0.0, 0.02, s.vocab_rows * d))))
    tensors.append(("backbone.norm_f.weight", (d,), lambda: bf16(np.ones(d))))
    for i in range(L):
        m = f"backbone.layers.{i}.mixer."
        tensors += [
            (f"backbone.layers.{i}.norm.weight", (d,), lambda: bf16(np.ones(d))),
            (m + "in_proj.weight", (s.d_in_proj, d),
             lambda i=i: window(s.d_in_proj * d, 7919 * 1009 * i, 1 / math.sqrt(d))),
            (m + "conv1d.weight", (s.conv_dim, 1, K), lambda: bf16(rng.uniform(-1, 1, s.conv_dim * K) / math.sqrt(K))),
            (m + "conv1d.bias", (s.conv_dim,), lambda: bf16(rng.uniform(-1, 1, s.conv_dim) / math.sqrt(K))),
            (m + "dt_bias", (H,), lambda: bf16(ref.inverse_softplus(
                np.exp(rng.uniform(math.log(0.001), math.log(0.1), H))))),
            (m + "A_log", (H,), lambda: bf16(np.log(rng.uniform(1.0, 16.0, H)))),
            (m + "D", (E if s.D_has_hdim else H,), lambda: bf16(np.ones(E if s.D_has_hdim else H))),
            (m + "norm.weight", (E,), lambda: bf16(np.ones(E))),
            (m + "out_proj.weight", (d, E),
             lambda i=i: window(d * E, 104729 * 613 * i + 12345, 1 / math.sqrt(E) / math.sqrt(L))),
        ]
    header, offset = {}, 0
    for name, shape, _ in tensors:
        n = 2 * math.prod(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.json").write_text(args.config.read_text())
    with open(args.out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode())
        for _, shape, make in tensors:
            values = make()
            assert values.size == math.prod(shape)
            f.write(values.tobytes())
    print(f"wrote {args.out / 'model.safetensors'}: {len(tensors)} tensors, {offset / 1e9:.2f} GB of BF16")


if __name__ == "__main__":
    main()
