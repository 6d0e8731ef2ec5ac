"""rcsweep_tools: read rcsweep HDF5 stores in Python and redraw the seed papers' figures.

Run with Debian's interpreter /usr/bin/python3 (it has h5py, numpy, matplotlib, xarray, pandas):
    import sys; sys.path.insert(0, "scripts")
    from rcsweep_tools import load
    ds = load("out/quick.h5")          # xarray.Dataset: swept axes x replicate x layer
"""
__version__ = "0.2.0"  # = the project version (CMakeLists.txt, pyproject.toml; tests/python/test_docs.py)

from .api import Job, Plan, RcsweepError, Sweep, SweepConfigError  # noqa: F401
from .export import export  # noqa: F401
from .load import load, spectrum, tidy  # noqa: F401
