"""The sweep file as the NumPy references read it (mind_the_gap_numpy.py, the plain baseline, and
mind_the_gap_numpy_batched.py, the batched peer): its points in rcsweep's order, the model
parameters they know, and the labels of the Mind the Gap grid's variants. No numpy here: the
plain baseline sets its BLAS threads before numpy is imported."""
import itertools
import math
import os
import sys
import tomllib

DEFAULTS = {"T": None, "d": None, "mixer": "softmax", "input": "orthonormal", "depth": 1, "heads": 1, "d_qk": 0,
            "sigma_qk": 1.0, "sigma_A": 1.0, "lambda": 0.0, "skip_scale": 1.0, "norm": "none",
            "gap_fix": "none", "value_init": "gaussian", "sigma_v": 1.0, "value_scale": "none"}
VARIANT_KEYS = ("mixer", "gap_fix", "lambda", "skip_scale", "norm")
DEFAULT_SWEEP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                              "sweeps", "mind_the_gap_stable_rank.toml"))


def expand(path, reader):
    """(points, replicates, seed) of the sweep file: the points in rcsweep's order ([axes] entries,
    then each [[zip]] table, as grid dimensions; row-major, the last dimension fastest). A model
    parameter outside DEFAULTS, or adaptive replicates, ends the program naming `reader`."""
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    base = dict(DEFAULTS)
    for k, v in cfg.get("model", {}).items():
        if k not in DEFAULTS:
            sys.exit(f"{path}: model.{k} is not supported by this {reader}")
        base[k] = v
    dims = [[{k: v} for v in vals] for k, vals in cfg.get("axes", {}).items()]
    for z in cfg.get("zip", []):
        n = len(next(iter(z.values())))
        dims.append([{k: vals[i] for k, vals in z.items()} for i in range(n)])
    points = []
    for combo in itertools.product(*dims):
        p = dict(base)
        for part in combo:
            for k in part:
                if k not in DEFAULTS:
                    sys.exit(f"{path}: swept parameter {k} is not supported by this {reader}")
            p.update(part)
        points.append(p)
    sweep = cfg.get("sweep", {})
    reps = sweep.get("replicates", 1)
    if not isinstance(reps, int):
        sys.exit(f"{path}: adaptive replicates are not supported by this {reader}")
    return points, reps, int(sweep.get("seed", 0))


def scale(v, d):
    """A scale parameter's value: 1/sqrt(d) for "inv_sqrt_d", else the number."""
    return 1.0 / math.sqrt(d) if v == "inv_sqrt_d" else float(v)


def variant_label(p):
    skip = "1/sqrt(d)" if p["skip_scale"] == "inv_sqrt_d" else f"{float(p['skip_scale']):g}"
    return f"{p['mixer']} {p['gap_fix']} lambda={float(p['lambda']):g} skip={skip} {p['norm']}"
