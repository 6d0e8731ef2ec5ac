#!/usr/bin/env bash
# Configure and build rcsweep (Release, with tests and benchmarks) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
