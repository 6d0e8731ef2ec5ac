"""Plotting helpers shared by every figure module (Mind the Gap, Lambda-skip, Dong et al.) and the
generic plot (facet.py).

- mean_band(da, dim="replicate", band="sd"): mean over replicates and a band around it: "sd" (the
  default, the papers' convention) mean ± one sample standard deviation of the replicates; "ci" a
  **t-based** 95% confidence interval of the mean, mean ± t_{0.975, n-1} · sd / sqrt(n); "se" one
  standard error, mean ± sd / sqrt(n) (sd with ddof=1, n = number of non-NaN replicates; no band
  where n < 2); "range" min..max over replicates. NaN (tasks not done, layers after a divergence)
  are left out, so mean and band at each x rest on the replicates that have a value there; n may
  differ from point to point (adaptive replicates, divergence). The standard error is
  load.mean_se's, the one load.replicate_stats reports. The band is clipped to the range the
  quantity can take (load.RANGES: a stable rank is >= 1, mu_rel lies in [0, 1]).
- line_band(ax, x, da, label=...): draws that mean as a line (gid "mean:<label>") and the band as
  a fill_between PolyCollection whose gid is "band:<label>" (tests read both back). A series that
  ends early (no replicate has a value beyond some x) gets an "x" at its last finite point (gid
  "ends:<label>"); points missing replicates that diverged, vanished, failed or are pending get a
  hollow marker (gid "fewer:<label>"; replicates an adaptive rule did not need are no loss: no
  marker), x without a value between values an "x" on the x axis (gid "gap:<label>"); the line's
  legend label names the outcomes of the missing replicates from the tasks' status, each by its
  own name (load.outcome_words): "<label> (n 4→1 from layer 4, ends at layer 6: 4 vanished)",
  "(n = 12 of 32 at lambda = 0.5: 20 not needed)" (series_note, missing_outcomes).
- with_tasks(ds): ds with the tasks' status and message as coordinates (why a series ends).
- log_ticks(ax, values): a log or symlog axis ticked at the swept values when they are few, as
  plain numbers, with no minor labels; plain_log_labels(ax): plain numbers on a log y axis.
- legends_outside(fig, axes): the panels' legends outside the data: one shared legend right of the
  grid when every panel lists the same entries (its entries carry every panel's notes), else one
  below each panel (legend_below); legends_below(fig) moves them under the panels.
- fit_width(fig, "page" | inches): a drawn figure resized to a two-column page (7 in), a legend
  wider than 30 % of it moved below; fit_column(fig): one journal column (3.5 in), the panels one
  under another (restack), legends below; both break y labels to the panels' height and panel
  titles that would leave the figure into lines (wrap_titles).
- replicate_counts(*das): (least, most) replicates behind the plotted values (finite along
  replicate, per point); band_text(band, n) writes "(n = 32)" or "(n = 4–32)" from it, as the
  figures' captions do (ds.sizes["replicate"] is the number requested, not the number done).
- axis_label(ds_or_da, name): "long name, symbol [units]" from the loader's attributes.
- hue_colors(values): one colour per value, distinguishable for many values and ordered for numbers
  (a diverging map centred at 0 for values of both signs).
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


BANDS = ("sd", "ci", "se", "range", "none")
DEFAULT_BAND = "sd"   # the papers' convention; rcsweep-plot, the figures and rcsweep-summary use it
BAND_TEXT = {"sd": "± 1 sd of the replicates", "ci": "t-based 95% confidence interval of the mean",
             "se": "± 1 standard error of the mean", "range": "min–max of the replicates", "none": "no band"}


def replicate_counts(*arrays, dim="replicate"):
    """(least, most) number of replicates behind the plotted values of `arrays` (DataArrays with a
    `dim` dimension): the finite values along `dim` at each point, over the points with at least one
    (a point with none is not drawn). On a store with adaptive or lost replicates this is not the
    requested number (ds.sizes["replicate"]); (0, 0) when nothing has a value."""
    counts = [np.isfinite(np.asarray(da.transpose(dim, ...).values, dtype=float)).sum(axis=0).ravel()
              for da in arrays]
    counts = np.concatenate(counts) if counts else np.zeros(0, int)
    counts = counts[counts > 0]
    return (int(counts.min()), int(counts.max())) if counts.size else (0, 0)


def count_text(n):
    """"32" for n = 32 or (32, 32), "4–32" (an en dash) for (4, 32)."""
    if isinstance(n, (tuple, list)):
        lo, hi = n
        return f"{lo}" if lo == hi else f"{lo}–{hi}"
    return f"{n}"


def band_text(band=DEFAULT_BAND, n=None):
    """A caption's words for a band: "band ± 1 sd of the replicates (n = 3)"; n an int or the
    (least, most) of replicate_counts: "(n = 4–32)" when the count varies between points."""
    if band == "none":
        return "no band"
    return f"band {BAND_TEXT[band]}" + (f" (n = {count_text(n)})" if n is not None else "")


def valid_range(name):
    """(smallest, largest) value of the quantity `name` (None where unbounded; load.RANGES)."""
    from .load import RANGES

    return RANGES.get(name, (None, None))


def mean_band(da, dim="replicate", level=LEVEL, band=DEFAULT_BAND, valid=None):
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
        elif band == "sd":
            half = se * np.sqrt(n)  # the sample sd (ddof = 1), NaN where n < 2
            lo, hi = mean - half, mean + half
        else:
            q = t_quantile(n.values, level) if band == "ci" else 1.0
            half = se * q
            lo, hi = mean - half, mean + half
    vmin, vmax = valid if valid is not None else valid_range(da.name)
    if vmin is not None or vmax is not None:
        lo, hi = lo.clip(min=vmin, max=vmax), hi.clip(min=vmin, max=vmax)
    return mean, lo, hi


def _fmt(v):
    return f"{v:g}" if isinstance(v, (float, int, np.floating, np.integer)) else str(v)


def _x_name(da, dim, x):
    """The name of the x axis of `da` for a note: its non-replicate dimension, or the [[zip]]
    member along it whose values are x (T rather than zip1)."""
    others = [d for d in da.dims if d != dim]
    if len(others) != 1:
        return "x"
    xdim = others[0]
    if xdim.startswith("zip"):
        for c, co in da.coords.items():
            if co.dims == (xdim,) and c != xdim:
                try:
                    if np.allclose(np.sort(np.asarray(co.values, float)), np.sort(np.asarray(x, float))):
                        return c
                except (TypeError, ValueError):
                    continue
    return xdim


def missing_outcomes(da, dim="replicate"):
    """Per x of `da` (its dimension other than `dim`; a 1-D `da` is one x): a dict {outcome:
    count} of the replicates without a value there, each by its task's status in the store
    (load.STATUS names: "not_needed", "diverged", "vanished", "failed", "pending"), from the
    `status` coordinate (plot.with_tasks) and, for stores before the status vanished, a diverged
    task's message "X vanished"; a done task without a value (or no status known) counts as None
    (load.outcome_words: "without a value")."""
    import xarray as xr

    from .load import DIVERGED, STATUS

    others = [d for d in da.dims if d != dim]
    arr = da.transpose(*others, dim) if others else da.expand_dims("_x").transpose("_x", dim)
    values = np.asarray(arr.values, dtype=float).reshape(-1, arr.sizes[dim])
    names = np.full(values.shape, None, dtype=object)
    if "status" in da.coords:
        st = xr.broadcast(da["status"], da)[0]
        st = st.transpose(*others, dim) if others else st.expand_dims("_x").transpose("_x", dim)
        codes = np.asarray(st.values).reshape(values.shape)
        msg = None
        if "message" in da.coords:
            m = xr.broadcast(da["message"], da)[0]
            m = m.transpose(*others, dim) if others else m.expand_dims("_x").transpose("_x", dim)
            msg = np.asarray(m.values).reshape(values.shape)
        for idx in np.ndindex(values.shape):
            name = STATUS.get(int(codes[idx]), str(int(codes[idx])))
            if int(codes[idx]) == DIVERGED and msg is not None and "vanished" in str(msg[idx]):
                name = "vanished"
            names[idx] = None if name == "done" else name
    out = []
    for i in range(values.shape[0]):
        c = {}
        for j in np.nonzero(~np.isfinite(values[i]))[0]:
            c[names[i, j]] = c.get(names[i, j], 0) + 1
        out.append(c)
    return out


def _merged(counts):
    """One dict of outcome counts for several x: the counts when every x has the same (the same
    replicates, e.g. layers), else their sum (different tasks, e.g. swept points)."""
    if all(c == counts[0] for c in counts):
        return dict(counts[0])
    total = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return total


def _lost(c):
    """The counts of `c` but not needed: the replicates an adaptive rule did not need are no loss."""
    return {k: v for k, v in c.items() if k != "not_needed" and v}


def series_note(x, mean, n, xname="layer", outcomes=None, requested=None):
    """What a series whose mean at x rests on n replicates leaves out, as (note, last, fewer, gaps):
    `last` the index of its last finite point when it ends before the last x (else None), `fewer`
    the indices of finite points missing replicates for another reason than an adaptive rule not
    needing them (the hollow markers), `gaps` the x without a value before its last finite point,
    and `note` the words for its legend ("" when nothing is missing). `outcomes` (per x, the
    counts of missing_outcomes) names why, each outcome by its own name (load.outcome_words):
    "n 4→1 from layer 4, ends at layer 6: 4 diverged", "n = 12 of 32 at lambda = 0.5: 20 not
    needed", "n = 2 of 3 at T = 16: 1 failed", "no value at lambda = 0: 3 vanished", "no value: 2
    pending"; without `outcomes` the missing replicates (below `requested`, default the series'
    most) are "without a value"."""
    from .load import outcome_words

    x, mean, n = np.asarray(x), np.asarray(mean, dtype=float), np.asarray(n)
    finite = np.isfinite(mean)
    none = np.array([], int)
    if len(x) == 0:
        return "", None, none, none
    req = int(requested) if requested is not None else int(n.max()) if n.size else 0
    if outcomes is None:
        outcomes = [{None: int(req - k)} if req > k else {} for k in n]
    outcomes = [dict(c) for c in outcomes]
    if not finite.any():
        return f"no value: {outcome_words(_merged(outcomes))}", None, none, none
    where = "layer " if xname == "layer" else f"{xname} = "

    def at(js):
        js = list(js)
        if len(js) <= 3:
            return where + ", ".join(_fmt(x[j]) for j in js)
        return f"{len(js)} {'layers' if xname == 'layer' else xname + ' values'}"

    idx = np.nonzero(finite)[0]
    last = int(idx[-1]) if idx[-1] < len(x) - 1 else None
    gaps = np.nonzero(~finite[:idx[-1]])[0]
    fewer = np.array([i for i in idx if _lost(outcomes[i])], int)
    parts = []
    # replicates lost one after another up to the end (a stack diverging layer by layer)
    # (layers only: the same replicates, each lost outcome only growing; along a swept x each point
    # has tasks of its own, named point by point)
    fall = None
    if xname == "layer" and fewer.size > 1 and fewer.tolist() == list(range(int(fewer[0]), int(idx[-1]) + 1)):
        k0 = int(fewer[0])
        run = n[k0 - 1 if k0 > 0 and finite[k0 - 1] else k0:idx[-1] + 1]
        grows = all(_lost(outcomes[j + 1]).get(k, 0) >= v for j in fewer[:-1] for k, v in _lost(outcomes[j]).items())
        if (np.diff(run) <= 0).all() and run[0] > run[-1] and grows:
            fall = k0
    tail = last is not None and fewer.tolist() == [last]  # lost only at the end: 'ends at' says it
    if tail:
        fall = last
    grouped = {}  # what a finite point misses -> its points (fall's points: only their not needed)
    for i in idx:
        c = outcomes[i]
        if fall is not None and i >= fall:
            c = {"not_needed": c["not_needed"]} if c.get("not_needed") else {}
        if sum(c.values()):
            grouped.setdefault((int(n[i]) if fall is None or i < fall else req - c["not_needed"],
                                tuple(sorted(c.items(), key=str))), []).append(i)
    for (k, c), js in grouped.items():
        spot = "" if len(js) == len(idx) else f" at {at(js)}"
        parts.append(f"n = {k} of {req}{spot}: {outcome_words(dict(c))}")
    if fall is not None and not tail:
        before = int(n[fall - 1]) if fall > 0 and finite[fall - 1] else req
        text = f"n {before}→{int(n[idx[-1]])} from {where}{_fmt(x[fall])}"
        if last is None:
            text += f": {outcome_words(_lost(outcomes[idx[-1]]))}"
        parts.append(text)
    if gaps.size:
        parts.append(f"no value at {at(gaps)}: {outcome_words(_merged([outcomes[j] for j in gaps]))}")
    if last is not None:
        parts.append(f"ends at {where}{_fmt(x[last])}: {outcome_words(_merged(outcomes[last + 1:]))}")
    return ", ".join(parts), last, fewer, gaps


def line_band(ax, x, da, label, dim="replicate", band=DEFAULT_BAND, valid=None, xname=None, **kw):
    """Mean of `da` over `dim` against x (1-D, same length), with its band (mean_band's `band`;
    True = the default band, False = "none"); returns the Line2D. A series that ends before the
    last x gets an "x" at its last finite point, points missing replicates for another reason
    than an adaptive rule not needing them a hollow marker, and its label the series_note, which
    names the outcomes of the missing replicates from the tasks' status (`xname` names x in it:
    default the dimension of `da`, or the [[zip]] member along it); the note is also the line's
    attribute `series_note`, and each marker's `outcomes` the counts it stands for."""
    band = {True: DEFAULT_BAND, False: "none", None: "none"}.get(band, band)
    mean, lo, hi = mean_band(da, dim, band=band, valid=valid)
    n = np.asarray(da.count(dim).values)
    x = np.asarray(x, dtype=float)
    y = np.asarray(mean.values, dtype=float)
    missing = missing_outcomes(da, dim)
    requested = da.sizes[dim] if dim in da.dims else None
    note, last, fewer, gaps = series_note(x, y, n, xname or _x_name(da, dim, x), missing, requested)
    (line,) = ax.plot(x, y, label=f"{label} ({note})" if note else label, gid=f"mean:{label}", **kw)
    line.series_note = note
    line.outcomes = _merged(missing) if note else {}  # what the note names (names only are meant)
    colour = line.get_color()
    lo, hi = np.asarray(lo.values, dtype=float), np.asarray(hi.values, dtype=float)
    ok = np.isfinite(lo) & np.isfinite(hi)
    if ok.any():
        ax.fill_between(x, lo, hi, where=ok, color=colour, alpha=0.2, linewidth=0,
                        gid=f"band:{label}")
    ms = kw.get("ms", kw.get("markersize", 3))
    if fewer.size:
        (m,) = ax.plot(x[fewer], y[fewer], ls="none", marker="o", ms=max(ms, 3) + 1, mfc="white", mec=colour,
                       mew=0.8, zorder=line.get_zorder() + 0.1, gid=f"fewer:{label}", label="_fewer")
        m.outcomes = _merged([_lost(missing[j]) for j in fewer])
    if last is not None:
        (m,) = ax.plot([x[last]], [y[last]], ls="none", marker="x", ms=max(ms, 3) + 4, mew=1.6, color=colour,
                       zorder=line.get_zorder() + 0.2, gid=f"ends:{label}", label="_ends")
        m.outcomes = _merged(missing[last + 1:])
    if gaps.size:  # x without a value between values: a mark on the bottom edge, at that x
        (m,) = ax.plot(x[gaps], np.zeros(gaps.size), ls="none", marker="x", ms=max(ms, 3) + 2, mew=1.2, color=colour,
                       transform=ax.get_xaxis_transform(), clip_on=False, gid=f"gap:{label}", label="_gap")
        m.outcomes = _merged([missing[j] for j in gaps])
    return line


def with_tasks(ds):
    """ds with the tasks' `status` and `message` as coordinates, so every metric selected from it
    carries them (line_band names why a series ends from them)."""
    names = [v for v in ("status", "message") if v in ds.data_vars]
    return ds.set_coords(names) if names else ds


def marker_outcomes(axes, kind):
    """{outcome: count} the markers of `kind` ("fewer", "ends", "gap") drawn on `axes` stand for
    (line_band's `outcomes` of each), {} when none was drawn."""
    found = {}
    for ax in axes:
        for ln in ax.get_lines():
            if (ln.get_gid() or "").split(":")[0] == kind:
                for k, v in getattr(ln, "outcomes", {None: 1}).items():
                    found[k] = found.get(k, 0) + v
    return found


def marker_handles(axes):
    """Legend entries explaining the markers drawn on `axes` (none when none was), naming the
    outcomes the drawn markers stand for (load.outcome_words), never others."""
    from matplotlib.lines import Line2D

    from .load import outcome_words

    found = {kind: c for kind in ("fewer", "ends", "gap") if (c := marker_outcomes(axes, kind))}
    out = []
    if "fewer" in found:
        out.append(Line2D([], [], ls="none", marker="o", ms=4, mfc="white", mec="0.3",
                          label=f"fewer replicates than requested (the others "
                                f"{outcome_words(found['fewer'], numbers=False, last=' or ')})"))
    if "ends" in found:
        out.append(Line2D([], [], ls="none", marker="x", ms=7, mew=1.6, color="0.3",
                          label=f"last finite value (after it no replicate has one: "
                                f"{outcome_words(found['ends'], numbers=False, last=' or ')})"))
    if "gap" in found:
        out.append(Line2D([], [], ls="none", marker="x", ms=5, mew=1.2, color="0.3",
                          label=f"on the x axis: no value there "
                                f"({outcome_words(found['gap'], numbers=False, last=' or ')})"))
    return out


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
    """One colour per value, in the order given. Numbers of one sign get ordered colours of a
    sequential colormap at evenly spaced positions in sorted order (viridis for up to 6 values; from
    7 on turbo, whose hues stay apart where viridis's neighbours blur), so 0 < 1 < 1e4 read in order
    whatever their spacing. Numbers of both signs (lambda = -0.5, 0, 0.5) get a diverging map
    centred at 0 (RdBu_r: negatives blue, positives red, each side by rank, darker further from 0;
    0 itself dark grey, as the map's white centre would vanish on the page). Anything else gets the
    categorical tab10 (tab20 from 11 values on, repeating after 20)."""
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
    if (numbers < 0).any() and (numbers > 0).any():
        return diverging_colors(numbers)
    cm, lo, hi = (matplotlib.colormaps["viridis"], 0.0, 0.85) if n <= 6 else (matplotlib.colormaps["turbo"], 0.05, 0.95)
    rank = np.empty(n)
    rank[np.argsort(numbers, kind="stable")] = np.arange(n)
    return [cm(lo + (hi - lo) * r / max(n - 1, 1)) for r in rank]


def diverging_colors(numbers):
    """Colours of a signed axis (hue_colors): RdBu_r at 0.08 (the most negative, dark blue) to 0.35
    (light blue) for the negatives by rank, 0.65 (light red) to 0.92 (the largest, dark red) for the
    positives, dark grey at 0; a lone negative / positive gets 0.12 / 0.88."""
    import matplotlib

    cm = matplotlib.colormaps["RdBu_r"]
    numbers = np.asarray(numbers, dtype=float)
    out = []
    neg = np.unique(numbers[numbers < 0])   # ascending: the most negative first
    pos = np.unique(numbers[numbers > 0])
    for v in numbers:
        if v < 0:
            k = int(np.searchsorted(neg, v))
            out.append(cm(0.08 + 0.27 * k / (len(neg) - 1) if len(neg) > 1 else 0.12))
        elif v > 0:
            k = int(np.searchsorted(pos, v))
            out.append(cm(0.92 - 0.27 * (len(pos) - 1 - k) / (len(pos) - 1) if len(pos) > 1 else 0.88))
        else:
            out.append((0.25, 0.25, 0.25, 1.0))
    return out


def log_ticks(ax, values, axis="x", most=8):
    """On a log or symlog axis: ticks at the swept `values` when there are at most `most` of them,
    labelled as plain numbers ("16", "0.5"); otherwise matplotlib's decades. Minor ticks are never
    labelled (their "3×10¹4×10¹" labels overlap)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    a = ax.xaxis if axis == "x" else ax.yaxis
    v = np.unique(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    if 0 < len(v) <= most:
        a.set_major_locator(FixedLocator(v))
        a.set_major_formatter(FuncFormatter(lambda t, _: _fmt(float(t))))
    elif len(v) and a.get_scale() == "symlog":  # many values over decades of both signs: 0 and every
        big = np.abs(v[v != 0])                 # k-th decade, at most `most` ticks
        lo, hi = int(np.floor(np.log10(big.min()))), int(np.ceil(np.log10(big.max())))
        decades = np.arange(lo, hi + 1)
        sides = int((v < 0).any()) + int((v > 0).any())
        step = max(1, int(np.ceil(len(decades) * sides / max(most - 1, 1))))
        decades = decades[(decades - decades[-1]) % step == 0]
        ticks = ([-(10.0 ** k) for k in decades[::-1]] if (v < 0).any() else []) + [0.0] + \
                ([10.0 ** k for k in decades] if (v > 0).any() else [])
        a.set_major_locator(FixedLocator(ticks))
    a.set_minor_formatter(NullFormatter())


def plain_log_labels(ax, axis="y"):
    """Plain-number labels ("0.1", "1", "10", "1e+04") on a log axis. Minor ticks are labelled
    only where the decades alone would leave the axis nearly bare: every one on an axis spanning
    less than a decade, those at 2 and 5 on one spanning less than two, none otherwise."""
    from matplotlib.ticker import FuncFormatter

    a = ax.xaxis if axis == "x" else ax.yaxis

    def minor(t, _):
        lo, hi = sorted(a.get_view_interval())
        if not (lo > 0 and hi > lo and t > 0):
            return ""
        span = np.log10(hi / lo)
        mantissa = round(t / 10 ** np.floor(np.log10(t) + 1e-9), 6)
        return _fmt(float(f"{t:.3g}")) if span < 1 or (span < 2 and mantissa in (2.0, 5.0)) else ""

    a.set_major_formatter(FuncFormatter(lambda t, _: _fmt(float(t))))
    a.set_minor_formatter(FuncFormatter(minor))


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
    longest = max((len(line) for t in labels for line in str(t).split("\n")), default=0)
    return 0.7 + longest * fontsize * 0.55 / 72


def legend_outside(ax, handles=None, **kw):
    """A legend to the right of ax (constrained layout makes room for it), so it hides no data."""
    kw = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0, "fontsize": 7,
          "frameon": False, **kw}
    return ax.legend(handles=handles, **kw) if handles is not None else ax.legend(**kw)


def _entries(ax):
    """[(handle, base label, note)] of a panel's labelled artists: a mean line (gid "mean:<label>")
    is listed by its label without its series_note, which comes apart."""
    out = []
    for h, text in zip(*ax.get_legend_handles_labels()):
        gid = h.get_gid() if hasattr(h, "get_gid") else None
        if gid and gid.startswith("mean:"):
            out.append((h, gid[5:], getattr(h, "series_note", "")))
        else:
            out.append((h, text, ""))
    return out


def merge_notes(notes):
    """One note for a legend entry shared by panels: the distinct non-empty notes joined by "; "."""
    return "; ".join(dict.fromkeys(n for n in notes if n))


def legends_outside(fig, axes=None, extra=()):
    """Every panel's legend (its labelled artists) outside the data: one legend right of the
    top-right panel when all panels list the same entries (a mean line's entry then carries the
    notes of every panel's series, merge_notes), else one below each panel; `extra` handles (and
    the divergence markers' explanation, marker_handles) go with the last."""
    axes = list(axes if axes is not None else fig.axes)
    found = [_entries(ax) for ax in axes]
    extra = list(extra) + marker_handles(axes)
    if not any(found) and not extra:
        return []
    if all([b for _, b, _ in f] == [b for _, b, _ in found[0]] for f in found):
        top = max(axes, key=lambda ax: _grid_place(ax))
        handles = [h for h, _, _ in found[0]] + extra
        labels = []
        for k, (_, base, _) in enumerate(found[0]):
            note = merge_notes(f[k][2] for f in found)
            labels.append(f"{base} ({note})" if note else base)
        labels += [h.get_label() for h in extra]
        leg = legend_outside(top, handles, labels=labels)
        leg.shared = True  # one legend for every panel: legends_below puts it under all of them
        return [leg]
    made = [legend_below(ax, [h for h, _, _ in f] + (extra if k == len(axes) - 1 else []))
            for k, (ax, f) in enumerate(zip(axes, found)) if f or k == len(axes) - 1]
    w, h = fig.get_size_inches()  # the panels keep their height: the figure grows by the tallest legend
    fig.set_size_inches(w, h + max(legend_height(leg) for leg in made))
    return made


def _spec(ax):
    """The SubplotSpec of a panel; None for an axes outside a grid (a colorbar's)."""
    get = getattr(ax, "get_subplotspec", None)
    return get() if get is not None else None


def _grid_place(ax):
    """(-row, column) of a subplot: the largest is the top-right panel."""
    spec = _spec(ax)
    return (-spec.rowspan.start, spec.colspan.stop) if spec is not None else (0, 0)


def _points(size):
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=size).get_size_in_points()


def below_offset():
    """Points from an axes' bottom edge to below its x tick labels and x label (rcParams)."""
    import matplotlib as mpl

    rc = mpl.rcParams
    return (max(rc["xtick.major.size"], 0) + rc["xtick.major.pad"] + _points(rc["xtick.labelsize"])
            + rc["axes.labelpad"] + 1.3 * _points(rc["axes.labelsize"]) + 4)


def legend_height(leg, points=7.0, pad=0.0):
    """Inches a legend of `points` type takes below its axes (its rows of text, the offset, `pad`)."""
    ncol = max(getattr(leg, "_ncols", getattr(leg, "_ncol", 1)), 1)
    lines = sum(t.get_text().count("\n") + 1 for t in leg.get_texts())
    return (np.ceil(lines / ncol) * points * 1.4 + below_offset() + pad + 6) / 72


def legend_below(ax, handles=None, ncol=1, pad=0.0, centre="axes", **kw):
    """A legend under ax, below its tick labels and axis label (constrained layout makes room);
    `pad` points more (tall tick labels, e.g. rotated ones); centred under the axes or, with
    centre="figure", on the figure's middle (a panel as wide as the figure)."""
    from matplotlib.transforms import blended_transform_factory, offset_copy

    under = offset_copy(ax.transAxes, fig=ax.figure, y=-below_offset() - pad, units="points")
    if centre == "figure":
        under = blended_transform_factory(ax.figure.transFigure, under)
    kw = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "borderaxespad": 0.0, "fontsize": 7,
          "frameon": False, "ncol": ncol, "bbox_transform": under, **kw}
    return ax.legend(handles=handles, **kw) if handles is not None else ax.legend(**kw)


def _fit_columns(fig, make, n, room=None):
    """The legend make(ncol) with the most columns (up to 6) whose width fits `room` inches (default
    the figure's width)."""
    room = 0.96 * (fig.get_figwidth() if room is None else room) * fig.dpi
    renderer = fig._get_renderer() if hasattr(fig, "_get_renderer") else None
    for ncol in range(min(n, 6), 0, -1):
        made = make(ncol)
        if ncol == 1 or renderer is None or made.get_window_extent(renderer).width <= room:
            return made
        made.remove()


def wrap_label(text, chars):
    """A label broken at spaces into lines of about `chars` characters (a line with mathtext is
    left whole: a break inside $...$ would break the formula)."""
    import textwrap

    return "\n".join(line if "$" in line or len(line) <= chars else
                     textwrap.fill(line, max(chars, 12), break_long_words=False) for line in text.split("\n"))


def wrap_ylabels(fig):
    """Break y labels longer than their panel's height (a short panel of a page-wide figure)."""
    import matplotlib as mpl

    rows = max([_spec(ax).get_gridspec().nrows for ax in fig.axes if _spec(ax) is not None] or [1])
    tall = max(fig.get_figheight() / rows - 0.8, 0.5)  # inches of a panel's height, less title and x labels
    size = _points(mpl.rcParams["axes.labelsize"])
    for ax in fig.axes:
        text = ax.get_ylabel()
        if text and _spec(ax) is not None:
            ax.set_ylabel(wrap_label(text, int(tall * 72 / (0.55 * size))))


def legends_below(fig, axes=None):
    """Move the legend of every axes (of `axes`) below it, in as many columns as fit the figure's
    width (for a narrow page): a legend of one panel under that panel, one shared by the panels
    (`legend.shared`, legends_outside) under the whole grid or the lowest panel of a single column,
    the figure grown to hold it. Returns the inches added."""
    added = 0.0
    for ax in list(fig.axes if axes is None else axes):
        leg = ax.get_legend()
        if leg is None:
            continue
        handles = leg.legend_handles if hasattr(leg, "legend_handles") else leg.legendHandles
        labels = [t.get_text() for t in leg.get_texts()]
        title = leg.get_title().get_text()
        shared = getattr(leg, "shared", False)
        leg.remove()
        spec = _spec(ax)
        share = fig.get_figwidth() / (spec.get_gridspec().ncols if spec is not None else 1)
        chars = int(0.9 * share * 72 / (6 * 0.5)) - 8  # characters of 6 pt type a line holds, less the handle
        kw = dict(labels=[wrap_label(t, chars) for t in labels], fontsize=6, title=title or None, title_fontsize=6,
                  columnspacing=1.0, handlelength=1.6)
        if shared and spec is not None and spec.get_gridspec().ncols > 1:
            # under the whole grid: a figure legend in a strip the layout leaves free at the bottom
            made = _fit_columns(fig, lambda ncol: fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0),
                                                               ncol=ncol, frameon=False, **kw), len(labels))
            renderer = fig._get_renderer() if hasattr(fig, "_get_renderer") else None
            tall = (made.get_window_extent(renderer).height / fig.dpi if renderer is not None
                    else legend_height(made, 6)) + 0.05
            w, h = fig.get_size_inches()
            fig.set_size_inches(w, h + tall)
            engine = fig.get_layout_engine()
            if engine is not None and hasattr(engine, "set"):
                engine.set(rect=(0, tall / (h + tall), 1, 1 - tall / (h + tall)))
            added += tall
            continue
        ncols = spec.get_gridspec().ncols if spec is not None else 1
        if shared and spec is not None:  # a legend of every panel: under the lowest of its column
            column = [a for a in fig.axes if _spec(a) is not None
                      and _spec(a).get_gridspec() is spec.get_gridspec()
                      and _spec(a).colspan.start == spec.colspan.start]
            ax = max(column, key=lambda a: _spec(a).rowspan.start)
        # one panel a row: centred on the page; else under its panel, as wide as its share of the page
        centre, room = ("figure", None) if ncols == 1 else ("axes", fig.get_figwidth() / ncols)
        made = _fit_columns(fig, lambda ncol: legend_below(ax, handles, ncol=ncol, centre=centre, **kw), len(labels),
                            room)
        tall = legend_height(made, 6)
        w, h = fig.get_size_inches()
        fig.set_size_inches(w, h + tall)
        added += tall
    return added


def wrap_titles(fig, pad=2.0):
    """Break the panels' titles that would leave the figure (a long title at a journal column's
    width) into lines that fit: a title is centred on its panel, so it has twice the distance from
    the panel's centre to the nearer side of the figure, less `pad` points a side (facet.fit_lines
    breaks at ", " first, then at spaces)."""
    from .facet import fit_lines

    if not hasattr(fig, "_get_renderer") or not any(ax.get_title() for ax in fig.axes):
        return fig
    fig.draw_without_rendering()  # the panels where the layout puts them
    renderer = fig._get_renderer()
    box = fig.bbox
    for ax in fig.axes:
        title = ax.title
        text = title.get_text()
        if not text or not title.get_visible():
            continue
        centre = ax.get_window_extent(renderer).x0 + ax.get_window_extent(renderer).width / 2
        room = 2 * (min(centre - box.x0, box.x1 - centre) - pad * fig.dpi / 72)
        if title.get_window_extent(renderer).width <= room:
            continue

        def measure(line, title=title):
            title.set_text(line)
            return title.get_window_extent(renderer).width

        title.set_text(fit_lines(text, room, measure))  # its own line breaks kept
    return fig


WIDTHS = {"column": 3.5, "page": 7.0}   # inches: a journal's column and two-column page
MIN_ROW = 1.5                          # inches: the least height of a row of panels


def fit_width(fig, width):
    """Resize a drawn figure to `width` ("column" 3.5 in, "page" 7 in, or inches), keeping its
    height in proportion but at least MIN_ROW per row of panels."""
    width = float(WIDTHS.get(width, width))
    w, h = fig.get_size_inches()
    rows = 1
    for ax in fig.axes:
        spec = _spec(ax)
        if spec is not None:
            rows = max(rows, spec.get_gridspec().nrows)
    fig.set_size_inches(width, max(h * width / w, MIN_ROW * rows))
    # a legend right of the panels that would take more than WIDE_LEGEND of the width goes below
    renderer = fig._get_renderer() if hasattr(fig, "_get_renderer") else None
    if renderer is not None:
        wide = [ax for ax in fig.axes if ax.get_legend() is not None and _right_of(ax)
                and ax.get_legend().get_window_extent(renderer).width > WIDE_LEGEND * width * fig.dpi]
        if wide:
            legends_below(fig, wide)
    wrap_ylabels(fig)
    wrap_titles(fig)
    return fig


WIDE_LEGEND = 0.3


def _right_of(ax):
    """Whether the legend of ax was placed right of it (legend_outside)."""
    anchor = ax.get_legend().get_bbox_to_anchor()
    box = ax.get_window_extent()
    return anchor.x0 > box.x1 - 1


def restack(fig):
    """Put the panels of a grid one under another (a journal column holds one panel a row),
    in reading order; returns the number of rows."""
    from matplotlib.gridspec import GridSpec

    panels = [ax for ax in fig.axes if _spec(ax) is not None]
    grids = {id(_spec(ax).get_gridspec()) for ax in panels}
    if len(panels) < 2 or len(grids) != 1:
        return 1
    panels.sort(key=lambda ax: (_spec(ax).rowspan.start, _spec(ax).colspan.start))
    xlabel = next((ax.get_xlabel() for ax in reversed(panels) if ax.get_xlabel()), "")
    shared = all(ax.get_xlabel() in ("", xlabel) for ax in panels)
    grid = GridSpec(len(panels), 1, figure=fig)
    for k, ax in enumerate(panels):
        ax.set_subplotspec(grid[k, 0])
        # panels of shared axes hid their inner tick labels: one under another each shows its own
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.yaxis.set_tick_params(labelleft=True)
        if shared:  # one x label, under the lowest panel
            ax.set_xlabel(xlabel if k == len(panels) - 1 else "")
    return len(panels)


def fit_column(fig, width="column"):
    """A figure for one journal column: panels one under another, each about 0.62 of the width
    tall, legends below the panels (legends_below), the height grown to hold them."""
    width = float(WIDTHS.get(width, width))
    rows = restack(fig)
    fig.set_size_inches(width, rows * 0.62 * width)  # the legends' columns are fitted to this width
    legends_below(fig)  # (grows the height by theirs)
    wrap_ylabels(fig)
    wrap_titles(fig)
    return fig


STYLES = {
    "default": {},
    # a journal page or column (rcsweep-plot --width): small type, thin lines, no grid; rcsweep-plot also
    # drops its provenance title and the caption line
    "paper": {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7,
              "ytick.labelsize": 7, "legend.fontsize": 7, "lines.linewidth": 1.2, "axes.linewidth": 0.6,
              "axes.grid": False, "savefig.dpi": 300},
}


def style(name="default"):
    """matplotlib settings of a style in STYLES, as a context manager (draw and save inside it)."""
    import matplotlib

    return matplotlib.rc_context(STYLES[name])
