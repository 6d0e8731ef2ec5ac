"""Lambda-skip Connections (Arangath Joseph et al.): Figs. 1-4 and Theorem 4.1, at random
initialisation with random inputs (the paper uses pre-trained models and text).

Every figure plots the normalised rank-collapse measure mu(X_l)/||X_l||_F (`mu_rel`, eq. (5)
divided by the Frobenius norm, as the paper's "normalised" measure) as the mean over replicates
with a band (plot.line_band: ± 1 sd of the replicates unless rcsweep-plot --band picks another);
a series whose replicates all diverge ends in an "x" and its legend entry says where and why. Theory lines carry gid "theory:<what>", data lines their legend
label (tests read both back).

Theorem 4.1 (per task, /theory, docs/MODELS.md): with a = collapse_rate, condition (7) is
lambda^2 - a (S C_M + |lambda|)^2 > 0, i.e. |lambda| > lambda_min = (a + sqrt a) S C_M / (1 - a);
the bound mu(X_L)^2 >= a^L mu(X_0)^2 is guaranteed when the stack is the theorem's (eq. (6): the
rms norm, one head, no gate or MLP, not s4d), its rows are unit at every layer including the input,
(7) holds and mu(X_0)^2 >= b(L) with b(L) = 2 |lambda| N d S C_M / (lambda^2 - a (S C_M + |lambda|)^2)
/ a^L (N = T tokens). The first two come from the store's /theory/bound_reason (1: not covered, 2:
rows not unit), the same at every depth: in a covered stack every layer's output has unit rows, so
only the input's can fail.
"""
from __future__ import annotations

import numpy as np

from . import figure
from ..plot import (DEFAULT_BAND, FigureDataError, axis_label, band_text, count_text, hue_colors, legend_below, legend_height,
                    legends_outside, line_band, log_ticks, marker_outcomes, need, replicate_counts, select)
from ..load import outcome_words

PAPER = "Lambda-skip"
MU_LABEL = "normalised rank-collapse measure\n" r"$\mu(X_\ell)/\|X_\ell\|_F$"


def _values(ds, name):
    """The values of a parameter in ds: a dimension's coordinate, or the one scalar value."""
    v = ds[name].values
    return list(np.atleast_1d(v))


def _panels(fig, n, width=5.2, height=4.0, legend=0.0):
    fig.set_size_inches(width * n + legend, height)
    return [fig.add_subplot(1, n, k + 1) for k in range(n)]


def condition_holds(lam, S, C_M, a):
    """Theorem 4.1 condition (7): lambda^2 - a (S C_M + |lambda|)^2 > 0 (elementwise)."""
    lam = np.abs(np.asarray(lam, dtype=float))
    return lam ** 2 - a * (np.asarray(S) * np.asarray(C_M) + lam) ** 2 > 0


def b_of_depth(lam, S, C_M, a, N, d, L):
    """b(L) of Theorem 4.1 (MODELS.md: |lambda| in the numerator); NaN where (7) fails."""
    lam = np.abs(np.asarray(lam, dtype=float))
    den = lam ** 2 - a * (np.asarray(S) * np.asarray(C_M) + lam) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        b = 2 * lam * N * d * np.asarray(S) * np.asarray(C_M) / den / np.asarray(a, dtype=float) ** np.asarray(L)
    return np.where(den > 0, b, np.nan)


# /theory/bound_reason codes (docs/SCHEMA.md) of the hypotheses that do not depend on the depth
REASON_NOT_COVERED, REASON_ROWS_NOT_UNIT = 1, 2


def within_hypotheses(ds_point):
    """True per task (same dims as theory_bound_reason) where the stack is the theorem's and its rows
    are unit; all True for a store without theory_bound_reason (made by an older rcsweep)."""
    if "theory_bound_reason" not in ds_point.data_vars:
        return np.ones(ds_point["theory_S"].shape, dtype=bool)
    r = ds_point["theory_bound_reason"].values
    return (r != REASON_NOT_COVERED) & (r != REASON_ROWS_NOT_UNIT)


def normalised_bound(ds_point, a):
    """a^(l/2) mu(X_0) / ||X_l||_F per task and layer: Theorem 4.1's lower bound on mu in the units of
    the plotted normalised measure (dims replicate, layer)."""
    layers = ds_point["layer"]
    return np.sqrt(a ** layers) * ds_point["mu"].isel(layer=0) / ds_point["fro"]


def _registered(name):
    from . import FIGURES

    return FIGURES[name]


def _a(ds):
    a = np.unique(np.atleast_1d(ds["collapse_rate"].values))
    if len(a) != 1:
        raise FigureDataError("collapse_rate takes several values; these figures need one (see jobs/examples/ls_*.toml)")
    return float(a[0])


def _mixers(ds):
    return [str(m) for m in _values(ds, "mixer")]


def _lambdas(ds):
    return [float(v) for v in _values(ds, "lambda")]


@figure("ls-fig1", PAPER, "Fig. 1: normalised mu vs layer for several lambda (softmax attention and SSD)",
        "ls_fig1.toml")
def fig1(ds, fig, band=DEFAULT_BAND):
    need(ds, _registered("ls-fig1"), vars=("mu_rel", "mu", "fro", "theory_S", "theory_C_M"),
         coords=("mixer", "lambda", "collapse_rate"))
    from matplotlib.lines import Line2D

    a = _a(ds)
    mixers, lams = _mixers(ds), sorted(_lambdas(ds))  # drawn (and listed) in increasing order
    cmap = hue_colors(lams)  # ordered colours that stay apart for the paper's 9 values, diverging at 0
    bound_drawn = False
    axes = _panels(fig, len(mixers), legend=1.4)
    for ax, mixer in zip(axes, mixers):
        dm = select(ds, mixer=mixer)
        for k, lam in enumerate(lams):
            p = select(dm, **{"lambda": lam})
            label = rf"$\lambda$ = {lam:g}"
            line_band(ax, p["layer"].values, p["mu_rel"].transpose("replicate", "layer"), label,
                      color=cmap[k], band=band)
            ok = condition_holds(lam, p["theory_S"].values, p["theory_C_M"].values, a) & within_hypotheses(p)
            if ok.all():  # every replicate satisfies (7) in the theorem's stack: the bound's shape beside the data
                bound = normalised_bound(p, a).mean("replicate")
                ax.plot(p["layer"].values, bound.values, ls="--", lw=1, color=cmap[k],
                        gid=f"theory:bound:{lam:g}", label="_bound")
                bound_drawn = True
        ax.set_title(f"mixer = {mixer}, norm = {_scalar_str(dm, 'norm')}")
        ax.set_xlabel(axis_label(ds["layer"]))
        ax.set_ylabel(MU_LABEL)
        ax.set_ylim(-0.02, 1.05)
    # one legend right of the panels, lambda in increasing order: it hides no curve (a lambda whose
    # series ends early in a panel says so in its entry)
    extra = [Line2D([], [], ls="--", lw=1, color="0.3",
                    label="Thm 4.1 bound\n" r"$a^{\ell/2}\mu(X_0)/\|X_\ell\|_F$" "\n(same colour)")] if bound_drawn else []
    legends_outside(fig, axes, extra=extra)
    fig.supxlabel(f"Lambda-skip Fig. 1 at initialisation (T = {_scalar_str(ds, 'T')}, "
                 f"d = {_scalar_str(ds, 'd')}, a = {a:g}; {band_text(band, replicate_counts(ds['mu_rel']))})",
                 fontsize=8)


def last_layer_against_lambda(ax, dm, band=DEFAULT_BAND, a=None, label="data"):
    """On ax, Fig. 2's curve: mu(X_L)/||X_L||_F at the last layer L against lambda (symlog x ticked
    at the swept values), the mean over the replicates of dm (one model: lambda its only swept
    dimension) with its band. With `a` (the collapse rate) also Theorem 4.1: the threshold
    +-lambda_min of condition (7) and, where (7) holds in every replicate of the theorem's stack,
    the bound a^(L/2) mu(X_0)/||X_L||_F. Returns (L, lambda_min) (lambda_min None without `a`)."""
    L = int(dm["layer"].values[-1])
    lam = dm["lambda"].values.astype(float)
    last = dm["mu_rel"].isel(layer=-1).transpose("lambda", "replicate")
    line_band(ax, lam, last.T, label, marker="o", ms=3, band=band, xname="λ")
    lmin = None
    if a is not None:  # Theorem 4.1: the threshold of condition (7) and, where it holds, the bound at depth L
        lmin = float(dm["theory_lambda_min"].mean().values)
        for sgn in (-1, 1):
            ax.axvline(sgn * lmin, color="k", ls=":", lw=1, gid=f"theory:lambda_min:{sgn:+d}",
                       label=r"$\pm\lambda_{\min}$ (condition (7))" if sgn > 0 else None)
        ok = (condition_holds(lam[:, None], dm["theory_S"].transpose("lambda", "replicate").values,
                              dm["theory_C_M"].transpose("lambda", "replicate").values, a)
              & within_hypotheses(dm.transpose("lambda", "replicate", ...))).all(axis=1)
        bound = (np.sqrt(a ** L) * dm["mu"].isel(layer=0) / dm["fro"].isel(layer=-1)).mean("replicate")
        y = np.where(ok, bound.transpose("lambda").values, np.nan)
        ax.plot(lam, y, ls="--", color="C3", marker="_", gid="theory:bound",
                label="Thm 4.1 bound\n" r"$a^{L/2}\mu(X_0)/\|X_L\|_F$" "\nwhere (7) holds")
    ax.set_xscale("symlog", linthresh=1.0)
    log_ticks(ax, lam)
    ax.set_xlabel(r"skip strength $\lambda$ (symlog)")
    ax.set_ylabel(rf"$\mu(X_L)/\|X_L\|_F$ at the last layer, L = {L}")
    ax.set_ylim(-0.02, 1.05)
    return L, lmin


@figure("ls-fig2", PAPER, "Fig. 2: last-layer normalised mu vs lambda, with Theorem 4.1's lambda_min and bound",
        "ls_fig2.toml")
def fig2(ds, fig, band=DEFAULT_BAND):
    need(ds, _registered("ls-fig2"), vars=("mu_rel", "mu", "fro", "theory_S", "theory_C_M", "theory_lambda_min"),
         coords=("mixer", "lambda", "collapse_rate"))
    if "lambda" not in ds.dims:
        raise FigureDataError("ls-fig2 needs lambda swept under [axes]; make the store with jobs/examples/ls_fig2.toml")
    a = _a(ds)
    mixers = _mixers(ds)
    axes = _panels(fig, len(mixers), legend=2.4)
    for ax, mixer in zip(axes, mixers):
        dm = select(ds, mixer=mixer)
        L, lmin = last_layer_against_lambda(ax, dm, band=band, a=a)
        ax.set_title(f"mixer = {mixer}, L = {L}\nnorm = {_scalar_str(dm, 'norm')}, " rf"$\lambda_{{\min}}$ = {lmin:.3g}")
    legends_outside(fig, axes)  # one legend right of the panels (right of each when their entries differ)
    fig.supxlabel(f"Lambda-skip Fig. 2 at initialisation (T = {_scalar_str(ds, 'T')}, d = {_scalar_str(ds, 'd')}, "
                 f"a = {a:g}; {band_text(band, replicate_counts(ds['mu_rel'].isel(layer=-1)))})", fontsize=8)


def _ablation(ds, fig, name, switch, switch_label, panel_dim, title, band=DEFAULT_BAND):
    """Curves of mu_rel vs layer for every (switch, norm) pair, one panel per value of panel_dim."""
    need(ds, _registered(name), vars=("mu_rel",), coords=(switch, "norm"))
    panel_values = _values(ds, panel_dim) if panel_dim in ds.dims else [None]
    axes = _panels(fig, len(panel_values), legend=2.6)
    for ax, pv in zip(axes, panel_values):
        dp = select(ds, **{panel_dim: pv}) if pv is not None else ds
        k = 0
        for sv in _values(dp, switch):
            for nv in _values(dp, "norm"):
                p = select(select(dp, **{switch: sv}), norm=nv)
                label = f"{switch_label(sv)}, norm = {nv}"
                # a series whose replicates all diverge ends in an x (line_band), its label says where
                line_band(ax, p["layer"].values, p["mu_rel"].transpose("replicate", "layer"), label,
                          color=f"C{k}", band=band)
                k += 1
        if pv is not None:
            ax.set_title(f"{panel_dim} = {pv:g}" if isinstance(pv, (float, np.floating)) else f"{panel_dim} = {pv}")
        ax.set_xlabel(axis_label(ds["layer"]))
        ax.set_ylabel(MU_LABEL)
        ax.set_ylim(-0.02, 1.05)
    legends_outside(fig, axes)
    ends = marker_outcomes(axes, "ends")  # the outcomes of the replicates where an x is drawn, by name
    ends = f"x: no replicate has a value after this layer ({outcome_words(ends, numbers=False, last=' or ')}); " if ends else ""
    fig.supxlabel(title + f"\n({ends}{band_text(band, replicate_counts(ds['mu_rel']))})", fontsize=8)


@figure("ls-fig3", PAPER, "Fig. 3: SSD (Mamba-2 mixer) with/without SiLU gate and LayerNorm, normalised mu vs layer",
        "ls_fig3.toml")
def fig3(ds, fig, band=DEFAULT_BAND):
    need(ds, _registered("ls-fig3"), coords=("gate", "norm", "lambda"))
    _ablation(ds, fig, "ls-fig3", "gate", lambda g: "gate" if g == "silu" else "no gate", "lambda",
              f"Lambda-skip Fig. 3 at initialisation: mixer = {_scalar_str(ds, 'mixer')}", band=band)


@figure("ls-fig4", PAPER, "Fig. 4: S4D with/without skip and LayerNorm, normalised mu vs layer", "ls_fig4.toml")
def fig4(ds, fig, band=DEFAULT_BAND):
    need(ds, _registered("ls-fig4"), coords=("lambda", "norm"))
    _ablation(ds, fig, "ls-fig4", "lambda", lambda v: f"skip (lambda = {v:g})" if v != 0 else "no skip",
              "gate", f"Lambda-skip Fig. 4 (App. A.13.1) at initialisation: mixer = {_scalar_str(ds, 'mixer')}",
              band=band)


# codes of the left panel of ls-thm41
OUTSIDE, FAILS, NOT_APPLIES, APPLIES = -1, 0, 1, 2
CODE_NAMES = {OUTSIDE: "outside the theorem (its stack, unit rows)", FAILS: "condition (7) fails",
              NOT_APPLIES: r"(7) holds, $\mu(X_0)^2 < b(L)$",
              APPLIES: r"bound applies: (7) and $\mu(X_0)^2 \geq b(L)$"}


def theorem_map(ds):
    """(lambda values, depths L = 1..L_max, code[L, lambda], held[L, lambda]) of Theorem 4.1:
    code = the weakest over replicates of OUTSIDE / FAILS / NOT_APPLIES / APPLIES (OUTSIDE: the
    store's bound_reason says the stack is not the theorem's or its rows are not unit); held = the
    fraction of replicates whose observed mu(X_L)^2 >= a^L mu(X_0)^2 (compared in logs)."""
    a = _a(ds)
    lam = ds["lambda"].values.astype(float)
    layers = ds["layer"].values[1:].astype(float)
    N, d = float(ds["T"].values), float(ds["d"].values)
    S = ds["theory_S"].transpose("lambda", "replicate").values[:, :, None]
    C = ds["theory_C_M"].transpose("lambda", "replicate").values[:, :, None]
    mu = ds["mu"].transpose("lambda", "replicate", "layer").values
    cond = condition_holds(lam[:, None, None], S, C, a)
    b = b_of_depth(lam[:, None, None], S, C, a, N, d, layers[None, None, :])
    inside = within_hypotheses(ds.transpose("lambda", "replicate", ...))[:, :, None]
    applies = inside & cond & (mu[:, :, :1] ** 2 >= b)
    code = np.where(~inside, OUTSIDE, np.where(applies, APPLIES, np.where(cond, NOT_APPLIES, FAILS))).min(axis=1)
    with np.errstate(divide="ignore"):
        held = 2 * np.log(mu[:, :, 1:]) >= layers[None, None, :] * np.log(a) + 2 * np.log(mu[:, :, :1])
    done = np.isfinite(mu[:, :, 1:])
    frac = np.where(done, held, 0).sum(axis=1) / np.maximum(done.sum(axis=1), 1)
    frac = np.where(done.any(axis=1), frac, np.nan)
    return lam, layers.astype(int), code.T, frac.T, applies, held


@figure("ls-thm41", PAPER, "Theorem 4.1 on a lambda x depth map: where the condition holds and the bound applies, "
        "and whether the observed mu respects it", "ls_thm41.toml")
def thm41(ds, fig):
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    need(ds, _registered("ls-thm41"), vars=("mu", "theory_S", "theory_C_M", "theory_bound_reason"),
         coords=("lambda", "T", "d", "collapse_rate"))
    if "lambda" not in ds.dims or ds["T"].ndim or ds["d"].ndim:
        raise FigureDataError("ls-thm41 needs lambda swept under [axes] and one T and d; "
                              "make the store with jobs/examples/ls_thm41.toml")
    others = [dim for dim in ds["mu"].dims if dim not in ("lambda", "replicate", "layer")]
    if others:
        raise FigureDataError(f"ls-thm41 needs lambda as the only swept axis, the store also sweeps {others}; "
                              "make the store with jobs/examples/ls_thm41.toml")
    a = _a(ds)
    lam, layers, code, frac, applies, held = theorem_map(ds)
    fig.set_size_inches(11.5, 4.6)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    extent = (-0.5, len(lam) - 0.5, layers[0] - 0.5, layers[-1] + 0.5)
    colours = {OUTSIDE: "#fdd0a2", FAILS: "#d9d9d9", NOT_APPLIES: "#9ecae1", APPLIES: "#3182bd"}
    cmap = ListedColormap([colours[k] for k in (OUTSIDE, FAILS, NOT_APPLIES, APPLIES)])
    ax1.imshow(code, origin="lower", aspect="auto", extent=extent, cmap=cmap, vmin=-1.5, vmax=2.5,
               interpolation="nearest", gid="map:code")
    shown = [k for k in (OUTSIDE, FAILS, NOT_APPLIES, APPLIES) if k != OUTSIDE or (code == OUTSIDE).any()]
    # below the map (inside it would hide cells), under the rotated lambda labels
    rotated = max(len(f"{v:g}") for v in lam) * 0.55 * 7 * np.sin(np.radians(60)) - 7
    leg = legend_below(ax1, [Patch(color=colours[k], label=CODE_NAMES[k]) for k in shown],
                       pad=rotated)
    fig.set_size_inches(fig.get_figwidth(), fig.get_figheight() + legend_height(leg, pad=rotated))
    ax1.set_title(f"Theorem 4.1's hypotheses\n(in every replicate), a = {a:g}", fontsize=8)
    im = ax2.imshow(frac, origin="lower", aspect="auto", extent=extent, cmap="RdYlGn", vmin=0, vmax=1,
                    interpolation="nearest", gid="map:held")
    # below the map, like the left map's legend: at the right it would narrow both panels of the one-column
    # layout (rcsweep-plot --width column stacks them; their right margins are the same), and the left
    # map's legend, centred on the page, would then overhang its panel and narrow it at every draw
    fig.colorbar(im, ax=ax2, location="bottom", shrink=0.8, aspect=30,
                 label="fraction of replicates with\n" r"$\mu(X_L)^2 \geq a^L \mu(X_0)^2$")
    # a replicate where the bound applies but the observed mu breaks it would contradict the theorem
    bad = (applies[:, :, :] & ~held).any(axis=1).T  # [L, lambda]
    for (li, ki) in zip(*np.nonzero(bad)):
        ax2.text(ki, layers[li], "!", ha="center", va="center", color="k", fontsize=8, gid="violation")
    # short lines: a title wider than its panel (at --width column) would make the constrained layout
    # narrow the panels at every draw
    ax2.set_title("observed bound\n(! = applies but violated:\ncontradicts Thm 4.1)", fontsize=8)
    for ax in (ax1, ax2):
        ax.set_xticks(range(len(lam)), [f"{v:g}" for v in lam], rotation=60, fontsize=7)
        ax.set_xlabel(r"skip strength $\lambda$")
        ax.set_ylabel(r"depth $L$")
    fig.supxlabel(f"Lambda-skip Theorem 4.1 at initialisation: mixer = {_scalar_str(ds, 'mixer')}, "
                 f"norm = {_scalar_str(ds, 'norm')}, T = {int(ds['T'].values)}, d = {int(ds['d'].values)}, "
                 f"{count_text(replicate_counts(ds['mu']))} replicates", fontsize=8)


def _scalar_str(ds, name):
    v = np.unique(np.atleast_1d(ds[name].values))
    return ", ".join(str(x) for x in v)

