#!/usr/bin/env bash
# Predicted vs measured time: for each sweep file, `rcsweep plan`'s one-core
# estimate (from this machine's stored calibration) against the wall time of `rcsweep run` on one
# rank, and the ratio. Calibrates first when no calibration of this machine is stored. Also prints
# the predicted and the measured peak memory (maximum RSS).
#   bash bench/run_plan_accuracy.sh [SWEEP.toml ...]
# Default: the benchmark sweeps of bench/sweeps/ and the quick example.
#   bash bench/run_plan_accuracy.sh --mamba2 [WORKDIR=/tmp/rcsweep-mamba2-memory]
# The Mamba-2 sweeps in the layout they are run in: the three examples jobs/examples/ls_fig*_mamba2.toml
# on 2 ranks of 1 thread (mpiexec), and the one-task sweep of bench/mamba2_memory.sh (every layer of
# a BF16 checkpoint of mamba2-2.7b's shapes, WORKDIR/sweep.toml; left out when that script has not
# made it) on one rank of 2 threads. For each, `rcsweep plan --json --threads N`'s wall time,
# core-seconds and peak memory per rank against the run's wall time, CPU time (user + system, every
# rank) and maximum RSS (the largest rank), and measured / predicted of each. Each run waits (up to
# 2 minutes) for the load average to fall below 1.5 and prints the load it started at.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./build/rcsweep
[[ -x $bin ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
if [[ ${1:-} == --mamba2 ]]; then
  work=${2:-/tmp/rcsweep-mamba2-memory}
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  runs=("jobs/examples/ls_fig1_mamba2.toml 1" "jobs/examples/ls_fig2_mamba2.toml 1" "jobs/examples/ls_fig3_mamba2.toml 1")
  if [[ -f $work/sweep.toml ]]; then
    runs+=("$work/sweep.toml 2")
  else
    echo "no $work/sweep.toml (bash bench/mamba2_memory.sh $work makes it): the one-task checkpoint sweep left out" >&2
  fi
  mpi=(mpiexec --oversubscribe)
  ((EUID == 0)) && mpi+=(--allow-run-as-root)
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
  echo
  echo "| sweep | layout | predicted wall s, core-s, peak MiB | measured wall s, CPU s, max RSS MiB | measured / predicted (wall, CPU, memory) | load before |"
  echo "|---|---|---|---|---|---|"
  for run in "${runs[@]}"; do
    read -r sweep threads <<<"$run"
    "$bin" plan "$sweep" --threads "$threads" --json >"$out/plan.json"
    read -r ranks wall core peak < <(/usr/bin/python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
print(p["layout"]["ranks"], p["suggested"]["wall_s"], p["work"]["core_seconds"], p["memory"]["peak_bytes"])' "$out/plan.json")
    cmd=("$bin" run "$sweep" -o "$out/s.h5" --overwrite -q --threads "$threads")
    ((ranks > 1)) && cmd=("${mpi[@]}" -n "$ranks" "${cmd[@]}")
    for _ in $(seq 24); do awk '{exit !($1 < 1.5)}' /proc/loadavg && break; sleep 5; done  # the last run's load
    load=$(cut -d' ' -f1 /proc/loadavg)
    rc=0
    /usr/bin/time -f "%e %U %S %M" -o "$out/time" "${cmd[@]}" >/dev/null 2>"$out/err" || rc=$?
    [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "run of $sweep failed with exit $rc:" >&2; cat "$out/err" >&2; exit 1; }
    read -r w user sys rss_kb < <(tail -n 1 "$out/time")
    awk -v s="$sweep" -v r="$ranks" -v t="$threads" -v pw="$wall" -v pc="$core" -v pm="$peak" -v w="$w" \
      -v c="$(awk -v u="$user" -v y="$sys" 'BEGIN {print u + y}')" -v m="$rss_kb" -v l="$load" \
      'BEGIN {printf "| %s | %d rank%s x %d thread%s | %.1f, %.1f, %.0f | %.1f, %.1f, %.0f | %.2f, %.2f, %.2f | %s |\n",
              s, r, (r > 1 ? "s" : ""), t, (t > 1 ? "s" : ""), pw, pc, pm / 2^20, w, c, m / 1024,
              w / pw, c / pc, m * 1024 / pm, l}'
  done
  echo
  echo "load after: $(cut -d' ' -f1 /proc/loadavg)"
  exit 0
fi
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
