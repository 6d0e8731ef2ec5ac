#!/usr/bin/python3
"""A Mamba-2 model in PyTorch float64, the same model folder and tokens as bench/mamba2_layer's model/N.

The model is a mamba_ssm folder (config.json and model.safetensors, any float dtype: read to float64 by
the NumPy reference's reader, tests/python/mamba2_reference.py), built from torch.nn modules under
mamba_ssm's parameter names (MixerModel: embedding, layers.{i}.norm and layers.{i}.mixer with in_proj,
conv1d, dt_bias, A_log, D, norm and out_proj, norm_f) and loaded with load_state_dict. The mixer is
mamba_ssm's Mamba2 without its fused kernels: in_proj, the causal depthwise convolution (nn.Conv1d's
weight as K shifted multiply-adds; --conv1d: nn.Conv1d itself) and SiLU, softplus, the SSD in chunks of
chunk_size tokens (as mamba_ssm's ssd_minimal: within a chunk L ⊙ (C B^T) ⊙ Delta times x with the
segment sums by a masked cumulative sum; the state carried between chunks), the gated RMSNorm and
out_proj; batched matrix products over the heads, C B^T once per group.

Before timing, every layer's hidden states and the final norm are compared with rcsweep's
(`build/tests/python/mamba2_forward MODEL_DIR IDS HIDDEN.npy`): the largest |difference| of a layer
divided by the largest |entry| of rcsweep's must be below 1e-10, else exit 1.

Timed: every layer and the final norm from the embedding's output X_0 (the embedding once, outside the
timing), in inference mode, with torch.set_num_threads(N) and OpenBLAS's threads (the library torch
calls, through ctypes) set to --blas-threads (default N). Prints one JSON line per repetition:
{"impl": "torch", "model": NAME, "threads": N, "blas_threads": M, "s_forward": ..., "cpu_per_wall": ...,
"checksum": ...}; checksum is the sum of the cubes of the normed output, as mamba2_layer's model/N.

  /usr/bin/python3 bench/mamba2_torch.py MODEL_DIR IDS HIDDEN.npy --threads 1 --repetitions 3
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent / "tests" / "python"))
sys.path.insert(0, str(here))
import mamba2_reference as ref  # noqa: E402  (config and folder reader, token file)
from encoder_torch import set_threads  # noqa: E402  (torch's and OpenBLAS's threads)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over groups of the last dimension (mamba_ssm's RMSNorm and
    RMSNormGated's norm)."""

    def __init__(self, d, eps=1e-5, groups=1):
        super().__init__()
        self.weight, self.eps, self.groups = nn.Parameter(torch.ones(d)), eps, groups

    def forward(self, x):
        xg = x.reshape(*x.shape[:-1], self.groups, -1)
        return (xg * torch.rsqrt(xg.pow(2).mean(-1, keepdim=True) + self.eps)).reshape(x.shape) * self.weight


def segsum(a):
    """a (..., q) -> (..., q, q): [t, s] = sum_(r=s+1..t) a[r] for s <= t, -inf above (ssd_minimal's
    masked cumulative sum: no difference of cumulative sums)."""
    q = a.shape[-1]
    x = a[..., None].expand(*a.shape, q).masked_fill(~torch.tril(torch.ones(q, q, dtype=torch.bool), -1), 0.0)
    x = torch.cumsum(x, dim=-2)
    return x.masked_fill(~torch.tril(torch.ones(q, q, dtype=torch.bool)), -torch.inf)


class Mamba2(nn.Module):
    """mamba_ssm's Mamba2 mixer on one sequence (T x d), without its fused kernels."""

    def __init__(self, s, conv1d=False):
        super().__init__()
        self.s, self.use_conv1d = s, conv1d
        E, H = s.d_inner, s.nheads
        self.in_proj = nn.Linear(s.d_model, s.d_in_proj, bias=s.bias)
        self.conv1d = nn.Conv1d(s.conv_dim, s.conv_dim, s.d_conv, groups=s.conv_dim, padding=s.d_conv - 1,
                                bias=s.conv_bias)
        self.dt_bias, self.A_log = nn.Parameter(torch.zeros(H)), nn.Parameter(torch.zeros(H))
        self.D = nn.Parameter(torch.ones(E if s.D_has_hdim else H))
        if s.rmsnorm:
            self.norm = RMSNorm(E, groups=s.ngroups)
        self.out_proj = nn.Linear(E, s.d_model, bias=s.bias)

    def conv(self, xBC):
        """The causal depthwise convolution (T x conv_dim), then SiLU."""
        T, K = xBC.shape[0], self.s.d_conv
        if self.use_conv1d:
            return F.silu(self.conv1d(xBC.T.unsqueeze(0))[0, :, :T].T)
        w = self.conv1d.weight[:, 0, :]  # conv_dim x K
        out = self.conv1d.bias.expand(T, -1).clone() if self.conv1d.bias is not None else torch.zeros_like(xBC)
        for k in range(K):  # tap k reads token t - (K - 1) + k
            shift = K - 1 - k
            if shift < T:
                out[shift:] += w[:, k] * xBC[:T - shift]
        return F.silu(out)

    def ssd(self, x, delta, A, B, C):
        """y (T x E) of the SSD in chunks, D x not added."""
        s = self.s
        T, H, P, G, N = x.shape[0], s.nheads, s.headdim, s.ngroups, s.d_state
        Q, hg = min(s.chunk_size, T), H // G
        y = torch.empty(T, H, P, dtype=x.dtype)
        S = torch.zeros(G, hg, P, N, dtype=x.dtype)
        for a in range(0, T, Q):
            q = min(Q, T - a)
            dl = delta[a:a + q].T  # H x q
            dA = dl * A[:, None]
            L = torch.exp(segsum(dA))  # H x q x q
            Xc = x[a:a + q].view(q, H, P).permute(1, 0, 2).reshape(G, hg, q, P)
            Bc = B[a:a + q].view(q, G, N).permute(1, 0, 2)  # G x q x N
            Cc = C[a:a + q].view(q, G, N).permute(1, 0, 2)
            CB = torch.matmul(Cc, Bc.transpose(1, 2))  # G x q x q, once per group
            W = L.view(G, hg, q, q) * CB[:, None] * dl.view(G, hg, 1, q)
            Y = torch.matmul(W, Xc)  # G x hg x q x P
            if a > 0:  # the state carried in, decayed to each token
                cum = torch.cumsum(dA, dim=1).view(G, hg, q, 1)
                Y += torch.exp(cum) * torch.matmul(Cc[:, None], S.transpose(-1, -2))
            y[a:a + q] = Y.reshape(H, q, P).permute(1, 0, 2)
            if a + q < T:  # the state carried out: L's last row weighs each token
                last = (L[:, -1, :] * dl).view(G, hg, q, 1)
                decay = torch.exp(dA.sum(1)).view(G, hg, 1, 1)
                S = decay * S + torch.matmul((Xc * last).transpose(-1, -2), Bc[:, None])
        return y.reshape(T, H * P)

    def forward(self, u):
        s = self.s
        E, G, N, H, P = s.d_inner, s.ngroups, s.d_state, s.nheads, s.headdim
        z, xBC, dt = torch.split(self.in_proj(u), [E, E + 2 * G * N, H], dim=-1)
        xs, B, C = torch.split(self.conv(xBC), [E, G * N, G * N], dim=-1)
        delta = torch.clamp(F.softplus(dt + self.dt_bias), s.dt_limit[0], s.dt_limit[1])
        A = -torch.exp(self.A_log)
        y = self.ssd(xs, delta, A, B, C)
        D = self.D if s.D_has_hdim else self.D.repeat_interleave(P)
        y = y + D * xs
        if s.rmsnorm:
            y = self.norm(y) * F.silu(z) if s.norm_before_gate else self.norm(y * F.silu(z))
        else:
            y = y * F.silu(z)
        return self.out_proj(y)


class Block(nn.Module):
    def __init__(self, s, conv1d=False):
        super().__init__()
        self.norm, self.mixer = RMSNorm(s.d_model), Mamba2(s, conv1d)

    def forward(self, x):
        return x + self.mixer(self.norm(x))


class Backbone(nn.Module):
    def __init__(self, s, layers, conv1d=False):
        super().__init__()
        self.embedding = nn.Embedding(s.vocab_rows, s.d_model)
        self.layers = nn.ModuleList(Block(s, conv1d) for _ in range(layers))
        self.norm_f = RMSNorm(s.d_model)

    def blocks(self, x, every=False):
        states = [x]
        for layer in self.layers:
            x = layer(x)
            if every:
                states.append(x)
        x = self.norm_f(x)
        return states + [x] if every else x


def load(folder, conv1d):
    """The model of a folder in float64 (every tensor of its n_layer layers; lm_head not read)."""
    s = ref.read_config(folder)
    tensors = ref.read_folder_tensors(Path(folder))
    model = Backbone(s, s.n_layer, conv1d).double().eval()
    state = {}
    for name in model.state_dict():
        key = "backbone." + name
        if key not in tensors:
            sys.exit(f"{folder}: tensor {key} is missing")
        state[name] = torch.from_numpy(np.array(tensors[key], dtype=np.float64))
    model.load_state_dict(state, strict=True)
    return s, model


def check(model, x0, hidden, threads, blas_threads, core, name):
    """Every layer and the final norm against rcsweep's; exit 1 above 1e-10 relative."""
    with torch.inference_mode():
        states = model.blocks(x0, every=True)
    ours_all = np.load(hidden, mmap_mode="r")  # (L + 2) x T x d
    if ours_all.shape != (len(states),) + tuple(x0.shape):
        sys.exit(f"{hidden} holds {ours_all.shape}, not {len(states)} states x T x d = {tuple(x0.shape)}")
    worst = 0.0
    for k, x in enumerate(states):
        r = np.asarray(ours_all[k])
        worst = max(worst, float(np.max(np.abs(x.numpy() - r)) / np.max(np.abs(r))))
    print(json.dumps({"check": "hidden states against rcsweep", "model": name, "max_relative": worst,
                      "states": len(states), "tokens": x0.shape[0], "threads": threads,
                      "blas_threads": blas_threads, "kernel": core, "torch": torch.__version__}), flush=True)
    if not worst < 1e-10:
        sys.exit(f"PyTorch's hidden states differ from rcsweep's by {worst:.3g} relative (> 1e-10)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path, help="a mamba_ssm model folder")
    ap.add_argument("ids", type=Path, help="a token file: its ids, joined, are the sequence")
    ap.add_argument("hidden", type=Path, help="rcsweep's hidden states (tests/python/mamba2_forward's OUT.npy)")
    ap.add_argument("--name", default=None, help="the model's name in the JSON lines (default: the folder's)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--blas-threads", type=int, help="OpenBLAS's threads (default: --threads)")
    ap.add_argument("--repetitions", type=int, default=3, help="timed forwards (0: check only)")
    ap.add_argument("--conv1d", action="store_true", help="the convolution through nn.Conv1d")
    ap.add_argument("--no-check", action="store_true", help="skip the comparison with rcsweep")
    args = ap.parse_args()
    name = args.name or args.model.name

    blas_threads, core = set_threads(args.threads, args.blas_threads)
    s, model = load(args.model, args.conv1d)
    ids = torch.tensor(ref.read_ids(args.ids))
    with torch.inference_mode():
        x0 = model.embedding(ids)
    if not args.no_check:
        check(model, x0, args.hidden, args.threads, blas_threads, core, name)
    with torch.inference_mode():
        for _ in range(args.repetitions):
            wall, cpu = time.perf_counter(), time.process_time()
            out = model.blocks(x0)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(json.dumps({"impl": "torch", "model": name, "threads": args.threads, "blas_threads": blas_threads,
                              "s_forward": wall, "cpu_per_wall": cpu / wall,
                              "checksum": float((out ** 3).sum())}), flush=True)


if __name__ == "__main__":
    main()
