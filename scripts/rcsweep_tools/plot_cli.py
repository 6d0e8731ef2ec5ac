"""rcsweep-plot STORE FIGURE [-o FILE]: redraw one of the seed papers' figures from an rcsweep store.

Each figure reads the store its sweep file (jobs/examples/<sweep>) makes; `--list` shows them all.
Exit codes: 0 written; 2 usage error, unknown figure, a file that is not a store, or a store that
lacks what the figure needs (the message names what is missing and the sweep file to run).
"""
import argparse
import os
import sys
from pathlib import Path


def figure_list(figures):
    width = max(len(n) for n in figures) if figures else 0
    lines = []
    for paper in dict.fromkeys(f.paper for f in figures.values()):
        lines.append(f"{paper}:")
        for f in figures.values():
            if f.paper == paper:
                lines.append(f"  {f.name:<{width}}  {f.title}  [jobs/examples/{f.sweep}]")
    return "\n".join(lines)


def main(argv=None):
    os.environ.setdefault("MPLBACKEND", "Agg")
    from rcsweep_tools.figures import FIGURES

    p = argparse.ArgumentParser(
        prog="rcsweep-plot",
        description="Draw a figure of the seed papers (Mind the Gap, Lambda-skip, Dong et al.) from an "
                    "rcsweep store: the mean over replicates with a t-based 95% band, theory curves "
                    "beside the data, log axes where the papers use them. PNG or SVG by the output's "
                    "extension.",
        epilog="Figures (name, what it shows, the sweep file that makes its store):\n"
               + figure_list(FIGURES)
               + "\n\nExample:\n  mpiexec -n 2 rcsweep run jobs/examples/mtg_width.toml -o width.h5\n"
                 "  scripts/rcsweep-plot width.h5 mtg-fig4a -o width.svg\n"
                 "Exit codes: 0 written; 2 usage error, unknown figure, not a store, or a store "
                 "that lacks what the figure needs.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", nargs="?", help="rcsweep HDF5 store (may be a running or partial sweep)")
    p.add_argument("figure", nargs="?", help="figure name (see --list)")
    p.add_argument("-o", "--output", help="output file, .png or .svg (default: <figure>.png)")
    p.add_argument("--dpi", type=int, default=150, help="PNG resolution (default 150)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    a = p.parse_args(argv)
    if a.list:
        print(figure_list(FIGURES))
        return 0
    if not a.store or not a.figure:
        p.error("give STORE and FIGURE (or --list)")
    if a.figure not in FIGURES:
        print(f"rcsweep-plot: unknown figure {a.figure!r}; known: {', '.join(FIGURES)} (see --list)",
              file=sys.stderr)
        return 2
    out = Path(a.output or f"{a.figure}.png")
    if out.suffix.lower() not in (".png", ".svg"):
        print(f"rcsweep-plot: -o {out}: the output must end in .png or .svg", file=sys.stderr)
        return 2
    fig_def = FIGURES[a.figure]

    from matplotlib.figure import Figure

    from rcsweep_tools import load
    from rcsweep_tools.plot import FigureDataError

    if not Path(a.store).is_file():
        print(f"rcsweep-plot: {a.store}: no such file", file=sys.stderr)
        return 2
    try:
        ds = load(a.store)
    except (OSError, ValueError, KeyError) as e:
        print(f"rcsweep-plot: {a.store}: cannot read as an rcsweep store: {e}", file=sys.stderr)
        return 2
    fig = Figure(layout="constrained")
    try:
        fig_def.draw(ds, fig)
    except (FigureDataError, KeyError) as e:
        msg = e.args[0] if e.args else str(e)
        print(f"rcsweep-plot: {msg}", file=sys.stderr)
        return 2
    done = int((ds["status"] == 1).sum())
    fig.suptitle(f"{fig_def.paper} — {fig_def.title}\n{Path(a.store).name}: sweep {ds.attrs.get('sweep_name')!r}, "
                 f"{done}/{ds['status'].size} tasks done, rcsweep {ds.attrs.get('git_commit', '?')}", fontsize=8)
    try:
        fig.savefig(out, dpi=a.dpi)
    except OSError as e:
        print(f"rcsweep-plot: cannot write {out}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0

