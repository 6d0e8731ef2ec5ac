#!/usr/bin/env bash
# Whole-sweep benchmark: run a sweep file REPS times at each rank count, alternating the rank
# counts so that drift of the machine hits all of them alike; print every wall time, the medians
# and the speed-up, as a Markdown table for docs/BENCHMARKS.md. Also each run's CPU time of its
# busiest rank (user + sys, /usr/bin/time per rank): on a machine shared with other sessions the
# wall times of 2 ranks suffer more than those of 1, the CPU times hardly.
#   bash bench/run_sweep_bench.sh [SWEEP.toml] [REPS] [RANKS...]
# Default: the Mind the Gap stable-rank grid, 3 repetitions, 1 and 2 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-bench/sweeps/mind_the_gap_stable_rank.toml}
reps=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
ranks=("${@:-1 2}")
read -r -a ranks <<< "${ranks[*]}"
bin=${RCSWEEP_BIN:-./build/rcsweep}  # another build: RCSWEEP_BIN=/path/to/rcsweep
[[ -x $bin ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
# Open MPI holds a non-zero exit (3: some tasks diverged, as 90 of the Mind the Gap grid do) for
# odls_base_sigkill_timeout seconds per rank before it tears the job down (about 2 s with 1 rank,
# 1 s with 2, measured): 0 makes the wall time the run's own.
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

declare -A times cpus
for ((r = 1; r <= reps; r++)); do
  for n in "${ranks[@]}"; do
    rm -f "$out"/cpu.*
    start=$(date +%s.%N)
    rc=0
    "${mpi[@]}" -n "$n" sh -c "/usr/bin/time -f '%U %S' -o $out/cpu.\$OMPI_COMM_WORLD_RANK $(printf '%q ' "$bin" run "$sweep") \
      -o $out/s.h5 --overwrite -q" >/dev/null 2>&1 || rc=$?
    [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "run failed with exit $rc" >&2; exit 1; }
    t=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.3f", a - b}')
    c=$(awk '/^[0-9.]+ [0-9.]+$/ {s = $1 + $2; if (s > m) m = s} END {printf "%.2f", m}' "$out"/cpu.*)
    times[$n]+="$t "
    cpus[$n]+="$c "
    printf 'run %d, %d rank(s): %.2f s, busiest rank %.2f s CPU\n' "$r" "$n" "$t" "$c" >&2
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "sweep: $sweep ($($bin plan "$sweep" | grep -m1 '^points'))"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo
echo "| ranks | wall times (s) | median (s) | speed-up vs 1 rank | CPU of the busiest rank (s) | median (s) | speed-up |"
echo "|---|---|---|---|---|---|---|"
base="" cbase=""
for n in "${ranks[@]}"; do
  m=$(echo "${times[$n]}" | median)
  cm=$(echo "${cpus[$n]}" | median)
  [[ -z $base ]] && base=$m cbase=$cm
  printf '| %d | %s| %.2f | %.2f | %s| %.2f | %.2f |\n' "$n" "${times[$n]}" "$m" \
    "$(awk -v a="$base" -v b="$m" 'BEGIN {print a / b}')" "${cpus[$n]}" "$cm" "$(awk -v a="$cbase" -v b="$cm" 'BEGIN {print a / b}')"
done
