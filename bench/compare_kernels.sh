#!/usr/bin/env bash
# How far results of two OpenBLAS kernels are apart: run one sweep under OPENBLAS_CORETYPE=A and
# =B (same binary, same machine) and compare every metric of every task and layer
# (bench/compare_kernels.py: each difference against the metric's own scale, the layers after a
# signal collapsed to rank one within rounding apart), as a Markdown table for docs/GUARANTEES.md.
#   bash bench/compare_kernels.sh A B [SWEEP.toml] [RANKS]
# Default: Haswell against SkylakeX on the Mind the Gap stable-rank grid, 2 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:-Haswell}
b=${2:-SkylakeX}
sweep=${3:-bench/sweeps/mind_the_gap_stable_rank.toml}
ranks=${4:-2}
bin=${RCSWEEP_BIN:-./build/rcsweep}
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0 -n "$ranks")
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for k in "$a" "$b"; do
  rc=0
  OPENBLAS_CORETYPE=$k "${mpi[@]}" -x OPENBLAS_CORETYPE "$bin" run "$sweep" -o "$out/$k.h5" -q >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "run under $k failed with exit $rc" >&2; exit 1; }
done
echo "sweep: $sweep, $ranks ranks; machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%Y-%m-%d)"
/usr/bin/python3 bench/compare_kernels.py "$out/$a.h5" "$out/$b.h5"
