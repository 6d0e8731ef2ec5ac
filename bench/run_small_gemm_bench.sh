#!/usr/bin/env bash
# OpenBLAS against LIBXSMM at the small products of the Mind the Gap stable-rank grid, one thread
# (bench/bench_small_gemm.cpp, built only where libxsmm-dev is installed; this script builds
# nothing). Prints the machine, the date, the load and the Markdown tables of docs/BENCHMARKS.md
# "Small products: OpenBLAS against LIBXSMM". OPENBLAS_CORETYPE is left as the environment sets it.
#   bash bench/run_small_gemm_bench.sh [BUILD_DIR]      (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}/bench/bench_small_gemm"
[[ -x $bin ]] || { echo "no $bin: install libxsmm-dev, configure again and build bench_small_gemm" >&2; exit 2; }
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset};" \
     "$(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$bin"
