"""Dong, Cordonnier, Loukas, "Attention is not all you need" (ICML 2021), Fig. 2 at
initialisation with random inputs in place of text.

The relative l1,inf residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf} (`res_rel`; res(X) = X - 1 xbar^T
with xbar the token mean, ||A||_{1,inf} = sqrt(||A||_1 ||A||_inf), docs/MODELS.md) against layer for
pure self-attention (SAN: lambda = 0, no MLP), SAN + MLP, SAN + skip (lambda != 0) and SAN + MLP +
skip, mean over replicates with a band (± 1 sd of the replicates unless --band picks another); one panel per `norm` value in the store. The paper's
bound (Thm 2.2, doubly exponential in depth) needs the weights' ||W_QK||_1 ||W_V||_{1,inf}, which the
store does not keep, so no theory curve is drawn.
"""
from __future__ import annotations

import numpy as np

from . import figure
from ..plot import (DEFAULT_BAND, FigureDataError, axis_label, band_text, legends_outside, line_band, need,
                    replicate_counts, select)

VARIANTS = (  # (has skip, has MLP) -> label, in the paper's order
    ((False, False), "SAN (pure attention)"),
    ((False, True), "SAN + MLP"),
    ((True, False), "SAN + skip"),
    ((True, True), "SAN + MLP + skip"),
)


def variants(ds):
    """[(label, {lambda: v, mlp: m})] for the four variants: lambda = 0 is 'no skip', the largest
    other lambda in the store is 'skip'; mlp 'none' / 'relu'."""
    lams = [float(v) for v in np.atleast_1d(ds["lambda"].values)]
    mlps = [str(v) for v in np.atleast_1d(ds["mlp"].values)]
    skip = [v for v in lams if v != 0]
    if 0.0 not in lams or not skip or "none" not in mlps or "relu" not in mlps:
        raise FigureDataError(
            f"dong-fig2 needs lambda = 0 and a non-zero lambda, and mlp = none and relu (has lambda {lams}, "
            f"mlp {mlps}); make the store with jobs/examples/dong_fig2.toml")
    lam_skip = max(skip, key=abs)
    out = []
    for (has_skip, has_mlp), label in VARIANTS:
        out.append((label, {"lambda": lam_skip if has_skip else 0.0, "mlp": "relu" if has_mlp else "none"}))
    return out


@figure("dong-fig2", "Dong et al.", "Fig. 2: relative l1,inf residual vs layer for SAN, +MLP, +skip, +both "
        "(at initialisation, random inputs)", "dong_fig2.toml")
def fig2(ds, fig, band=DEFAULT_BAND):
    from . import FIGURES

    need(ds, FIGURES["dong-fig2"], vars=("res_rel",), coords=("lambda", "mlp", "norm"))
    norms = [str(v) for v in np.atleast_1d(ds["norm"].values)]
    fig.set_size_inches(5.2 * len(norms) + 2.2, 4.2)
    axes, plotted = [], []  # plotted: the arrays drawn, for the caption's n
    for k, norm in enumerate(norms):
        ax = fig.add_subplot(1, len(norms), k + 1)
        axes.append(ax)
        dn = select(ds, norm=norm)
        for j, (label, where) in enumerate(variants(dn)):
            p = select(select(dn, **{"lambda": where["lambda"]}), mlp=where["mlp"])
            da = p["res_rel"].transpose("replicate", "layer")
            plotted.append(da)
            line_band(ax, p["layer"].values, da, label, color=f"C{j}", marker="o", ms=3, band=band)
        ax.set_title(f"norm = {norm}" + (" (the paper's theory)" if norm == "none" else ""), fontsize=8)
        ax.set_xlabel(axis_label(ds["layer"]))
        ax.set_ylabel(r"relative residual $\|\mathrm{res}(X_\ell)\|_{1,\infty}/\|X_\ell\|_{1,\infty}$")
        ax.set_ylim(-0.02, 1.05)
    legends_outside(fig, axes)
    lam_skip = variants(ds)[2][1]["lambda"]
    fig.supxlabel(f"Dong et al. Fig. 2 at initialisation: {str(np.atleast_1d(ds['mixer'].values)[0])} attention, "
                 f"T = {int(np.atleast_1d(ds['T'].values)[0])}, d = {int(np.atleast_1d(ds['d'].values)[0])}, "
                 f"skip lambda = {lam_skip:g}, random '{str(np.atleast_1d(ds['input'].values)[0])}' inputs\n"
                 f"({band_text(band, replicate_counts(*plotted))})", fontsize=8)
