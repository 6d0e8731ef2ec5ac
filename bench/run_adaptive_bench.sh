#!/usr/bin/env bash
# Adaptive against fixed replicates on one grid: the fixed sweep (its `replicates = N`) is run
# once to find the worst relative standard error of METRIC at the last layer over its points; the
# adaptive sweep asks every point for that standard error (min MIN replicates, then one at a time,
# at most MAX), so it reaches the fixed grid's worst case everywhere. Both are then run REPS
# times, alternating, on RANKS ranks: tasks computed, replicates per point, worst standard error
# reached, wall-time medians and their ratio, as Markdown for docs/BENCHMARKS.md.
#   bash bench/run_adaptive_bench.sh [SWEEP.toml] [REPS] [RANKS] [METRIC] [MIN] [MAX]
# Default: the Mind the Gap stable-rank grid (5 replicates), 3 repetitions, 2 ranks, sr_cov, 3, 20.
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-bench/sweeps/mind_the_gap_stable_rank.toml}
reps=${2:-3}
ranks=${3:-2}
metric=${4:-sr_cov}
lo=${5:-3}
hi=${6:-20}
bin=${RCSWEEP_BIN:-./build/rcsweep}
py=/usr/bin/python3  # Debian's python3: h5py, numpy
[[ -x $bin ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # run SWEEP STORE: wall seconds (exit 3, diverged tasks, is a normal end here)
  local start rc=0
  start=$(date +%s.%N)
  "${mpi[@]}" -n "$ranks" "$bin" run "$1" -o "$2" --overwrite -q >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "run of $1 failed with exit $rc" >&2; exit 1; }
  awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.3f", a - b}'
}

run "$sweep" "$out/fixed.h5" >/dev/null
target=$($py bench/adaptive_stats.py target "$out/fixed.h5" "$metric")
$py bench/adaptive_stats.py adaptive "$sweep" "$target" "$lo" "$hi" 1 "$metric" > "$out/adaptive.toml"
declare -A times
for ((r = 1; r <= reps; r++)); do
  for kind in fixed adaptive; do
    file=$sweep
    [[ $kind == adaptive ]] && file=$out/adaptive.toml
    t=$(run "$file" "$out/$kind.h5")
    times[$kind]+="$t "
    printf 'run %d, %s: %.2f s\n' "$r" "$kind" "$t" >&2
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "sweep: $sweep; target: relative SE of $metric at the last layer <= $target (the fixed grid's worst point), adaptive min $lo, step 1, max $hi"
echo "machine: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $ranks ranks, $(date -u +%F)"
echo
echo "| replicates | tasks and replicates per point | wall times (s) | median (s) |"
echo "|---|---|---|---|"
for kind in fixed adaptive; do
  printf '| %s | %s | %s| %.2f |\n' "$kind" "$($py bench/adaptive_stats.py report "$out/$kind.h5" "$metric")" \
    "${times[$kind]}" "$(echo "${times[$kind]}" | median)"
done
awk -v a="$(echo "${times[fixed]}" | median)" -v b="$(echo "${times[adaptive]}" | median)" \
  'BEGIN {printf "\nwall time adaptive / fixed: %.2f\n", b / a}'
