#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite (unit, MPI at 1-3 ranks,
# end-to-end command line, Python readers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
ctest --preset release
