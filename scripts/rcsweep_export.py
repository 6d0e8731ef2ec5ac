#!/usr/bin/python3
"""Export an rcsweep store as csv, parquet or netcdf (`rcsweep export` runs this).

    /usr/bin/python3 scripts/rcsweep_export.py OUT.h5 [-o FILE] [--format csv|parquet|netcdf]

The code is rcsweep_tools.export (installed as the command `rcsweep-export`); this file runs it from a
checkout or an installation prefix (P/bin next to P/lib/rcsweep/python)."""
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here), str(here.parent / "lib" / "rcsweep" / "python")]
from rcsweep_tools.export import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
