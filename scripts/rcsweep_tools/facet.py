"""The generic plot of `rcsweep-plot STORE --y METRIC`: any per-task quantity of a store against
layer or a swept axis, the mean over replicates with a band, one line per value of a hue axis (and
of a dash axis), one panel per value of a column axis (wrapped into rows) or per (row, column).

    draw(ds, fig, y, x=None, hue=None, col=None, row=None, dash=None, sel=None, layer=None,
         logx=False, logy=False, band="sd", wrap=None, panel=(3.6, 2.7), grid=True, width=None) -> fig

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
  for numbers of both signs); `grid` draws grid lines.
- Layout (FacetGrid), as seaborn's FacetGrid(margin_titles=True, col_wrap=...): with `row`, one
  row per row value and one column per col value, each column's label once above the top row and
  each row's once on the right margin; with `col` alone the panels wrap into rows (`wrap` a row;
  by default up to 3, from 4 on ceil(sqrt(n)), fewer when a fixed width cannot hold them), each
  titled with its value; `wrap` with `row` is refused. x tick labels and the x label on the
  lowest panel of each column, y tick labels on the first column, one y label for several rows.
  Constrained layout places everything; then, measured on the laid-out figure until nothing
  moves, titles, row labels and axis labels are broken into lines that fit their panel, crowded
  tick labels are thinned (fewer ticks at round values, else every k-th labelled), and the
  height is set for panels of the `panel` aspect (FacetGrid.settle).
- Size: `width` None sizes the figure from `panel` inches a panel (panels narrowed within
  MAX_WIDTH, width / height <= MAX_ASPECT) with the legend right of the top-right panel, past its
  row label; `width` "page" (7 in), "column" (3.5 in) or inches fixes the width: panels at least
  MIN_PANEL_WIDTH wide, the figure at most MAX_HEIGHT tall (panels flattened down to FLAT_PANEL
  first), the legend below the panels at a column's width, when right of them it would take more
  than WIDE_LEGEND of the width or leave the panels too narrow. A grid that cannot fit raises
  FigureDataError saying why and naming what helps (--width page when a page holds it, --row and
  --col swapped, a --wrap that fits, --col for a --row alone, the axis as --hue or --dash, no
  --width).
Bad choices raise plot.FigureDataError naming the choices (rcsweep-plot: exit code 2).
"""
from __future__ import annotations

import numpy as np

from .load import outcome_words
from .plot import (DEFAULT_BAND, FigureDataError, axis_label, hue_colors, line_band, log_ticks, marker_handles,
                   plain_log_labels, select, with_tasks)

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
         logx=False, logy=False, band=DEFAULT_BAND, wrap=None, panel=(3.6, 2.7), grid=True, width=None):
    """Draw the generic plot into `fig` (see the module docstring); returns fig, laid out
    (fig.facet_grid.settle() lays it out again after a caller adds a title)."""
    grid_lines = grid
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
    has_row = "row" in roles
    if has_row and wrap:
        raise FigureDataError(f"--wrap {wrap} wraps the panels of --col alone; with --row {roles['row'][0]} each row "
                              f"holds every --col value: leave out --wrap (or --row)")
    if wrap is not None and wrap < 1:
        raise FigureDataError(f"--wrap {wrap}: give the number of panels a row, 1 or more")
    names = {r: roles[r][0] for r in ("row", "col") if r in roles}
    grid = FacetGrid(fig, len(cols), len(rows) if has_row else None, names, wrap=wrap, width=width, panel=panel)
    axes = grid.axes

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
        grid.labels.append((rlabel, clabel))
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
        if logx:
            nonzero = np.abs(xpos[xpos != 0])
            if (xpos <= 0).any():  # layer 0, negative lambda: linear around 0
                ax.set_xscale("symlog", linthresh=float(nonzero.min()) if nonzero.size else 1.0)
            else:
                ax.set_xscale("log")
            log_ticks(ax, xpos)  # at the swept values when few, plain numbers, no minor labels
        elif xname in ("layer", "L"):  # whole layers and depths: integer ticks, as many as fit (FacetGrid thins them)
            ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", integer=True))
        if logy:
            ax.set_yscale("log")
            plain_log_labels(ax, "y")
        if not numeric:  # names (mixer = softmax, ...) or zip entries at 0, 1, ...
            ticks = _value_labels(da, xname, xdim) if xdim.startswith("zip") else [_fmt(v) for v in xco]
            ticks = [_wrap(ticks[k], grid.panel_inches() / len(xco), 8) for k in order]
            ax.set_xticks(xpos, ticks, fontsize="small", rotation=30 if len(xco) > 4 else 0)
        if grid_lines:
            ax.grid(True, which="major", alpha=0.3)
    xlabel = axis_label(ds[xname]) if xname in ds.coords else xname
    ylabel = axis_label(ds[y], sep="\n") + at
    if notes and hue_name is not None:  # the legend says which hue values end early (or lose replicates) and why
        for h, k in zip(legend, [k for k, t in hues if t]):
            if k in notes:
                h.set_label(_wrap(f"{hue_text[k]} ({_join_notes(notes[k], whys[k])})", NOTE_INCHES, 7))
        legend += marker_handles(axes)
    elif hue_name is None and notes:  # one series per panel: an entry of its own says where it ends
        legend = [Line2D([], [], color=colours[0], marker="o", ms=3,
                         label=_wrap(f"{y} ({_join_notes(notes[None], whys[None])})", NOTE_INCHES, 7))]
        legend += marker_handles(axes)
    grid.finish(xlabel, ylabel, legend, legend_title=axis_label(ds[hue_name]) if by_value else None)
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


# ------------------------------------------------------------------------------------------------
# The grid of panels and its layout

MIN_PANEL_WIDTH = 0.7  # inches: a panel at a fixed width is at least this wide (about 6 ems of 8 pt type)
WRAP_PANEL_WIDTH = 1.2  # inches: a wrapped grid at a fixed width takes as many panels a row as keep this
MAX_HEIGHT = 9.0      # inches: the tallest figure a page holds (its text height)
WIDE_LEGEND = 0.3     # a legend wider than this share of a fixed width goes below the panels
FLAT_PANEL = 0.3      # height / width of a panel at least, when the style's aspect would pass MAX_HEIGHT
MAX_ASPECT = 3.0      # free size: width / height at most
MAX_WIDTH = 18.0      # free size: inches; wider grids get narrower panels, down to MIN_PANEL inches
MIN_PANEL = 2.0


def default_columns(n):
    """Panels a row of a wrapped grid of n: up to 3 in one row, from 4 on ceil(sqrt(n))."""
    return n if n <= 3 else int(np.ceil(np.sqrt(n)))


def fit_lines(text, room, measure):
    """`text` broken into lines no wider than `room` (measure(line) -> the same units): at ", "
    first, then at spaces; a word wider than `room` stays whole, and so does a part with
    mathtext (a break inside $...$ would break the formula)."""
    out = []
    for para in text.split("\n"):
        line = ""
        for part in para.split(", "):
            pieces = [part] if "$" in part or measure(part) <= room else _words(part)
            joiner = ", " if line else ""
            for i, piece in enumerate(pieces):
                sep = joiner if i == 0 else " "
                if line and measure(line + sep + piece) > room:
                    out.append(line + ("," if i == 0 else ""))
                    line = piece
                else:
                    line = line + sep + piece if line else piece
        out.append(line)
    return "\n".join(out)


def _words(part):
    """The words of `part` to break it at, an "=" kept with the word before it ("norm =", "layernorm")."""
    out = []
    for word in part.split(" "):
        if out and word == "=":
            out[-1] += " ="
        else:
            out.append(word)
    return out


def every_kth(inner, k):
    """A tick formatter that labels every k-th tick as `inner` does and leaves the others blank
    (ticks whose labels would run together; the tick marks stay). Its `k` may be raised later."""
    from matplotlib.ticker import Formatter

    class EveryKth(Formatter):
        def set_axis(self, axis):
            super().set_axis(axis)
            inner.set_axis(axis)

        def set_locs(self, locs):
            self.locs = locs
            inner.set_locs(locs)

        def format_ticks(self, values):
            return [t if i % self.k == 0 else "" for i, t in enumerate(inner.format_ticks(values))]

        def __call__(self, x, pos=None):
            return inner(x, pos) if pos is None or pos % self.k == 0 else ""

        def get_offset(self):
            return inner.get_offset()

        def format_data_short(self, value):
            return inner.format_data_short(value)

    made = EveryKth()
    made.k = k
    return made


def drawn_tick_labels(axis):
    """The tick labels of a matplotlib Axis that are drawn: visible, with text, within the view."""
    ticks = axis._update_ticks()  # the ticks within the view interval: the ones matplotlib draws
    out = []
    for t in ticks:
        for label in (t.label1, t.label2):
            if label.get_visible() and label.get_text():
                out.append(label)
    return out


def _crowded(labels, renderer, pad=2.0):
    """Whether any two of these tick labels' boxes come closer than `pad` pixels."""
    boxes = [t.get_window_extent(renderer) for t in labels]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if (a.x0 - pad < b.x1 and b.x0 - pad < a.x1 and a.y0 - pad < b.y1 and b.y0 - pad < a.y1):
                return True
    return False


def thin_ticks(axis, renderer):
    """Fewer tick labels on a crowded Axis: its minor labels gone first, then fewer major ticks (a
    MaxNLocator: fewer bins, at round values) or every other label (any other locator). Returns
    whether it changed anything."""
    from matplotlib.ticker import MaxNLocator, NullFormatter

    major = [t.label1 for t in axis.get_major_ticks() if t.label1.get_text()]
    drawn = drawn_tick_labels(axis)
    if any(t not in major for t in drawn) and not isinstance(axis.get_minor_formatter(), NullFormatter):
        axis.set_minor_formatter(NullFormatter())
        return True
    shown = len([t for t in drawn if t in major])
    if shown <= 1:
        return False
    # how many labels of the widest (tallest) one fit the axis, a third of one apart
    boxes = [t.get_window_extent(renderer) for t in drawn if t in major]
    along = axis.axis_name == "x"
    size = max(b.width if along else b.height for b in boxes)
    ends = axis.axes.get_window_extent(renderer)
    length = ends.width if along else ends.height
    fit = max(1, int((length + size) // (1.35 * size + 2)))
    loc, fmt = axis.get_major_locator(), axis.get_major_formatter()
    if isinstance(loc, MaxNLocator) and shown > 2 and not hasattr(fmt, "k"):
        loc.set_params(nbins=max(1, min(shown - 2, fit - 1)))  # fewer intervals, at round steps
        return True
    k = max(2, int(np.ceil(shown / fit)))
    if hasattr(fmt, "k"):
        fmt.k = max(fmt.k * 2, k)
    else:
        axis.set_major_formatter(every_kth(fmt, k))
    return True


class FacetGrid:
    """The panels of the generic plot, their labels and layout (module docstring, "Layout").

    FacetGrid(fig, ncol_values, nrow_values, names, wrap=None, width=None, panel=(3.6, 2.7)):
    ncol_values panels a row per value of the row axis (nrow_values, None without one), else
    ncol_values panels wrapped into rows; `names` {"row": name, "col": name} of the axes (for
    messages); `width` None (a figure sized to its panels), "page", "column" or inches.
    .axes the panels (row-major), .labels [(row label, col label)] per panel (draw fills it);
    finish(xlabel, ylabel, legend handles, legend_title) labels the grid and lays it out, and
    settle() lays it out again (after a title is added)."""

    def __init__(self, fig, ncol_values, nrow_values, names, wrap=None, width=None, panel=(3.6, 2.7)):
        from matplotlib.gridspec import GridSpec

        from .plot import WIDTHS

        self.fig, self.panel, self.names, self.wrap = fig, panel, names, wrap
        self.has_row = nrow_values is not None
        self.n = ncol_values * (nrow_values or 1)
        self.width_name = width
        self.width = None if width is None else float(WIDTHS.get(width, width))
        self.auto = not self.has_row and wrap is None  # the columns of a wrapped grid are ours to pick
        if self.has_row:
            self.ncols = ncol_values
        else:
            self.ncols = max(1, min(wrap or default_columns(self.n), self.n))
        self.labels = []
        self.xlabel = self.ylabel = ""
        self.handles, self.legend_title, self.legend, self.below = [], None, None, False
        self.margin_texts = []
        fig.set_size_inches(self.width or self.ncols * panel[0], panel[1] * self.nrows)
        spec = GridSpec(self.nrows, self.ncols, figure=fig)
        self.axes = [fig.add_subplot(spec[0])]
        self.axes += [fig.add_subplot(spec[k], sharex=self.axes[0], sharey=self.axes[0]) for k in range(1, self.n)]
        fig.facet_grid = self

    @property
    def nrows(self):
        return int(np.ceil(self.n / self.ncols))

    def panel_inches(self):
        """About the width of a panel (before layout)."""
        return self.fig.get_figwidth() / self.ncols

    # ------------------------------------------------------------------ labels
    def _place(self):
        """Put the panels on a grid of self.ncols columns and label its margins: the column
        values above the top row and the row values right of the last column (seaborn's margin
        titles) with --row, else each panel's value above it; tick labels and the x label on
        the lowest panel of each column, y tick labels on the first column."""
        from matplotlib.gridspec import GridSpec

        spec = GridSpec(self.nrows, self.ncols, figure=self.fig)
        for t in self.margin_texts:
            t.remove()
        self.margin_texts = []
        self.titles, self.margins, self.xlabels = {}, {}, {}
        for k, ax in enumerate(self.axes):
            ax.set_subplotspec(spec[k])
            rlabel, clabel = self.labels[k] if k < len(self.labels) else (None, None)
            row, col = divmod(k, self.ncols)
            lowest = k + self.ncols >= self.n
            ax.xaxis.set_tick_params(which="both", labelbottom=lowest)
            ax.yaxis.set_tick_params(which="both", labelleft=col == 0)
            ax.set_xlabel(self.xlabel if lowest else "")
            ax.set_ylabel("")
            title = (clabel if row == 0 else None) if self.has_row else clabel
            ax.set_title(title or "", fontsize="medium")
            if title:
                self.titles[k] = title
            if lowest and self.xlabel:
                self.xlabels[k] = self.xlabel
            if self.has_row and rlabel and col == self.ncols - 1:
                t = ax.annotate(rlabel, xy=(1.0, 0.5), xycoords="axes fraction", xytext=(4, 0),
                                textcoords="offset points", rotation=270, ha="left", va="center",
                                fontsize=ax.title.get_fontsize(), gid="row-title")
                self.margins[k] = (t, rlabel)
                self.margin_texts.append(t)
        fig = self.fig
        if fig._supylabel is not None:
            fig._supylabel.remove()
            fig._supylabel = None
        if self.ylabel:
            if self.nrows > 1:  # one label for every row
                fig.supylabel(self.ylabel, fontsize="medium")
            else:
                self.axes[0].set_ylabel(self.ylabel)

    def _legend_right(self):
        from .plot import legend_outside

        self._drop_legend()
        if not self.handles:
            return
        self.legend = legend_outside(self.axes[self.ncols - 1], self.handles, title=self.legend_title,
                                     title_fontsize=7)
        self.legend.shared = True  # it serves every panel (plot.legends_below)
        self._shift_legend(self._margin_points())
        self.below = False

    def _shift_legend(self, points):
        """The right legend `points` right of the top-right panel (past its row label)."""
        from matplotlib.transforms import offset_copy

        top = self.axes[self.ncols - 1]
        self.legend.set_bbox_to_anchor((1.0, 1.0), transform=offset_copy(top.transAxes, fig=self.fig, x=points,
                                                                          units="points"))
        self.legend_shift = points

    def _legend_below(self, renderer):
        """The legend under the grid in as many columns as fit the width, the layout's rect above it."""
        self._drop_legend()
        fig = self.fig
        room = 0.96 * fig.get_figwidth() * fig.dpi
        for ncol in range(min(len(self.handles), 6), 0, -1):
            leg = fig.legend(handles=self.handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
                             frameon=False, fontsize=7, title=self.legend_title, title_fontsize=7,
                             columnspacing=1.0, handlelength=1.6, borderaxespad=0.2)
            if ncol == 1 or leg.get_window_extent(renderer).width <= room:
                break
            leg.remove()
        leg.shared = True
        self.legend, self.below = leg, True

    def _drop_legend(self):
        if self.legend is not None:
            self.legend.remove()
            self.legend = None
        engine = self.fig.get_layout_engine()
        if engine is not None and hasattr(engine, "set"):
            engine.set(rect=(0, 0, 1, 1))

    def _margin_points(self, renderer=None):
        """Points right of the right panels that their row labels take (4 without any): the
        labels' width (their lines' height, as they run downwards) past their offset."""
        if not self.margins:
            return 4.0
        renderer = renderer or self.fig._get_renderer()
        return 4 + max(t.get_window_extent(renderer).width for t, _ in self.margins.values()) * 72 / self.fig.dpi + 6

    # ------------------------------------------------------------------ layout
    def finish(self, xlabel, ylabel, handles, legend_title=None):
        """Label the grid and lay it out (settle). At a fixed width: the legend below the panels
        when right of them it leaves them too narrow, fewer panels a row for a wrapped grid, and
        FigureDataError naming the options that help when the grid cannot fit the width."""
        self.xlabel, self.ylabel, self.handles, self.legend_title = xlabel, ylabel, list(handles), legend_title
        self.force_below = False
        if self.width is not None and self.auto:  # as many panels a row as can be wide enough
            self.ncols = self._wrap_columns()
        from .plot import WIDTHS

        problem = self._lay_out()
        if problem is not None:
            why, fixes = self._no_fit(problem)
            if self.width_name == "column":  # would a page hold it? (laid out there to know)
                self.width, self.width_name, self.force_below = WIDTHS["page"], "page", False
                if self.auto:
                    self.ncols = self._wrap_columns()
                if self._lay_out() is None:
                    fixes.insert(0, "--width page")
            raise FigureDataError(f"{why}; use " + ", or ".join(fixes))

    def _lay_out(self):
        """Size, label and settle the grid; at a fixed width, the legend below the panels when
        right of them it leaves them too narrow, fewer panels a row for a wrapped grid. Returns
        None when it fits, else whether its panels are too narrow (True) or it is too tall (False)."""
        while True:
            self._size()
            self._place()
            if self.width is not None and self.handles and (self.force_below or self.width_name == "column"):
                self._legend_below(self.fig._get_renderer())
            else:
                self._legend_right()
            self.settle()
            if self.width is None:
                return None
            narrow = self._panel_width() < self.min_panel() * 0.98
            if narrow and self.handles and not self.below:
                self.force_below = True
                continue
            if self.auto and self.ncols > 1 and self._panel_width() < WRAP_PANEL_WIDTH * 0.98:
                self.ncols -= 1
                continue
            if narrow or self.fig.get_figheight() > MAX_HEIGHT + 1e-6:
                return narrow
            return None

    def _wrap_columns(self):
        """Panels a row of a wrapped grid at a fixed width: default_columns, or fewer that leave
        them about WRAP_PANEL_WIDTH wide."""
        return max(1, min(default_columns(self.n), int((self.width - 0.8) // (WRAP_PANEL_WIDTH + 0.1))))

    def min_panel(self):
        """Inches a panel at a fixed width is at least wide (MIN_PANEL_WIDTH)."""
        return MIN_PANEL_WIDTH

    def _panel_width(self):
        return self.axes[0].get_position().width * self.fig.get_figwidth()

    def _size(self):
        """The figure's size before layout: at a fixed width its height from the panels' aspect
        (settle corrects it), else panel inches a panel, within MAX_WIDTH and MAX_ASPECT."""
        from .plot import legend_width

        w, h = self.panel
        if self.width is not None:
            guess = (self.width - 0.8) / self.ncols
            self.fig.set_size_inches(self.width, self.nrows * (guess * h / w + 0.45) + 0.5)
            return
        extra = legend_width([hd.get_label() for hd in self.handles]) if self.handles else 0.0
        extra += 0.35 if self.has_row else 0.0
        w = max(MIN_PANEL, min(w, (MAX_WIDTH - extra) / self.ncols))
        width = self.ncols * w + extra
        self.fig.set_size_inches(width, max(self.nrows * h, width / MAX_ASPECT))

    def settle(self, rounds=12):
        """Lay the figure out until nothing moves: titles, row labels, x and y labels broken into
        lines that fit their panel, crowded tick labels thinned, the legend right of the row
        labels (or, wider than WIDE_LEGEND of a fixed width or at a column's width, below the
        panels), and at a fixed width the height that gives the panels their aspect."""
        import warnings

        fig = self.fig
        for k in range(rounds):
            with warnings.catch_warnings():  # a grid too large for the width: _no_fit says so, and what helps
                warnings.filterwarnings("ignore", "constrained_layout not applied")
                engine = fig.get_layout_engine()
                if engine is not None:  # the layout alone (what is measured below needs no drawing)
                    engine.execute(fig)
                else:
                    fig.draw_without_rendering()
            if not self._tidy(fig._get_renderer()):
                return
            if k >= 1 and self.width is not None and (self.below or not self.handles) \
                    and self._panel_width() < 0.9 * self.min_panel():
                return  # too narrow whatever the labels do: finish() takes it from here

    def _tidy(self, renderer):
        """One step of settle; returns whether anything changed."""
        from matplotlib.font_manager import FontProperties

        fig, changed = self.fig, False
        box = self.axes[0].get_window_extent(renderer)

        def measure_with(artist):
            prop = FontProperties.copy(artist.get_fontproperties())

            def measure(s):
                w, _, _ = renderer.get_text_width_height_descent(s, prop, ismath="$" in s)
                return w
            return measure

        def refit(artist, text, room):
            nonlocal changed
            measure = measure_with(artist)
            now = artist.get_text()
            whole = all(measure(line) <= room for line in text.split("\n"))
            if not whole and now != text and all(measure(line) <= room for line in now.split("\n")):
                return  # broken lines that still fit stay (the room grows and shrinks as the layout settles)
            new = text if whole else fit_lines(text, room, measure)
            if new != now:
                artist.set_text(new)
                changed = True

        for k, text in self.titles.items():
            refit(self.axes[k].title, text, box.width)
        for k, text in self.xlabels.items():
            refit(self.axes[k].xaxis.label, text, box.width)
        # tick labels: every panel that shows them
        for axis in ("x", "y"):
            for ax in self.axes:
                a = ax.xaxis if axis == "x" else ax.yaxis
                labels = drawn_tick_labels(a)
                if len(labels) > 1 and _crowded(labels, renderer):
                    if thin_ticks(a, renderer):
                        changed = True
                    break
        # the legend below the panels at a fixed width when right of them it is too wide
        if self.handles and self.width is not None and not self.below and (
                self.width_name == "column" or self.force_below
                or box.width < self.min_panel() * fig.dpi  # right of the panels it leaves them too narrow
                or self.legend.get_window_extent(renderer).width > WIDE_LEGEND * self.width * fig.dpi):
            self._legend_below(renderer)
            changed = True
        # the height: panels of the `panel` aspect; a legend below gets a strip of its own
        strip = 0.0
        if self.below and self.legend is not None:
            strip = self.legend.get_window_extent(renderer).height / fig.dpi + 0.05
        w, h = fig.get_size_inches()
        tall = box.height  # the panels' height in pixels once the height below is set
        if not changed:  # (the panels' size is known once the labels above stay)
            # at a fixed width flatter (down to FLAT_PANEL or 6 ems tall) when that is too tall for a
            # page, at a free size no wider than MAX_ASPECT times the height
            want = box.width * self.panel[1] / self.panel[0]
            other = h - self.nrows * box.height / fig.dpi  # inches of labels, gaps and legend
            if self.width is not None and other + self.nrows * want / fig.dpi > MAX_HEIGHT:
                least = max(FLAT_PANEL * box.width, 6 * self.axes[0].xaxis.label.get_fontsize() / 72 * fig.dpi)
                want = max((MAX_HEIGHT - other) / self.nrows * fig.dpi, least)
            new = max(h + self.nrows * (want - box.height) / fig.dpi, 1.0)
            if self.width is None:
                new = max(new, w / MAX_ASPECT)
            if abs(new - h) > 0.02:
                fig.set_size_inches(w, new)
                tall = box.height + (new - h) * fig.dpi / self.nrows
                h, changed = new, True
        # row labels and the y label fit the panels' height to be
        for t, text in self.margins.values():
            refit(t, text, tall)
        if self.ylabel:  # the y label may run the figure's height (nothing else is at its left edge)
            if fig._supylabel is not None:  # centred on the figure above a legend's strip
                refit(fig._supylabel, self.ylabel, 0.95 * (h - strip) * fig.dpi)
            else:  # centred on the panel
                middle = (box.y0 + box.y1) / 2 + (tall - box.height) / 2
                refit(self.axes[0].yaxis.label, self.ylabel,
                      1.9 * min(h * fig.dpi - middle, middle - strip * fig.dpi))
        # the legend right of the panels: past the row labels
        if self.handles and not self.below and abs(self._margin_points(renderer) - self.legend_shift) > 1.0:
            self._shift_legend(self._margin_points(renderer))
            changed = True
        if self.below:
            engine = fig.get_layout_engine()
            rect = (0, strip / h, 1, 1 - strip / h)
            if engine is not None and hasattr(engine, "set"):
                if abs(engine.get().get("rect", (0, 0))[1] - rect[1]) > 1e-3:
                    changed = True
                engine.set(rect=rect)
            if fig._supylabel is not None:  # centred on the panels, not on the legend's strip
                fig._supylabel.set_y(0.5 + 0.5 * strip / h)
        return changed

    def _no_fit(self, narrow):
        """Why a grid cannot fit the width asked, and the options that make it fit: (the
        sentence, [options]); finish() adds --width page when a page holds the grid."""
        W, name = self.width, self.width_name
        where = f"--width {name} ({W:g} in)" if isinstance(name, str) else f"a width of {W:g} in"
        shape = f"{self.nrows} × {self.ncols} panels"
        if self.has_row:
            shape += f" ({', '.join(f'{self.names[r]} {w}' for r, w in (('row', 'down'), ('col', 'across')) if r in self.names)})"
        panel, least = self._panel_width(), self.min_panel()
        # the y label, tick labels, row labels and gaps: measured, unless the layout gave up
        overhead = W - self.ncols * panel if panel > 0.3 else 1.2
        fixes = []
        if narrow:
            what = f"its panels would be {panel:.2f} in wide, narrower than the {least:.2f} in their labels need"
            if self.has_row and self.nrows < self.ncols and self.nrows * least + overhead <= W:
                fixes.append(f"--row {self.names['col']} --col {self.names['row']} (fewer panels across)")
            if self.wrap:
                most = max(1, int((W - overhead) // least))
                fixes.append(f"--wrap {most}" if most < self.wrap else "a smaller --wrap")
            many = self.names.get("col")
        else:
            what = f"it would be {self.fig.get_figheight():.1f} in tall, more than a page's {MAX_HEIGHT:g} in"
            if self.wrap:
                fixes.append("a larger --wrap")
            if self.has_row and "col" not in self.names:
                fixes.append(f"--col {self.names['row']} instead of --row (its panels wrapped into rows)")
            many = self.names.get("row") or self.names.get("col")
        if many:
            fixes.append(f"--hue or --dash {many} (its values as lines instead of panels)")
        fixes.append("leaving out --width and --style paper (a figure as large as its panels need)")
        return f"the grid of {shape} does not fit {where}: {what}", fixes
