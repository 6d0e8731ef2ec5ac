"""Tiny mamba_ssm-style Mamba-2 checkpoints for the Mamba-2 reference tests: config.json (MambaConfig
with a Mamba2 ssm_cfg) and model.safetensors with mamba_ssm's tensor names, 2 to 4 layers, d_model
32 to 64, d_state 8 to 16, 2 to 4 heads, ngroups 1 and 2, stored as F64, F32 or BF16; the weights
drawn by NumPy with a spread far from the published initialisation (every parameter shows: per-step
decays exp(Delta A) spread over (0, 1) with medians 0.35 to 0.65, D away from 1, norm weights away
from 1).

The names and keys are written from mamba_ssm's published layout (MambaLMHeadModel's state dict and
MambaConfig), not from rcsweep's C++; the safetensors writer is tiny_encoders.py's.

    /usr/bin/python3 tests/python/tiny_mamba2.py OUT_DIR   # every case of CASES in OUT_DIR/<name>
"""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mamba2_reference as ref  # noqa: E402
from tiny_encoders import stored_value, write_safetensors  # noqa: E402


def config(d_model, n_layer, d_state, headdim, ngroups=1, vocab=50, expand=2, d_conv=4, **ssm):
    """A config.json dict as mamba_ssm's MambaConfig writes it, ssm_cfg with `layer` "Mamba2"."""
    return {"d_model": d_model, "d_intermediate": 0, "n_layer": n_layer, "vocab_size": vocab,
            "ssm_cfg": {"layer": "Mamba2", "d_state": d_state, "d_conv": d_conv, "expand": expand,
                        "headdim": headdim, "ngroups": ngroups, **ssm},
            "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True, "residual_in_fp32": True,
            "fused_add_norm": True, "pad_vocab_size_multiple": 16, "tie_embeddings": True}


def state_dict(cfg, rng):
    """{name: float64 array} for cfg with a large spread: projections N(0, 0.2^2), the convolution
    N(0, 0.3^2) and its bias N(0, 0.15^2), softplus(dt_bias) around 0.1 to 1, A = -exp(A_log) between
    about -0.3 and -3, D = 1 + N(0, 0.3^2), norm weights 1 + N(0, 0.15^2), embedding N(0, 0.5^2)."""
    s = ref.Shape.of(cfg)
    t = {"backbone.embedding.weight": rng.normal(0, 0.5, (s.vocab_rows, s.d_model)),
         "backbone.norm_f.weight": 1 + rng.normal(0, 0.15, s.d_model)}
    for i in range(s.n_layer):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        t[p + "norm.weight"] = 1 + rng.normal(0, 0.15, s.d_model)
        t[m + "in_proj.weight"] = rng.normal(0, 0.2, (s.d_in_proj, s.d_model))
        t[m + "conv1d.weight"] = rng.normal(0, 0.3, (s.conv_dim, 1, s.d_conv))
        t[m + "conv1d.bias"] = rng.normal(0, 0.15, s.conv_dim)
        t[m + "dt_bias"] = ref.inverse_softplus(rng.uniform(0.1, 1.0, s.nheads))
        t[m + "A_log"] = np.log(rng.uniform(0.3, 3.0, s.nheads))
        t[m + "D"] = 1 + rng.normal(0, 0.3, s.nheads)
        t[m + "norm.weight"] = 1 + rng.normal(0, 0.15, s.d_inner)
        t[m + "out_proj.weight"] = rng.normal(0, 0.2, (s.d_model, s.d_inner))
    return t


# name -> (config arguments, dtype, with lm_head.weight beside)
CASES = {
    "mamba2_f64": (dict(d_model=32, n_layer=2, d_state=8, headdim=16), "F64", False),        # 4 heads, 1 group
    "mamba2_groups_f64": (dict(d_model=48, n_layer=3, d_state=16, headdim=24, ngroups=2), "F64", True),  # 4 heads
    "mamba2_f32": (dict(d_model=64, n_layer=4, d_state=12, headdim=64, ngroups=2), "F32", False),  # 2 heads
    "mamba2_bf16": (dict(d_model=32, n_layer=2, d_state=8, headdim=32, ngroups=1), "BF16", True),  # 2 heads
}


def write_folder(folder, cfg, tensors, dtype="F64"):
    """config.json and model.safetensors (every tensor as `dtype`); returns {name: the float64 value
    a reader gets back}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    write_safetensors(folder / "model.safetensors", {k: (v, dtype) for k, v in tensors.items()}, {"format": "pt"})
    return {k: stored_value(v, dtype) for k, v in tensors.items()}


def write_case(folder, name, seed=0):
    """Writes CASES[name] into `folder`; returns the config dict."""
    args, dtype, lm_head = CASES[name]
    cfg = config(**args)
    rng = np.random.default_rng([seed, sorted(CASES).index(name)])
    tensors = state_dict(cfg, rng)
    if lm_head:  # the tied LM head a saved MambaLMHeadModel carries beside the backbone
        tensors["lm_head.weight"] = tensors["backbone.embedding.weight"]
    write_folder(folder, cfg, tensors, dtype)
    return cfg


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    for case in CASES:
        write_case(Path(sys.argv[1]) / case, case)
        print(Path(sys.argv[1]) / case)
