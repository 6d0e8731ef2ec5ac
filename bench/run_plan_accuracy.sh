#!/usr/bin/env bash
# Predicted vs measured time: for each sweep file, `rcsweep plan`'s one-core
# estimate (from this machine's stored calibration) against the wall time of `rcsweep run` on one
# rank, and the ratio. Calibrates first when no calibration of this machine is stored. Also prints
# the predicted and the measured peak memory (maximum RSS).
#   bash bench/run_plan_accuracy.sh [SWEEP.toml ...]
# Default: the benchmark sweeps of bench/sweeps/ and the quick example.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./build/rcsweep
[[ -x $bin ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
sweeps=("$@")
((${#sweeps[@]})) || sweeps=(jobs/examples/quick.toml bench/sweeps/mind_the_gap_stable_rank.toml
                             bench/sweeps/mind_the_gap_gradients.toml bench/sweeps/mixed_sizes.toml
                             bench/sweeps/big_task.toml)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
"$bin" plan "${sweeps[0]}" | grep -q "rates of this machine" || "$bin" calibrate >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
to_s() { awk '{v=$1; u=$2; print (u=="ms" ? v/1000 : u=="min" ? v*60 : u=="h" ? v*3600 : v)}'; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores; load before: $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| sweep | predicted (s, 1 core) | measured (s, 1 rank) | measured / predicted | predicted peak memory | measured max RSS |"
echo "|---|---|---|---|---|---|"
for sweep in "${sweeps[@]}"; do
  plan=$("$bin" plan "$sweep")
  predicted=$(sed -n 's/^work .*about \([0-9.]*\) \([a-z]*\) on one core.*/\1 \2/p' <<< "$plan" | to_s)
  memory=$(sed -n 's/^peak memory *\([0-9.]* [A-Za-z]*\) per rank.*/\1/p' <<< "$plan")
  rc=0
  /usr/bin/time -f "%e %M" -o "$out/time" "$bin" run "$sweep" -o "$out/s.h5" --overwrite -q >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "run of $sweep failed with exit $rc" >&2; exit 1; }
  read -r wall rss_kb < <(tail -n 1 "$out/time")  # after "Command exited with non-zero status 3"
  awk -v s="$sweep" -v p="$predicted" -v w="$wall" -v m="$memory" -v r="$rss_kb" \
    'BEGIN {printf "| %s | %.1f | %.1f | %.2f | %s | %.0f MiB |\n", s, p, w, w / p, m, r / 1024}'
done
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"
