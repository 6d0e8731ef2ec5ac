"""Compare two stores of one sweep computed under two BLAS kernels (bench/compare_kernels.sh):
per metric, the largest difference measured against the metric's own scale, with the entries
after a signal collapsed to rank one within rounding counted apart. Markdown on stdout.
    /usr/bin/python3 bench/compare_kernels.py A.h5 B.h5
"""
import sys

import h5py
import numpy as np

# A signal collapsed to rank one within rounding (s2 / s1 < COLLAPSED in either run, at this
# layer or before) has an s2, mu and residual that are rounding noise of whichever kernel ran it,
# and so are the mixers formed from it (layer l's mixer reads X_(l-1)).
COLLAPSED = 1e-7
# Each metric is measured against its own scale: relative for norms and ranks, relative to
# ||X||_F (resp. the mixer's s1) for s2 and mu, absolute for the scale-free ratios.
SCALE_OF = {"s2": "fro", "mu": "fro", "m_s2": "m_s1"}
ABSOLUTE = {"mu_rel", "res_rel"}


def main(path_a, path_b):
    fa, fb = h5py.File(path_a, "r"), h5py.File(path_b, "r")
    ka, kb = (f["provenance"].attrs["blas_kernels"] for f in (fa, fb))
    sa, sb = fa["tasks"]["status"], fb["tasks"]["status"]
    done = (sa == 1) & (sb == 1)

    def layer(f, name):
        return f["layers"][name][...][done]

    print(f"A = {ka}, B = {kb}; {len(sa)} tasks, {int(np.sum(sa != sb))} with another status "
          f"(done/diverged), {int(done.sum())} done under both\n")
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.fmax(layer(fa, "s2") / layer(fa, "s1"), layer(fb, "s2") / layer(fb, "s1"))
    flat = np.logical_or.accumulate(np.nan_to_num(ratio, nan=1.0) < COLLAPSED, axis=1)
    mixer_flat = np.zeros_like(flat)
    mixer_flat[:, 1:] = flat[:, :-1]
    # m_gap = s1 / s2 of the mixer: noise where the mixer itself is rank one within rounding.
    with np.errstate(invalid="ignore", divide="ignore"):
        m_ratio = np.fmax(layer(fa, "m_s2") / layer(fa, "m_s1"), layer(fb, "m_s2") / layer(fb, "m_s1"))
    gap_flat = mixer_flat | (np.nan_to_num(m_ratio, nan=1.0) < COLLAPSED)

    print("| metric | measured against | entries | bitwise equal | max difference | 99.9th percentile | "
          "entries after a collapse (max difference there) |")
    print("|---|---|---|---|---|---|---|")
    for name in fa["layers"]:
        x, y = layer(fa, name), layer(fb, name)
        ok = np.isfinite(x) & np.isfinite(y)
        with np.errstate(invalid="ignore", divide="ignore"):
            if name in ABSOLUTE:
                d, against = np.abs(x - y), "1 (absolute)"
            else:
                ref = SCALE_OF.get(name)
                s = np.fmax(np.abs(layer(fa, ref)), np.abs(layer(fb, ref))) if ref else np.fmax(np.abs(x), np.abs(y))
                d = np.where(x == y, 0.0, np.abs(x - y) / np.where(s == 0, 1.0, s))
                against = ref or "itself"
        noisy = (gap_flat if name == "m_gap" else mixer_flat if name.startswith("m_") else flat) & ok
        clean = ok & ~noisy
        same = int(np.sum(x[ok].view(np.uint64) == y[ok].view(np.uint64)))
        dc = d[clean]
        tail = f"{int(noisy.sum())} ({d[noisy].max():.1e})" if noisy.any() else "0"
        print(f"| {name} | {against} | {int(ok.sum())} | {same} | {dc.max():.1e} | "
              f"{np.quantile(dc, 0.999):.1e} | {tail} |")
    # Per task (C_M, lambda_min: max over every layer's mixer); apart: tasks that ever collapsed.
    ever = mixer_flat.any(axis=1)
    for name in fa["theory"]:
        x, y = fa["theory"][name][...][done], fb["theory"][name][...][done]
        ok = np.isfinite(x) & np.isfinite(y)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.where(x == y, 0.0, np.abs(x - y) / np.fmax(np.abs(x), np.abs(y)))
        clean, noisy = ok & ~ever, ok & ever
        same = int(np.sum(x[ok].view(np.uint64) == y[ok].view(np.uint64)))
        tail = f"{int(noisy.sum())} tasks ({d[noisy].max():.1e})" if noisy.any() else "0"
        print(f"| theory/{name} | itself | {int(ok.sum())} | {same} | {d[clean].max() if clean.any() else 0:.1e} | "
              f"{np.quantile(d[clean], 0.999) if clean.any() else 0:.1e} | {tail} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
