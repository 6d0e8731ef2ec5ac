#!/usr/bin/env bash
# Baseline benchmark of the Mind the Gap stable-rank grid: in one run, alternating, time
#   (a) the paper authors' PyTorch code (stable_ranks.py of their repository, whose path MTG_DIR
#       gives; the row is skipped when it is unset) on the same grid, as a researcher runs it:
#       default threads, in a temporary directory for its ./results,
#   (b) the plain NumPy implementation bench/reference/mind_the_gap_numpy.py (1 process, 1 BLAS
#       thread),
#   (c) rcsweep on 1 rank (mpiexec -n 1, 1 BLAS thread),
#   (d) rcsweep on 2 ranks (mpiexec -n 2),
#   (e) rcsweep on 1 and 2 ranks computing only the metrics of --select (default ["sr_cov"], the
#       authors' stable rank: the authors' code computes nothing else; "none" leaves the rows out),
#       by the override output.metrics=SELECT,
#   (e') the batched NumPy peer bench/reference/mind_the_gap_numpy_batched.py (per (T, d) all
#       variants x replicates as stacked arrays, the stable rank sr_cov only, OpenBLAS's default
#       threads: one per core), beside (e)'s 2-rank row of the same metric,
# REPS times each, and (f) the grid's GEMM floor on 2 cores: the flops of the BLAS products rcsweep
# performs (counted once, untimed, by build/bench/librcsweep_flop_count.so under LD_PRELOAD) over
# 2 x the single-core dgemm rate at 512^3 measured in the same run (`rcsweep calibrate`, into a
# temporary file). Prints every wall time, the medians and the ratios as a Markdown table for
# docs/BENCHMARKS.md, then the sanity check of the NumPy baseline's mean stable ranks per variant
# against the last 1-rank rcsweep store.
# (per selection: the selected run performs fewer products). The NumPy baseline computes every metric,
# as the sweep file's rcsweep rows do.
#   [MTG_DIR=/path/to/authors/repo] bash bench/run_baseline_bench.sh [--max-T N] [--select JSON|none] [REPS] [SWEEP.toml]
# Default: 2 repetitions of bench/sweeps/mind_the_gap_stable_rank.toml. --max-T N keeps the points
# with T <= N (a quick check: --max-T 40). The authors' code runs the grid of the sweep file: its
# (T, gamma = T/d) pairs, replicates and depth become --list_n, --list_gammas, --n_simulations and
# --n_layers, for every configuration of its configs.py.
set -euo pipefail
cd "$(dirname "$0")/.."
max_t="" select='["sr_cov"]'
while [[ ${1:-} == --* ]]; do
  case $1 in
    --max-T) max_t=$2 ;;
    --select) select=$2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
[[ $select == none ]] && select=""
reps=${1:-2}
sweep=${2:-bench/sweeps/mind_the_gap_stable_rank.toml}
grid="$sweep${max_t:+, the points with T <= $max_t}"
bin=./build/rcsweep
shim=$PWD/build/bench/librcsweep_flop_count.so
py=/usr/bin/python3
baseline=bench/reference/mind_the_gap_numpy.py
batched=bench/reference/mind_the_gap_numpy_batched.py
mtg=${MTG_DIR:-}
[[ -x $bin && -f $shim ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
# Open MPI holds a non-zero exit (3: some tasks diverged, as 90 of the Mind the Gap grid do) for
# odls_base_sigkill_timeout seconds per rank before it tears the job down (about 2 s with 1 rank,
# 1 s with 2, measured): 0 makes the wall time the run's own.
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The authors' code runs with the environment's default threads, the rest with one BLAS thread.
researcher=(env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS -u MKL_NUM_THREADS PYTHONDONTWRITEBYTECODE=1)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
started="$(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

# The grid: the sweep file (or its points with T <= max_t, written to $out/sweep.toml) and the
# authors' arguments for the same grid, as shell assignments.
eval "$("$py" - "$sweep" "$max_t" "$out/sweep.toml" <<'EOF'
import json, shlex, sys, tomllib
path, max_t, reduced = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = tomllib.load(open(path, "rb"))
zips = [z for z in cfg.get("zip", []) if "T" in z and "d" in z]
if max_t and zips:
    for z in zips:
        keep = [i for i, t in enumerate(z["T"]) if t <= int(max_t)]
        for k in z:
            z[k] = [z[k][i] for i in keep]
    def toml(v):
        return "[" + ", ".join(map(toml, v)) + "]" if isinstance(v, list) else json.dumps(v)
    with open(reduced, "w") as f:
        for name, table in cfg.items():
            for t in table if isinstance(table, list) else [table]:
                f.write(f"[[{name}]]\n" if isinstance(table, list) else f"[{name}]\n")
                f.writelines(f"{k} = {toml(v)}\n" for k, v in t.items())
    path = reduced
print(f"sweep={shlex.quote(path)}")
# Mind the Gap's grid: every T at every gamma, d = int(T / gamma) as its code computes it.
pairs = list(zip(zips[0]["T"], zips[0]["d"])) if len(zips) == 1 else []
ts, gammas = list(dict.fromkeys(t for t, _ in pairs)), list(dict.fromkeys(t / d for t, d in pairs))
if pairs and sorted(pairs) == sorted((t, int(1 / g * t)) for g in gammas for t in ts):
    reps, depth = cfg.get("sweep", {}).get("replicates", 1), cfg.get("model", {}).get("depth", 1)
    args = ["--list_gammas", *(f"{g:g}" for g in gammas), "--n_simulations", str(reps), "--n_layers", str(depth),
            "--list_n", *map(str, ts)]
    print(f"mtg_args=({shlex.join(args)}) mtg_rows={len(pairs) * reps * depth}")
else:
    print("mtg_args=()")
EOF
)"
points=$($bin plan "$sweep" | grep -m1 '^points')

notes=()
if [[ -z $mtg ]]; then
  notes+=("authors' code: skipped (set MTG_DIR to a clone of their repository)")
elif [[ ! -f $mtg/stable_ranks.py ]]; then
  notes+=("authors' code: skipped ($mtg/stable_ranks.py not found)"); mtg=""
elif [[ ${#mtg_args[@]} -eq 0 ]]; then
  notes+=("authors' code: skipped ($sweep is not a T x gamma grid of Mind the Gap)"); mtg=""
else
  mtg=$(cd "$mtg" && pwd)
  configs=$(cd "$mtg" && "${researcher[@]}" "$py" -c 'from configs import configs; print(len(configs))' || echo "?")
  torch_threads=$("${researcher[@]}" "$py" -c 'import torch; print(torch.get_num_threads())')
  notes+=("authors' code: $mtg ($(git -C "$mtg" log -1 --format='%h %cs' 2>/dev/null || echo 'not a git clone')), $configs configurations in configs.py, torch $("$py" -c 'import torch; print(torch.__version__)'), torch.get_num_threads() = $torch_threads (default threads), float32")
  notes+=("authors' command: python3 stable_ranks.py ${mtg_args[*]}")
  if ! "$py" -c 'import omegaconf' 2>/dev/null; then
    # utils.py imports omegaconf.DictConfig for helpers that stable_ranks.py never calls.
    mkdir -p "$out/stub" && printf 'class DictConfig:\n    pass\n' > "$out/stub/omegaconf.py"
    researcher+=(PYTHONPATH="$out/stub")
    notes+=("omegaconf is not installed: a stand-in module (an empty DictConfig class) is on PYTHONPATH for utils.py's import, unused by stable_ranks.py")
  fi
fi

# The day's dgemm rate (1 thread, 512^3) and the flops of rcsweep's products (2 ranks, untimed).
rate=$($bin calibrate -o "$out/calibration.toml" 2>/dev/null | awk '$1 == "dgemm" && $2 == "512^3" {print $3}')
[[ -n $rate ]] || { echo "rcsweep calibrate printed no dgemm rate at 512^3" >&2; exit 1; }
# count FILE [OVERRIDE]: the products of one untimed 2-rank run into FILE; prints their GFLOP.
count() {
  RCSWEEP_FLOP_COUNT=$1 LD_PRELOAD=$shim "${mpi[@]}" -n 2 "$bin" run "$sweep" ${2:+"$2"} -o "$out/count.h5" \
    --overwrite -q >/dev/null 2>&1 || [[ $? -eq 3 ]] || { echo "counting run failed" >&2; exit 1; }
  [[ -s $1 ]] || { echo "the flop counter caught no BLAS call" >&2; exit 1; }
  awk '{f += $3} END {printf "%.2f", f / 1e9}' "$1"
}
gflop=$(count "$out/flops.txt")
floor=$(awk -v g="$gflop" -v r="$rate" 'BEGIN {printf "%.3f", g / (2 * r)}')
sel_override=${select:+output.metrics=$select}
[[ -n $select ]] && sel_gflop=$(count "$out/flops_sel.txt" "$sel_override")

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.3f", a - b}'; }
declare -A times
names=(mtg numpy rc1 rc2 sel1 sel2 npb)
mtg_cpu="" mtg_nan=""
for ((r = 1; r <= reps; r++)); do
  if [[ -n $mtg ]]; then
    mkdir "$out/mtg$r"
    start=$(now)
    rc=0
    (cd "$out/mtg$r" && "${researcher[@]}" /usr/bin/time -f '%U %S' -o cpu "$py" "$mtg/stable_ranks.py" \
      "${mtg_args[@]}" >log 2>&1) || rc=$?
    t=$(since "$start"); times[mtg]+="${times[mtg]:+, }$t"
    mtg_cpu+="${mtg_cpu:+, }$(awk 'END {printf "%.1f", $1 + $2}' "$out/mtg$r/cpu")"
    # its CSVs: one row per configuration, gamma, simulation, T and layer; NaN where svdvals failed
    mtg_nan=$(find "$out/mtg$r" -name '*.csv' -exec cat {} + | awk -F, '$1 != "gamma" {n++; if ($5 == "" || $5 ~ /nan/) b++}
      END {printf "%d NaN stable ranks in %d rows", b, n}')
    [[ $rc -eq 0 ]] || notes+=("authors' code, run $r: exit $rc ($(tail -n1 "$out/mtg$r/log"))")
    rm -rf "$out/mtg$r/results"
    printf "run %d, authors' code: %.2f s\n" "$r" "$t" >&2
  fi
  start=$(now)
  "$py" "$baseline" "$sweep" --out "$out/numpy.npz" -q
  t=$(since "$start"); times[numpy]+="${times[numpy]:+, }$t"
  printf 'run %d, NumPy (1 process): %.2f s\n' "$r" "$t" >&2
  start=$(now)
  env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS "$py" "$batched" "$sweep" -q 2>/dev/null
  t=$(since "$start"); times[npb]+="${times[npb]:+, }$t"
  printf 'run %d, batched NumPy (default BLAS threads): %.2f s\n' "$r" "$t" >&2
  for kind in rc ${select:+sel}; do
    for n in 1 2; do
      start=$(now)
      rc=0
      override=""
      [[ $kind == sel ]] && override=$sel_override
      "${mpi[@]}" -n "$n" "$bin" run "$sweep" ${override:+"$override"} -o "$out/$kind$n.h5" --overwrite -q \
        >/dev/null 2>&1 || rc=$?
      [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "rcsweep run failed with exit $rc" >&2; exit 1; }
      t=$(since "$start"); times[$kind$n]+="${times[$kind$n]:+, }$t"
      printf 'run %d, rcsweep %d rank(s)%s: %.2f s\n' "$r" "$n" "${override:+, $override}" "$t" >&2
    done
  done
done

median() { tr ', ' '\n\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -A med
for k in "${names[@]}"; do if [[ -n ${times[$k]:-} ]]; then med[$k]=$(echo "${times[$k]}" | median); fi; done
order="NumPy, batched NumPy, rcsweep 1 rank, rcsweep 2 ranks${select:+, the same with $sel_override}" label="authors' code (PyTorch, float32)"
[[ -n $mtg ]] && order="authors' code, $order" label="authors' code (PyTorch, float32, $torch_threads torch thread(s))"
echo "sweep: $grid ($points)"
echo "machine: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $($bin --version | grep -m1 '^BLAS kernel')"
echo "date: $started; ended $(date -u '+%H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "numpy $("$py" -c 'import numpy; print(numpy.__version__)'), $("$py" --version 2>&1); $reps repetition(s), order per repetition: $order"
echo "dgemm at 512^3, 1 thread (rcsweep calibrate): $rate GFLOP/s"
echo "products rcsweep performs (counted over the 2-rank run): $gflop GFLOP in all:"
per_routine() { awk '{c[$1] += $2; f[$1] += $3} END {for (k in c) printf "  %-12s %10d calls %10.2f GFLOP\n", k, c[k], f[k] / 1e9}' "$1" | sort -k4 -gr; }
per_routine "$out/flops.txt"
if [[ -n $select ]]; then
  echo "products with $sel_override: $sel_gflop GFLOP in all:"
  per_routine "$out/flops_sel.txt"
fi
for n in "${notes[@]}"; do echo "$n"; done
if [[ -n $mtg ]]; then
  echo "authors' code CPU (user + sys, its core-seconds below) per repetition: $mtg_cpu s; its CSVs (last run): $mtg_nan (expected $mtg_rows per configuration)"
fi
echo
echo "| run | cores | wall times (s) | median (s) | core-seconds | authors' ÷ this, wall | NumPy ÷ this, per core | this ÷ GEMM floor on its cores |"
echo "|---|---|---|---|---|---|---|---|"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
row() {  # key label cores [core-seconds, else median x cores]; rc and sel rows against their own floor
  local m=${med[$1]:-} c=$3
  if [[ -z $m ]]; then printf '| %s | | skipped | | | | | |\n' "$2"; return; fi
  local core_s=${4:-$(awk -v m="$m" -v c="$c" 'BEGIN {print m * c}')}
  printf '| %s | %s | %s | %.2f | %.1f | %s | %s | %s |\n' "$2" "$c" "${times[$1]}" "$m" "$core_s" \
    "${med[mtg]:+$(ratio "${med[mtg]:-0}" "$m")}" "$(ratio "${med[numpy]}" "$core_s")" \
    "$([[ $1 == rc* || $1 == sel* ]] && ratio "$m" "$(awk -v g="$([[ $1 == sel* ]] && echo "$sel_gflop" || echo "$gflop")" \
      -v r="$rate" -v c="$c" 'BEGIN {print g / (r * c)}')")"
}
# The authors' code: its measured CPU time, as its BLAS may run threads of its own.
if [[ -n ${med[mtg]:-} ]]; then
  cpu=$(echo "$mtg_cpu" | median)
  row mtg "$label" "$(ratio "$cpu" "${med[mtg]}") (CPU ÷ wall)" "$cpu"
else
  row mtg "$label" ""
fi
row numpy "NumPy baseline, 1 BLAS thread" 1
row npb "batched NumPy peer (sr_cov only), $(env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS "$py" -c 'import ctypes, numpy; print(ctypes.CDLL("libopenblas.so.0").openblas_get_num_threads())' 2>/dev/null || echo '?') BLAS threads" "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
row rc1 "rcsweep, mpiexec -n 1" 1
row rc2 "rcsweep, mpiexec -n 2" 2
printf '| GEMM floor on 2 cores (%s GFLOP at 2 × %s GFLOP/s) | 2 | | %.2f | %.1f | | | 1.00 |\n' "$gflop" "$rate" \
  "$floor" "$(awk -v f="$floor" 'BEGIN {print 2 * f}')"
if [[ -n $select ]]; then
  row sel1 "rcsweep, mpiexec -n 1, \`$sel_override\`" 1
  row sel2 "rcsweep, mpiexec -n 2, \`$sel_override\`" 2
  sel_floor=$(awk -v g="$sel_gflop" -v r="$rate" 'BEGIN {printf "%.3f", g / (2 * r)}')
  printf '| GEMM floor on 2 cores with `%s` (%s GFLOP at 2 × %s GFLOP/s) | 2 | | %.2f | %.1f | | | 1.00 |\n' \
    "$sel_override" "$sel_gflop" "$rate" "$sel_floor" "$(awk -v f="$sel_floor" 'BEGIN {print 2 * f}')"
fi
echo
echo "per-core speed-up rcsweep (1 rank) vs NumPy: $(ratio "${med[numpy]}" "${med[rc1]}")× (target: ≥ 3.5×)"
if [[ -n ${med[sel2]:-} ]]; then
  echo "batched NumPy peer (sr_cov) ÷ rcsweep 2 ranks with $sel_override: $(ratio "${med[npb]}" "${med[sel2]}")× (target: ≥ 3×; equal work when the selection is [\"sr_cov\"])"
fi
echo
echo "Sanity check: NumPy baseline (last run) vs rcsweep store (last 1-rank run), last layer"
"$py" "$baseline" --load "$out/numpy.npz" --compare "$out/rc1.h5"
