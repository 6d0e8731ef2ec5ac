#!/usr/bin/env bash
# OpenBLAS, BLIS and LIBXSMM at the products of the Mind the Gap stable-rank grid and of the big
# task's softmax layers, one thread (bench/bench_small_gemm.cpp, built only where libxsmm-dev is
# installed; its BLIS columns need the build's BLIS; this script builds nothing). Prints the
# machine, the kernels (OpenBLAS core, BLIS configuration), the date and the load, then the Markdown
# tables of docs/BENCHMARKS.md "Small products: OpenBLAS, BLIS and LIBXSMM". OPENBLAS_CORETYPE and
# BLIS_ARCH_TYPE are left as the environment sets them. Measure on a quiet machine, no build beside:
#   flock /tmp/rcsweep-build.lock bash bench/run_small_gemm_bench.sh [BUILD_DIR] [grid] [big] [blis-whole]
# (default build/, both parts).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [[ $# -gt 0 && $1 != grid && $1 != big && $1 != blis-whole ]]; then build=$1; shift; fi
bin="$build/bench/bench_small_gemm"
[[ -x $bin ]] || { echo "no $bin: install libxsmm-dev, configure again and build bench_small_gemm" >&2; exit 2; }
cores=$(nproc --all)  # before OMP_NUM_THREADS=1 below: nproc honours it
echo "machine: $cores cores, $(lscpu | sed -n 's/^Model name: *//p')," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, BLIS_ARCH_TYPE=${BLIS_ARCH_TYPE:-unset};" \
     "$(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1
"$bin" "$@"
echo
echo "done: $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
