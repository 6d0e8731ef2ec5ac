"""The generic plot of `rcsweep-plot STORE --y METRIC`: any per-task quantity of a store against
layer or a swept axis, the mean over replicates with a band, one line per value of a hue axis (and
of a dash axis), one panel per value of a column axis (wrapped into rows) or per (row, column).

    draw(ds, fig, y, x=None, hue=None, col=None, row=None, dash=None, sel=None, layer=None,
         logx=False, logy=False, band="sd", wrap=None, panel=(3.6, 2.7), grid=True) -> fig

- y: a data variable with a replicate dimension (the /layers metrics, theory_*, grad_*, wall_s).
- An axis is a dimension of y other than replicate (a grid dimension, `layer`, `L`) or a
  coordinate along one (a [[zip]] member such as T, d): x, hue, col, row and dash each take one,
  and no dimension may be used twice. x defaults to `layer` (else the first swept dimension).
- Dimensions left over: `layer` is taken at `layer` (an index, -1 or None the last), `L` at its last
  value, a dimension of one value is dropped, and a swept one goes to the first free role of hue,
  col, row, dash; more than that is an error asking for `sel` (name -> value, plot.select).
- Bands: plot.mean_band's `band` ("sd" ± 1 sd of the replicates, the default; "ci" t-based 95%,
  "se", "range", "none"), clipped to the quantity's range (load.RANGES). Lines carry gid
  "mean:<label>" with label "<hue label>[, <dash label>]" (and the series_note of a series that
  ends early or misses replicates), bands gid "band:<label>", as in the paper figures.
- Missing replicates: a series that ends before the last x is marked "x" at its last finite point,
  points missing replicates that diverged, vanished, failed or are pending get a hollow marker
  (not those whose other replicates an adaptive rule did not need; plot.line_band); the legend entry of its hue value says
  where it ends and why, naming the outcomes of the missing replicates from the store
  ("0 (ends at layer 6: 2 vanished)", "(n = 3 of 6: 3 not needed)"), and entries explain the markers.
- Log axes (logx, logy): ticked at the swept x values when there are at most 8, as plain numbers;
  minor ticks unlabelled (plot.log_ticks).
- Colours: plot.hue_colors (ordered sequential colours for numbers, a diverging map centred at 0
  for numbers of both signs); the legend sits outside the
  panels, right of the top-right one. Panels: plot.panel_grid (`wrap` panels a row, `panel` inches
  each); `grid` draws grid lines.
Bad choices raise plot.FigureDataError naming the choices (rcsweep-plot: exit code 2).
"""
from __future__ import annotations

import numpy as np

from .load import outcome_words
from .plot import (DEFAULT_BAND, FigureDataError, axis_label, hue_colors, legend_outside, legend_width, line_band,
                   log_ticks, marker_handles, panel_grid, plain_log_labels, select, with_tasks)

ROLES = ("hue", "col", "row", "dash")   # the order swept dimensions left over are given to
DASHES = ["-", "--", ":", "-."]


def metric_choices(ds):
    """Names that --y takes: float data variables with a replicate dimension."""
    return [v for v in ds.data_vars if "replicate" in ds[v].dims and ds[v].dtype.kind == "f"]


def axis_choices(da):
    """name -> dimension of every axis of `da`: its dimensions but replicate, and the 1-D
    coordinates along them (zip members)."""
    out = {d: d for d in da.dims if d != "replicate"}
    for c, co in da.coords.items():
        if co.ndim == 1 and c not in out and co.dims[0] in out:
            out[c] = co.dims[0]
    return out


def _fmt(v):
    return f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)


NOTE_INCHES = 3.5  # a legend entry's note breaks into lines of about this width (at 7 pt)


def _wrap(text, inches, points=10.0):
    """Break `text` at ", " into lines that fit about `inches` at a font of `points`."""
    room = max(8, int(inches * 72 / (0.6 * points)))
    lines = []
    for part in text.split(", "):
        if lines and len(lines[-1]) + 2 + len(part) <= room:
            lines[-1] += ", " + part
        else:
            lines.append(part)
    return "\n".join(lines)


def _value_labels(da, name, dim):
    """Label of each index along `dim`: "name = v"; a [[zip]] dimension given by its own name
    lists every member ("T = 8, d = 8")."""
    members = [name]
    if name == dim and dim.startswith("zip"):
        members = [c for c, co in da.coords.items() if co.dims == (dim,) and c != dim] or [dim]
    return [", ".join(f"{m} = {_fmt(da[m].values[i])}" for m in members) for i in range(da.sizes[dim])]


def parse_sel(ds, items):
    """["name=value", ...] -> {name: value}, the value converted to the coordinate's type."""
    out = {}
    for item in items or ():
        name, eq, text = item.partition("=")
        if not eq:
            raise FigureDataError(f"--sel {item!r}: write NAME=VALUE, e.g. --sel mixer=softmax")
        if name not in ds.coords:
            raise FigureDataError(f"--sel {item!r}: no coordinate {name!r}; choose one of: "
                                  + ", ".join(c for c in ds.coords if ds[c].ndim == 1 and c != "replicate"))
        values = np.atleast_1d(ds[name].values)
        try:
            value = float(text) if np.issubdtype(values.dtype, np.number) else text
        except ValueError:
            value = None
        if value not in values.tolist():
            raise FigureDataError(f"--sel {item!r}: {name} takes the values {', '.join(_fmt(v) for v in values)}")
        out[name] = value
    return out


def assign(da, x=None, hue=None, col=None, row=None, dash=None, layer=None):
    """Check the roles against `da` and fill them in: (da with the unused dimensions taken away,
    {role: (name, dim)} for x and the roles in use, " at layer 12"-like text for what was taken)."""
    choices = axis_choices(da)
    given = {"x": x, "hue": hue, "col": col, "row": row, "dash": dash}
    roles, used = {}, {}
    for role, name in given.items():
        if name is None:
            continue
        if name not in choices:
            scalar = f" ({name} is not swept in this store)" if name in da.coords else ""
            raise FigureDataError(f"unknown axis {name!r} for --{role}{scalar}; choose one of: {', '.join(choices)}")
        dim = choices[name]
        if dim in used:
            raise FigureDataError(f"--{role} {name} and --{used[dim]} run along the same dimension {dim!r}; give it once")
        roles[role], used[dim] = (name, dim), role
    if "x" not in roles:
        swept = [d for d in da.dims if d not in used and d != "replicate" and da.sizes[d] > 1]
        dim = "layer" if "layer" in da.dims and "layer" not in used else (swept[0] if swept else None)
        if dim is None:
            raise FigureDataError(f"{da.name} has no axis left for --x; choose one of: {', '.join(choices)}")
        roles["x"], used[dim] = (dim, dim), "x"
    if layer is not None and "layer" in used:
        raise FigureDataError(f"--layer {layer}: layer is the --{used['layer']} axis here; --layer picks "
                              "the layer when no role takes it (e.g. with --x lambda)")
    layer = -1 if layer is None else layer
    extra, at = [], ""
    for dim in [d for d in da.dims if d not in used and d != "replicate"]:
        if dim == "layer":
            n = da.sizes["layer"]
            if not -n <= layer < n:
                raise FigureDataError(f"--layer {layer}: the store has layers 0..{n - 1}")
            da = da.isel(layer=layer)
            at += f" at layer {int(da['layer'].values)}"
        elif dim == "L":
            da = da.isel(L=-1)
            at += f" at L = {int(da['L'].values)}"
        elif da.sizes[dim] == 1:
            da = da.isel({dim: 0})
        else:
            free = [r for r in ROLES if r not in roles]
            if free:
                roles[free[0]], used[dim] = (dim, dim), free[0]
            else:
                extra.append(dim)
    if extra:
        raise FigureDataError(
            f"{da.name} also varies along {', '.join(f'{d} ({da.sizes[d]} values)' for d in extra)}, "
            f"beyond --x, {', '.join('--' + r for r in ROLES)}: pick a value with --sel, e.g. "
            f"--sel {extra[0]}={_fmt(np.atleast_1d(da[extra[0]].values)[0])}")
    return da, roles, at


def _entries(da, roles, role):
    """[(index along the role's dimension or None, label)] of a role, numbers in increasing order."""
    if role not in roles:
        return [(None, None)]
    name, dim = roles[role]
    labels = _value_labels(da, name, dim)
    values = np.atleast_1d(da[name].values)
    order = np.argsort(values, kind="stable") if np.issubdtype(values.dtype, np.number) else range(len(values))
    return [(int(k), labels[k]) for k in order]


def draw(ds, fig, y, x=None, hue=None, col=None, row=None, dash=None, sel=None, layer=None,
         logx=False, logy=False, band=DEFAULT_BAND, wrap=None, panel=(3.6, 2.7), grid=True):
    """Draw the generic plot into `fig` (see the module docstring); returns fig."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    choices = metric_choices(ds)
    if y not in choices:
        raise FigureDataError(f"unknown metric {y!r}; choose one of: {', '.join(choices)}")
    ds = with_tasks(ds)  # every selection carries the tasks' status and message: why a series ends
    if sel:
        ds = select(ds, **sel)
    da, roles, at = assign(ds[y], x=x, hue=hue, col=col, row=row, dash=dash, layer=layer)
    cols, rows = _entries(da, roles, "col"), _entries(da, roles, "row")
    hues, dashes = _entries(da, roles, "hue"), _entries(da, roles, "dash")
    # hue: colours by value; the legend lists the values under the axis's label (a zip: its members)
    hue_name = roles["hue"][0] if "hue" in roles else None
    colours = hue_colors(np.atleast_1d(da[hue_name].values)) if hue_name else ["C0"]
    by_value = hue_name is not None and not hue_name.startswith("zip")
    hue_text = {k: _fmt(da[hue_name].values[k]) if by_value else t for k, t in hues if t}
    legend = [Line2D([], [], color=colours[k], marker="o", ms=3, label=hue_text[k]) for k, t in hues if t]
    legend += [Line2D([], [], color="0.3", ls=DASHES[s % len(DASHES)], label=t) for s, (_, t) in enumerate(dashes) if t]
    n = len(cols) * len(rows)
    axes = panel_grid(fig, n, ncols=len(cols) if "row" in roles else wrap, nrows=len(rows) if "row" in roles else None,
                      panel=panel, extra_width=legend_width([h.get_label() for h in legend]) if legend else 0.0,
                      sharex=True, sharey=True)
    ncols = axes[0].get_gridspec().ncols

    xname, xdim = roles["x"]
    xco = np.atleast_1d(da[xname].values)
    numeric = np.issubdtype(xco.dtype, np.number) and not (xname == xdim and xdim.startswith("zip"))
    xpos = xco.astype(float) if numeric else np.arange(len(xco), dtype=float)
    order = np.argsort(xpos, kind="stable")

    def pick(a, role, k):
        return a if k is None else a.isel({roles[role][1]: k})

    notes = {}  # hue index -> the series notes of its lines (plot.series_note)
    whys = {}  # hue index -> the outcomes of the replicates its lines miss (line_band's `outcomes`)
    for p, ax in enumerate(axes):
        (rk, rlabel), (ck, clabel) = rows[p // len(cols)], cols[p % len(cols)]
        sub = pick(pick(da, "row", rk), "col", ck)
        for hk, hlabel in hues:
            for s, (sk, slabel) in enumerate(dashes):
                line = pick(pick(sub, "hue", hk), "dash", sk).transpose(xdim, "replicate").isel({xdim: order})
                label = ", ".join(t for t in (hlabel, slabel) if t) or str(y)
                drawn = line_band(ax, xpos[order], line, label, band=band, color=colours[hk or 0],
                                  ls=DASHES[s % len(DASHES)], marker="o" if len(xpos) <= 12 else None, ms=3,
                                  xname=xname if numeric else "x")
                if drawn.series_note:  # one series a panel: the note names its panel
                    where = ", ".join(t for t in (rlabel, clabel) if t) if hk is None and len(axes) > 1 else ""
                    notes.setdefault(hk, []).append(f"{where}: {drawn.series_note}" if where else drawn.series_note)
                    why = whys.setdefault(hk, {})
                    for o, c in drawn.outcomes.items():
                        why[o] = why.get(o, 0) + c
        width = fig.get_figwidth() / ncols
        ax.set_title(_wrap(", ".join(t for t in (rlabel, clabel) if t), width - 0.5), fontsize="medium")
        if logx:
            nonzero = np.abs(xpos[xpos != 0])
            if (xpos <= 0).any():  # layer 0, negative lambda: linear around 0
                ax.set_xscale("symlog", linthresh=float(nonzero.min()) if nonzero.size else 1.0)
            else:
                ax.set_xscale("log")
            log_ticks(ax, xpos)  # at the swept values when few, plain numbers, no minor labels
        elif xname in ("layer", "L"):  # whole layers and depths: integer ticks
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if logy:
            ax.set_yscale("log")
            plain_log_labels(ax, "y")
        if not numeric:  # names (mixer = softmax, ...) or zip entries at 0, 1, ...
            ticks = _value_labels(da, xname, xdim) if xdim.startswith("zip") else [_fmt(v) for v in xco]
            ticks = [_wrap(ticks[k], width / len(xco), 8) for k in order]
            ax.set_xticks(xpos, ticks, fontsize="small", rotation=30 if len(xco) > 4 else 0)
        if grid:
            ax.grid(True, which="major", alpha=0.3)
        if p + ncols >= len(axes):  # the lowest panel of its column
            ax.set_xlabel(axis_label(ds[xname]) if xname in ds.coords else xname)
            ax.xaxis.set_tick_params(labelbottom=True)
    ylabel = axis_label(ds[y], sep="\n") + at
    if len(axes) > ncols:  # several rows: one label for all
        fig.supylabel(ylabel, fontsize="medium")
    else:
        axes[0].set_ylabel(ylabel)
    if notes and hue_name is not None:  # the legend says which hue values end early (or lose replicates) and why
        before = legend_width([h.get_label() for h in legend])
        for h, k in zip(legend, [k for k, t in hues if t]):
            if k in notes:
                h.set_label(_wrap(f"{hue_text[k]} ({_join_notes(notes[k], whys[k])})", NOTE_INCHES, 7))
        legend += marker_handles(axes)
        if legend:
            w, hgt = fig.get_size_inches()
            fig.set_size_inches(w + legend_width([h.get_label() for h in legend]) - before, hgt)
    elif hue_name is None and notes:  # one series per panel: an entry of its own says where it ends
        legend = [Line2D([], [], color=colours[0], marker="o", ms=3,
                         label=_wrap(f"{y} ({_join_notes(notes[None], whys[None])})", NOTE_INCHES, 7))]
        legend += marker_handles(axes)
        w, hgt = fig.get_size_inches()
        fig.set_size_inches(w + legend_width([h.get_label() for h in legend]), hgt)
    if legend:
        leg = legend_outside(axes[min(ncols, len(axes)) - 1], legend,
                             title=axis_label(ds[hue_name]) if by_value else None, title_fontsize=7)
        leg.shared = True  # it serves every panel (plot.legends_below)
    return fig


def _join_notes(notes, outcomes=None):
    """One legend note for the several lines of a hue value: the one note, or a count of the
    lines with the outcomes they miss replicates to (`outcomes`, load.outcome_words)."""
    distinct = list(dict.fromkeys(notes))
    # a note that another one already says in full ("ends at layer 6: 2 vanished" beside
    # "n 2→1 from layer 5, ends at layer 6: 2 vanished") adds nothing
    distinct = [n for n in distinct if not any(n != m and n in m for m in distinct)]
    if len(distinct) == 1:
        return distinct[0]
    if len(distinct) == 2:
        return "; ".join(distinct)
    return f"{len(notes)} lines miss replicates: {outcome_words(outcomes or {None: 1}, numbers=False, last=' or ')}"
