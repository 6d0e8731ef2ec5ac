"""Figure registry: every figure of the seed papers that rcsweep redraws.

A figure module decorates its draw function with @figure(...); importing this package imports
every module listed in MODULES, so FIGURES then holds them all.

    draw(ds: xarray.Dataset, fig: matplotlib.figure.Figure, band: str = "sd") -> None

draws into `fig` (it adds its own axes) from the loaded store `ds` (rcsweep_tools.load), with
`band` the band around its means (plot.mean_band: "sd", the default, "ci", "se", "range", "none";
figures without means ignore it). The registered draw hands the function `ds` with the tasks'
status and message as coordinates (plot.with_tasks), so a series that ends early says why. The
sweep file that makes the store lives in jobs/examples/<sweep>.

A figure that draws a second store beside the first (Lambda-skip Fig. 2 on Mamba-2 with ALBERT's
curve) declares it with `second=Second(...)`: the keyword argument of its draw function that takes
the store, what it adds, the sweep file that makes it, and the check a store must pass (a
FigureDataError naming that sweep file otherwise). FIGURES[name].draw(ds, fig, band=..., second=ds2)
hands it over; `rcsweep-plot STORE FIGURE --with STORE2` loads and checks it first.
"""
import inspect
from dataclasses import dataclass
from importlib import import_module
from typing import Callable

from ..plot import DEFAULT_BAND, with_tasks


@dataclass(frozen=True)
class Second:
    keyword: str       # the draw function's keyword argument that takes the store, e.g. "albert"
    what: str          # what it adds to the figure, one line, e.g. "ALBERT's curve"
    sweep: str         # file name under jobs/examples/ whose store it takes
    check: Callable    # check(ds): FigureDataError (naming `sweep`) for a store of the wrong kind


@dataclass(frozen=True)
class Figure:
    name: str          # command-line name, e.g. "mtg-fig1"
    paper: str         # "Mind the Gap" | "Lambda-skip" | "Dong et al.", or one of them + " (encoders)" or " (Mamba-2)"
    title: str         # what it shows, one line (with the paper's figure number)
    sweep: str         # file name under jobs/examples/ whose store it draws
    draw: Callable
    second: Second | None = None  # the second store it draws beside the first (rcsweep-plot --with)


FIGURES: dict = {}


def figure(name, paper, title, sweep, second=None):
    """Register `draw` under `name` (unique); FIGURES[name].draw(ds, fig, band=..., second=...) calls
    it, `second` (a Second) naming the keyword argument of `draw` that takes a second store."""
    def register(draw):
        if name in FIGURES:
            raise ValueError(f"figure {name!r} registered twice")
        params = inspect.signature(draw).parameters
        takes_band = "band" in params
        if second is not None and second.keyword not in params:
            raise ValueError(f"figure {name!r}: its draw function takes no argument {second.keyword!r}")

        def registered(ds, fig, band=DEFAULT_BAND, second=None):
            kw = {"band": band} if takes_band else {}
            if second is not None:
                if FIGURES[name].second is None:
                    raise ValueError(f"figure {name!r} takes no second store")
                kw[FIGURES[name].second.keyword] = second
            ds = with_tasks(ds)
            return draw(ds, fig, **kw)

        registered.__doc__, registered.__name__ = draw.__doc__, draw.__name__
        FIGURES[name] = Figure(name, paper, title, sweep, registered, second)
        return draw
    return register


MODULES = ("mind_the_gap", "lambda_skip", "dong", "encoders", "mamba2")
for _module in MODULES:
    try:
        import_module(f"{__name__}.{_module}")
    except ModuleNotFoundError as e:  # a module not written yet
        if e.name != f"{__name__}.{_module}":
            raise
