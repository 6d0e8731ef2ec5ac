"""Mind the Gap (Nait Saada, Naderi, Tanner, ICML 2025): the random-initialisation figures.

Every draw function reads a loaded store (rcsweep_tools.load) and marks its artists so that a
test can read them back:
  - a mean line is a Line2D whose label names the variant (e.g. "l=2 ⊥", "A + skip + LN ⊥");
    its band (± 1 sd of the replicates unless rcsweep-plot --band picks another, plot.mean_band)
    is a PolyCollection with gid "band:<label>"; a series that ends early is marked (plot.line_band);
  - a theory curve is a Line2D with gid "theory:<what>";
  - eigenvalues are scatter PathCollections with gid "eig:<panel>", the leading one of each task
    "outlier:<panel>"; histogram bars are Rectangles with gid "hist:<panel>".
"""
from __future__ import annotations

import numpy as np

from . import FIGURES, figure
from ..load import spectrum
from ..plot import (DEFAULT_BAND, FigureDataError, axis_label, legends_outside, line_band, log_ticks,
                    need, plain_log_labels, scalar, select)

PAPER = "Mind the Gap"
PERP = "⊥"


def _need(ds, name, **kw):
    need(ds, FIGURES[name], **kw)


def _grid_dims(ds):
    return [d for d in ds["status"].dims if d != "replicate"]


def _points(ds, dims):
    """Every index combination over `dims` (row-major), as dicts for isel."""
    shape = [ds.sizes[d] for d in dims]
    for flat in range(int(np.prod(shape)) if dims else 1):
        yield dict(zip(dims, np.unravel_index(flat, shape))) if dims else {}


def _value(ds, name, default=None):
    if name not in ds.coords:
        return default
    v = np.unique(np.asarray(ds[name].values).ravel())
    if len(v) != 1:
        return default
    return v[0].item() if hasattr(v[0], "item") else v[0]


def variant_label(ds):
    """Mind the Gap's legend names: A (Markov) / A(X) (softmax) / ..., + skip, + LN, ⊥."""
    mixer = _value(ds, "mixer", "")
    name = {"markov": "A", "softmax": "A(X)", "identity": "Identity A"}.get(mixer, str(mixer))
    lam = _value(ds, "lambda", 0.0)
    if lam not in (0, 0.0):
        ss = _value(ds, "skip_scale", 1.0)
        name += " + skip" if ss == 1.0 else " + skip (scaled)"
    if _value(ds, "norm", "none") not in ("none", None):
        name += " + LN" if _value(ds, "norm") == "layernorm" else " + RMS"
    if _value(ds, "gap_fix", "none") == "perp":
        name += f" {PERP}"
    elif _value(ds, "gap_fix", "none") == "outliers":
        name += " no outliers"
    return name


def _tdim(ds, name):
    if "T" not in ds.coords or ds["T"].ndim != 1:
        raise FigureDataError(f"{ds.attrs.get('path')}: {name} needs T swept (an [axes] or [[zip]] list); "
                              f"make the store with jobs/examples/{FIGURES[name].sweep}")
    return ds["T"].dims[0]


def _panels(n, fig, width=4.6, height=3.8, ncols=None, legend=0.0):
    """n axes in one row (or rows of ncols), left to right then top to bottom; `legend` inches
    more width for a legend right of them."""
    ncols = min(n, ncols or n)
    nrows = -(-n // ncols)
    fig.set_size_inches(width * ncols + legend, height * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.remove()
    return list(axes[:n])


# --------------------------------------------------------------------------------------------
def circle_radius(mixer, T, sigma_A, sigma_qk):
    """Radius of the bulk of M's eigenvalues: sigma / sqrt(T) (circular law of sqrt(T) M; Mind the
    Gap Fig. 1, Thm A.1). Markov: sigma = sigma_A (exact in the limit). Softmax A(X) on an
    orthonormal input: the logits are close to N(0, sigma_qk^4), so Z = exp(logit) has relative
    std sigma = sqrt(exp(sigma_qk^4) - 1) (an approximation). None for other mixers."""
    if mixer == "markov":
        return sigma_A / np.sqrt(T)
    if mixer == "softmax":
        return np.sqrt(np.expm1(sigma_qk ** 4)) / np.sqrt(T)
    return None


@figure("mtg-fig1", PAPER, "Fig. 1: eigenvalues of the attention matrix M in the complex plane, "
        "bulk radius sigma/sqrt(T)", "mtg_fig1.toml")
def fig1(ds, fig):
    _need(ds, "mtg-fig1", coords=["mixer", "T", "sigma_A", "sigma_qk"],
          attrs={"mixer_spectra_stored": {"last", "all"}})
    layer = int(ds["layer"].values[-1])
    mixers = list(np.atleast_1d(ds["mixer"].values))
    axes = _panels(len(mixers), fig, 4.2, 4.2, ncols=2 if len(mixers) == 4 else 3, legend=1.8)
    t = np.linspace(0, 2 * np.pi, 361)
    for ax, m in zip(axes, mixers):
        sub = select(ds, mixer=m)
        T, sA, sqk = scalar(sub, "T"), scalar(sub, "sigma_A"), scalar(sub, "sigma_qk")
        eig = spectrum(sub, "m_eig", layer).reshape(-1, int(T))
        eig = eig[~np.isnan(eig).all(axis=1)]
        if eig.size == 0:
            raise FigureDataError(f"no done task with mixer {m!r} in {ds.attrs.get('path')}")
        ax.scatter(eig.real.ravel(), eig.imag.ravel(), s=4, alpha=0.6, color="C0", gid=f"eig:{m}",
                   label=f"eigenvalues ({len(eig)} draws)")
        ax.scatter(eig[:, 0].real, eig[:, 0].imag, s=18, color="k", gid=f"outlier:{m}", label="largest |λ|")
        r = circle_radius(m, T, sA, sqk)
        if r is not None:
            what = r"$\sigma_A/\sqrt{T}$" if m == "markov" else r"$\sqrt{e^{\sigma_{qk}^4}-1}/\sqrt{T}$ (approx.)"
            ax.plot(r * np.cos(t), r * np.sin(t), "r--", lw=1, gid="theory:circle", label=f"radius {what}")
        ax.axhline(0, color="0.8", lw=0.5, zorder=0)
        ax.axvline(0, color="0.8", lw=0.5, zorder=0)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel(r"Re $\lambda(M)$")
        ax.set_ylabel(r"Im $\lambda(M)$")
        ax.set_title(f"{m}, T = {T}, layer {layer}")
    legends_outside(fig, axes)


# --------------------------------------------------------------------------------------------
@figure("mtg-fig4a", PAPER, "Fig. 3a/4a: stable rank of X X^T vs T at every layer, with and without perp",
        "mtg_width.toml")
def fig4a(ds, fig, band=DEFAULT_BAND):
    _need(ds, "mtg-fig4a", vars=["sr_cov"], coords=["gap_fix", "T"], values={"gap_fix": ["none", "perp"]})
    tdim = _tdim(ds, "mtg-fig4a")
    if ds["gap_fix"].ndim != 1:
        raise FigureDataError("gap_fix must be swept")
    gdim = ds["gap_fix"].dims[0]
    if gdim == tdim:
        raise FigureDataError("gap_fix and T must be separate grid dimensions")
    others = [d for d in _grid_dims(ds) if d not in (tdim, gdim)]
    panels = list(_points(ds, others))
    axes = _panels(len(panels), fig, legend=2.4)
    T = ds["T"].values.astype(float)
    for ax, at in zip(axes, panels):
        sub = ds.isel(**at)
        for ell in ds["layer"].values:
            color = f"C{int(ell) % 10}"
            for gf, ls in (("none", "-"), ("perp", "--")):
                da = select(sub, gap_fix=gf)["sr_cov"].sel(layer=ell).transpose(tdim, "replicate")
                label = f"ℓ={int(ell)}" + (f" {PERP}" if gf == "perp" else "")
                line_band(ax, T, da, label, color=color, ls=ls, marker=".", band=band, xname="T")
        ax.plot(T, np.ones_like(T), ":", color="k", lw=1, gid="theory:sr=1", label="sr = 1 (Prop. 3.4, T→∞)")
        ax.plot(T, T, ":", color="0.5", lw=1, gid="theory:sr=T", label=r"sr = T (input; $\perp$ grows ∝ T, Prop. 3.7)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_ticks(ax, T)
        plain_log_labels(ax, "y")
        ax.set_xlabel(axis_label(ds, "T"))
        ax.set_ylabel(axis_label(ds, "sr_cov", sep="\n"))
        ax.set_title(variant_label(select(sub, gap_fix="none")).strip())
    legends_outside(fig, axes)  # one legend right of the panels: the steep part of the data stays visible


# --------------------------------------------------------------------------------------------
@figure("mtg-fig4b", PAPER, "Fig. 4b: stable rank of X X^T vs depth for A, + LN, + skip, + skip + LN, "
        "with and without perp", "mtg_depth.toml")
def fig4b(ds, fig, band=DEFAULT_BAND):
    _need(ds, "mtg-fig4b", vars=["sr_cov"], coords=["gap_fix", "lambda", "norm"], values={"gap_fix": ["none", "perp"]})
    axes = _panels(1, fig, 6.5, 4.5, legend=1.6)
    ax = axes[0]
    dims = _grid_dims(ds)
    x = ds["layer"].values
    bases, seen = [], set()
    for at in _points(ds, dims):
        sub = ds.isel(**at)
        label = variant_label(sub)
        if label in seen:  # a grid dimension the legend names do not cover (e.g. T): spell it out
            label += " (" + ", ".join(f"{d}={sub[d].values.item()}" for d in dims) + ")"
        seen.add(label)
        base = label.replace(f" {PERP}", "")
        if base not in bases:
            bases.append(base)
        line_band(ax, x, sub["sr_cov"].transpose("layer", "replicate"), label, band=band,
                  color=f"C{bases.index(base) % 10}", ls="--" if _value(sub, "gap_fix") == "perp" else "-")
    ax.set_yscale("log")
    plain_log_labels(ax, "y")
    ax.set_xlabel(axis_label(ds, "layer"))
    ax.set_ylabel(axis_label(ds, "sr_cov", sep="\n"))
    ax.set_title(f"T = {_value(ds, 'T', '…')}, d = {_value(ds, 'd', '…')}")
    legends_outside(fig, axes)


# --------------------------------------------------------------------------------------------
@figure("mtg-fig5", PAPER, "Fig. 5: gradient norm of the first layer's W_V vs depth L and vs T, "
        "with the T^(L-1) reference", "mtg_gradients.toml")
def fig5(ds, fig, band=DEFAULT_BAND):
    _need(ds, "mtg-fig5", vars=["grad_log10_g_all"], coords=["T"])
    tdim = _tdim(ds, "mtg-fig5")
    others = [d for d in _grid_dims(ds) if d != tdim]
    g = ds["grad_log10_g_all"].sel(layer=1)  # g_{L,1}: the first layer's value weight
    Ls = ds["L"].values.astype(float)
    T = ds["T"].values.astype(float)
    imax = int(np.argmax(T))
    ax_l, ax_t = _panels(2, fig, 5.2, 4.2, legend=2.0)
    plain = None
    for at in _points(ds, others):
        sub = ds.isel(**at)
        label = variant_label(sub)
        gsub = g.isel(**at)
        line_band(ax_l, Ls, gsub.isel({tdim: imax}).transpose("L", "replicate"), label, marker=".", band=band)
        line_band(ax_t, T, gsub.sel(L=Ls[-1]).transpose(tdim, "replicate"), label, marker=".", band=band, xname="T")
        if plain is None and _value(sub, "gap_fix", "none") == "none" and _value(sub, "norm", "none") == "none" \
                and _value(sub, "lambda", 0.0) == 0.0:
            plain = gsub
    # Prop. 3.6: g_{L,1} >= C T^{L-1}. Reference slopes through the plain variant's first point
    # (through the lowest mean when the store has no plain A).
    ref = plain if plain is not None else g
    m_l = ref.isel({tdim: imax}).mean("replicate")
    m_l = m_l.min([d for d in m_l.dims if d != "L"]) if m_l.ndim > 1 else m_l
    y0 = float(m_l.sel(L=Ls[0]))
    ax_l.plot(Ls, y0 + (Ls - Ls[0]) * np.log10(T[imax]), "k:", gid="theory:T^(L-1) vs L",
              label=rf"$\propto T^{{L-1}}$, T = {int(T[imax])} (Prop. 3.6)")
    m_t = ref.sel(L=Ls[-1]).mean("replicate")
    m_t = m_t.min([d for d in m_t.dims if d != tdim]) if m_t.ndim > 1 else m_t
    i0 = int(np.argmin(T))
    y0t = float(m_t.isel({tdim: i0}))
    ax_t.plot(T, y0t + (Ls[-1] - 1) * (np.log10(T) - np.log10(T[i0])), "k:", gid="theory:T^(L-1) vs T",
              label=rf"$\propto T^{{L-1}}$, L = {int(Ls[-1])} (Prop. 3.6)")
    ylabel = r"$\log_{10}\|\partial X_L/\partial W_{V,1}\|_F^2$"
    ax_l.set_xlabel(axis_label(ds, "L"))
    ax_l.set_ylabel(ylabel)
    ax_l.set_title(f"vs depth, T = d = {int(T[imax])}")
    ax_t.set_xscale("log")
    log_ticks(ax_t, T)
    ax_t.set_xlabel(axis_label(ds, "T"))
    ax_t.set_ylabel(ylabel)
    ax_t.set_title(f"vs T, L = {int(Ls[-1])}")
    legends_outside(fig, (ax_l, ax_t))


# --------------------------------------------------------------------------------------------
@figure("mtg-fig6", PAPER, "Fig. 6: perp against removing all outliers: stable rank vs T and vs depth, "
        "gradient norm vs depth", "mtg_fig6.toml")
def fig6(ds, fig, band=DEFAULT_BAND):
    _need(ds, "mtg-fig6", vars=["sr_cov", "grad_log10_g_all"], coords=["gap_fix", "T"],
          values={"gap_fix": ["none", "perp", "outliers"]})
    tdim = _tdim(ds, "mtg-fig6")
    if ds["gap_fix"].ndim != 1 or ds["gap_fix"].dims[0] == tdim:
        raise FigureDataError("gap_fix and T must be separate grid dimensions")
    gdim = ds["gap_fix"].dims[0]
    others = [d for d in _grid_dims(ds) if d not in (tdim, gdim)]
    if others:
        raise FigureDataError(f"mtg-fig6 draws one attention variant; the store also sweeps {others}")
    T = ds["T"].values.astype(float)
    imax = int(np.argmax(T))
    ax_w, ax_d, ax_g = _panels(3, fig, 4.6, 4.0, legend=1.6)
    for k, gf in enumerate(ds["gap_fix"].values):
        sub = select(ds, gap_fix=str(gf))
        label = variant_label(sub)
        style = dict(color=f"C{k}", marker=".", band=band)
        line_band(ax_w, T, sub["sr_cov"].sel(layer=1).transpose(tdim, "replicate"), label, xname="T", **style)
        line_band(ax_d, ds["layer"].values, sub["sr_cov"].isel({tdim: imax}).transpose("layer", "replicate"),
                  label, **style)
        line_band(ax_g, ds["L"].values, sub["grad_log10_g_all"].sel(layer=1).isel({tdim: imax})
                  .transpose("L", "replicate"), label, **style)
    ax_w.set_xscale("log")
    ax_w.set_yscale("log")
    log_ticks(ax_w, T)
    plain_log_labels(ax_w, "y")
    ax_w.set_xlabel(axis_label(ds, "T"))
    ax_w.set_ylabel(axis_label(ds, "sr_cov", sep="\n"))
    ax_w.set_title("width, layer ℓ = 1")
    ax_d.set_yscale("log")
    plain_log_labels(ax_d, "y")
    ax_d.set_xlabel(axis_label(ds, "layer"))
    ax_d.set_ylabel(axis_label(ds, "sr_cov", sep="\n"))
    ax_d.set_title(f"depth, T = d = {int(T[imax])}")
    ax_g.set_xlabel(axis_label(ds, "L"))
    ax_g.set_ylabel(r"$\log_{10}\|\partial X_L/\partial W_{V,1}\|_F^2$")
    ax_g.set_title(f"gradients, T = d = {int(T[imax])}")
    legends_outside(fig, (ax_w, ax_d, ax_g))


# --------------------------------------------------------------------------------------------
def fig7_layers(lmax, n=6):
    """The layers Fig. 7 shows: up to n, evenly spaced from 1 to L_max."""
    return sorted(set(int(round(x)) for x in np.linspace(1, lmax, min(n, lmax))))


@figure("mtg-fig7", PAPER, "Fig. 7: eigenvalues of the softmax attention matrix across layers",
        "mtg_fig7.toml")
def fig7(ds, fig):
    _need(ds, "mtg-fig7", coords=["T"], attrs={"mixer_spectra_stored": {"all"}})
    T = int(scalar(ds, "T"))
    layers = fig7_layers(int(ds["layer"].values[-1]))
    axes = _panels(len(layers), fig, 3.4, 3.6)
    for ax, ell in zip(axes, layers):
        eig = spectrum(ds, "m_eig", ell).reshape(-1, T)
        eig = eig[~np.isnan(eig).all(axis=1)]
        ax.scatter(eig.real.ravel(), eig.imag.ravel(), s=4, alpha=0.6, gid=f"eig:layer {ell}")
        ax.axhline(0, color="0.8", lw=0.5, zorder=0)
        ax.axvline(0, color="0.8", lw=0.5, zorder=0)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(f"layer ℓ = {ell}")
        ax.set_xlabel(r"Re $\lambda(M_\ell)$")
    axes[0].set_ylabel(r"Im $\lambda(M_\ell)$")


# --------------------------------------------------------------------------------------------
def quarter_circle(x, sigma):
    """Lemma A.6: density of the quarter-circle law on [0, 2 sigma]."""
    x = np.asarray(x, dtype=float)
    return np.where((x >= 0) & (x <= 2 * sigma), np.sqrt(np.clip(4 * sigma ** 2 - x ** 2, 0, None)) / (np.pi * sigma ** 2), 0.0)


def histogram_bins(values, sigma, n=30):
    """n equal bins on [0, max(2 sigma, largest value)]."""
    return np.linspace(0.0, max(2 * sigma, float(np.nanmax(values))), n + 1)


@figure("mtg-lemma-a6", PAPER, "Lemma A.6: singular values of sqrt(T) A^perp against the quarter-circle law",
        "mtg_quarter_circle.toml")
def lemma_a6(ds, fig):
    _need(ds, "mtg-lemma-a6", coords=["gap_fix", "mixer", "sigma_A", "T"], values={"gap_fix": ["perp"], "mixer": ["markov"]},
          attrs={"mixer_spectra_stored": {"last", "all"}})
    ds = select(ds, gap_fix="perp", mixer="markov")
    sigmas = list(np.atleast_1d(ds["sigma_A"].values))
    axes = _panels(len(sigmas), fig, 4.4, 3.8, legend=2.0)
    for ax, s in zip(axes, sigmas):
        sub = select(ds, sigma_A=s)
        T = int(scalar(sub, "T"))
        sv = np.sqrt(T) * spectrum(sub, "m_sv", 1).reshape(-1, T)
        sv = sv[~np.isnan(sv).all(axis=1)].ravel()
        if sv.size == 0:
            raise FigureDataError(f"no done task with sigma_A = {s}")
        bins = histogram_bins(sv, s)
        ax.hist(sv, bins=bins, density=True, alpha=0.6, gid=f"hist:sigma_A={s}",
                label=f"{sv.size // T} draws, T = {T}")
        x = np.linspace(0, 2 * s, 201)
        ax.plot(x, quarter_circle(x, s), "r-", gid="theory:quarter-circle",
                label=r"$\sqrt{4\sigma_A^2-x^2}/(\pi\sigma_A^2)$")
        ax.set_xlabel(r"singular value of $\sqrt{T}\,A^\perp$")
        ax.set_ylabel("density")
        ax.set_title(rf"$\sigma_A$ = {s}")
    legends_outside(fig, axes)


# --------------------------------------------------------------------------------------------
# The perp Markov stack as T -> infinity (docs/ANALYTIC.md): per depth, the finite-T means of a
# scale-free ratio, their extrapolation and the free-probability limit.
# metric -> (label, power p of x = T^-p, polynomial degree). sr_cov and sr_x divide by the largest
# eigenvalue of Sigma, whose finite-T offset from the spectrum's edge scales like T^(-2/3) (the
# Tracy-Widom scale of a soft edge); pr = (tr Sigma)^2 / tr Sigma^2 is a ratio of moments, whose
# corrections are a series in 1/T.
LIMIT_FITS = {
    "sr_cov": (r"$\mathrm{sr}(\Sigma_\ell)/T$, $\mathrm{sr} = \|\Sigma\|_F^2/\|\Sigma\|^2$", 2.0 / 3.0, 2),
    "pr": (r"$(\mathrm{tr}\,\Sigma_\ell)^2/(T\,\mathrm{tr}\,\Sigma_\ell^2)$", 1.0, 2),
}
# what the closed form assumes (analytic.perp_markov_limits): parameter -> allowed values
LIMIT_MODEL = {"mixer": ("markov",), "gap_fix": ("perp",), "lambda": (0.0,), "norm": ("none",),
               "gate": ("none",), "mlp": ("none",), "heads": (1,), "input": ("orthonormal",),
               "value_init": ("gaussian",), "input_scale": None, "skip_scale": None}


def limit_gamma(ds):
    """gamma = T/d of a store the closed form applies to, or FigureDataError naming what differs."""
    problems = []
    for p, allowed in LIMIT_MODEL.items():
        if allowed is None:
            continue
        v = np.unique(np.asarray(ds[p].values).ravel()) if p in ds.coords else []
        if len(v) != 1 or v[0] not in allowed:
            problems.append(f"{p} = {list(v)} (the closed form needs {allowed[0]!r})")
    if "T" in ds.coords and "d" in ds.coords:
        T, d = np.broadcast_arrays(ds["T"].values.astype(float), ds["d"].broadcast_like(ds["T"]).values.astype(float))
        g = np.unique(np.round(T / d, 12))
        if len(g) != 1 or not 0 < g[0] <= 1:
            problems.append(f"T/d takes {g.tolist()} (needs one ratio gamma <= 1: zip T and d)")
    if problems:
        raise FigureDataError(f"{ds.attrs.get('path')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw "
                              "mtg-limits: " + "; ".join(problems)
                              + f". Make the store with jobs/examples/{FIGURES['mtg-limits'].sweep}")
    return float(g[0])


@figure("mtg-limits", PAPER, "Prop. 2.3/3.7: sr/T of the perp Markov stack extrapolated to T -> inf "
        "per depth, against the free-probability limit", "mtg_limits.toml")
def limits(ds, fig):
    from ..analytic import perp_markov_limits
    from ..extrapolate import extrapolate, fit_limit

    _need(ds, "mtg-limits", vars=["sr_cov", "sr_x"], coords=["T", "d"])
    tdim = _tdim(ds, "mtg-limits")
    others = [d for d in _grid_dims(ds) if d != tdim]
    if others:
        raise FigureDataError(f"{ds.attrs.get('path')}: mtg-limits draws one model along T; the store also "
                              f"sweeps {others}. Make the store with jobs/examples/{FIGURES['mtg-limits'].sweep}")
    gamma = limit_gamma(ds)
    layers = [int(v) for v in ds["layer"].values if v >= 1]
    axes = _panels(4, fig, 5.0, 3.9, ncols=2)
    colors = {ell: f"C{k % 10}" for k, ell in enumerate(layers)}
    T = ds["T"].values.astype(float)
    for row, (metric, (label, power, degree)) in enumerate(LIMIT_FITS.items()):
        ax_x, ax_l = axes[2 * row], axes[2 * row + 1]
        ex = extrapolate(ds, metric, degree=degree, power=power)
        theory = [perp_markov_limits(ell, gamma)[metric] for ell in layers]
        xs = np.linspace(0.0, float(np.max(T ** -power)), 100)
        xname = r"$1/T$" if power == 1 else (r"$T^{-2/3}$" if abs(power - 2 / 3) < 1e-12 else f"$T^{{-{power:g}}}$")
        for ell, th in zip(layers, theory):
            c = ex.sel(layer=ell)
            col = colors[ell]
            eb = ax_x.errorbar(T ** -power, c["mean"].values, yerr=c["se"].values, fmt="o", ms=3, color=col,
                               capsize=2, label=f"L = {ell}")
            eb.lines[0].set_gid(f"mean:{metric}:L={ell}")
            fit = fit_limit(T, c["mean"].values, c["se"].values, degree=degree, power=power)
            ax_x.plot(xs, np.polynomial.polynomial.polyval(xs, fit.coef), "-", color=col, lw=1,
                      gid=f"fit:{metric}:L={ell}")
            lim = ax_x.errorbar([0.0], [float(c["limit"])], yerr=[float(c["limit_se"])], fmt="s", ms=4,
                                color=col, capsize=3)
            lim.lines[0].set_gid(f"limit:{metric}:L={ell}")
            ax_x.plot([0.0], [th], marker="*", ms=9, color=col, mec="k", mew=0.5, ls="none",
                      gid=f"theory:{metric}:L={ell}")
        ax_x.plot([], [], "s", color="0.4", label="extrapolated (± 1 s.e.)")
        ax_x.plot([], [], "*", color="0.4", mec="k", label="free-probability limit")
        ax_x.set_xlabel(xname)
        ax_x.set_ylabel(label)
        ax_x.set_title(f"means ± 1 s.e. and degree-{degree} fits in {xname}", fontsize=9)
        ax_x.set_xlim(left=-0.02 * xs[-1])

        lim = ex["limit"].sel(layer=layers).values
        err = ex["limit_se"].sel(layer=layers).values
        eb = ax_l.errorbar(layers, lim, yerr=err, fmt="s", ms=4, capsize=3, color="C0",
                           label=f"extrapolated T → ∞ (T = {int(T.min())}…{int(T.max())})")
        eb.lines[0].set_gid(f"limit:{metric}")
        ls = np.arange(1, max(layers) + 1)
        ax_l.plot(ls, [perp_markov_limits(ell, gamma)[metric] for ell in ls], "k--", lw=1, marker="*",
                  gid=f"theory:{metric}", label=f"free-probability limit, γ = T/d = {gamma:g}")
        ax_l.set_yscale("log")
        plain_log_labels(ax_l, "y")
        ax_l.set_xticks(ls)
        ax_l.set_xlabel(r"depth $L$ (the layer $\ell = L$ of the stack)")
        ax_l.set_ylabel(label)
        ax_l.set_title("T → ∞ limit per depth", fontsize=9)
    legends_outside(fig, axes)
