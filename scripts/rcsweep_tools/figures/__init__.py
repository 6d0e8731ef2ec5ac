"""Figure registry: every figure of the seed papers that rcsweep redraws.

A figure module decorates its draw function with @figure(...); importing this package imports
every module listed in MODULES, so FIGURES then holds them all.

    draw(ds: xarray.Dataset, fig: matplotlib.figure.Figure, band: str = "sd") -> None

draws into `fig` (it adds its own axes) from the loaded store `ds` (rcsweep_tools.load), with
`band` the band around its means (plot.mean_band: "sd", the default, "ci", "se", "range", "none";
figures without means ignore it). The registered draw hands the function `ds` with the tasks'
status and message as coordinates (plot.with_tasks), so a series that ends early says why. The
sweep file that makes the store lives in jobs/examples/<sweep>.
"""
import inspect
from dataclasses import dataclass
from importlib import import_module
from typing import Callable

from ..plot import DEFAULT_BAND, with_tasks


@dataclass(frozen=True)
class Figure:
    name: str          # command-line name, e.g. "mtg-fig1"
    paper: str         # "Mind the Gap" | "Lambda-skip" | "Dong et al.", or one of them + " (encoders)" or " (Mamba-2)"
    title: str         # what it shows, one line (with the paper's figure number)
    sweep: str         # file name under jobs/examples/ whose store it draws
    draw: Callable


FIGURES: dict = {}


def figure(name, paper, title, sweep):
    """Register `draw` under `name` (unique); FIGURES[name].draw(ds, fig, band=...) calls it."""
    def register(draw):
        if name in FIGURES:
            raise ValueError(f"figure {name!r} registered twice")
        takes_band = "band" in inspect.signature(draw).parameters

        def registered(ds, fig, band=DEFAULT_BAND):
            ds = with_tasks(ds)
            return draw(ds, fig, band=band) if takes_band else draw(ds, fig)

        registered.__doc__, registered.__name__ = draw.__doc__, draw.__name__
        FIGURES[name] = Figure(name, paper, title, sweep, registered)
        return draw
    return register


MODULES = ("mind_the_gap", "lambda_skip", "dong", "encoders", "mamba2")
for _module in MODULES:
    try:
        import_module(f"{__name__}.{_module}")
    except ModuleNotFoundError as e:  # a module not written yet
        if e.name != f"{__name__}.{_module}":
            raise
