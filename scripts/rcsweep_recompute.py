#!/usr/bin/python3
"""Recompute every X_l and metric of a --dump-weights store with NumPy and compare.

    /usr/bin/python3 scripts/rcsweep_recompute.py OUT.h5 [--tol 1e-10] [--quiet]

The code is rcsweep_tools.recompute (installed as the command `rcsweep-recompute`); this file runs it from a
checkout or an installation prefix (P/bin next to P/lib/rcsweep/python)."""
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here), str(here.parent / "lib" / "rcsweep" / "python")]
from rcsweep_tools.recompute import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
