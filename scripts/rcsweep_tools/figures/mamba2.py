"""Lambda-skip Connections (Arangath Joseph et al., §5): Figs. 1-3 on Mamba-2 blocks, from stores of
`block = "mamba2"` sweeps (docs/MAMBA2.md "In a sweep": layer 0 is X_0, layer l the output of
block l, X_l = lambda X_(l-1) + Mixer(RMSNorm(X_(l-1))); the final norm is not applied). The weights
are the published initialisation (init = "random", a config.json alone) or a checkpoint's (init =
"checkpoint"); the inputs tokens or random rows fed to the first block without embedding.

Every figure plots the normalised rank-collapse measure mu(X_l)/||X_l||_F (`mu_rel`), the mean over
replicates with a band (plot.line_band; ± 1 sd unless rcsweep-plot --band picks another); a series
whose replicates all diverge ends in an "x" and its legend entry says where and why. No Theorem 4.1
line: the store's /theory is NaN for Mamba-2 blocks (docs/MAMBA2.md). Mean lines carry the gid
"mean:<label>", their bands "band:<label>" (tests read them back).

    ls-fig1-mamba2  mu_rel against the layer, one line per lambda; a panel per value of any other
                    swept parameter (gate, norm, init, ...)
    ls-fig2-mamba2  mu_rel at the last layer against lambda (symlog), one curve per value of any
                    other swept parameter; a store of jobs/examples/ls_fig2_albert.toml adds the
                    ALBERT curve (its own last layer) to the same axes: rcsweep-plot STORE
                    ls-fig2-mamba2 --with ALBERT_STORE, or fig2(ds, fig, albert=ALBERT_STORE)
    ls-fig3-mamba2  mu_rel against the layer, one line per (gate, norm) pair; a panel per value of
                    gated_norm (and of any other swept parameter)

Each refuses a store that is not a Mamba-2 store, or lacks the axis it plots, with a
plot.FigureDataError naming the sweep file that makes one (rcsweep-plot exits 2).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import FIGURES, Second, figure
from ..plot import (DEFAULT_BAND, FigureDataError, axis_label, band_text, count_text, hue_colors, legends_outside,
                    line_band, log_ticks, marker_outcomes, replicate_counts, select, with_tasks)
from ..load import outcome_words
from .encoders import _block_output, input_text, model_name, need_encoder
from .lambda_skip import MU_LABEL, last_layer_against_lambda
from .mind_the_gap import _grid_dims, _panels, _points, _value

PAPER = "Lambda-skip (Mamba-2)"
INIT_TEXT = {"random": "at initialisation (init = random)", "checkpoint": "trained weights (init = checkpoint)"}
GATE_TEXT = {"silu": "gate", "none": "no gate"}
NORM_TEXT = {"rms": "RMSNorm", "none": "no norm"}


def _blocks(ds):
    return sorted({str(v) for v in np.atleast_1d(ds["block"].values).ravel()}) if "block" in ds.coords else ["stack"]


def need_mamba2(ds, name, swept=()):
    """FigureDataError naming figure `name`'s sweep file unless every point of ds is a Mamba-2 block
    with mu_rel recorded and each parameter of `swept` a dimension of the store."""
    f = FIGURES[name]
    where = f"{ds.attrs.get('path', 'store')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw {name}"
    make = f"Make the store with jobs/examples/{f.sweep}"
    blocks = _blocks(ds)
    if blocks != ["mamba2"]:
        raise FigureDataError(f"{where}: it is not a Mamba-2 store (block = {', '.join(blocks)}); {name} draws "
                              f"Mamba-2 blocks, block = \"mamba2\" at every point. {make}")
    if "mu_rel" not in ds.data_vars:
        raise FigureDataError(f"{where}: no variable 'mu_rel' ([output] metrics left it out). {make}")
    missing = [s for s in swept if s not in ds.dims]
    if missing:
        raise FigureDataError(f"{where}: it needs {' and '.join(missing)} swept under [axes] (the store has "
                              f"{', '.join(_grid_dims(ds)) or 'no swept axis'}). {make}")


def _name(v):
    return f"{v:g}" if isinstance(v, (float, np.floating)) else str(v).lower() if isinstance(v, (bool, np.bool_)) else str(v)


def _where(ds, at):
    """'gate = none, init = random' for the grid point `at` (dimension -> index) of ds."""
    parts = []
    for dim, i in at.items():
        names = [c for c, co in ds.coords.items() if co.dims == (dim,) and (c != dim or not dim.startswith("zip"))]
        parts += [f"{c} = {_name(ds[c].values[i])}" for c in names]
    return ", ".join(parts)


def init_text(ds):
    """Where the weights come from, for a caption: 'at initialisation (init = random), a new model per
    replicate' or 'trained weights (init = checkpoint)'; several when init is swept."""
    inits = sorted({str(v) for v in np.atleast_1d(ds["init"].values).ravel()}) if "init" in ds.coords else ["random"]
    if len(inits) > 1:
        return "init = " + " / ".join(inits)
    text = INIT_TEXT.get(inits[0], f"init = {inits[0]}")
    if inits[0] == "random":
        draw = _value(ds, "init_draw", -1)
        text += ", a new model per replicate" if draw in (-1, None) else f", one model (init_draw = {draw})"
    return text


def caption(ds, what, band, n=None):
    """The caption line: the figure, the model (its folder's name), the weights, the input, T, the
    replicates and the band (n: replicate_counts of the plotted values, default those of mu_rel)."""
    model = model_name(ds)
    if model == "encoder":  # encoders.model_name's default: no model_folder in the sweep text
        model = "Mamba-2"
    return (f"Lambda-skip {what} on {model} (Mamba-2 blocks, d = {_value(ds, 'd', '…')}),\n{init_text(ds)};\n"
            f"{input_text(ds)}, T = {_value(ds, 'T', '…')};\n{band_text(band, n or replicate_counts(ds['mu_rel']))}")


def _integer_ticks(ax):
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _mu_axes(ax, ds):
    ax.set_xlabel(axis_label(ds["layer"]))
    ax.set_ylabel(MU_LABEL)
    ax.set_ylim(-0.02, 1.05)
    _integer_ticks(ax)


def _ends_text(axes):
    ends = marker_outcomes(axes, "ends")
    return f"x: no replicate has a value after this layer ({outcome_words(ends, numbers=False, last=' or ')}); " \
        if ends else ""


# --------------------------------------------------------------------------------------------
@figure("ls-fig1-mamba2", PAPER, "Fig. 1 on Mamba-2: normalised mu vs layer for several lambda", "ls_fig1_mamba2.toml")
def fig1(ds, fig, band=DEFAULT_BAND):
    name = "ls-fig1-mamba2"
    need_mamba2(ds, name, swept=("lambda",))
    lams = sorted(float(v) for v in ds["lambda"].values)
    cmap = hue_colors(lams)  # diverging at 0: negatives blue, positives red
    others = [d for d in _grid_dims(ds) if d != "lambda"]
    panels = list(_points(ds, others))
    axes = _panels(len(panels), fig, 5.2, 4.0, ncols=min(len(panels), 3), legend=1.6)
    for ax, at in zip(axes, panels):
        sub = ds.isel(**at)
        for k, lam in enumerate(lams):
            p = select(sub, **{"lambda": lam})
            line_band(ax, p["layer"].values, p["mu_rel"].transpose("replicate", "layer"), rf"$\lambda$ = {lam:g}",
                      color=cmap[k], band=band)
        where = _where(ds, at)
        ax.set_title(f"{model_name(ds)}: gate = {_value(sub, 'gate', '…')}, norm = {_value(sub, 'norm', '…')}"
                     + (f"\n{where}" if where else ""), fontsize=8)
        _mu_axes(ax, ds)
    legends_outside(fig, axes)
    fig.supxlabel(caption(ds, "Fig. 1", band), fontsize=8)


# --------------------------------------------------------------------------------------------
def _albert(albert):
    """The ALBERT store for Fig. 2's overlay: a loaded Dataset or a path; checked as ls-fig2-albert
    checks it (an encoder store with lambda swept, the blocks' outputs)."""
    if isinstance(albert, (str, Path)):
        from ..load import load

        albert = load(albert)
    albert = with_tasks(albert)
    need_encoder(albert, "ls-fig2-albert", vars=("mu_rel",), coords=("lambda",))
    albert = _block_output(albert, "ls-fig2-albert")
    if "lambda" not in albert.dims:
        raise FigureDataError(f"{albert.attrs.get('path', 'store')} (sweep {albert.attrs.get('sweep_name')!r}) "
                              "cannot be the ALBERT curve of ls-fig2-mamba2: it needs lambda swept under [axes]. "
                              "Make the store with jobs/examples/ls_fig2_albert.toml")
    return albert


@figure("ls-fig2-mamba2", PAPER, "Fig. 2 on Mamba-2: last-layer normalised mu vs lambda (with --with, ALBERT's "
        "curve beside it)", "ls_fig2_mamba2.toml",
        second=Second("albert", "ALBERT's curve, at its own last layer", "ls_fig2_albert.toml", _albert))
def fig2(ds, fig, band=DEFAULT_BAND, albert=None):
    """Fig. 2: one panel, a curve per point of the store's other swept parameters (gate, ...);
    `albert` (a store of jobs/examples/ls_fig2_albert.toml, loaded or a path) adds the ALBERT curve,
    each model at its own last layer, as the paper's Fig. 2 shows both."""
    name = "ls-fig2-mamba2"
    need_mamba2(ds, name, swept=("lambda",))
    albert = _albert(albert) if albert is not None else None
    fig.set_size_inches(9.6, 4.4)
    ax = fig.add_subplot(1, 1, 1)
    model = model_name(ds)
    others = [d for d in _grid_dims(ds) if d != "lambda"]
    lams = list(ds["lambda"].values.astype(float))
    L = int(ds["layer"].values[-1])
    for at in _points(ds, others):
        where = _where(ds, at)
        last_layer_against_lambda(ax, ds.isel(**at), band=band, label=f"{model}, L = {L}" + (f": {where}" if where else ""))
    if albert is not None:
        amodel = model_name(albert)
        La = int(albert["layer"].values[-1])
        for at in _points(albert, [d for d in _grid_dims(albert) if d != "lambda"]):
            where = _where(albert, at)
            last_layer_against_lambda(ax, albert.isel(**at), band=band,
                                      label=f"{amodel}, L = {La}" + (f": {where}" if where else ""))
        lams += list(albert["lambda"].values.astype(float))
        # two lines: one ran into the panel's title at --width column
        ax.set_ylabel(r"$\mu(X_L)/\|X_L\|_F$" + "\nat each model's last layer L")
    log_ticks(ax, lams)
    ax.set_title(f"{model}: {init_text(ds)}", fontsize=8)
    legends_outside(fig, [ax])
    text = caption(ds, "Fig. 2", band, replicate_counts(ds["mu_rel"].isel(layer=-1)))
    if albert is not None:
        text += (f"\n{model_name(albert)}: {init_text(albert).split(', a new')[0]}, {input_text(albert)}, "
                 f"T = {_value(albert, 'T', '…')}, {count_text(replicate_counts(albert['mu_rel'].isel(layer=-1)))} replicates")
    fig.supxlabel(text, fontsize=8)


# --------------------------------------------------------------------------------------------
@figure("ls-fig3-mamba2", PAPER, "Fig. 3 on Mamba-2: normalised mu vs layer, gate x pre-norm (x gated norm)",
        "ls_fig3_mamba2.toml")
def fig3(ds, fig, band=DEFAULT_BAND):
    name = "ls-fig3-mamba2"
    need_mamba2(ds, name, swept=("gate", "norm"))
    others = [d for d in _grid_dims(ds) if d not in ("gate", "norm")]
    panels = list(_points(ds, others))
    axes = _panels(len(panels), fig, 5.2, 4.0, ncols=min(len(panels), 3), legend=2.2)
    gates = [str(v) for v in ds["gate"].values]
    norms = [str(v) for v in ds["norm"].values]
    for ax, at in zip(axes, panels):
        sub = ds.isel(**at)
        k = 0
        for g in gates:
            for nv in norms:
                p = select(select(sub, gate=g), norm=nv)
                label = f"{GATE_TEXT.get(g, 'gate = ' + g)}, {NORM_TEXT.get(nv, 'norm = ' + nv)}"
                line_band(ax, p["layer"].values, p["mu_rel"].transpose("replicate", "layer"), label,
                          color=f"C{k}", band=band)
                k += 1
        where = _where(ds, at)
        ax.set_title(f"{model_name(ds)}: lambda = {_value(sub, 'lambda', '…')}" + (f"\n{where}" if where else ""),
                     fontsize=8)
        _mu_axes(ax, ds)
    legends_outside(fig, axes)
    ends = _ends_text(axes)
    fig.supxlabel(caption(ds, "Fig. 3", band) + (f"\n({ends.rstrip('; ')})" if ends else ""), fontsize=8)
