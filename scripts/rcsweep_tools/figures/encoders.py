"""The seed papers' figures of BERT-family encoders: Mind the Gap Figs. 3, 8, 9 and 11, Dong et al.
Fig. 2 and Lambda-skip Fig. 2's ALBERT curve, from stores of `block = "encoder"` sweeps
(docs/ENCODERS.md "In a sweep": a layer's signal metrics are of the block's output, or of its
attention branch with measure = "attention"; its mixer metrics and spectra are head 0's attention
probabilities P_l). The weights are the published initialisation (init = "random": "before
training") or a checkpoint's (init = "checkpoint": "after training"); a swept init (or any other
grid dimension a figure does not plot) gives one row or panel per value.

Artists carry gids a test reads back, as in mind_the_gap.py: a mean line "mean:<label>" and its
band "band:<label>" (plot.line_band), a theory curve "theory:<what>", one realisation's spectrum
"x_eig:<panel>" (eigenvalues of X_0 X_0^T), "sv:<panel>" (singular values of P_1), "eig:<panel>"
(eigenvalues of P_1, a scatter) with its largest "outlier:<panel>".

Every figure refuses a store that is not an encoder store (plot.FigureDataError, exit code 2 in
rcsweep-plot), naming the sweep file to run.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import FIGURES, figure
from ..load import spectrum
from ..plot import (DEFAULT_BAND, FigureDataError, axis_label, band_text, hue_colors, legend_outside, legends_outside,
                    line_band, log_ticks, marker_handles, need, plain_log_labels, replicate_counts, select)
from .dong import VARIANTS
from .lambda_skip import last_layer_against_lambda
from .mind_the_gap import _grid_dims, _panels, _points, _tdim, _value

MTG = "Mind the Gap (encoders)"
DONG = "Dong et al. (encoders)"
LS = "Lambda-skip (encoders)"
INIT_TEXT = {"random": "before training (init = random)", "checkpoint": "after training (init = checkpoint)"}


def need_encoder(ds, name, vars=(), coords=(), attrs=None, values=None):
    """plot.need for figure `name`, after checking that every point of the store is an encoder
    block; FigureDataError naming the figure's sweep file otherwise."""
    f = FIGURES[name]
    blocks = sorted({str(v) for v in np.atleast_1d(ds["block"].values).ravel()}) if "block" in ds.coords else ["stack"]
    if blocks != ["encoder"]:
        raise FigureDataError(
            f"{ds.attrs.get('path', 'store')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw {name}: it is not "
            f"an encoder store (block = {', '.join(blocks)}); {name} draws a BERT-family encoder's blocks, "
            f"block = \"encoder\" at every point. Make the store with jobs/examples/{f.sweep}")
    need(ds, f, vars=vars, coords=coords, attrs=attrs, values=values)


def _config_string(ds, key):
    """A string key of the store's canonical sweep text (model_folder, input_path), or None."""
    m = re.search(rf'^{key} = "((?:[^"\\]|\\.)*)"', str(ds.attrs.get("config", "")), re.M)
    return m.group(1) if m else None


def model_name(ds):
    """The model folder's name (e.g. bert-base-uncased), from the store's sweep text."""
    folder = _config_string(ds, "model_folder")
    return Path(folder).name if folder else "encoder"


def input_text(ds):
    """What X_0 is, for a caption."""
    inp = _value(ds, "input", "?")
    if inp == "tokens":
        path = _config_string(ds, "input_path")
        return f"X_0 the embedding of token ids from {Path(path).name if path else 'a token file'}"
    scale = _value(ds, "input_scale", 1.0)
    return f"X_0 random '{inp}' embeddings" + (f" x {scale:.4g}" if scale not in (1, 1.0, None) else "") + \
        " (no embedding layer)"


def _block_output(ds, name):
    """ds at measure = "block" (the blocks' outputs, what these figures plot); FigureDataError when
    the store measured only the attention branch."""
    if "measure" not in ds.coords:
        return ds
    have = sorted({str(v) for v in np.atleast_1d(ds["measure"].values).ravel()})
    if "block" not in have:
        raise FigureDataError(f"{ds.attrs.get('path', 'store')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw "
                              f"{name}: it plots the blocks' outputs (measure = \"block\"), the store has measure = "
                              f"{', '.join(have)}. Make the store with jobs/examples/{FIGURES[name].sweep}")
    return select(ds, measure="block") if ds["measure"].ndim else ds


def _where(ds, at):
    """'measure = block, ...' for the grid point `at` (dimension -> index) of ds; init is left to
    _init_title."""
    parts = []
    for dim, i in at.items():
        names = [c for c, co in ds.coords.items() if co.dims == (dim,) and c != "init"
                 and (c != dim or not dim.startswith("zip"))]
        parts += [f"{c} = {ds[c].values[i]}" for c in names]
    return ", ".join(parts)


def _series(da, *keep):
    """da with every length-1 dimension but `keep` dropped, in the order `keep` (a [[zip]] member
    selected by value keeps its dimension of length 1)."""
    extra = [d for d in da.dims if d not in keep and da.sizes[d] == 1]
    return da.squeeze(extra, drop=True).transpose(*keep)


def _first_done(sub):
    """The first replicate of a point whose task is done: the realisation a spectrum shows."""
    done = np.nonzero(np.atleast_1d(sub["status"].values) == 1)[0]
    if not len(done):
        raise FigureDataError(f"{sub.attrs.get('path', 'store')}: no done task at a point of the figure")
    return int(sub["replicate"].values[done[0]])


def _legend_right(ax):
    """The panel's legend right of it, with the divergence markers' explanation when drawn."""
    handles, labels = ax.get_legend_handles_labels()
    extra = marker_handles([ax])
    legend_outside(ax, handles + extra, labels=labels + [h.get_label() for h in extra])


def _integer_ticks(ax):
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _init_title(sub):
    return INIT_TEXT.get(_value(sub, "init", "random"), f"init = {_value(sub, 'init')}")


# --------------------------------------------------------------------------------------------
def perron_point(ax):
    """The eigenvalue 1 of a row-stochastic P (P 1 = 1), the largest in modulus (Perron-Frobenius)."""
    ax.plot([1.0], [0.0], ls="none", marker="o", ms=9, mfc="none", mec="C3", mew=1.2, gid="theory:perron",
            label=r"eigenvalue 1 ($P\mathbf{1} = \mathbf{1}$)")


def eigen_panel(ax, eig, name):
    """One realisation's eigenvalues of P in the complex plane, the largest in black, the Perron
    point 1, and an inset of the others (the bulk, far smaller than 1 at initialisation)."""
    from matplotlib.ticker import MaxNLocator

    ax.scatter(eig.real, eig.imag, s=5, alpha=0.6, color="C0", gid=f"eig:{name}", label="eigenvalues")
    k = int(np.argmax(np.abs(eig)))
    ax.scatter([eig[k].real], [eig[k].imag], s=18, color="k", gid=f"outlier:{name}", label=r"largest $|\lambda|$")
    perron_point(ax)
    ax.axhline(0, color="0.8", lw=0.5, zorder=0)
    ax.axvline(0, color="0.8", lw=0.5, zorder=0)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel(r"Re $\lambda(P_1)$")
    ax.set_ylabel(r"Im $\lambda(P_1)$")
    bulk = np.delete(eig, k)
    if bulk.size:
        ins = ax.inset_axes([0.3, 0.6, 0.4, 0.37])
        ins.scatter(bulk.real, bulk.imag, s=3, alpha=0.6, color="C0", gid=f"bulk:{name}")
        ins.axhline(0, color="0.8", lw=0.5, zorder=0)
        ins.axvline(0, color="0.8", lw=0.5, zorder=0)
        ins.set_aspect("equal", adjustable="datalim")
        ins.tick_params(labelsize=5, length=2, pad=1)
        for axis in (ins.xaxis, ins.yaxis):
            axis.set_major_locator(MaxNLocator(3, symmetric=True))
        ins.set_title("the others (zoom)", fontsize=6, pad=2)


def embedding_stable_rank(T):
    """sr(X_0 X_0^T) of the published initialisation's embedding at large d: X_0 = LN(word + position
    + type), the three N(0, sigma^2) rows independent but the token-type row shared by every token
    (type 0), so X_0 X_0^T is about d (2/3 I + 1/3 1 1^T): eigenvalues 2/3 + T/3 once and 2/3
    T - 1 times, sr = 1 + 4 (T - 1) / (T + 2)^2 (docs/FIGURES.md "Encoders")."""
    T = np.asarray(T, dtype=float)
    return 1 + 4 * (T - 1) / (T + 2) ** 2


def mp_stable_rank(T, d):
    """sr(X X^T) of a T x d matrix of i.i.d. Gaussian entries at large T, d: E tr (X X^T)^2 =
    T d (T + d + 1) over the squared Marchenko-Pastur edge (sqrt T + sqrt d)^4 of its largest
    eigenvalue (Geman 1980)."""
    T, d = np.asarray(T, dtype=float), float(d)
    return T * d * (T + d + 1) / (np.sqrt(T) + np.sqrt(d)) ** 4


# --------------------------------------------------------------------------------------------
@figure("mtg-fig3", MTG, "Fig. 3: an untrained encoder's sr(X_l X_l^T) vs T (width) and vs layer (depth)", "mtg_fig3_bert.toml")
def mtg_fig3(ds, fig, band=DEFAULT_BAND):
    need_encoder(ds, "mtg-fig3", vars=("sr_cov",), coords=("T",))
    ds = _block_output(ds, "mtg-fig3")
    tdim = _tdim(ds, "mtg-fig3")
    others = [d for d in _grid_dims(ds) if d != tdim]
    rows = list(_points(ds, others))
    axes = _panels(2 * len(rows), fig, 4.6, 3.8, ncols=2, legend=2.4)
    T = ds["T"].values.astype(float)
    layers = ds["layer"].values
    lcol, tcol = hue_colors(list(layers)), hue_colors(list(T))
    model = model_name(ds)
    for k, at in enumerate(rows):
        sub = ds.isel(**at)
        ax_w, ax_d = axes[2 * k], axes[2 * k + 1]
        for j, ell in enumerate(layers):
            da = _series(sub["sr_cov"].sel(layer=ell), tdim, "replicate")
            line_band(ax_w, T, da, f"ℓ = {int(ell)}", color=lcol[j], marker=".", band=band, xname="T")
        ax_w.plot(T, np.ones_like(T), ":", color="k", lw=1, gid="theory:sr=1", label="sr = 1 (Prop. 3.4, T → ∞)")
        if _value(sub, "init") == "random" and _value(sub, "input") == "tokens":
            ax_w.plot(T, embedding_stable_rank(T), "--", color=lcol[0], lw=1, gid="theory:embedding",
                      label="ℓ = 0, published init, large d:\nthe shared token-type row,\n" r"$1 + 4(T-1)/(T+2)^2$")
        ax_w.set_xscale("log")
        ax_w.set_yscale("log")
        log_ticks(ax_w, T)
        plain_log_labels(ax_w, "y")
        ax_w.set_xlabel(axis_label(ds, "T"))
        ax_w.set_ylabel(axis_label(ds, "sr_cov", sep="\n"))
        where = _where(ds, at)
        ax_w.set_title(f"(a) width: {model}" + (f", {where}" if where else "") + f"\n{_init_title(sub)}", fontsize=8)
        for i, t in enumerate(T):
            da = _series(sub["sr_cov"].isel({tdim: i}), "layer", "replicate")
            line_band(ax_d, layers, da, f"T = {int(t)}", color=tcol[i], marker=".", band=band)
        ax_d.plot(layers, np.ones(len(layers)), ":", color="k", lw=1, gid="theory:sr=1", label="sr = 1")
        ax_d.set_yscale("log")
        plain_log_labels(ax_d, "y")
        _integer_ticks(ax_d)
        ax_d.set_xlabel(axis_label(ds, "layer"))
        ax_d.set_ylabel(axis_label(ds, "sr_cov", sep="\n"))
        ax_d.set_title(f"(b) depth: {model}" + (f", {where}" if where else "") + f"\n{_init_title(sub)}", fontsize=8)
        _legend_right(ax_w)
        _legend_right(ax_d)
    fig.supxlabel(f"Mind the Gap Fig. 3: {model} encoder blocks, d = {_value(ds, 'd', '…')}, "
                  f"lambda = {_value(ds, 'lambda', '…')}, mlp = {_value(ds, 'mlp', '…')}, norm = {_value(ds, 'norm', '…')}; "
                  f"{input_text(ds)}\n({band_text(band, replicate_counts(ds['sr_cov']))})", fontsize=8)


# --------------------------------------------------------------------------------------------
def _gap_figure(ds, fig, name, band, tokens):
    """Mind the Gap Figs. 8 (tokens) and 9 (random embeddings): per grid point a row of four panels:
    (a) the eigenvalues of X_0 X_0^T / ||X_0||_F^2 (one realisation) against the isometric input's
    1/T; (b) the singular values of head 0's P_1 (one realisation); (c) its eigenvalues in the complex
    plane; (d) the spectral gap s_1/s_2 of P_l against the layer (mean over replicates and band)."""
    need_encoder(ds, name, vars=("sr_cov", "m_gap"), coords=("T", "input"),
                 attrs={"spectra_stored": {"all"}, "mixer_spectra_stored": {"all"}})
    inputs = sorted({str(v) for v in np.atleast_1d(ds["input"].values).ravel()})
    if (inputs == ["tokens"]) != tokens:
        other = "mtg-fig9" if tokens else "mtg-fig8"
        raise FigureDataError(f"{ds.attrs.get('path', 'store')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw {name}: "
                              f"it shows {'token inputs (input = tokens)' if tokens else 'random embeddings (an input other than tokens)'}, "
                              f"the store has input = {', '.join(inputs)} (draw it as {other}). "
                              f"Make the store with jobs/examples/{FIGURES[name].sweep}")
    ds = _block_output(ds, name)
    others = _grid_dims(ds)
    rows = list(_points(ds, others))
    axes = _panels(4 * len(rows), fig, 3.7, 3.5, ncols=4)
    model = model_name(ds)
    layers = ds["layer"].values
    for k, at in enumerate(rows):
        sub = ds.isel(**at)
        ax_x, ax_s, ax_e, ax_g = axes[4 * k:4 * k + 4]
        T = int(_value(sub, "T"))
        r0 = _first_done(sub)
        where = _where(ds, at)
        tag = f" ({where})" if where else ""
        # (a) X_0 X_0^T: its eigenvalues are the squared singular values of X_0 (x_sv: of X_0/||X_0||_F)
        s = spectrum(sub, "x_sv", 0, replicate=r0)
        lam = s ** 2
        idx = np.arange(1, len(lam) + 1)
        ax_x.plot(idx, lam, marker=".", ms=3, lw=0.8, color="C0", gid=f"x_eig:{k}",
                  label=r"eigenvalues of $X_0X_0^\top/\|X_0\|_F^2$")
        ax_x.plot(idx, np.full(len(idx), 1.0 / T), ":", color="k", lw=1, gid="theory:isometric",
                  label=r"isometric input ($X_0X_0^\top \propto I$): $1/T$")
        ax_x.set_yscale("log")
        ax_x.set_xlabel("index i")
        ax_x.set_ylabel("eigenvalue")
        sr0 = float(sub["sr_cov"].sel(layer=0, replicate=r0))
        ax_x.set_title(f"(a) input{tag}: sr$(X_0X_0^\\top)$ = {sr0:.3g} of T = {T}", fontsize=8)
        # (b) the singular values of head 0's attention probabilities at layer 1
        sv = spectrum(sub, "m_sv", 1, replicate=r0)
        ax_s.plot(np.arange(1, len(sv) + 1), sv, marker=".", ms=3, lw=0.8, color="C0", gid=f"sv:{k}",
                  label=r"singular values of $P_1$")
        ax_s.axhline(1.0, ls=":", color="C3", lw=1, gid="theory:s=1", label=r"1: $s_1 \geq 1$ as $P\mathbf{1} = \mathbf{1}$")
        ax_s.set_yscale("log")
        ax_s.set_xlabel("index i")
        ax_s.set_ylabel(r"$s_i(P_1)$, head 0 of layer 1")
        gap1 = float(sub["m_gap"].sel(layer=1, replicate=r0))
        ax_s.set_title(f"(b) spectral gap of $P_1${tag}: $s_1/s_2$ = {gap1:.3g}", fontsize=8)
        # (c) its eigenvalues in the complex plane
        eig = spectrum(sub, "m_eig", 1, replicate=r0)
        eigen_panel(ax_e, eig, str(k))
        ax_e.set_title(f"(c) eigenvalues of $P_1${tag}, T = {T}", fontsize=8)
        # (d) the spectral gap at every layer (the mixer has no layer 0)
        deep = layers[layers >= 1]
        line_band(ax_g, deep, _series(sub["m_gap"].sel(layer=deep), "layer", "replicate"), r"$s_1/s_2$ of $P_\ell$",
                  color="C0", marker="o", ms=3, band=band)
        ax_g.set_yscale("log")
        plain_log_labels(ax_g, "y")
        _integer_ticks(ax_g)
        ax_g.set_xlabel(axis_label(ds, "layer"))
        ax_g.set_ylabel("spectral gap of head 0's attention\n" r"$s_1(P_\ell)/s_2(P_\ell)$")
        ax_g.set_title(f"(d) spectral gap against depth{tag}", fontsize=8)
    legends_outside(fig, axes)
    n = replicate_counts(ds["m_gap"].sel(layer=ds["layer"].values[ds["layer"].values >= 1]))
    fig.supxlabel(f"Mind the Gap Fig. {8 if tokens else 9}: {model} encoder blocks, {_init_title(ds)}, "
                  f"d = {_value(ds, 'd', '…')};\n{input_text(ds)}; (a)-(c) replicate {r0} (one realisation), "
                  f"(d) {band_text(band, n)}", fontsize=8)


@figure("mtg-fig8", MTG, "Fig. 8: a random-init encoder on tokens: spectra of X_0 X_0^T and of the attention, its gap",
        "mtg_fig8_roberta.toml")
def mtg_fig8(ds, fig, band=DEFAULT_BAND):
    _gap_figure(ds, fig, "mtg-fig8", band, tokens=True)


@figure("mtg-fig9", MTG, "Fig. 9: Fig. 8 with random embeddings in place of the tokens'", "mtg_fig9_roberta_random.toml")
def mtg_fig9(ds, fig, band=DEFAULT_BAND):
    _gap_figure(ds, fig, "mtg-fig9", band, tokens=False)


# --------------------------------------------------------------------------------------------
def fig11_lengths(T, d, most=3):
    """Indices of the T values whose attention eigenvalues Fig. 11 shows: up to `most`, evenly
    spread over those with gamma = T/d > 1 (over every T when none is)."""
    T = np.asarray(T, dtype=float)
    pool = np.nonzero(T > d)[0]
    pool = pool if len(pool) else np.arange(len(T))
    pool = pool[np.argsort(T[pool])]
    pick = np.unique(np.round(np.linspace(0, len(pool) - 1, min(most, len(pool)))).astype(int))
    return [int(pool[i]) for i in pick]


@figure("mtg-fig11", MTG, "Fig. 11: TinyBERT at gamma = T/d > 1: attention eigenvalues, sr(X_l X_l^T) vs T", "mtg_fig11_tinybert.toml")
def mtg_fig11(ds, fig, band=DEFAULT_BAND):
    need_encoder(ds, "mtg-fig11", vars=("sr_cov",), coords=("T", "d"), attrs={"mixer_spectra_stored": {"all"}})
    ds = _block_output(ds, "mtg-fig11")
    tdim = _tdim(ds, "mtg-fig11")
    others = [d for d in _grid_dims(ds) if d != tdim]
    d = int(_value(ds, "d"))
    T = ds["T"].values.astype(float)
    picks = fig11_lengths(T, d)
    rows = list(_points(ds, others))
    per_row = len(picks) + 1
    axes = _panels(per_row * len(rows), fig, 3.6, 3.5, ncols=per_row)
    layers = ds["layer"].values
    lcol = hue_colors(list(layers))
    model = model_name(ds)
    random_input = _value(ds, "input") in ("gaussian", "sphere")
    for k, at in enumerate(rows):
        sub = ds.isel(**at)
        row = axes[per_row * k:per_row * (k + 1)]
        where = _where(ds, at)
        tag = f" ({where})" if where else ""
        for ax, i in zip(row, picks):
            point = sub.isel({tdim: i})
            r0 = _first_done(point)
            eigen_panel(ax, spectrum(point, "m_eig", 1, replicate=r0), f"{k}:T={int(T[i])}")
            ax.set_title(rf"$P_1$, T = {int(T[i])}, $\gamma$ = T/d = {T[i] / d:.3g}{tag}", fontsize=8)
        ax = row[-1]
        for j, ell in enumerate(layers):
            da = _series(sub["sr_cov"].sel(layer=ell), tdim, "replicate")
            line_band(ax, T, da, f"ℓ = {int(ell)}", color=lcol[j], marker=".", band=band, xname="T")
        ax.plot(T, np.ones_like(T), ":", color="k", lw=1, gid="theory:sr=1", label="sr = 1 (Prop. 3.4, T → ∞)")
        if random_input:
            ax.plot(T, mp_stable_rank(T, d), "--", color="0.4", lw=1, gid="theory:mp",
                    label="ℓ = 0, i.i.d. Gaussian $X_0$:\n" r"$Td(T+d+1)/(\sqrt{T}+\sqrt{d})^4$")
        ax.axvline(d, color="0.6", lw=0.8, ls="-.", gid="theory:gamma=1", label=r"$\gamma$ = T/d = 1")
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_ticks(ax, T)
        ax.tick_params(axis="x", labelrotation=45)
        plain_log_labels(ax, "y")
        ax.set_xlabel(axis_label(ds, "T"))
        ax.set_ylabel(axis_label(ds, "sr_cov", sep="\n"))
        ax.set_title(f"rank collapse in width{tag}", fontsize=8)
        top = ax.secondary_xaxis("top", functions=(lambda t: t / d, lambda g: g * d))
        top.set_xlabel(r"$\gamma$ = T/d", fontsize=8)
        log_ticks(top, T / d)
        _legend_right(ax)
    eig_axes = [a for a in axes if a.get_legend() is None]
    if eig_axes:  # the eigenvalue panels' entries, once: right of the last (below it in a column)
        _legend_right(eig_axes[-1])
    fig.supxlabel(f"Mind the Gap Fig. 11: {model} encoder blocks, {_init_title(ds)}, d = {d};\n{input_text(ds)}; "
                  f"eigenvalues: one realisation; stable ranks: {band_text(band, replicate_counts(ds['sr_cov']))}", fontsize=8)


# --------------------------------------------------------------------------------------------
RES_LABEL = {
    "attention": r"$\|\mathrm{res}(\mathrm{SAN}(X_{\ell-1}))\|_{1,\infty}/\|\mathrm{SAN}(X_{\ell-1})\|_{1,\infty}$"
                 "\n(block ℓ's attention output; ℓ = 0: $X_0$)",
    "block": r"$\|\mathrm{res}(X_\ell)\|_{1,\infty}/\|X_\ell\|_{1,\infty}$" "\n(block ℓ's output)",
}


def encoder_variants(ds, name):
    """Dong et al.'s four variants in an encoder store: [(label, {lambda: v, mlp: m})] with
    lambda = 0 'no skip', the largest |lambda| of the store 'skip', mlp 'none' / 'model'."""
    lams = sorted({float(v) for v in np.atleast_1d(ds["lambda"].values).ravel()})
    mlps = sorted({str(v) for v in np.atleast_1d(ds["mlp"].values).ravel()})
    skip = [v for v in lams if v != 0]
    if 0.0 not in lams or not skip or "none" not in mlps or "model" not in mlps:
        raise FigureDataError(
            f"{ds.attrs.get('path', 'store')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw {name}: it needs "
            f"lambda = 0 and a non-zero lambda, and mlp = none and model (has lambda {lams}, mlp {mlps}). "
            f"Make the store with jobs/examples/{FIGURES[name].sweep}")
    lam_skip = max(skip, key=abs)
    return [(label, {"lambda": lam_skip if has_skip else 0.0, "mlp": "model" if has_mlp else "none"})
            for (has_skip, has_mlp), label in VARIANTS]


@figure("dong-fig2-encoders", DONG, "Fig. 2 in an encoder: residual of each SAN(X) output vs layer, skip / MLP removed",
        "dong_fig2_encoders.toml")
def dong_fig2_encoders(ds, fig, band=DEFAULT_BAND):
    name = "dong-fig2-encoders"
    need_encoder(ds, name, vars=("res_rel",), coords=("lambda", "mlp"))
    variants = encoder_variants(ds, name)
    plotted = set(ds["lambda"].dims) | set(ds["mlp"].dims)
    others = [d for d in _grid_dims(ds) if d not in plotted]
    panels = list(_points(ds, others))
    axes = _panels(len(panels), fig, 6.4, 4.2, ncols=min(len(panels), 3), legend=2.4)
    model = model_name(ds)
    # res_best (opt-in: the sweep names it in [output] metrics), Dong et al.'s res with the best row
    # vector x, dashed beside res_rel (the token mean), without a band
    best = "res_best" in ds and bool(np.isfinite(ds["res_best"].values).any())
    plotted = []  # the arrays drawn with a band, for the caption's n
    for ax, at in zip(axes, panels):
        sub = ds.isel(**at)
        _integer_ticks(ax)
        for j, (label, at_v) in enumerate(variants):
            p = select(select(sub, **{"lambda": at_v["lambda"]}), mlp=at_v["mlp"])
            plotted.append(_series(p["res_rel"], "replicate", "layer"))
            line_band(ax, p["layer"].values, plotted[-1], label, color=f"C{j}",
                      marker="o", ms=3, band=band)
            if best:
                line_band(ax, p["layer"].values, _series(p["res_best"], "replicate", "layer"), f"{label}, best x",
                          color=f"C{j}", ls="--", marker="s", ms=2, band=False)
        measure = str(_value(sub, "measure", "block"))
        where = _where(ds, at)
        ax.set_title(f"{model}: {_init_title(sub)}" + (f"\n{where}" if where else ""), fontsize=8)
        ax.set_xlabel(axis_label(ds["layer"]))
        ax.set_ylabel("relative residual " + RES_LABEL.get(measure, RES_LABEL["block"]), fontsize=8)
        ax.set_ylim(-0.02, 1.05)
    legends_outside(fig, axes)
    lam_skip = variants[2][1]["lambda"]
    fig.supxlabel(f"Dong et al. Fig. 2 in {model} encoder blocks: T = {_value(ds, 'T', '…')}, "
                  f"d = {_value(ds, 'd', '…')}, skip lambda = {lam_skip:g} (0: no skip around either sub-block), "
                  f"norm = {_value(ds, 'norm', '…')};\n{input_text(ds)} ({band_text(band, replicate_counts(*plotted))})"
                  + ("; dashed: res with the best row vector x (res_best), solid: x the token mean" if best else ""),
                  fontsize=8)


# --------------------------------------------------------------------------------------------
@figure("ls-fig2-albert", LS, "Fig. 2's ALBERT curve: last-layer normalised mu vs lambda (no Theorem 4.1 line)", "ls_fig2_albert.toml")
def ls_fig2_albert(ds, fig, band=DEFAULT_BAND):
    name = "ls-fig2-albert"
    need_encoder(ds, name, vars=("mu_rel",), coords=("lambda",))
    ds = _block_output(ds, name)
    if "lambda" not in ds.dims:
        raise FigureDataError(f"{ds.attrs.get('path', 'store')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw "
                              f"{name}: it needs lambda swept under [axes]. Make the store with "
                              f"jobs/examples/{FIGURES[name].sweep}")
    others = [d for d in _grid_dims(ds) if d != "lambda"]
    panels = list(_points(ds, others))
    axes = _panels(len(panels), fig, 6.4, 4.0, ncols=min(len(panels), 3), legend=2.0)
    model = model_name(ds)
    for ax, at in zip(axes, panels):
        sub = ds.isel(**at)
        L, _ = last_layer_against_lambda(ax, sub, band=band, label=model)
        where = _where(ds, at)
        ax.set_title(f"{model}, L = {L}: {_init_title(sub)}" + (f"\n{where}" if where else ""), fontsize=8)
    legends_outside(fig, axes)
    same = bool(np.all(np.asarray(ds["lambda_mlp"].broadcast_like(ds["lambda"]).values, float)
                       == np.asarray(ds["lambda"].values, float))) if "lambda_mlp" in ds.coords else False
    fig.supxlabel(f"Lambda-skip Fig. 2 ({model}): T = {_value(ds, 'T', '…')}, d = {_value(ds, 'd', '…')}, "
                  f"mlp = {_value(ds, 'mlp', '…')}, norm = {_value(ds, 'norm', '…')}, lambda_mlp = "
                  f"{'lambda' if same else _value(ds, 'lambda_mlp', '…')};\n{input_text(ds)} "
                  f"({band_text(band, replicate_counts(ds['mu_rel'].isel(layer=-1)))})", fontsize=8)
