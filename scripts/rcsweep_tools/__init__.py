"""rcsweep_tools: read rcsweep HDF5 stores in Python, build and run sweeps, redraw the seed papers'
figures.

Run with Debian's interpreter /usr/bin/python3 (it has h5py, numpy, matplotlib, xarray, pandas),
after `pip install` or `module load rcsweep` (docs/INSTALL.md), or from a checkout with
`sys.path.insert(0, "scripts")`:
    from rcsweep_tools import load, tidy, spectrum, Sweep, export, replicate_stats, catalog
    from rcsweep_tools.extrapolate import extrapolate   # a metric's T -> infinity limit
    ds = load("out/quick.h5")          # xarray.Dataset: swept axes x replicate x layer
    catalog("out", where="mixer=ssd")  # pandas.DataFrame: every store under out/, one row each
    rcsweep_tools.figures.FIGURES      # the papers' figures (imported on first use: matplotlib)
"""
__version__ = "0.10.0"  # = the project version (CMakeLists.txt, pyproject.toml; tests/python/test_docs.py)

from .api import Job, Plan, RcsweepError, RunStopped, Sweep, SweepConfigError, TaskOutcomeWarning  # noqa: F401
from .catalog import catalog  # noqa: F401
from .export import export  # noqa: F401
from .load import StoreInvalid, load, replicate_stats, spectrum, tidy  # noqa: F401


def __getattr__(name):
    """`figures` (and FIGURES) on first use: they import matplotlib, which `load` does not need."""
    if name in ("figures", "FIGURES"):
        import importlib
        figures = importlib.import_module(".figures", __name__)
        return figures if name == "figures" else figures.FIGURES
    raise AttributeError(f"module 'rcsweep_tools' has no attribute {name!r}")
