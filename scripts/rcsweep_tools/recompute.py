"""Recompute a sweep from its weights dump, independently of rcsweep, and check the store.

    rcsweep-recompute OUT.h5 [--tol 1e-10] [--quiet]     (installed), or from a checkout
    /usr/bin/python3 scripts/rcsweep_recompute.py OUT.h5 [--tol 1e-10] [--quiet]

OUT.h5 must come from `rcsweep run ... --dump-weights` (docs/SCHEMA.md "/dump"). For every dumped
task this script

1. rebuilds the task's model parameters from /tasks and /points (and the mixer/input matrices
   from the root attribute `config`),
2. runs the stack again from the dumped X_0 with its own NumPy code for every part of a layer
   (docs/MODELS.md "One layer": mixers, gap_fix, values, skip, SiLU gate, norms, ReLU MLP),
   recomputing the input-dependent mixers (softmax, relu, sigmoid attention and the selective
   SSM `ssd`) from the dumped weights; only the input-independent mixers (markov, identity,
   uniform, lti, matrix) are taken from the dumped M, and s4d from its dumped kernels s4d_K,
3. compares every X_l of its own chain with the dumped X_l, and
4. recomputes the metrics of /layers it knows (METRICS: the 13 of schema 2) from its own X_l and
   mixers (SVD-based, straight from MODELS.md "Metrics") and compares them with the store; a
   metric of the store it does not know is named in a note and not compared.

The dumped matrices are also checked for what is known about them without the random streams:
shapes; W_V = sigma_v I (value_init identity) or I (SSM mixers); an orthogonal W_V; X_0 with
orthonormal or unit rows, or the sweep file's input_matrix; M = I, (1/T) 1 1^T, the sweep file's
mixer_matrix or g L(alpha) for the identity, uniform, matrix and lti mixers, and a row-stochastic
positive Markov matrix (each after gap_fix none or perp).

Every error is relative to the natural scale of the quantity, so a rounding-level difference is
about 1e-16 whatever the quantity's size:
  X                  ||X_mine - X_dump||_F / ||X_dump||_F (both at the same scale), max over layers;
                     also the checks of X_0 above
  M                  input-dependent mixers: ||M_mine - M_dump||_F / ||M_dump||_F (and M_raw before
                     an outliers gap_fix; after it, / ||M_raw||_F); the others: the checks above
  W                  the weight checks above
  fro, s1, s2, mu    |a - b| / ||X_l||_F (singular values move by at most ||dX||_2)
  log_fro            |a - b| (the relative error of ||X_l||_F)
  sr_cov, sr_x       |a - b| / |b|
  mu_rel, res_rel    |a - b| (ratios of order 1)
  m_s1, m_s2, m_fro  |a - b| / ||M||_F (||M_raw||_F after an outliers gap_fix of a recomputed M)
  m_gap = s1/s2      |1/a - 1/b|, i.e. s2/s1 compared (s1/s2 itself is arbitrary for a rank-1 M)
NaN in both is agreement; NaN or inf in one only is an infinite error. A metric the sweep did not
compute ([output] metrics; the /layers attribute `computed`) is not compared (shown as -).

Output: one row per task with the largest error of each quantity over the layers, then a verdict.
Exit code 0 when every error is <= --tol, 1 otherwise, 2 when the file has no usable dump.
"""
import argparse
import math
import sys
import tomllib

import h5py
import numpy as np

# The metrics this script recomputes (signal_metrics, mixer_metrics below), in storage order.
METRICS = ("fro", "log_fro", "s1", "s2", "sr_cov", "sr_x", "mu", "mu_rel", "res_rel",
           "m_s1", "m_s2", "m_gap", "m_fro")
COLUMNS = ("X", "M", "W") + METRICS
ATTENTION = ("softmax", "relu", "sigmoid")
INPUT_DEPENDENT = ATTENTION + ("ssd",)
SSM = ("ssd", "lti", "s4d")
LINEAR = ("markov", "identity", "uniform", "lti", "matrix", "s4d")
STATUS_DONE = 1  # "done" where a store's /tasks status enumeration does not name it (done_status)


class DumpError(Exception):
    """The dump is not what this script expects (missing dataset, wrong shape, ...)."""


def text(v):
    return v.decode().rstrip("\x00") if isinstance(v, bytes) else str(v)


# ---- the model of one task ------------------------------------------------------------------

class Model:
    """The parameters of one grid point, resolved like MODELS.md says (/points holds the scale
    parameters already resolved, sigma_v before value_scale, lambda_mlp resolved)."""

    def __init__(self, row, config):
        g = lambda name: row[name]
        self.mixer = text(g("mixer"))
        self.input = text(g("input"))
        self.T, self.d, self.depth = int(g("T")), int(g("d")), int(g("depth"))
        self.heads = int(g("heads"))
        self.d_qk = int(g("d_qk")) or self.d
        self.sigma_qk = float(g("sigma_qk"))
        self.lam = float(g("lambda"))
        self.skip_scale = float(g("skip_scale"))
        self.norm = text(g("norm"))
        self.gap_fix = text(g("gap_fix"))
        self.outliers_r = int(g("outliers_r"))
        self.value_init = text(g("value_init"))
        self.sigma_v = float(g("sigma_v"))
        if text(g("value_scale")) == "inv_sqrt_d":
            self.sigma_v /= math.sqrt(self.d)
        self.gate = text(g("gate"))
        self.mlp = text(g("mlp"))
        self.lambda_mlp = float(g("lambda_mlp"))
        self.mlp_ratio = int(g("mlp_ratio"))
        self.bc_init = text(g("bc_init"))
        self.state_dim = self.d if self.bc_init == "identity" else int(g("state_dim"))
        self.alpha = float(g("alpha"))
        self.input_scale = float(g("input_scale"))
        model_table = config.get("model", {})
        self.mixer_matrix = np.array(model_table["mixer_matrix"], float) if "mixer_matrix" in model_table else None
        self.input_matrix = np.array(model_table["input_matrix"], float) if "input_matrix" in model_table else None

    def n_heads(self):
        return 1 if self.mixer == "s4d" else self.heads

    def carried(self):
        """X is carried at unit scale (renormalised by powers of two) when every layer is linear
        in X or positively homogeneous of degree 1 and there is no norm: MODELS.md "Scale"."""
        return self.norm == "none" and self.gate == "none" and self.mixer in LINEAR

    def describe(self):
        extra = [f"H={self.heads}" if self.heads > 1 and self.mixer != "s4d" else "",
                 f"gap={self.gap_fix}" if self.gap_fix != "none" else "",
                 f"norm={self.norm}" if self.norm != "none" else "",
                 "gate" if self.gate != "none" else "", "mlp" if self.mlp != "none" else "",
                 f"lam={self.lam:g}" if self.lam != 0 else ""]
        if self.mixer in ("ssd", "lti"):
            extra.append(f"bc={self.bc_init}")
        return " ".join([f"{self.mixer} T={self.T} d={self.d}"] + [e for e in extra if e])


# ---- the parts of a layer (MODELS.md "One layer"), written from the formulas --------------

def decay_mask(T, alpha):
    """L(alpha)_ji = alpha^(j-i) for j >= i, 0 above the diagonal (lambda-skip eq. (12))."""
    k = np.arange(T)[:, None] - np.arange(T)[None, :]
    return np.where(k >= 0, np.power(alpha, np.maximum(k, 0)), 0.0)


def gap_fixed(M, kind, r_fixed):
    if kind == "none":
        return M
    if kind == "perp":  # Mind the Gap eq. (8)
        return M - 1.0 / M.shape[0]
    U, s, Vt = np.linalg.svd(M)  # outliers: Mind the Gap App. A.5
    r = r_fixed
    if r == 0 and len(s) >= 2:
        r = int(np.argmax(s[:-1] - s[1:])) + 1  # the first largest gap
    r = min(r, len(s))
    return M - (U[:, :r] * s[:r]) @ Vt[:r, :]


def normed(Y, kind):
    if kind == "none":
        return Y
    if kind == "rms":  # lambda-skip eq. (4): rows divided by their Euclidean norm
        return Y / np.linalg.norm(Y, axis=1, keepdims=True)
    mean = Y.mean(axis=1, keepdims=True)  # LayerNorm, biased variance, eps 1e-5, no affine
    var = ((Y - mean) ** 2).mean(axis=1, keepdims=True)
    return (Y - mean) / np.sqrt(var + 1e-5)


def raw_mixer(m, X, W):
    """The mixer of one head from its weights, before gap_fix (input-dependent mixers)."""
    T = m.T
    if m.mixer in ATTENTION:  # logits X W_Q W_K^T X^T sigma_qk^2 / sqrt(d_qk), Mind the Gap eq. (1)
        S = (X @ W["W_Q"]) @ (X @ W["W_K"]).T * (m.sigma_qk ** 2 / math.sqrt(m.d_qk))
        if m.mixer == "softmax":
            E = np.exp(S - S.max(axis=1, keepdims=True))
            return E / E.sum(axis=1, keepdims=True)
        if m.mixer == "relu":  # ReLU(S) / T
            return np.maximum(S, 0.0) / T
        return 1.0 / (1.0 + np.exp(math.log(T) - S))  # sigmoid(S - ln T)
    # ssd: L(alpha) ⊙ (C B^T), B = X W_B, C = X W_C (W_B = W_C = I with bc_init identity)
    if m.bc_init == "identity":
        B = C = X
    else:
        B, C = X @ W["W_B"], X @ W["W_C"]
    return decay_mask(T, m.alpha) * (C @ B.T)


def s4d_apply(K, X):
    """O[j, c] = sum_{i <= j} K[j - i, c] X[i, c]: one causal convolution per channel."""
    T = X.shape[0]
    O = np.zeros_like(X)
    for j in range(T):
        O[j] = (K[j::-1] * X[: j + 1]).sum(axis=0)
    return O


def silu(z):
    return z / (1.0 + np.exp(-z))


def rel(a, b, scale=None):
    """||a - b||_F / ||b||_F, or / scale when given."""
    nb = np.linalg.norm(b) if scale is None else scale
    if nb == 0:
        return 0.0 if np.linalg.norm(a - b) == 0 else math.inf
    return float(np.linalg.norm(a - b) / nb)


def layer_forward(m, X, weights, checks):
    """One layer of the stack on X (as this script carries it). `weights(name)` reads a dumped
    matrix of this layer. Returns (X_next, head 0's M after gap_fix or None for s4d, the scale
    of its errors). `checks` collects the M errors."""
    T, d = X.shape
    if m.mixer == "s4d":
        O = m.skip_scale * s4d_apply(weights("s4d_K", (T, d)), X)
        M0, M0_scale = None, math.nan
    else:
        O = np.zeros_like(X)
        M0, M0_scale = None, math.nan
        for h in range(m.heads):
            k = f"_h{h}"
            M_dump = weights("M" + k, (T, T))
            if m.mixer in INPUT_DEPENDENT:
                W = {}
                if m.mixer in ATTENTION:
                    W["W_Q"] = weights("W_Q" + k, (d, m.d_qk))
                    W["W_K"] = weights("W_K" + k, (d, m.d_qk))
                elif m.bc_init == "gaussian":
                    W["W_B"] = weights("W_B" + k, (d, m.state_dim))
                    W["W_C"] = weights("W_C" + k, (d, m.state_dim))
                M_raw = raw_mixer(m, X, W)
                # Removing outliers may leave a tiny M (the largest gap can sit low in the
                # spectrum): its rounding errors are those of M_raw, so measure against ||M_raw||.
                scale = np.linalg.norm(M_raw) if m.gap_fix == "outliers" else None
                if m.gap_fix == "outliers":
                    checks["M"].append(rel(M_raw, weights("M_raw" + k, (T, T))))
                M = gap_fixed(M_raw, m.gap_fix, m.outliers_r)
                checks["M"].append(rel(M, M_dump, scale))
            else:
                M, scale = M_dump, None
            W_V = weights("W_V" + k, (d, d))
            O += M @ (X @ W_V)
            if h == 0:
                M0, M0_scale = M, (np.linalg.norm(M) if scale is None else scale)
        O *= m.skip_scale
    if m.gate == "silu":  # O ⊙ SiLU(X W_G / sqrt(d)), W_G dumped standard normal
        O = O * silu(X @ weights("W_G", (d, d)) / math.sqrt(d))
    Y = normed(m.lam * X + O, m.norm)
    if m.mlp == "relu":  # norm(lambda_mlp Y + ReLU(sqrt(2/d) Y W_1) W_2 / sqrt(m)), Dong et al. §3.2
        hidden = m.mlp_ratio * d
        H = np.maximum(math.sqrt(2.0 / d) * (Y @ weights("W_1", (d, hidden))), 0.0)
        Y = normed(m.lambda_mlp * Y + (H @ weights("W_2", (hidden, d))) / math.sqrt(hidden), m.norm)
    return Y, M0, M0_scale


# ---- checks of the dumped matrices that need no random stream ---------------------------------

def expected_mixer(m, M_dump):
    """The input-independent mixer (before gap_fix) implied by the parameters, or None when it
    cannot be known here (markov, or after an outliers gap_fix)."""
    T = m.T
    if m.gap_fix == "outliers":
        return None
    if m.mixer == "identity":
        return np.eye(T)
    if m.mixer == "uniform":
        return np.full((T, T), 1.0 / T)
    if m.mixer == "matrix":
        return m.mixer_matrix
    if m.mixer == "lti":  # g L(alpha), g = 1 for bc_init identity, else read off the diagonal
        undone = M_dump + (1.0 / T if m.gap_fix == "perp" else 0.0)
        g = 1.0 if m.bc_init == "identity" else undone[0, 0]
        return g * decay_mask(T, m.alpha)
    return None


def mixer_form_error(m, M_dump):
    if m.mixer == "markov":
        if m.gap_fix == "outliers":
            return math.nan
        Z = M_dump + (1.0 / m.T if m.gap_fix == "perp" else 0.0)  # positive, rows summing to 1
        return max(float(np.max(np.abs(Z.sum(axis=1) - 1.0))), float(max(0.0, -Z.min())))
    want = expected_mixer(m, M_dump)
    if want is None:
        return math.nan
    return rel(M_dump, gap_fixed(want, m.gap_fix, m.outliers_r))


def weight_form_error(m, W_V):
    d = m.d
    if m.mixer in SSM:
        return rel(W_V, np.eye(d))
    if m.value_init == "identity":
        return rel(W_V, m.sigma_v * np.eye(d))
    if m.value_init == "orthogonal":
        return rel(W_V.T @ W_V, m.sigma_v ** 2 * np.eye(d))
    return math.nan  # gaussian: nothing known without the random stream


def input_form_error(m, X0):
    s = m.input_scale
    if m.input == "orthonormal":
        return rel(X0 @ X0.T / s ** 2, np.eye(m.T))
    if m.input == "sphere":
        return float(np.max(np.abs(np.linalg.norm(X0, axis=1) / s - 1.0)))
    if m.input == "matrix":
        return rel(X0, s * m.input_matrix)
    return math.nan  # gaussian, file: nothing to check here


# ---- metrics (MODELS.md "Metrics"), from the SVD ----------------------------------------------

def signal_metrics(X, log2):
    """The signal metrics of the true X_l = X 2^log2."""
    fro = np.linalg.norm(X)
    s = np.linalg.svd(X / fro, compute_uv=False)  # singular values at unit Frobenius norm
    R = X - X.mean(axis=0, keepdims=True)
    mu = np.linalg.norm(R)

    def one_inf(A):  # sqrt(max column abs sum * max row abs sum)
        A = np.abs(A)
        return math.sqrt(A.sum(axis=0).max() * A.sum(axis=1).max())

    def true(v):  # v 2^log2, +inf beyond the double range (like the store)
        with np.errstate(over="ignore"):
            return float(np.ldexp(float(v), log2))

    return {
        "fro": true(fro), "log_fro": math.log(fro) + log2 * math.log(2.0),
        "s1": true(s[0] * fro), "s2": true((s[1] if len(s) > 1 else 0.0) * fro),
        "sr_cov": float(np.sum((s / s[0]) ** 4)), "sr_x": float(np.sum((s / s[0]) ** 2)),
        "mu": true(mu), "mu_rel": float(mu / fro), "res_rel": one_inf(R) / one_inf(X),
    }


def mixer_metrics(M):
    if M is None:
        return {k: math.nan for k in ("m_s1", "m_s2", "m_gap", "m_fro")}
    s = np.linalg.svd(M, compute_uv=False)
    s2 = s[1] if len(s) > 1 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):  # s1/0 = inf; 0/0 = NaN, as in the store
        gap = float(np.divide(s[0], s2))
    return {"m_s1": float(s[0]), "m_s2": float(s2), "m_gap": gap, "m_fro": float(np.linalg.norm(M))}


def metric_error(name, mine, stored, ref):
    """Error of one metric as documented at the top; `ref` holds ||X||_F and ||M||_F."""
    a, b = stored, mine[name]
    if math.isnan(a) and math.isnan(b):
        return 0.0
    if name == "m_gap":
        a, b = (1.0 / a if a else math.inf), (1.0 / b if b else math.inf)
    if not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if a == b else math.inf
    diff = abs(a - b)
    if name in ("fro", "s1", "s2", "mu"):
        scale = ref["fro"]
    elif name in ("m_s1", "m_s2", "m_fro"):
        scale = ref["m_fro"]
    elif name in ("sr_cov", "sr_x"):
        scale = abs(b)
    else:  # log_fro, mu_rel, res_rel, m_gap (as s2/s1)
        scale = 1.0
    if scale == 0 or not math.isfinite(scale):
        return 0.0 if diff == 0 else math.inf
    return diff / scale


# ---- one task ---------------------------------------------------------------------------------

def check_task(group, m, layers_row, computed=METRICS):
    """Errors {column: max over layers} of one dumped task; layers_row(name) -> stored [L+1]; the
    metrics not in `computed` are not compared (NaN)."""
    L = int(group.attrs["layers"])
    errors = {c: [] for c in COLUMNS}

    def dumped_signal(l):
        name = f"X_{l}"
        if name not in group:
            raise DumpError(f"{group.name}: no {name}")
        ds = group[name]
        if ds.shape != (m.T, m.d):
            raise DumpError(f"{ds.name} is {ds.shape}, expected T x d = {(m.T, m.d)}")
        return ds[...], int(ds.attrs["log2_scale"])

    stored = {name: layers_row(name) for name in METRICS if name in computed}  # a store may lack the others
    X, log2 = dumped_signal(0)  # this script's own chain starts from the dumped input
    if log2 != 0:
        raise DumpError(f"{group.name}/X_0 has log2_scale {log2}; the input is never rescaled")
    errors["X"].append(input_form_error(m, X))
    for l in range(L + 1):
        if l > 0:
            layer = group[f"layer_{l}"]

            def weights(name, shape, layer=layer):
                if name not in layer:
                    raise DumpError(f"{layer.name}: no {name} (needed by mixer {m.mixer})")
                A = layer[name][...]
                if A.shape != shape:
                    raise DumpError(f"{layer.name}/{name} is {A.shape}, expected {shape}")
                return A

            X, M0, M0_scale = layer_forward(m, X, weights, errors)
            for h in range(m.n_heads()):
                errors["W"].append(weight_form_error(m, weights(f"W_V_h{h}", (m.d, m.d))))
                if m.mixer not in INPUT_DEPENDENT and m.mixer != "s4d":
                    errors["M"].append(mixer_form_error(m, weights(f"M_h{h}", (m.T, m.T))))
            if m.carried():  # this script's own exact power-of-two carrying
                e = math.frexp(float(np.max(np.abs(X))))[1]
                X = np.ldexp(X, -e)
                log2 += e
        else:
            M0, M0_scale = None, math.nan
        X_dump, log2_dump = dumped_signal(l)
        errors["X"].append(rel(np.ldexp(X, log2 - log2_dump), X_dump))
        mine = signal_metrics(X, log2) | mixer_metrics(M0)
        ref = {"fro": mine["fro"], "m_fro": M0_scale}
        for name in METRICS:
            if name in computed:
                errors[name].append(metric_error(name, mine, float(stored[name][l]), ref))
    return {c: (max((e for e in v if not math.isnan(e)), default=math.nan)) for c, v in errors.items()}


def done_status(tasks):
    """The code of "done" in the /tasks status enumeration of the store (STATUS_DONE without one)."""
    try:
        members = h5py.check_enum_dtype(tasks.dtype.fields["status"][0]) or {}
    except (KeyError, TypeError):
        members = {}
    return int(members.get("done", STATUS_DONE))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", help="rcsweep HDF5 store written with --dump-weights")
    ap.add_argument("--tol", type=float, default=1e-10, help="largest accepted error (default 1e-10)")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only the verdict")
    args = ap.parse_args(argv)

    try:
        f = h5py.File(args.store, "r")
    except OSError as e:
        print(f"error: cannot open {args.store}: {e}", file=sys.stderr)
        return 2
    with f:
        if "dump" not in f:
            print(f"error: {args.store} has no /dump group: run rcsweep with --dump-weights", file=sys.stderr)
            return 2
        config = tomllib.loads(text(f.attrs["config"]))
        tasks, points = f["tasks"][...], f["points"][...]
        done = done_status(f["tasks"])
        groups = sorted((g for g in f["dump"] if g.startswith("task_")), key=lambda g: int(g[5:]))
        computed = text(f["layers"].attrs.get("computed", " ".join(METRICS))).split()
        if not groups:
            print(f"error: {args.store}: /dump holds no task", file=sys.stderr)
            return 2
        header = f"{'task':>5}  " + " ".join(f"{c:>8}" for c in COLUMNS) + "  model"
        unknown = [m for m in computed if m not in METRICS]
        if not args.quiet:
            if unknown:
                print(f"note: not recomputed (this script does not know them): {', '.join(unknown)}")
            print(header)
        worst, worst_where, failures = 0.0, "", []
        for name in groups:
            group = f["dump"][name]
            task = int(name[5:])
            if int(group.attrs["task"]) != task or task >= len(tasks):
                failures.append(f"{name}: attribute task = {int(group.attrs['task'])} does not match")
                continue
            if int(tasks["status"][task]) != done:
                failures.append(f"{name}: the task is not done in /tasks but has a dump")
                continue
            m = Model(points[int(tasks["point"][task])], config)
            try:
                errs = check_task(group, m, lambda metric: f["layers"][metric][task, :], computed)
            except DumpError as e:
                failures.append(f"task {task}: {e}")
                continue
            cells = []
            for c in COLUMNS:
                e = errs[c]
                cells.append(f"{'-':>8}" if math.isnan(e) else f"{e:8.1e}")
                if not math.isnan(e) and not e <= worst:
                    worst, worst_where = e, f"task {task} {c}"
            if not args.quiet:
                print(f"{task:>5}  " + " ".join(cells) + "  " + m.describe())
            bad = [c for c in COLUMNS if not math.isnan(errs[c]) and not errs[c] <= args.tol]
            if bad:
                failures.append(f"task {task} ({m.describe()}): " +
                                ", ".join(f"{c} {errs[c]:.2e}" for c in bad) + f" > tol {args.tol:g}")
    for line in failures:
        print("FAIL " + line)
    verdict = "FAIL" if failures else "OK"
    print(f"{verdict}: {len(groups)} dumped tasks, largest error {worst:.2e} ({worst_where or 'none'}), "
          f"tolerance {args.tol:g}")
    return 1 if failures else 0

