#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite (ctest labels: unit, mpi at 1-3
# ranks, scaling at 64 ranks, e2e command line, python toolkit, cluster (Slurm, PBS, install), fuzz;
# docs/CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
ctest --preset release
