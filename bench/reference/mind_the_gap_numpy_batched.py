#!/usr/bin/python3
"""Batched NumPy peer of rcsweep on Mind the Gap's stable-rank grid.

    /usr/bin/python3 bench/reference/mind_the_gap_numpy_batched.py [SWEEP.toml] [--max-T 60]
        [--replicates 20] [--seed S] [--out results.npz] [--compare STORE.h5] [-q]

The strongest straightforward NumPy version of what

    mpiexec -n 2 build/rcsweep run bench/sweeps/mind_the_gap_stable_rank.toml \
        'output.metrics=["sr_cov"]' -o STORE.h5

computes (the stable rank sr_cov of every layer's X, docs/MODELS.md "Metrics"): per (T, d) pair
of the sweep file, all its variants x replicates advance together as stacked float64 arrays
X[replicate, variant, T, d], one layer at a time, with np.matmul on (B, T, d) batches. Like
rcsweep's bundles (docs/MODELS.md "Randomness"), the variants of one (T, d, replicate) share
their input and weights (common random numbers), so each weight is drawn once per replicate
and layer and the products with a shared matrix are stacked: X W_V of all variants of a
replicate is one (V T x d) by (d x d) product, the softmax logits X (W_Q W_K^T / sqrt(d)) X^T
one (V_softmax T x d) by (d x d) product and a batch of (T x d) by (d x T), the Markov mixer
one T x T matrix per replicate and layer broadcast over its variants. It uses the BLAS threads
of the environment (OpenBLAS's default: one per core; the script sets no thread variable).

Model (docs/MODELS.md "One layer", as rcsweep defines each part):
  X_0 = Q^T, Q the sign-fixed thin QR factor of a d x T standard Gaussian (X_0 X_0^T = I_T)
  M   = softmax(X W_Q (X W_K)^T / sqrt(d)) row-wise, max-subtracted, W_Q, W_K ~ N(0, sigma_qk^2)
        Z / rowsum(Z), Z = exp(G), G ~ N(-s^2/2, s^2), s^2 = ln(1 + sigma_A^2)   (markov)
        I                                                                         (identity)
  M   = M - 11^T/T, formed explicitly as rcsweep does (gap_fix = perp: a softmax that turns
        exactly uniform then gives M = 0 and X = 0, "vanished", as in rcsweep)
  Y   = lambda X + skip_scale * (M X) W_V,  W_V ~ N(0, sigma_v^2)
  X'  = LayerNorm(Y) per row (no affine, eps 1e-5, biased variance)  (norm = layernorm)
Metric per layer 0..L: G = X X^T (T x T, the smaller Gram matrix as T <= d), its eigenvalues
from one batched np.linalg.eigvalsh, sr_cov = sum(lambda^2) / lambda_max^2 (= sum s^4 / s_1^4)
and, at no extra cost, sr_x = sum(lambda) / lambda_max (= ||X||_F^2 / s_1^2). A task whose X
becomes non-finite or exactly zero is marked diverged / vanished, NaN from that layer on (as
rcsweep); its X is set to 0 so the batch carries on.
Random numbers: numpy's SFC64 Generator, one per (seed, T, d, replicate) (SeedSequence), so a
replicate's numbers do not depend on --replicates. They cannot be rcsweep's (Philox4x64-10).

--compare STORE.h5 checks that it is the same computation: the store is rcsweep's of the same
sweep file with the same replicates (e.g. both with 20: `rcsweep run SWEEP 'sweep.replicates=20'
'output.metrics=["sr_cov"]' -o STORE.h5` and --replicates 20 here). Task t of the store is grid
point t // R, replicate t % R (points in the sweep file's order). For every cell (T, d, variant,
layer) it takes the mean of sr_cov over the replicates that are finite on each side, the standard
error of the difference of the two means (sqrt(var_a / n_a + var_b / n_b), sample variances) and
z = difference / SE, and prints the fraction of cells with |z| <= 2 and <= 3, counting as agreeing
the cells where both means are equal to 1e-9 relative (layer 0: sr_cov = T; fully collapsed
stacks) and the cells NaN on both sides (every replicate diverged or vanished in both); then the
worst cells and, per variant, the number of cells beyond 3 SE. Tasks diverged or vanished on one
side only are listed by count.
"""
import argparse
import itertools
import math
import sys
import time

import numpy as np

from mtg_grid import DEFAULT_SWEEP, DEFAULTS, VARIANT_KEYS, expand, scale, variant_label

# ---- the grid -------------------------------------------------------------------------------

def shapes_of(points):
    """{(T, d): [point indices]} in the order of first appearance; every shape must hold the
    same model parameters apart from the variant keys."""
    shapes = {}
    for i, p in enumerate(points):
        shapes.setdefault((int(p["T"]), int(p["d"])), []).append(i)
    for (T, d), idx in shapes.items():
        p = points[idx[0]]
        if p["input"] != "orthonormal" or p["value_init"] != "gaussian" or int(p["heads"]) != 1 \
                or int(p["d_qk"]) not in (0, d) or p["value_scale"] != "none" or T > d:
            sys.exit("this peer supports input = orthonormal (T <= d), value_init = gaussian, "
                     "heads = 1, d_qk = d, value_scale = none")
        for i in idx:
            q = points[i]
            if q["mixer"] not in ("softmax", "markov", "identity") or \
                    q["gap_fix"] not in ("none", "perp") or q["norm"] not in ("none", "layernorm"):
                sys.exit(f"point {i}: mixer {q['mixer']}, gap_fix {q['gap_fix']}, norm "
                         f"{q['norm']}: not supported by this peer")
            for k in DEFAULTS:
                if k not in VARIANT_KEYS and q[k] != p[k]:
                    sys.exit(f"point {i}: {k} differs within the shape ({T}, {d})")
    return shapes


# ---- one shape: all variants x replicates ---------------------------------------------------

def run_shape(T, d, variants, reps, seed, chunk):
    """sr_cov and sr_x [replicate, variant, layer] and the status [replicate, variant] (0 ok,
    1 diverged, 2 vanished) of the (T, d) pair."""
    p0 = variants[0]
    L = int(p0["depth"])
    V = len(variants)
    sigma_qk = scale(p0["sigma_qk"], d)
    sigma_v = scale(p0["sigma_v"], d)
    s2 = math.log(1.0 + float(p0["sigma_A"]) ** 2)
    mu_g, sd_g = -s2 / 2, math.sqrt(s2)
    lam = np.array([float(p["lambda"]) for p in variants]).reshape(1, V, 1, 1)
    skip = np.array([scale(p["skip_scale"], d) for p in variants]).reshape(1, V, 1, 1)
    skip_is_one = bool(np.all(skip == 1.0))
    ln = np.array([p["norm"] == "layernorm" for p in variants])

    def block(mixer, gap):
        """the variants of (mixer, gap_fix) as a slice when contiguous, else an index array"""
        idx = [v for v, p in enumerate(variants) if p["mixer"] == mixer and p["gap_fix"] == gap]
        if idx and idx == list(range(idx[0], idx[-1] + 1)):
            return slice(idx[0], idx[-1] + 1)
        return np.array(idx, dtype=np.intp)

    groups = {key: block(*key) for key in itertools.product(("markov", "softmax", "identity"),
                                                            ("none", "perp"))}
    nonempty = lambda s: (s.stop > s.start) if isinstance(s, slice) else len(s) > 0
    groups = {k: s for k, s in groups.items() if nonempty(s)}
    soft = [v for v, p in enumerate(variants) if p["mixer"] == "softmax"]
    soft = slice(soft[0], soft[-1] + 1) if soft and soft == list(range(soft[0], soft[-1] + 1)) \
        else (np.array(soft, dtype=np.intp) if soft else None)
    has_markov = any(k[0] == "markov" for k in groups)
    ln_idx = np.flatnonzero(ln)
    ln_sl = None
    if len(ln_idx) > 1 and np.all(np.diff(ln_idx) == ln_idx[1] - ln_idx[0]):
        ln_sl = slice(ln_idx[0], ln_idx[-1] + 1, int(ln_idx[1] - ln_idx[0]))
    elif len(ln_idx) == 1:
        ln_sl = slice(ln_idx[0], ln_idx[0] + 1)

    lam_nonzero = [v for v in range(V) if lam[0, v, 0, 0] != 0.0]

    def mul(M, Xg, sl):
        if isinstance(sl, slice):
            np.matmul(M, Xg, out=MX[:, sl])
        else:
            MX[:, sl] = np.matmul(M, Xg)

    sr_cov = np.full((reps, V, L + 1), np.nan)
    sr_x = np.full((reps, V, L + 1), np.nan)
    status = np.zeros((reps, V), dtype=np.int8)
    gens = [np.random.Generator(np.random.SFC64(np.random.SeedSequence([seed, T, d, r])))
            for r in range(reps)]

    def gram_metrics(Xb):
        """sr_cov, sr_x and ||X||_F^2 of a stack [..., T, d]"""
        G = np.matmul(Xb, Xb.swapaxes(-1, -2))
        tr = np.trace(G, axis1=-2, axis2=-1)
        bad = ~np.isfinite(tr) | (tr == 0)
        if bad.any():
            G[bad] = np.eye(T)
        ev = np.linalg.eigvalsh(G)
        top = ev[..., -1]
        return (ev * ev).sum(-1) / (top * top), ev.sum(-1) / top, tr

    for r0 in range(0, reps, chunk):
        R = min(chunk, reps - r0)
        g = gens[r0:r0 + R]
        # input: one orthonormal X_0 per replicate, shared by its variants
        A = np.empty((R, d, T))
        for i in range(R):
            g[i].standard_normal(out=A[i])
        Q, Rf = np.linalg.qr(A)
        Q *= np.sign(np.diagonal(Rf, axis1=-2, axis2=-1))[:, None, :]
        X0 = np.ascontiguousarray(Q.swapaxes(-1, -2))          # (R, T, d)
        c, x, _ = gram_metrics(X0)
        sr_cov[r0:r0 + R, :, 0] = c[:, None]
        sr_x[r0:r0 + R, :, 0] = x[:, None]
        # three buffers of (R, V, T, d) reused over the layers: X, the next X, and M X
        X = np.empty((R, V, T, d))
        X[...] = X0[:, None]
        Y = np.empty_like(X)
        MX = np.empty_like(X)
        alive = np.ones((R, V), dtype=bool)
        W_V = np.empty((R, d, d))
        W_Q = np.empty((R, d, d))
        W_K = np.empty((R, d, d))
        Z = np.empty((R, T, T))
        Pbuf = None
        for layer in range(1, L + 1):
            # weights of this layer, per replicate (shared by the variants)
            for i in range(R):
                if soft is not None:
                    g[i].standard_normal(out=W_Q[i])
                    g[i].standard_normal(out=W_K[i])
                if has_markov:
                    g[i].standard_normal(out=Z[i])
                g[i].standard_normal(out=W_V[i])
            if sigma_v != 1.0:
                W_V *= sigma_v
            if has_markov:
                Z *= sd_g
                Z += mu_g
                np.exp(Z, out=Z)
                Mk = Z / Z.sum(-1, keepdims=True)                # (R, T, T)
            if soft is not None:
                # logits X (W_Q W_K^T / sqrt(d)) X^T: one d x d product per replicate, then one
                # stacked product over the softmax variants and a batch of T x T
                W = np.matmul(W_Q, W_K.swapaxes(-1, -2))
                W *= sigma_qk * sigma_qk / math.sqrt(d)
                Xs = X[:, soft]
                nS = Xs.shape[1]
                if Pbuf is None or Pbuf.shape != Xs.shape:
                    Pbuf = np.empty(Xs.shape)
                P = np.matmul(Xs.reshape(R, nS * T, d), W, out=Pbuf.reshape(R, nS * T, d))
                P = Pbuf
                S = np.matmul(P, Xs.swapaxes(-1, -2))            # (R, nS, T, T)
                S -= S.max(-1, keepdims=True)
                np.exp(S, out=S)
                S /= S.sum(-1, keepdims=True)
                soft_pos = np.arange(V)[soft]
            for (mixer, gap), sl in groups.items():
                Xg = X[:, sl]
                if mixer == "markov":
                    M = Mk - 1.0 / T if gap == "perp" else Mk
                    mul(M[:, None], Xg, sl)
                elif mixer == "softmax":
                    pos = np.searchsorted(soft_pos, np.arange(V)[sl])
                    if isinstance(sl, slice) and isinstance(soft, slice):
                        M = S[:, pos[0]:pos[-1] + 1]
                    else:
                        M = S[:, pos]
                    if gap == "perp":
                        M = M - 1.0 / T
                    mul(M, Xg, sl)
                else:  # identity
                    if gap == "perp":
                        MX[:, sl] = Xg - Xg.mean(-2, keepdims=True)
                    else:
                        MX[:, sl] = Xg
            # Y = lambda X + skip (M X) W_V: one (V T x d) by (d x d) product per replicate
            np.matmul(MX.reshape(R, V * T, d), W_V, out=Y.reshape(R, V * T, d))
            if not skip_is_one:
                Y *= skip
            for v in lam_nonzero:
                if lam[0, v, 0, 0] == 1.0:
                    Y[:, v] += X[:, v]
                else:
                    Y[:, v] += lam[0, v, 0, 0] * X[:, v]
            if ln_sl is not None:
                Yn = Y[:, ln_sl]
                Yn -= Yn.mean(-1, keepdims=True)
                var = np.mean(Yn * Yn, axis=-1, keepdims=True)
                var += 1e-5
                np.sqrt(var, out=var)
                Yn /= var
            X, Y = Y, X
            c, x, tr = gram_metrics(X)
            dead = alive & (~np.isfinite(tr) | (tr == 0))
            if dead.any():
                st = np.where(np.isfinite(tr), 2, 1).astype(np.int8)
                status[r0:r0 + R][dead] = st[dead]
                alive &= ~dead
                X[~alive] = 0.0
            c[~alive] = np.nan
            x[~alive] = np.nan
            sr_cov[r0:r0 + R, :, layer] = c
            sr_x[r0:r0 + R, :, layer] = x
    return sr_cov, sr_x, status


# ---- comparison with an rcsweep store -------------------------------------------------------

def compare(res, store):
    import h5py
    with h5py.File(store, "r") as f:
        n_tasks = int(f.attrs["n_tasks"])
        tasks = f["/tasks"][...]
        rc = f["/layers/sr_cov"][...]
    P, R = res["n_points"], res["replicates"]
    if n_tasks != P * R:
        sys.exit(f"{store}: {n_tasks} tasks; this run has {P} points x {R} replicates = {P * R}"
                 f" (run both with the same sweep file and replicates)")
    shape_of, variant = res["shape"], res["variant"]
    points = res["points"]                      # grid point indices computed here
    mine = res["sr_cov"]                        # [point, replicate, layer]
    L1 = mine.shape[-1]
    theirs = rc.reshape(P, R, -1)[points][:, :, :L1]
    st = tasks["status"].reshape(P, R)[points]
    my_st = res["status"]
    print(f"{len(points)} grid points x {R} replicates x {L1} layers (0..{L1 - 1}) compared with "
          f"{store}; rcsweep task status counts {dict(zip(*np.unique(st, return_counts=True)))}"
          f"; here: {int((my_st == 0).sum())} ok, {int((my_st == 1).sum())} diverged, "
          f"{int((my_st == 2).sum())} vanished")
    fin_a, fin_b = np.isfinite(mine), np.isfinite(theirs)
    print(f"layer values NaN here only: {int((~fin_a & fin_b).sum())}, in rcsweep only: "
          f"{int((fin_a & ~fin_b).sum())} (of {mine.size})")
    na, nb = fin_a.sum(1), fin_b.sum(1)
    with np.errstate(all="ignore"):
        ma = np.where(fin_a, mine, 0).sum(1) / na
        mb = np.where(fin_b, theirs, 0).sum(1) / nb
        va = np.where(fin_a, (mine - ma[:, None]) ** 2, 0).sum(1) / (na - 1)
        vb = np.where(fin_b, (theirs - mb[:, None]) ** 2, 0).sum(1) / (nb - 1)
        se = np.sqrt(va / na + vb / nb)
        diff = ma - mb
        z = diff / se
    both_nan = (na == 0) & (nb == 0)
    one_nan = (na == 0) ^ (nb == 0)
    equal = (na > 0) & (nb > 0) & (np.abs(diff) <= 1e-9 * np.abs(mb))
    few = (na > 0) & (nb > 0) & ((na < 2) | (nb < 2)) & ~equal
    zok = np.where(equal | both_nan, 0.0, np.where(one_nan | few, np.inf, np.abs(z)))
    zok = np.where(np.isnan(zok), np.inf, zok)
    n = zok.size
    print(f"cells (T, d, variant, layer): {n}; equal to 1e-9 on both sides {int(equal.sum())}, "
          f"NaN on both sides {int(both_nan.sum())}, NaN on one side only {int(one_nan.sum())}, "
          f"fewer than 2 finite replicates on a side {int(few.sum())}")
    for k in (2, 3, 4):
        print(f"  |z| <= {k}: {int((zok <= k).sum())} of {n} = {100 * (zok <= k).mean():.1f} %")
    tested = ~(equal | both_nan | one_nan | few)
    print(f"  among the {int(tested.sum())} cells with a z-score: |z| <= 2 "
          f"{100 * (zok[tested] <= 2).mean():.1f} %, <= 3 {100 * (zok[tested] <= 3).mean():.1f} %"
          f" (normal: 95.4 %, 99.7 %); mean z {np.mean(z[tested]):+.3f}, sd of z "
          f"{np.std(z[tested]):.3f}; largest |relative difference| of the means "
          f"{100 * np.max(np.abs(diff[tested] / mb[tested])):.2f} %")
    worst = np.argsort(-np.where(np.isfinite(zok), zok, 1e300), axis=None)[:8]
    print("worst cells:")
    for w in worst:
        pi, layer = np.unravel_index(w, zok.shape)
        T, d = shape_of[pi]
        print(f"  T={T} d={d} {variant[pi]} layer {layer}: here {ma[pi, layer]:.6g} (n={na[pi, layer]}),"
              f" rcsweep {mb[pi, layer]:.6g} (n={nb[pi, layer]}), z {z[pi, layer]:+.2f}")
    print("per variant: cells beyond 3 SE (or NaN on one side) / cells")
    labels = list(dict.fromkeys(variant))
    for lab in labels:
        sel = np.array([v == lab for v in variant])
        print(f"  {lab}: {int((zok[sel] > 3).sum())} / {zok[sel].size}")


# ---- main -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " Per (T, d), all variants x replicates as "
        "stacked arrays; prints the wall time; --compare checks it against an rcsweep store.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", nargs="?", default=DEFAULT_SWEEP,
                    help="sweep file (default: bench/sweeps/mind_the_gap_stable_rank.toml)")
    ap.add_argument("--max-T", type=int, default=None, help="only the points with T <= this")
    ap.add_argument("--replicates", type=int, default=None,
                    help="replicates per point (default: the sweep's)")
    ap.add_argument("--seed", type=int, default=None, help="base seed (default: the sweep's)")
    ap.add_argument("--chunk", type=int, default=5,
                    help="replicates stacked at once (memory: about 6 x chunk x V x T x d x 8 "
                         "bytes; default 5)")
    ap.add_argument("--out", default=None, help="write sr_cov, sr_x, status to this .npz")
    ap.add_argument("--compare", metavar="STORE.h5", default=None,
                    help="after the run, compare the mean sr_cov per (T, d, variant, layer) "
                         "with an rcsweep store of the same sweep and replicates")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args()

    points, reps, seed = expand(args.sweep, "peer")
    if args.replicates is not None:
        reps = args.replicates
    if args.seed is not None:
        seed = args.seed
    shapes = shapes_of(points)
    L = max(int(p["depth"]) for p in points)
    todo = [(T, d, idx) for (T, d), idx in shapes.items()
            if args.max_T is None or T <= args.max_T]
    out_c, out_x, out_s, out_pts = [], [], [], []
    t0 = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for T, d, idx in todo:
            ts = time.perf_counter()
            c, x, s = run_shape(T, d, [points[i] for i in idx], reps, seed, max(1, args.chunk))
            out_c.append(c.transpose(1, 0, 2))
            out_x.append(x.transpose(1, 0, 2))
            out_s.append(s.T)
            out_pts.extend(idx)
            if not args.quiet:
                print(f"T={T} d={d}: {len(idx)} variants x {reps} replicates in "
                      f"{time.perf_counter() - ts:.2f} s", file=sys.stderr)
    total = time.perf_counter() - t0
    res = {"sr_cov": np.concatenate(out_c), "sr_x": np.concatenate(out_x),
           "status": np.concatenate(out_s), "points": np.array(out_pts, dtype=np.int64),
           "n_points": len(points), "replicates": reps,
           "shape": {pi: (int(points[pi]["T"]), int(points[pi]["d"])) for pi in out_pts},
           "variant": [variant_label(points[pi]) for pi in out_pts]}
    n_tasks = len(out_pts) * reps
    print(f"{n_tasks} tasks ({len(todo)} (T, d) pairs, {reps} replicates, {L} layers) in "
          f"{total:.2f} s; {int((res['status'] == 1).sum())} diverged, "
          f"{int((res['status'] == 2).sum())} vanished", file=sys.stderr)
    if args.out:
        np.savez(args.out, sr_cov=res["sr_cov"], sr_x=res["sr_x"], status=res["status"],
                 point=res["points"], variant=np.array(res["variant"]),
                 T=np.array([res["shape"][p][0] for p in out_pts]),
                 d=np.array([res["shape"][p][1] for p in out_pts]), total_s=np.float64(total))
    if args.compare:
        res["shape"] = [res["shape"][p] for p in out_pts]
        compare(res, args.compare)


if __name__ == "__main__":
    main()
