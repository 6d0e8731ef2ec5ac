#!/usr/bin/python3
"""Plain NumPy baseline of Mind the Gap's stable-rank grid.

    /usr/bin/python3 bench/reference/mind_the_gap_numpy.py [SWEEP.toml] [--max-T 60]
        [--replicates 2] [--out results.npz] [--compare STORE.h5]

What a researcher would write to run bench/sweeps/mind_the_gap_stable_rank.toml without rcsweep:
one process, one BLAS thread (OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = 1 are set before numpy is
imported), float64, a loop over tasks and layers with plain numpy operations, weights drawn per
task from numpy's default_rng (no sharing across the 25 variants, no common random numbers), and
every layer's metrics from np.linalg.svd of X_l and of the mixer M_l (docs/MODELS.md "Metrics").

Model (docs/MODELS.md "One layer"), for each task (grid point x replicate):
  X_0 = Q^T, Q the sign-fixed thin QR factor of a d x T standard Gaussian (X_0 X_0^T = I_T)
  M   = softmax(X W_Q (X W_K)^T / sqrt(d_qk)) row-wise, W_Q, W_K ~ N(0, sigma_qk^2)  (softmax)
        Z / rowsum(Z), Z = exp(G), G ~ N(-s^2/2, s^2), s^2 = ln(1 + sigma_A^2)   (markov)
        I                                                                         (identity)
  M   = M - 11^T/T                                                    (gap_fix = perp)
  Y   = lambda X + skip_scale * M X W_V,  W_V ~ N(0, sigma_v^2)
  X'  = LayerNorm(Y) per row (no affine, eps 1e-5, biased variance)  (norm = layernorm)
Metrics per layer: fro, log_fro, s1, s2, sr_cov = sum s^4 / s1^4, sr_x = sum s^2 / s1^2,
mu = ||X - 1 xbar^T||_F, mu_rel = mu / fro, res_rel = ||X - 1 xbar^T||_{1,inf} / ||X||_{1,inf},
and m_s1, m_s2, m_gap = m_s1 / m_s2, m_fro of M after gap_fix (NaN at layer 0). A task whose X
becomes non-finite or exactly zero is marked diverged, with NaN from that layer on (as rcsweep).

It is a timing baseline: its random numbers are not rcsweep's. --compare STORE.h5 checks it
statistically against an rcsweep store of the same sweep file: per variant, the mean over the
common tasks of sr_cov and sr_x at the last layer, with the standard error of the difference.
"""
import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse
import math
import sys
import time

import numpy as np

from mtg_grid import DEFAULT_SWEEP, expand, scale, variant_label

METRICS = ("fro", "log_fro", "s1", "s2", "sr_cov", "sr_x", "mu", "mu_rel", "res_rel",
           "m_s1", "m_s2", "m_gap", "m_fro")

# ---- one task -------------------------------------------------------------------------------

def metrics(X, M):
    out = {}
    s = np.linalg.svd(X, compute_uv=False)
    fro = np.linalg.norm(X)
    out["fro"] = fro
    out["log_fro"] = math.log(fro)
    out["s1"] = s[0]
    out["s2"] = s[1] if len(s) > 1 else 0.0
    out["sr_cov"] = np.sum(s ** 4) / s[0] ** 4
    out["sr_x"] = np.sum(s ** 2) / s[0] ** 2
    C = X - X.mean(axis=0, keepdims=True)
    out["mu"] = np.linalg.norm(C)
    out["mu_rel"] = out["mu"] / fro
    l1inf = lambda A: math.sqrt(np.abs(A).sum(axis=0).max() * np.abs(A).sum(axis=1).max())
    out["res_rel"] = l1inf(C) / l1inf(X)
    if M is None:
        for k in ("m_s1", "m_s2", "m_gap", "m_fro"):
            out[k] = np.nan
    else:
        sm = np.linalg.svd(M, compute_uv=False)
        out["m_s1"] = sm[0]
        out["m_s2"] = sm[1]
        out["m_gap"] = sm[0] / sm[1] if sm[1] > 0 else np.inf
        out["m_fro"] = np.linalg.norm(M)
    return out


def run_task(p, rng):
    T, d, L = int(p["T"]), int(p["d"]), int(p["depth"])
    if p["input"] != "orthonormal" or p["value_init"] != "gaussian" or int(p["heads"]) != 1:
        sys.exit("this baseline supports input = orthonormal, value_init = gaussian, heads = 1")
    d_qk = int(p["d_qk"]) or d
    sigma_qk = scale(p["sigma_qk"], d)
    sigma_v = scale(p["sigma_v"], d) / (math.sqrt(d) if p["value_scale"] == "inv_sqrt_d" else 1)
    skip = scale(p["skip_scale"], d)
    lam = float(p["lambda"])
    s2 = math.log(1.0 + float(p["sigma_A"]) ** 2)

    res = np.full((len(METRICS), L + 1), np.nan)
    Q, R = np.linalg.qr(rng.standard_normal((d, T)))
    Q = Q * np.sign(np.diag(R))
    X = Q.T.copy()
    m = metrics(X, None)
    res[:, 0] = [m[k] for k in METRICS]
    for layer in range(1, L + 1):
        if p["mixer"] == "softmax":
            W_Q = sigma_qk * rng.standard_normal((d, d_qk))
            W_K = sigma_qk * rng.standard_normal((d, d_qk))
            S = (X @ W_Q) @ (X @ W_K).T / math.sqrt(d_qk)
            S = S - S.max(axis=1, keepdims=True)
            E = np.exp(S)
            M = E / E.sum(axis=1, keepdims=True)
        elif p["mixer"] == "markov":
            Z = np.exp(rng.normal(-s2 / 2, math.sqrt(s2), size=(T, T)))
            M = Z / Z.sum(axis=1, keepdims=True)
        elif p["mixer"] == "identity":
            M = np.eye(T)
        else:
            sys.exit(f"mixer {p['mixer']} is not supported by this baseline")
        if p["gap_fix"] == "perp":
            M = M - 1.0 / T
        elif p["gap_fix"] != "none":
            sys.exit(f"gap_fix {p['gap_fix']} is not supported by this baseline")
        W_V = sigma_v * rng.standard_normal((d, d))
        Y = lam * X + skip * (M @ X @ W_V)
        if p["norm"] == "layernorm":
            mean = Y.mean(axis=1, keepdims=True)
            var = Y.var(axis=1, keepdims=True)
            Y = (Y - mean) / np.sqrt(var + 1e-5)
        elif p["norm"] != "none":
            sys.exit(f"norm {p['norm']} is not supported by this baseline")
        X = Y
        if not np.all(np.isfinite(X)) or not np.any(X):
            return res, f"diverged at layer {layer}"
        m = metrics(X, M)
        res[:, layer] = [m[k] for k in METRICS]
    return res, ""


# ---- comparison with an rcsweep store -------------------------------------------------------

def compare(npz, store, metric_names=("sr_cov", "sr_x")):
    import h5py
    with h5py.File(store, "r") as f:
        tasks = f["/tasks"][...]
        layers = {k: f["/layers/" + k][...] for k in metric_names}
        if int(f.attrs["n_tasks"]) != int(npz["n_grid_tasks"]):
            sys.exit(f"{store}: a different grid ({f.attrs['n_tasks']} tasks)")
    ids = npz["task_id"]
    labels = npz["variant"]
    points = npz["point"]
    done = tasks["status"][ids] == 1
    mine_ok = npz["status"] == 0
    print(f"diverged tasks: NumPy {int((~mine_ok).sum())}, rcsweep "
          f"{int((tasks['status'][ids] == 3).sum())}, both {int(((~mine_ok) & ~done).sum())}")
    print(f"{len(ids)} tasks compared with {store} (same task ids: same T, d, variant, replicate;"
          f" different random numbers); last layer; rcsweep diverged/failed or baseline diverged"
          f" tasks dropped per metric")
    print()
    hdr = "| variant | n |"
    for k in metric_names:
        hdr += f" {k} NumPy | {k} rcsweep | rel. diff | z |"
    print(hdr)
    print("|---" * (2 + 4 * len(metric_names)) + "|")
    worst_rel = {k: 0.0 for k in metric_names}
    worst_z = {k: 0.0 for k in metric_names}
    for lab in dict.fromkeys(labels.tolist()):
        sel = (labels == lab) & done & mine_ok
        row = f"| {lab} | {int(sel.sum())} |"
        for k in metric_names:
            a = npz[k][sel, -1]
            b = layers[k][ids[sel], -1]
            ok = np.isfinite(a) & np.isfinite(b)
            a, b, pts = a[ok], b[ok], points[sel][ok]
            if len(a) == 0:
                row += " – | – | – | – |"
                continue
            # standard error of the difference of the two means, stratified by grid point
            # (the tasks of a variant span 18 (T, d) points with very different stable ranks)
            var = 0.0
            for q in np.unique(pts):
                aq, bq = a[pts == q], b[pts == q]
                if len(aq) > 1:
                    var += aq.var(ddof=1) / len(aq) + bq.var(ddof=1) / len(bq)
            n_pts = len(np.unique(pts))
            # a mean over tasks = mean over points of per-point means when replicates are equal
            ma, mb = a.mean(), b.mean()
            se = math.sqrt(var) / max(n_pts, 1)
            rel = (ma - mb) / mb if mb != 0 else np.nan
            if se > 0:
                z = (ma - mb) / se
            else:  # both constant (e.g. fully collapsed: stable rank 1 to rounding)
                z = 0.0 if abs(ma - mb) <= 1e-9 * abs(mb) else np.inf
            worst_rel[k] = max(worst_rel[k], abs(rel))
            worst_z[k] = max(worst_z[k], abs(z))
            row += f" {ma:.4g} | {mb:.4g} | {100 * rel:+.1f} % | {z:+.2f} |"
        print(row)
    print()
    for k in metric_names:
        print(f"{k}: largest |rel. diff| {100 * worst_rel[k]:.1f} %, largest |z| {worst_z[k]:.2f}")


# ---- main -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " Loops over tasks and layers in one process with "
        "one BLAS thread; writes every layer's metrics of every task to --out.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", nargs="?", default=DEFAULT_SWEEP,
                    help="sweep file (default: bench/sweeps/mind_the_gap_stable_rank.toml)")
    ap.add_argument("--max-T", type=int, default=None, help="only the points with T <= this")
    ap.add_argument("--replicates", type=int, default=None,
                    help="only the first N replicates of each point (default: the sweep's)")
    ap.add_argument("--variants", type=str, default=None,
                    help="only these variants: comma-separated indices into the distinct "
                         "(mixer, gap_fix, lambda, skip_scale, norm) combinations, in file order")
    ap.add_argument("--seed", type=int, default=None, help="base seed (default: the sweep's)")
    ap.add_argument("--out", default=None, help="write the metrics to this .npz file")
    ap.add_argument("--compare", metavar="STORE.h5", default=None,
                    help="after the run (or with --load, instead of it) compare mean stable "
                         "ranks per variant with an rcsweep store of the same sweep file")
    ap.add_argument("--load", metavar="RESULTS.npz", default=None,
                    help="do not run; load a previous --out file (for --compare)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args()

    if args.load:
        npz = dict(np.load(args.load, allow_pickle=False))
        if args.compare:
            compare(npz, args.compare)
        return

    points, reps, seed = expand(args.sweep, "baseline")
    if args.seed is not None:
        seed = args.seed
    labels = [variant_label(p) for p in points]
    distinct = list(dict.fromkeys(labels))
    keep_var = set(distinct)
    if args.variants:
        keep_var = {distinct[int(i)] for i in args.variants.split(",")}
    n_rep = reps if args.replicates is None else min(args.replicates, reps)

    todo = [(pi, r) for pi, p in enumerate(points) for r in range(n_rep)
            if (args.max_T is None or int(p["T"]) <= args.max_T) and labels[pi] in keep_var]
    L = max(int(p["depth"]) for p in points)
    out = {k: np.full((len(todo), L + 1), np.nan) for k in METRICS}
    status = np.zeros(len(todo), dtype=np.int8)
    wall = np.zeros(len(todo))
    t0 = time.perf_counter()
    last = t0
    for i, (pi, r) in enumerate(todo):
        tid = pi * reps + r
        rng = np.random.default_rng([seed, tid])
        ts = time.perf_counter()
        res, msg = run_task(points[pi], rng)
        wall[i] = time.perf_counter() - ts
        for j, k in enumerate(METRICS):
            out[k][i, : res.shape[1]] = res[j]
        status[i] = 1 if msg else 0
        now = time.perf_counter()
        if not args.quiet and (now - last > 5 or i + 1 == len(todo)):
            print(f"{i + 1}/{len(todo)} tasks, {now - t0:.1f} s", file=sys.stderr)
            last = now
    total = time.perf_counter() - t0
    if not args.quiet:
        print(f"{len(todo)} tasks ({int(status.sum())} diverged) in {total:.2f} s",
              file=sys.stderr)
    npz = dict(out)
    npz.update(task_id=np.array([pi * reps + r for pi, r in todo], dtype=np.int64),
               point=np.array([pi for pi, _ in todo], dtype=np.int64),
               replicate=np.array([r for _, r in todo], dtype=np.int64),
               T=np.array([int(points[pi]["T"]) for pi, _ in todo], dtype=np.int64),
               d=np.array([int(points[pi]["d"]) for pi, _ in todo], dtype=np.int64),
               variant=np.array([labels[pi] for pi, _ in todo]),
               status=status, wall_s=wall, total_s=np.float64(total),
               n_grid_tasks=np.int64(len(points) * reps))
    if args.out:
        np.savez(args.out, **npz)
    if args.compare:
        compare(npz, args.compare)


if __name__ == "__main__":
    main()
