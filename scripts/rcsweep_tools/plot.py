"""Plotting helpers shared by every figure module (Mind the Gap, Lambda-skip, Dong et al.) and the
generic plot (facet.py).

- mean_band(da, dim="replicate", band="ci"): mean over replicates and a band around it: "ci" a
  **t-based** 95% confidence interval, mean ± t_{0.975, n-1} · sd / sqrt(n); "se" one standard
  error, mean ± sd / sqrt(n) (sd with ddof=1, n = number of non-NaN replicates; no band where
  n < 2); "range" min..max over replicates. NaN (tasks not done) are left out; n may differ from
  point to point (adaptive replicates). The standard error is load.mean_se's, the one
  load.replicate_stats reports. The band is clipped to the range the quantity can take
  (load.RANGES: a stable rank is >= 1, mu_rel lies in [0, 1]).
- line_band(ax, x, da, label=...): draws that mean as a line (label = `label`) and the band as
  a fill_between PolyCollection whose gid is "band:<label>" (tests read both back).
- axis_label(ds_or_da, name): "long name, symbol [units]" from the loader's attributes.
- hue_colors(values): one colour per value, distinguishable for many values and ordered for numbers.
- panel_grid(fig, n): a grid of n panels wrapped into rows, with a figure size of bounded aspect.
- legend_outside(ax, handles): a legend to the right of ax, where it hides no data.
- style(name): matplotlib settings of a style ("default", "paper") as a context manager.
- need(ds, figure, vars=..., coords=..., values=...): raise FigureDataError naming what is missing
  and the sweep file that makes the right store; rcsweep-plot turns it into exit code 2.
- select(ds, **where): the part of ds where each coordinate equals a value, whatever the
  dimension that coordinate lives on (an [axes] dimension or a [[zip]] member).
"""
from __future__ import annotations

import numpy as np

LEVEL = 0.95


class FigureDataError(Exception):
    """The store does not hold what a figure needs (another sweep, a missing output)."""


def t_quantile(n, level=LEVEL):
    """Two-sided Student-t quantile t_{(1+level)/2, n-1}; NaN where n < 2."""
    from scipy import stats

    n = np.asarray(n, dtype=float)
    q = np.full(n.shape, np.nan)
    ok = n >= 2
    q[ok] = stats.t.ppf(0.5 + level / 2, n[ok] - 1)
    return q


BANDS = ("ci", "se", "range", "none")


def valid_range(name):
    """(smallest, largest) value of the quantity `name` (None where unbounded; load.RANGES)."""
    from .load import RANGES

    return RANGES.get(name, (None, None))


def mean_band(da, dim="replicate", level=LEVEL, band="ci", valid=None):
    """(mean, lo, hi) over `dim` as xarray DataArrays; see the module docstring. `valid` =
    (smallest, largest) overrides the range looked up by the array's name; band "none" gives NaN
    lo, hi."""
    import warnings

    from .load import mean_se

    if band not in BANDS:
        raise ValueError(f"unknown band {band!r}; one of {', '.join(BANDS)}")
    mean, se, n = mean_se(da, dim)  # the standard error shared with load.replicate_stats
    with warnings.catch_warnings():  # fewer than 2 replicates (or none) done: NaN, by design
        warnings.simplefilter("ignore", RuntimeWarning)
        if band == "range":
            lo, hi = da.min(dim, skipna=True), da.max(dim, skipna=True)
        elif band == "none":
            lo = hi = mean * np.nan
        else:
            q = t_quantile(n.values, level) if band == "ci" else 1.0
            half = se * q
            lo, hi = mean - half, mean + half
    vmin, vmax = valid if valid is not None else valid_range(da.name)
    if vmin is not None or vmax is not None:
        lo, hi = lo.clip(min=vmin, max=vmax), hi.clip(min=vmin, max=vmax)
    return mean, lo, hi


def line_band(ax, x, da, label, dim="replicate", band="ci", valid=None, **kw):
    """Mean of `da` over `dim` against x (1-D, same length), with its band (mean_band's `band`;
    True = "ci", False = "none"); returns the Line2D."""
    band = {True: "ci", False: "none", None: "none"}.get(band, band)
    mean, lo, hi = mean_band(da, dim, band=band, valid=valid)
    x = np.asarray(x, dtype=float)
    (line,) = ax.plot(x, np.asarray(mean.values, dtype=float), label=label, **kw)
    lo, hi = np.asarray(lo.values, dtype=float), np.asarray(hi.values, dtype=float)
    ok = np.isfinite(lo) & np.isfinite(hi)
    if ok.any():
        ax.fill_between(x, lo, hi, where=ok, color=line.get_color(), alpha=0.2, linewidth=0,
                        gid=f"band:{label}")
    return line


def axis_label(obj, name=None, sep=", "):
    """Axis label from the loader's attributes: "long name, symbol [units]" (units "1" omitted;
    sep="\n" puts the symbol on a second line)."""
    da = obj[name] if name is not None else obj
    a = da.attrs
    text = a.get("long_name", da.name)
    if a.get("symbol") and a["symbol"] != text:
        text = f"{text}{sep}{a['symbol']}"
    units = a.get("units")
    if units and units != "1":
        text += f" [{units}]"
    return text


def need(ds, figure, vars=(), coords=(), attrs=None, values=None):
    """Check that ds has the data variables, coordinates, attributes (name -> allowed values)
    and coordinate values (name -> values that must all be present) that `figure` (a registry
    Figure) needs; raise FigureDataError otherwise."""
    problems = []
    for v in vars:
        if v not in ds.data_vars:
            problems.append(f"no variable {v!r}")
    for c in coords:
        if c not in ds.coords:
            problems.append(f"no swept or model parameter {c!r}")
    for k, allowed in (attrs or {}).items():
        if ds.attrs.get(k) not in allowed:
            problems.append(f"{k} is {ds.attrs.get(k)!r}, needs one of {sorted(allowed)}")
    for c, wanted in (values or {}).items():
        have = set(np.atleast_1d(ds[c].values).tolist()) if c in ds.coords else set()
        missing = [w for w in wanted if w not in have]
        if missing:
            problems.append(f"{c} lacks {missing}")
    if problems:
        raise FigureDataError(
            f"{ds.attrs.get('path', 'store')} (sweep {ds.attrs.get('sweep_name')!r}) cannot draw "
            f"{figure.name}: " + "; ".join(problems)
            + f". Make the store with jobs/examples/{figure.sweep}")


def select(ds, **where):
    """ds restricted to where every coordinate `c` equals `where[c]` (dimension coordinates and
    zip members alike; a scalar coordinate must equal it or FigureDataError). Dimensions that
    become length 1 are squeezed away only when they are dimension coordinates of `where`."""
    for c, v in where.items():
        if c not in ds.coords:
            raise FigureDataError(f"no coordinate {c!r}")
        co = ds[c]
        if co.ndim == 0:
            if co.values.item() != v:
                raise FigureDataError(f"{c} is {co.values.item()!r}, not {v!r}")
            continue
        if co.ndim != 1:
            raise FigureDataError(f"{c} varies over {co.dims}; select those dimensions first")
        dim = co.dims[0]
        hit = np.nonzero(np.asarray(co.values == v))[0]
        if len(hit) == 0:
            raise FigureDataError(f"{c} has no value {v!r}")
        ds = ds.isel({dim: hit[0] if len(hit) == 1 and dim == c else hit})
    return ds


def scalar(ds, name):
    """A parameter that must be the same everywhere in ds (e.g. sigma_A), as a Python number/str."""
    v = np.unique(np.asarray(ds[name].values).ravel())
    if len(v) != 1:
        raise FigureDataError(f"{name} takes several values {v.tolist()}; this figure needs one")
    return v[0].item() if hasattr(v[0], "item") else v[0]


def hue_colors(values):
    """One colour per value, in the order given. Numbers get ordered colours of a sequential
    colormap at evenly spaced positions in sorted order (viridis for up to 6 values; from 7 on
    turbo, whose hues stay apart where viridis's neighbours blur), so -10 < 0 < 1e4 read in order
    whatever their spacing; anything else gets the categorical tab10 (tab20 from 11 values on,
    repeating after 20)."""
    import matplotlib

    values = list(values)
    n = len(values)
    try:
        numbers = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        numbers = None
    if numbers is None or n == 0 or isinstance(values[0], str):
        cm = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
        return [cm(k % cm.N) for k in range(n)]
    cm, lo, hi = (matplotlib.colormaps["viridis"], 0.0, 0.85) if n <= 6 else (matplotlib.colormaps["turbo"], 0.05, 0.95)
    rank = np.empty(n)
    rank[np.argsort(numbers, kind="stable")] = np.arange(n)
    return [cm(lo + (hi - lo) * r / max(n - 1, 1)) for r in rank]


MAX_ASPECT = 3.0        # width / height of a figure of panels at most
MAX_WIDTH = 18.0        # inches; wider grids get narrower panels (down to MIN_PANEL)
MIN_PANEL = 2.0


def panel_grid(fig, n, ncols=None, nrows=None, panel=(3.6, 2.7), extra_width=0.0, **share):
    """n panels (row-major) in a grid of nrows x ncols: by default up to 3 in one row, from 4 on
    ceil(sqrt(n)) columns. Sizes the figure ncols x panel width (+ extra_width for a legend) by
    nrows x panel height, with panels narrowed to keep it within MAX_WIDTH and made taller to keep
    width / height <= MAX_ASPECT. `share`: sharex/sharey for the subplots. Returns the n axes."""
    if ncols is None:
        ncols = n if n <= 3 else int(np.ceil(np.sqrt(n)))
    ncols = max(1, min(ncols, n))
    nrows = nrows or int(np.ceil(n / ncols))
    w, h = panel
    w = max(MIN_PANEL, min(w, (MAX_WIDTH - extra_width) / ncols))
    width = ncols * w + extra_width
    height = max(nrows * h, width / MAX_ASPECT)
    fig.set_size_inches(width, height)
    axes = fig.subplots(nrows, ncols, squeeze=False, **share).ravel()
    for ax in axes[n:]:
        ax.remove()
    return list(axes[:n])


def legend_width(labels, fontsize=7.0):
    """Inches a legend of these labels takes beside the axes (a rough text width)."""
    longest = max((len(str(t)) for t in labels), default=0)
    return 0.7 + longest * fontsize * 0.55 / 72


def legend_outside(ax, handles=None, **kw):
    """A legend to the right of ax (constrained layout makes room for it), so it hides no data."""
    kw = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0, "fontsize": 7,
          "frameon": False, **kw}
    return ax.legend(handles=handles, **kw) if handles is not None else ax.legend(**kw)


STYLES = {
    "default": {},
    # a journal column: small type, thin lines, no grid; rcsweep-plot also drops its provenance title
    "paper": {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7,
              "ytick.labelsize": 7, "legend.fontsize": 7, "lines.linewidth": 1.2, "axes.linewidth": 0.6,
              "axes.grid": False, "savefig.dpi": 300},
}


def style(name="default"):
    """matplotlib settings of a style in STYLES, as a context manager (draw and save inside it)."""
    import matplotlib

    return matplotlib.rc_context(STYLES[name])
