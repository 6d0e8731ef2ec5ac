#!/usr/bin/env bash
# Where the Mind the Gap stable-rank grid's time goes, under OpenBLAS's AVX2 kernel and its own
# choice, side by side: one 1-rank run per kernel under `perf record -F FREQ -g`, each sample
# (self time, `perf report --no-children --sort dso,sym -g none`) put into one category by the
# rules below, and a Markdown table of the shares (% of samples) per category and kernel, with
# each run's wall time (the process under perf) and its sample count.
#
#   bash bench/profile_grid.sh [--freq F] [--kernels "Haswell default"] [--time REPS] [SWEEP.toml [OVERRIDE...]]
#
# --time REPS (default 0: no timing) then times the whole sweep without perf, `mpiexec -n 1` and
# `-n 2` (1 BLAS thread per rank, --gemm-library openblas), REPS rounds, each round every kernel on
# 1 then 2 ranks, against the GEMM floor as bench/run_baseline_bench.sh defines it: the flops of
# rcsweep's products (counted by build/bench/librcsweep_flop_count.so over one untimed 2-rank run
# per kernel) / (ranks x the 1-thread dgemm rate at 512^3 of `rcsweep calibrate` under that kernel,
# measured in the same run into a temporary file). Prints wall times, medians and median / floor.
#
# Default: bench/sweeps/mind_the_gap_stable_rank.toml 'output.metrics=["sr_cov"]' (the stable rank
# only, what the authors' code computes), 499 samples/s, kernels "Haswell default" ("default":
# OPENBLAS_CORETYPE unset, OpenBLAS's own choice; any other word is set as OPENBLAS_CORETYPE).
# Each run: one process, 1 BLAS and 1 OpenMP thread, --gemm-library openblas (no BLIS products).
# Needs perf and /usr/bin/python3; the perf data and reports stay in a temporary directory whose
# path is printed. Categories, first match wins (symbol names as perf prints them, demangled):
#   GEMM kernel          dgemm_kernel*, dgemm_small_kernel*, dgemm_beta* (OpenBLAS)
#   packing              OpenBLAS's GEMM packing: dgemm_{i,o}{n,t}copy*
#   other BLAS/LAPACK    the rest of libopenblas / liblapack / libblas (domatcopy, level-1/2 BLAS, LAPACK)
#   divergence checks    finite_max_abs
#   row maps             exp_affine_sum (softmax), apply_norm
#   random normals       rcsweep::rng::*
#   metrics              rcsweep::metrics::*, linalg householder_tridiagonal (and its fused_row),
#                        sturm, gram_top, lanczos
#   memset/malloc        memset, memcpy, memmove, malloc/free and friends of libc
#   MPI/HDF5/start-up    libmpi, libopen-*, libpmix, libhwloc, libevent, libhdf5, libz, ld-linux,
#                        rcsweep::store, rcsweep::mpi
#   the rest             everything else (the layer code of rcsweep::models, libm, libgomp, and the
#                        Linux kernel, [kernel.kallsyms]: page faults, system calls; its share is printed)
set -euo pipefail
cd "$(dirname "$0")/.."

freq=499
kernels="Haswell default"
reps=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --freq) freq=$2; shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    --time) reps=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
sweep=${1:-bench/sweeps/mind_the_gap_stable_rank.toml}
[[ $# -gt 0 ]] && shift
overrides=("$@")
[[ ${#overrides[@]} -eq 0 ]] && overrides=('output.metrics=["sr_cov"]')
bin=${RCSWEEP_BIN:-build/rcsweep}
py=/usr/bin/python3
out=$(mktemp -d /tmp/profile_grid.XXXXXX)

echo "sweep: $sweep ${overrides[*]}"
echo "CPU: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)" \
  "(family $(awk -F': ' '/cpu family/ {print $2; exit}' /proc/cpuinfo)," \
  "model $(awk -F': ' '/^model\t/ {print $2; exit}' /proc/cpuinfo))"
echo "start: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "perf data and reports: $out"

labels=()
for k in $kernels; do
  env=(env -u OPENBLAS_CORETYPE)
  [[ $k != default ]] && env=(env OPENBLAS_CORETYPE="$k")
  start=$(date +%s.%N)
  rc=0
  "${env[@]}" OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 perf record -F "$freq" -g -o "$out/$k.data" -q \
    "$bin" run "$sweep" "${overrides[@]}" -o "$out/$k.h5" --overwrite -q --gemm-library openblas \
    >/dev/null 2>"$out/$k.err" || rc=$?
  wall=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.2f", a - b}')
  [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "run ($k) failed with exit $rc: $(tail -n3 "$out/$k.err")" >&2; exit 1; }
  # the kernel OpenBLAS ran, as the store records it
  ran=$("$py" -c 'import h5py, sys
print(h5py.File(sys.argv[1], "r")["provenance"].attrs["blas_kernels"])' "$out/$k.h5" 2>/dev/null || echo "?")
  perf report -i "$out/$k.data" --no-children --sort dso,sym -g none --stdio -n 2>/dev/null >"$out/$k.txt"
  echo "$k: wall $wall s under perf (exit $rc), kernel recorded: $ran, load $(cut -d' ' -f1-3 /proc/loadavg)"
  labels+=("$k|$wall|$ran")
done
echo "profiles end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"

if [[ $reps -gt 0 ]]; then
  mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0)
  [[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
  shim=$PWD/build/bench/librcsweep_flop_count.so
  [[ -f $shim ]] || { echo "$shim is missing (cmake --build build --target rcsweep_flop_count)" >&2; exit 1; }
  declare -A rate gflop times
  kenv() { if [[ $1 == default ]]; then echo "-u OPENBLAS_CORETYPE"; else echo "OPENBLAS_CORETYPE=$1"; fi; }
  for k in $kernels; do
    # shellcheck disable=SC2046
    rate[$k]=$(env $(kenv "$k") "$bin" calibrate -o "$out/cal_$k.toml" 2>/dev/null | awk '$1 == "dgemm" && $2 == "512^3" {print $3}')
    # shellcheck disable=SC2046
    env $(kenv "$k") RCSWEEP_FLOP_COUNT="$out/flops_$k.txt" LD_PRELOAD="$shim" "${mpi[@]}" -n 2 "$bin" run "$sweep" \
      "${overrides[@]}" -o "$out/count.h5" --overwrite -q --gemm-library openblas >/dev/null 2>&1 || [[ $? -eq 3 ]]
    gflop[$k]=$(awk '{f += $3} END {printf "%.2f", f / 1e9}' "$out/flops_$k.txt")
    echo "$k: dgemm at 512^3 ${rate[$k]} GFLOP/s, products ${gflop[$k]} GFLOP"
  done
  echo "timed runs start: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((r = 1; r <= reps; r++)); do
    for k in $kernels; do
      for n in 1 2; do
        start=$(date +%s.%N)
        # shellcheck disable=SC2046
        env $(kenv "$k") "${mpi[@]}" -n "$n" "$bin" run "$sweep" "${overrides[@]}" -o "$out/t.h5" --overwrite -q \
          --gemm-library openblas >/dev/null 2>&1 || [[ $? -eq 3 ]]
        t=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.2f", a - b}')
        times[$k$n]+="${times[$k$n]:+, }$t"
        echo "round $r, $k, $n rank(s): $t s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      done
    done
  done
  echo "timed runs end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| kernel | dgemm 512^3 (GFLOP/s) | products (GFLOP) | ranks | wall times (s) | median (s) | GEMM floor on these ranks (s) | median / floor |"
  echo "|---|---|---|---|---|---|---|---|"
  for k in $kernels; do
    for n in 1 2; do
      med=$(echo "${times[$k$n]}" | tr ', ' '\n\n' | grep -v '^$' | sort -g |
        awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
      floor=$(awk -v g="${gflop[$k]}" -v r="${rate[$k]}" -v n="$n" 'BEGIN {printf "%.2f", g / (n * r)}')
      echo "| $k | ${rate[$k]} | ${gflop[$k]} | $n | ${times[$k$n]} | $med | $floor | $(awk -v m="$med" -v f="$floor" 'BEGIN {printf "%.2f", m / f}') |"
    done
  done
fi
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"

"$py" - "$out" "${labels[@]}" <<'EOF'
import re, sys
out, labels = sys.argv[1], sys.argv[2:]
cats = ["GEMM kernel", "packing", "other BLAS/LAPACK", "random normals", "metrics", "row maps",
        "divergence checks", "memset/malloc", "MPI/HDF5/start-up", "the rest"]
blas_dso = re.compile(r"lib(openblas|lapack|blas|blis)")
comm_dso = re.compile(r"lib(mpi|open-|pmix|hwloc|event|hdf5|z\.|sz|aec|ucp|ucs|uct|fabric|psm|ibverbs)|ld-linux")
libc_mem = re.compile(r"^(__)?(mem(set|cpy|move)|malloc|free|calloc|realloc|cfree|_int_(malloc|free|realloc)|"
                      r"malloc_consolidate|unlink_chunk|sysmalloc|__libc_(malloc|free|calloc))")

def category(dso, sym):
    if blas_dso.search(dso):
        if re.match(r"dgemm_(small_kernel|kernel|beta)", sym) or sym.startswith("bli_dgemm"):
            return "GEMM kernel"
        if re.match(r"dgemm_[io][nt]copy", sym):
            return "packing"
        return "other BLAS/LAPACK"
    if "finite_max_abs" in sym:
        return "divergence checks"
    if "exp_affine_sum" in sym or "apply_norm" in sym:
        return "row maps"
    if "rcsweep::rng" in sym:
        return "random normals"
    if ("rcsweep::metrics" in sym or "householder_tridiagonal" in sym or "fused_row" in sym
            or "sturm" in sym or "gram_top" in sym or "lanczos" in sym):
        return "metrics"
    if "libc" in dso and libc_mem.match(sym.split("(")[0].strip()):
        return "memset/malloc"
    if comm_dso.search(dso) or "rcsweep::store" in sym or "rcsweep::mpi" in sym:
        return "MPI/HDF5/start-up"
    return "the rest"

line = re.compile(r"^\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+\[[^\]]*\]\s+(.*)$")
cols, top = [], []
for lab in labels:
    k, wall, ran = lab.split("|")
    share = dict.fromkeys(cats, 0.0)
    syms, samples = [], 0
    for l in open(f"{out}/{k}.txt", errors="replace"):
        m = line.match(l)
        if m:
            p, dso, sym = float(m.group(1)), m.group(3), m.group(4).strip()
            samples += int(m.group(2))
            c = category(dso, sym)
            share[c] += p
            syms.append((p, c, dso, sym))
    share["kernel"] = sum(p for p, c, dso, sym in syms if "kernel" in dso and c == "the rest")
    cols.append((k, wall, ran, samples, share))
    top.append((k, sorted(syms, reverse=True)[:15]))

name = lambda k, ran: (f"`OPENBLAS_CORETYPE={k}`" if k != "default" else "`OPENBLAS_CORETYPE` unset") + f" ({ran})"
print()
print("| category | " + " | ".join(name(k, ran) for k, _, ran, _, _ in cols) + " |")
print("|---|" + "---|" * len(cols))
for c in cats:
    print(f"| {c} | " + " | ".join(f"{s[c]:.1f} %" for *_, s in cols) + " |")
print("| (of the rest: the Linux kernel) | " + " | ".join(f"({s['kernel']:.1f} %)" for *_, s in cols) + " |")
print("| total | " + " | ".join(f"{sum(s[c] for c in cats):.1f} %" for *_, s in cols) + " |")
print("| samples | " + " | ".join(str(n) for _, _, _, n, _ in cols) + " |")
print("| wall time under perf | " + " | ".join(f"{w} s" for _, w, _, _, _ in cols) + " |")
for k, syms in top:
    print(f"\ntop symbols, {k}:")
    for p, c, dso, sym in syms:
        print(f"  {p:6.2f}%  {c:18s} {dso:22s} {sym[:90]}")
EOF
