"""Plotting helpers shared by every figure module (Mind the Gap, Lambda-skip, Dong et al.).

- mean_band(da, dim="replicate"): mean over replicates and a **t-based** 95% confidence band,
  mean ± t_{0.975, n-1} · sd / sqrt(n) (sd with ddof=1, n = number of non-NaN replicates; no band
  where n < 2). NaN (tasks not done) are left out.
- line_band(ax, x, da, label=...): draws that mean as a line (label = `label`) and the band as
  a fill_between PolyCollection whose gid is "band:<label>" (tests read both back).
- axis_label(ds_or_da, name): "long name, symbol [units]" from the loader's attributes.
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


def mean_band(da, dim="replicate", level=LEVEL):
    """(mean, lo, hi) over `dim` as xarray DataArrays; see the module docstring."""
    import warnings

    n = da.count(dim)
    with warnings.catch_warnings():  # fewer than 2 replicates (or none) done: NaN, by design
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = da.mean(dim, skipna=True)
        sd = da.std(dim, ddof=1, skipna=True)
    half = sd / np.sqrt(n) * t_quantile(n.values, level)
    return mean, mean - half, mean + half


def line_band(ax, x, da, label, dim="replicate", band=True, **kw):
    """Mean of `da` over `dim` against x (1-D, same length), with its 95% band; returns the Line2D."""
    mean, lo, hi = mean_band(da, dim)
    x = np.asarray(x, dtype=float)
    (line,) = ax.plot(x, np.asarray(mean.values, dtype=float), label=label, **kw)
    if band:
        lo, hi = np.asarray(lo.values, dtype=float), np.asarray(hi.values, dtype=float)
        ok = np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            ax.fill_between(x, lo, hi, where=ok, color=line.get_color(), alpha=0.2, linewidth=0,
                            gid=f"band:{label}")
    return line


def axis_label(obj, name=None):
    """Axis label from the loader's attributes: "long name, symbol [units]" (units "1" omitted)."""
    da = obj[name] if name is not None else obj
    a = da.attrs
    text = a.get("long_name", da.name)
    if a.get("symbol") and a["symbol"] != text:
        text = f"{text}, {a['symbol']}"
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
