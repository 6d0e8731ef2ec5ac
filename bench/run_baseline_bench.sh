#!/usr/bin/env bash
# NumPy baseline benchmark: in one run, alternating, time
#   (a) the plain NumPy implementation bench/reference/mind_the_gap_numpy.py (1 process, 1 BLAS
#       thread),
#   (b) rcsweep run of the same sweep file on 1 rank (mpiexec -n 1, 1 BLAS thread),
#   (c) rcsweep run on 2 ranks (mpiexec -n 2),
# REPS times each; print every wall time, the medians and the per-core speed-up of rcsweep over
# NumPy as a Markdown table for docs/BENCHMARKS.md, then the sanity check of the baseline's mean
# stable ranks per variant against the last rcsweep store.
#   bash bench/run_baseline_bench.sh [REPS] [SWEEP.toml]
# Default: 2 repetitions of bench/sweeps/mind_the_gap_stable_rank.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-2}
sweep=${2:-bench/sweeps/mind_the_gap_stable_rank.toml}
bin=./build/rcsweep
py=/usr/bin/python3
baseline=bench/reference/mind_the_gap_numpy.py
[[ -x $bin ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
# Open MPI holds a non-zero exit (3: some tasks diverged, as 90 of the Mind the Gap grid do) for
# odls_base_sigkill_timeout seconds per rank before it tears the job down (about 2 s with 1 rank,
# 1 s with 2, measured): 0 makes the wall time the run's own.
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.3f", a - b}'; }

declare -A times
names=(numpy rc1 rc2)
for ((r = 1; r <= reps; r++)); do
  start=$(now)
  "$py" "$baseline" "$sweep" --out "$out/numpy.npz" -q
  t=$(since "$start"); times[numpy]+="${times[numpy]:+, }$t"
  printf 'run %d, NumPy (1 process): %.2f s\n' "$r" "$t" >&2
  for n in 1 2; do
    start=$(now)
    rc=0
    "${mpi[@]}" -n "$n" "$bin" run "$sweep" -o "$out/s$n.h5" --overwrite -q >/dev/null 2>&1 || rc=$?
    [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "rcsweep run failed with exit $rc" >&2; exit 1; }
    t=$(since "$start"); times[rc$n]+="${times[rc$n]:+, }$t"
    printf 'run %d, rcsweep %d rank(s): %.2f s\n' "$r" "$n" "$t" >&2
  done
done

median() { tr ', ' '\n\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -A med
for k in "${names[@]}"; do med[$k]=$(echo "${times[$k]}" | median); done
echo "sweep: $sweep ($($bin plan "$sweep" | grep -m1 '^points'))"
echo "machine: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo "numpy $("$py" -c 'import numpy; print(numpy.__version__)'), $("$py" --version 2>&1), OPENBLAS_NUM_THREADS=1; $reps repetition(s), order per repetition: NumPy, rcsweep 1 rank, rcsweep 2 ranks"
echo
echo "| run | processes | wall times (s) | median (s) | core-seconds | NumPy ÷ this, per core |"
echo "|---|---|---|---|---|---|"
row() {  # name label cores
  local m=${med[$1]}
  printf '| %s | %d | %s | %.2f | %.1f | **%.2f** |\n' "$2" "$3" "${times[$1]}" "$m" \
    "$(awk -v m="$m" -v c="$3" 'BEGIN {print m * c}')" \
    "$(awk -v a="${med[numpy]}" -v m="$m" -v c="$3" 'BEGIN {print a / (m * c)}')"
}
row numpy "NumPy baseline" 1
row rc1 "rcsweep, mpiexec -n 1" 1
row rc2 "rcsweep, mpiexec -n 2" 2
echo
echo "per-core speed-up rcsweep (1 rank) vs NumPy: $(awk -v a="${med[numpy]}" -v b="${med[rc1]}" 'BEGIN {printf "%.2f", a / b}')× (target: ≥ 3.5×)"
echo
echo "Sanity check: NumPy baseline (last run) vs rcsweep store (last 1-rank run), last layer"
"$py" "$baseline" --load "$out/numpy.npz" --compare "$out/s1.h5"
