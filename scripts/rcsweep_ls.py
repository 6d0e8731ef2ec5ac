#!/usr/bin/python3
"""List the rcsweep stores under some folders (`rcsweep ls` runs this).

    /usr/bin/python3 scripts/rcsweep_ls.py [DIR|STORE ...] [--where KEY=VALUE ...] [--json]

The code is rcsweep_tools.catalog (installed as the command `rcsweep-ls`); this file runs it from a
checkout or an installation prefix (P/bin next to P/lib/rcsweep/python)."""
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here), str(here.parent / "lib" / "rcsweep" / "python")]
from rcsweep_tools.catalog import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
