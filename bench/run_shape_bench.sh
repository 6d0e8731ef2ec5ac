#!/usr/bin/env bash
# Per shape, how far one rank is from its GEMM floor: for each (T, d) pair of a sweep whose first
# [[zip]] table lists T and d (default: the Mind the Gap stable-rank grid), the sweep of that pair
# alone (all its other axes and replicates) is run once untimed under the flop counter
# (build/bench/librcsweep_flop_count.so, LD_PRELOAD: the flops of every BLAS product rcsweep
# performs), then REPS times on one rank (`rcsweep run`, 1 BLAS thread; the best wall time of the
# process, start-up included). The floor is the flops at the single-core dgemm rate at 512^3,
# measured once at the start (`rcsweep calibrate`, into a temporary file). Prints a Markdown table
# of T, d, best time, floor and their ratio for docs/BENCHMARKS.md.
#   bash bench/run_shape_bench.sh [REPS] [SWEEP.toml]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
sweep=${2:-bench/sweeps/mind_the_gap_stable_rank.toml}
bin=./build/rcsweep
shim=$PWD/build/bench/librcsweep_flop_count.so
py=/usr/bin/python3
[[ -x $bin && -f $shim ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

rate=$($bin calibrate -o "$out/calibration.toml" 2>/dev/null | awk '$1 == "dgemm" && $2 == "512^3" {print $3}')
[[ -n $rate ]] || { echo "rcsweep calibrate printed no dgemm rate at 512^3" >&2; exit 1; }
echo "machine: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $($bin --version | tail -n1)"
echo "date: $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg); $($bin --version | head -n1)"
echo "dgemm at 512^3, 1 thread: $rate GFLOP/s; best of $reps wall times per shape, 1 rank"
echo
echo "| T | d | best wall (s) | GEMM floor (s) | wall ÷ floor |"
echo "|---|---|---|---|---|"

# The sweep once per (T, d) pair of its first [[zip]] table, as out/shape_<i>.toml.
"$py" - "$sweep" "$out" <<'EOF'
import json, sys, tomllib
path, out = sys.argv[1], sys.argv[2]
cfg = tomllib.load(open(path, "rb"))
zips = cfg.get("zip", [])
first = next((z for z in zips if "T" in z and "d" in z), None)
if first is None:
    sys.exit(f"{path}: no [[zip]] table with T and d")
def toml(v):
    return "[" + ", ".join(map(toml, v)) + "]" if isinstance(v, list) else json.dumps(v)
for i, (t, d) in enumerate(zip(first["T"], first["d"])):
    with open(f"{out}/shape_{i}.toml", "w") as f:
        for name, table in cfg.items():
            for tab in table if isinstance(table, list) else [table]:
                if tab is first:
                    tab = {k: ([t] if k == "T" else [d] if k == "d" else [v[i]]) for k, v in tab.items()}
                f.write(f"[[{name}]]\n" if isinstance(table, list) else f"[{name}]\n")
                f.writelines(f"{k} = {toml(v)}\n" for k, v in tab.items())
EOF

now() { date +%s.%N; }
for shape in $(ls "$out"/shape_*.toml | sort -V); do
  read -r T d < <("$py" -c 'import sys, tomllib; z = [z for z in tomllib.load(open(sys.argv[1], "rb"))["zip"] if "T" in z][0]; print(z["T"][0], z["d"][0])' "$shape")
  rm -f "$out/flops.txt"
  RCSWEEP_FLOP_COUNT=$out/flops.txt LD_PRELOAD=$shim "${mpi[@]}" -n 1 "$bin" run "$shape" -o "$out/count.h5" -q \
    --overwrite >/dev/null 2>&1 || [[ $? -eq 3 ]] || { echo "counting run failed at T = $T, d = $d" >&2; exit 1; }
  flops=$(awk '{f += $3} END {print f}' "$out/flops.txt")
  best=""
  for ((r = 1; r <= reps; r++)); do
    start=$(now)
    "$bin" run "$shape" -o "$out/run.h5" -q --overwrite || [[ $? -eq 3 ]]  # 3: some tasks diverged
    best=$(awk -v a="$(now)" -v b="$start" -v m="$best" 'BEGIN {t = a - b; print (m == "" || t < m) ? t : m}')
  done
  awk -v T="$T" -v d="$d" -v t="$best" -v f="$flops" -v r="$rate" \
    'BEGIN {printf "| %d | %d | %.3f | %.3f | %.2f |\n", T, d, t, f / (r * 1e9), t * r * 1e9 / f}'
done
