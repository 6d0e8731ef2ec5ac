#!/usr/bin/python3
"""bert-base's 12 encoder blocks in PyTorch float64, the same model and inputs as bench/encoder_block.cpp.

The model is the folder `tests/python/encoder_forward ... --random SEED 0 --save-weights DIR` writes
(config.json and model.safetensors: rcsweep's RandomWeights under Hugging Face's tensor names, F64),
built from torch.nn modules as Hugging Face's BertModel computes it (BertEmbeddings, then per layer
BertSelfAttention, BertSelfOutput, BertIntermediate with the exact GELU, BertOutput; eval mode, no
dropout). The inputs are the excerpts of the token file padded to T = 128 with pad_token_id, the padding
masked as keys (Hugging Face's additive mask of the dtype's minimum).

Before timing, every layer's hidden states of every excerpt are compared with rcsweep's
(`build/bench/encoder_block --write-hidden HIDDEN.npy`): the largest |difference| over an excerpt's
layer, divided by the largest |entry| of rcsweep's, must be below 1e-10, else exit 1.

Timed, as encoder_block's `forward`: the 12 blocks from the embedding's output X_0 (the embedding once,
outside the timing), in inference mode, with torch.set_num_threads(N) and OpenBLAS's threads set to N
(the library torch calls, through ctypes):
  batch 32   the 32 excerpts as one batch (32 x 128 x 768): how PyTorch is run for throughput
  batch 1    one excerpt at a time, as rcsweep runs them
Prints one JSON line per repetition: {"impl": "torch", "batch": B, "threads": N, "s_excerpt": ...,
"cpu_per_wall": ..., "checksum": ...}; checksum is the sum of the cubes of the last layer's hidden
states over the excerpts, as encoder_block's forward prints it.

  /usr/bin/python3 bench/encoder_torch.py MODEL_DIR TOKENS HIDDEN.npy --threads 1 --repetitions 3
"""
import argparse
import ctypes
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# The model folder's reader: the NumPy reference's (F64, F32, F16, BF16 to float64).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))
from encoder_reference import read_safetensors  # noqa: E402

T = 128


class Layer(nn.Module):
    """Hugging Face's BertLayer (post-LN), float64."""

    def __init__(self, d, heads, m, eps):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attention_dense, self.attention_norm = nn.Linear(d, d), nn.LayerNorm(d, eps=eps)
        self.intermediate, self.output = nn.Linear(d, m), nn.Linear(m, d)
        self.output_norm = nn.LayerNorm(d, eps=eps)

    def split(self, x):  # B x T x d -> B x H x T x d_head
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.dh).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + mask
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, t, _ = context.shape
        context = context.permute(0, 2, 1, 3).reshape(b, t, self.heads * self.dh)
        a = self.attention_norm(self.attention_dense(context) + x)
        return self.output_norm(self.output(F.gelu(self.intermediate(a))) + a)


class Bert(nn.Module):
    def __init__(self, config):
        super().__init__()
        d, eps = config["hidden_size"], config["layer_norm_eps"]
        self.word = nn.Embedding(config["vocab_size"], d)
        self.position = nn.Embedding(config["max_position_embeddings"], d)
        self.token_type = nn.Embedding(config["type_vocab_size"], d)
        self.norm = nn.LayerNorm(d, eps=eps)
        self.layers = nn.ModuleList(
            Layer(d, config["num_attention_heads"], config["intermediate_size"], eps)
            for _ in range(config["num_hidden_layers"]))

    def embed(self, ids):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        types = torch.zeros_like(ids)
        return self.norm((self.word(ids) + self.token_type(types)) + self.position(positions))

    def blocks(self, x, mask, every=False):
        states = []
        for layer in self.layers:
            x = layer(x, mask)
            if every:
                states.append(x)
        return states if every else x

    def load(self, tensors):
        names = {"word.weight": "embeddings.word_embeddings.weight",
                 "position.weight": "embeddings.position_embeddings.weight",
                 "token_type.weight": "embeddings.token_type_embeddings.weight",
                 "norm.weight": "embeddings.LayerNorm.weight", "norm.bias": "embeddings.LayerNorm.bias"}
        hf = {"query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
              "attention_dense": "attention.output.dense", "attention_norm": "attention.output.LayerNorm",
              "intermediate": "intermediate.dense", "output": "output.dense", "output_norm": "output.LayerNorm"}
        for i in range(len(self.layers)):
            for ours, theirs in hf.items():
                for p in ("weight", "bias"):
                    names[f"layers.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
        state = {}
        for ours, theirs in names.items():
            found = [tensors[n] for n in (theirs, "bert." + theirs) if n in tensors]
            if len(found) != 1:
                sys.exit(f"the model folder has {len(found)} tensors named {theirs}")
            state[ours] = torch.from_numpy(np.array(found[0], dtype=np.float64))
        self.load_state_dict(state, strict=True)


def read_tokens(path, pad):
    ids, real = [], []
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        x = [int(t) for t in line.split()][:T]
        ids.append(x + [pad] * (T - len(x)))
        real.append([1] * len(x) + [0] * (T - len(x)))
    return torch.tensor(ids), torch.tensor(real, dtype=torch.float64)


def set_threads(n, blas_n):
    """torch's threads n, OpenBLAS's blas_n (None: n); returns OpenBLAS's threads and kernel."""
    torch.set_num_threads(n)
    # torch calls OpenBLAS (Debian's libblas.so.3 alternative); its thread pool is set apart.
    loaded = [line.split()[-1] for line in open("/proc/self/maps") if "libopenblas" in line]
    if not loaded:
        sys.exit("torch did not load OpenBLAS (libblas.so.3 is another BLAS): its threads cannot be set")
    blas = ctypes.CDLL(loaded[0])
    blas_threads = n if blas_n is None else blas_n
    blas.openblas_set_num_threads(blas_threads)
    blas.openblas_get_corename.restype = ctypes.c_char_p
    if blas.openblas_get_num_threads() != blas_threads:
        sys.exit(f"OpenBLAS runs {blas.openblas_get_num_threads()} threads, not {blas_threads}")
    return blas_threads, blas.openblas_get_corename().decode()


def check(model, x0, mask, hidden, threads, blas_threads, core):
    """Every layer of every excerpt against rcsweep's hidden states; exit 1 above 1e-10 relative."""
    with torch.inference_mode():
        states = [x0] + model.blocks(x0, mask, every=True)
    ref = np.load(hidden, mmap_mode="r")  # excerpts x 13 x T x d
    if ref.shape != (x0.shape[0], len(states)) + tuple(x0.shape[1:]):
        sys.exit(f"{hidden} holds {ref.shape}, not {x0.shape[0]} excerpts x {len(states)} layers x T x d")
    worst = 0.0
    for layer, x in enumerate(states):
        ours = x.numpy()
        for k in range(ours.shape[0]):
            r = np.asarray(ref[k, layer])
            worst = max(worst, float(np.max(np.abs(ours[k] - r)) / np.max(np.abs(r))))
    print(json.dumps({"check": "hidden states against rcsweep", "max_relative": worst, "layers": len(states),
                      "excerpts": x0.shape[0], "threads": threads, "blas_threads": blas_threads,
                      "kernel": core, "torch": torch.__version__}), flush=True)
    if not worst < 1e-10:
        sys.exit(f"PyTorch's hidden states differ from rcsweep's by {worst:.3g} relative (> 1e-10)")


def time_blocks(model, x0, mask, threads, blas_threads, repetitions, batches):
    n = x0.shape[0]
    with torch.inference_mode():
        for _ in range(repetitions):
            for batch in batches:
                wall, cpu = time.perf_counter(), time.process_time()
                checksum = 0.0
                for first in range(0, n, batch):
                    last = model.blocks(x0[first:first + batch], mask[first:first + batch])
                    checksum += float((last ** 3).sum())
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                print(json.dumps({"impl": "torch", "batch": batch, "threads": threads, "blas_threads": blas_threads,
                                  "s_excerpt": wall / n,
                                  "cpu_per_wall": cpu / wall, "checksum": checksum}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path, help="a model folder of F64 weights (encoder_forward --save-weights)")
    ap.add_argument("tokens", type=Path, help="the token file (jobs/examples/tokens/excerpts.txt)")
    ap.add_argument("hidden", type=Path, help="rcsweep's hidden states (encoder_block --write-hidden)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--blas-threads", type=int, help="OpenBLAS's threads (default: --threads)")
    ap.add_argument("--repetitions", type=int, default=3, help="timed runs per batch size (0: check only)")
    ap.add_argument("--batch", choices=["32", "1", "both"], default="both")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the comparison with rcsweep (run_encoder_bench.sh checks once, then times)")
    args = ap.parse_args()

    blas_threads, core = set_threads(args.threads, args.blas_threads)
    config = json.loads((args.model / "config.json").read_text())
    model = Bert(config).double().eval()
    model.load(read_safetensors(args.model / "model.safetensors"))
    ids, real = read_tokens(args.tokens, config["pad_token_id"])
    mask = ((1.0 - real) * torch.finfo(torch.float64).min)[:, None, None, :]  # B x 1 x 1 x T
    with torch.inference_mode():
        x0 = model.embed(ids)
    if not args.no_check:
        check(model, x0, mask, args.hidden, args.threads, blas_threads, core)
    batches = {"32": [32], "1": [1], "both": [32, 1]}[args.batch]
    time_blocks(model, x0, mask, args.threads, blas_threads, args.repetitions, batches)


if __name__ == "__main__":
    main()
