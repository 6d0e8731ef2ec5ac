#!/usr/bin/env bash
# Configure and build rcsweep (Release) into build/.
#   bash scripts/build.sh            # everything: the program, the tests and the benchmarks
#   bash scripts/build.sh rcsweep    # only the named targets (the README's first command builds only rcsweep)
# The tests and benchmarks are CMake options, on in the release preset: RCSWEEP_BUILD_TESTS,
# RCSWEEP_BUILD_BENCH (docs/INSTALL.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
if (($# > 0)); then
  cmake --build --preset release -j "$(nproc)" --target "$@"
else
  cmake --build --preset release -j "$(nproc)"
fi
