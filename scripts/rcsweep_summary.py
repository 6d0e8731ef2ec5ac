#!/usr/bin/python3
"""Summarise an rcsweep store: a table of last-layer metrics per grid point and a PNG plot.

    /usr/bin/python3 scripts/rcsweep_summary.py OUT.h5 [--metric sr_cov] [--png OUT.png]

The code is rcsweep_tools.summary (installed as the command `rcsweep-summary`); this file runs it from a
checkout or an installation prefix (P/bin next to P/lib/rcsweep/python)."""
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here), str(here.parent / "lib" / "rcsweep" / "python")]
from rcsweep_tools.summary import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
