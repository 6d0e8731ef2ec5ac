"""rcsweep-plot: draw a seed paper's figure, or a generic plot of any metric, from an rcsweep store.

    rcsweep-plot STORE FIGURE [-o FILE] [--band sd|ci|se|range|none] [--style paper] [--width column|page]
                 [--no-title] [--with STORE2]                              a paper's figure (--list)
    rcsweep-plot STORE --y METRIC [--x AXIS] [--hue AXIS] [--col AXIS] [--row AXIS] [--dash AXIS]
                 [--sel NAME=VALUE] [--layer N] [--logx] [--logy] [--band sd|ci|se|range|none] ...

Each figure reads the store its sweep file (jobs/examples/<sweep>) makes; the generic plot
(rcsweep_tools.facet) reads any store. Exit codes: 0 written; 2 usage error, unknown figure,
metric or axis, a file that is not a store, a store that lacks what the figure needs (the
message names what is missing and the choices or the sweep file to run), or a generic plot's
grid that cannot fit the --width asked (the message names the options that fit it), or a --with
that the figure does not take or whose store is not what it draws (the message names --with).
"""
import argparse
import os
import sys
from pathlib import Path

GENERIC = ("x", "hue", "col", "row", "dash", "wrap", "sel", "layer", "logx", "logy")
PANEL = {"default": (3.6, 2.7), "paper": (2.8, 2.1)}  # inches per panel of the generic plot


def figure_list(figures):
    width = max(len(n) for n in figures) if figures else 0
    lines = []
    for paper in dict.fromkeys(f.paper for f in figures.values()):
        lines.append(f"{paper}:")
        for f in figures.values():
            if f.paper == paper:
                lines.append(f"  {f.name:<{width}}  {f.title}  [jobs/examples/{f.sweep}]")
                if f.second:
                    lines.append(f"  {'':<{width}}  --with: {f.second.what}  [jobs/examples/{f.second.sweep}]")
    return "\n".join(lines)


def parser():
    from rcsweep_tools.figures import FIGURES
    from rcsweep_tools.plot import BANDS, STYLES, WIDTHS

    p = argparse.ArgumentParser(
        prog="rcsweep-plot",
        usage="rcsweep-plot STORE FIGURE [options] | STORE --y METRIC [options] | --list",
        description="Draw a figure of the seed papers (Mind the Gap, Lambda-skip, Dong et al.) from an "
                    "rcsweep store, or (with --y) any metric of any store against layer or a swept "
                    "axis: the mean over replicates with a band of ± 1 sd of the replicates (the "
                    "papers' convention; --band picks another), clipped to the metric's range; a series "
                    "that ends early is marked where it ends, and the legend names the outcome of every missing replicate as the store does "
                    "(not needed, diverged, vanished, failed, pending; hollow markers: replicates lost); theory curves beside the data in the papers' figures. PNG or SVG by the "
                    "output's extension.",
        epilog="Figures (name, what it shows, the sweep file that makes its store):\n"
               + figure_list(FIGURES)
               + "\n\nGeneric plot: an AXIS is `layer`, a swept parameter, a [[zip]] dimension (zip0) or "
                 "one of its members (T, d). Swept axes not given to --x/--hue/--col/--row/--dash go "
                 "to the free ones in the order hue, col, row, dash; --sel fixes the others.\n"
                 "\nExamples:\n  mpiexec -n 2 rcsweep run jobs/examples/mtg_width.toml -o width.h5\n"
                 "  scripts/rcsweep-plot width.h5 mtg-fig4a -o width.svg\n"
                 "  scripts/rcsweep-plot ls_fig2.h5 ls-fig2 --style paper --width column -o fig2.png\n"
                 "  scripts/rcsweep-plot ls_fig2_mamba2.h5 ls-fig2-mamba2 --with ls_fig2_albert.h5\n"
                 "  scripts/rcsweep-plot quick.h5 --y sr_cov --hue lambda --col d --row mixer --logy "
                 "--sel gap_fix=none\n"
                 "  scripts/rcsweep-plot width.h5 --y sr_cov --x T --hue layer --col zip0 --logx --logy "
                 "--style paper -o w.svg\n"
                 "Exit codes: 0 written; 2 usage error, unknown figure, metric or axis, not a store, "
                 "a store that lacks what the figure needs, a grid of panels that cannot fit the --width "
                 "asked (the message names what fits), or a --with the figure does not take or whose store "
                 "it cannot draw (the message names --with).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", nargs="?", help="rcsweep HDF5 store (may be a running or partial sweep)")
    p.add_argument("figure", nargs="?", help="a paper's figure (see --list); leave it out with --y")
    p.add_argument("-o", "--output", help="output file, .png or .svg (default: <figure>.png, <METRIC>.png)")
    p.add_argument("--dpi", type=int, help="PNG resolution (default 150; 300 with --style paper)")
    p.add_argument("--style", choices=sorted(STYLES), default="default",
                   help="paper: 8 pt type, no grid, no provenance title and no caption line, 300 dpi, sized "
                        "to a page (--width)")
    p.add_argument("--width", choices=sorted(WIDTHS), help="the paper style for a journal's column (3.5 in wide, "
                                                            "legends below; a paper's figure one panel a row, the "
                                                            "generic plot's grid laid out at that width, refused "
                                                            "naming what fits when it cannot fit) or two-column page "
                                                            "(7 in, the default of --style paper); implies --style paper")
    p.add_argument("--band", choices=BANDS, help="the band around each mean: sd (default): ± 1 sample sd of "
                                                  "the replicates; ci: t-based 95%% interval of the mean; se: ± 1 "
                                                  "standard error; range: min..max over replicates; none")
    p.add_argument("--no-title", action="store_true", help="leave out the provenance title (store, tasks, commit)")
    p.add_argument("--with", dest="second", metavar="STORE2",
                   help="a second store drawn beside STORE, for a figure that takes one (" + ", ".join(
                       f"{f.name}: {f.second.what}, a store of jobs/examples/{f.second.sweep}"
                       for f in FIGURES.values() if f.second) + "); refused for any other figure")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    g = p.add_argument_group("generic plot (instead of FIGURE)")
    g.add_argument("--y", metavar="METRIC", help="the quantity: a /layers metric (sr_cov, mu_rel, ...), "
                                                 "theory_*, grad_*, wall_s")
    g.add_argument("--x", metavar="AXIS", help="horizontal axis (default: layer)")
    for role, what in (("hue", "one colour per value (ordered colours for numbers, a diverging map centred at 0 "
                               "for numbers of both signs)"),
                       ("col", "one panel per value, wrapped into rows (with --row: one column per value, its "
                               "value once above the top row)"),
                       ("row", "one row of panels per value, its value once on the right margin"),
                       ("dash", "one line style per value")):
        g.add_argument(f"--{role}", metavar="AXIS", help=what)
    g.add_argument("--wrap", type=int, metavar="N", help="panels per row with --col alone (default: up to 3 "
                                                         "in a row, else about a square; at a --width, fewer when "
                                                         "they would be narrower than about 1.2 in)")
    g.add_argument("--sel", action="append", metavar="NAME=VALUE", help="keep one value of a coordinate (repeatable)")
    g.add_argument("--layer", type=int, metavar="N", help="the layer when x is not layer (default -1: the last)")
    g.add_argument("--logx", action="store_true", help="log x (symlog when x has values <= 0)")
    g.add_argument("--logy", action="store_true", help="log y")
    return p


def build(ds, a, second=None):
    """The matplotlib Figure for parsed arguments `a` and the loaded store `ds` (inside the style's
    settings; save it inside them too), with `second` the loaded store of --with for a figure that
    takes one. Raises FigureDataError or KeyError for a bad request."""
    from matplotlib.figure import Figure

    from rcsweep_tools import facet
    from rcsweep_tools.figures import FIGURES
    from rcsweep_tools.plot import DEFAULT_BAND, band_text, fit_column, fit_width

    if a.width:  # a column or page of a paper: the paper style (main() draws inside its settings)
        a.style = "paper"
    fig = Figure(layout="constrained")
    band = a.band or DEFAULT_BAND
    width = a.width or ("page" if a.style == "paper" else None)
    heading = f"{a.y}: mean over replicates, {band_text(band)}" if a.y else None
    if a.y and not (a.no_title or a.style == "paper"):  # the title first: the facet grid lays out around it
        title(fig, ds, heading)
    if a.y:  # the facet grid lays itself out at the width asked (facet.FacetGrid)
        facet.draw(ds, fig, a.y, x=a.x, hue=a.hue, col=a.col, row=a.row, dash=a.dash,
                   sel=facet.parse_sel(ds, a.sel), layer=a.layer, logx=a.logx,
                   logy=a.logy, band=band, wrap=a.wrap, panel=PANEL[a.style], grid=a.style != "paper", width=width)
    else:
        f = FIGURES[a.figure]
        f.draw(ds, fig, band=band, second=second)
        heading = f"{f.paper} — {f.title}"
        if width == "column":  # panels one under another, legends below them
            fit_column(fig)
        elif width:
            fit_width(fig, width)
    if a.style == "paper" and fig._supxlabel is not None:  # the caption line: the paper's caption says it
        fig._supxlabel.set_visible(False)
        fig._supxlabel.set_in_layout(False)
    if not (a.no_title or a.style == "paper"):
        if not a.y:
            title(fig, ds, heading, max(fig.get_figwidth(), 5.5), second)
        w, h = fig.get_size_inches()
        if w < 5.5:  # room for the title line
            fig.set_size_inches(5.5, h)
            if getattr(fig, "facet_grid", None) is not None:  # wider: lay the panels out again
                fig.facet_grid.settle()
    return fig


def title(fig, ds, heading, inches=5.5, second=None):
    """The provenance title: what is drawn, the store, its sweep, the tasks done by outcome (the same
    for the --with store `second`), the commit; the second line broken between these parts where it
    is longer than `inches` (a long store path; 8 pt type)."""
    from rcsweep_tools.load import outcome_counts, outcome_words

    def count(ds):
        counts = outcome_counts(ds["status"].values)  # every outcome by the store's name
        skipped = counts.get("not_needed", 0)  # not needed (adaptive replicates): never to be run
        others = outcome_words(counts)
        return f"{counts.get('done', 0)}/{ds['status'].size - skipped} tasks done" + (f" ({others})" if others else "")

    parts = [f"{Path(ds.attrs['path']).name}: sweep {ds.attrs.get('sweep_name')!r}", count(ds)]
    if second is not None:
        parts += [f"with {Path(second.attrs['path']).name}: sweep {second.attrs.get('sweep_name')!r}", count(second)]
    parts.append(f"rcsweep {ds.attrs.get('git_commit', '?')}")
    made = fig.suptitle(heading, fontsize=8)
    renderer, prop = fig._get_renderer(), made.get_fontproperties()

    def wide(line):  # inches
        return renderer.get_text_width_height_descent(line, prop, ismath=False)[0] / fig.dpi

    lines = [parts[0]]
    for part in parts[1:]:
        if wide(lines[-1] + ", " + part) <= 0.97 * inches:
            lines[-1] += ", " + part
        else:
            lines[-1] += ","
            lines.append(part)
    made.set_text("\n".join([heading] + lines))


def main(argv=None):
    os.environ.setdefault("MPLBACKEND", "Agg")
    from rcsweep_tools.figures import FIGURES

    p = parser()
    a = p.parse_args(argv)
    if a.list:
        print(figure_list(FIGURES))
        return 0
    if not a.store or not (a.figure or a.y):
        p.error("give STORE and FIGURE, or STORE --y METRIC (or --list)")
    if a.figure and a.y:
        p.error(f"give a FIGURE ({a.figure}) or --y {a.y}, not both")
    if a.width:  # a column or page of a paper: the paper style
        a.style = "paper"
    if not a.y:
        stray = [f"--{k}" for k in GENERIC if getattr(a, k) not in (None, False)]
        if stray:
            p.error(f"{', '.join(stray)} belong to the generic plot: give --y METRIC instead of FIGURE {a.figure}")
        if a.figure not in FIGURES:
            print(f"rcsweep-plot: unknown figure {a.figure!r}; known: {', '.join(FIGURES)} (see --list)",
                  file=sys.stderr)
            return 2
        if a.second and not FIGURES[a.figure].second:
            takers = [f.name for f in FIGURES.values() if f.second]
            print(f"rcsweep-plot: --with {a.second}: figure {a.figure} takes no second store (the figures that "
                  f"take one: {', '.join(takers)}; see --list)", file=sys.stderr)
            return 2
    elif a.second:
        p.error(f"--with {a.second} belongs to a paper's figure that takes a second store, not to the generic "
                f"plot --y {a.y}")
    out = Path(a.output or f"{a.figure or a.y}.png")
    if out.suffix.lower() not in (".png", ".svg"):
        print(f"rcsweep-plot: -o {out}: the output must end in .png or .svg", file=sys.stderr)
        return 2

    from rcsweep_tools import load
    from rcsweep_tools.plot import FigureDataError, style

    stores = []
    for option, path in (("", a.store), ("--with ", a.second)):
        if path is None:
            stores.append(None)
            continue
        if not Path(path).is_file():
            print(f"rcsweep-plot: {option}{path}: no such file", file=sys.stderr)
            return 2
        try:
            stores.append(load(path))
        except (OSError, ValueError, KeyError) as e:  # StoreInvalid (a ValueError): the line `rcsweep info` prints
            print(f"rcsweep-plot: {option}{path}: cannot read as an rcsweep store: {e}", file=sys.stderr)
            return 2
    ds, second = stores
    if second is not None:  # the figure's own check of its second store, before anything is drawn
        try:
            FIGURES[a.figure].second.check(second)
        except (FigureDataError, KeyError) as e:
            msg = e.args[0] if e.args else str(e)
            print(f"rcsweep-plot: --with {a.second}: {msg}", file=sys.stderr)
            return 2
    with style(a.style):
        try:
            fig = build(ds, a, second)
        except (FigureDataError, KeyError) as e:
            msg = e.args[0] if e.args else str(e)
            print(f"rcsweep-plot: {msg}", file=sys.stderr)
            return 2
        try:
            fig.savefig(out, dpi=a.dpi or (300 if a.style == "paper" else 150))
        except OSError as e:
            print(f"rcsweep-plot: cannot write {out}: {e}", file=sys.stderr)
            return 1
    print(f"wrote {out}")
    return 0
