#!/usr/bin/env bash
# Hybrid layouts benchmark: run a sweep file REPS times in each layout RANKSxTHREADS (MPI ranks x
# OpenMP threads per rank, `rcsweep run --threads`), alternating the layouts so that drift of the
# machine hits all of them alike; print every wall time, the medians, the ratio to the first
# layout, and the peak resident memory of one rank (largest over ranks) and of all ranks, as a
# Markdown table for docs/BENCHMARKS.md. Every run's store is compared bitwise with the first's.
#   bash bench/run_layout_bench.sh SWEEP.toml REPS LAYOUT...
# LAYOUT is e.g. 1x1, 1x2, 2x1; a suffix :openmp runs it with Debian's OpenMP build of OpenBLAS
# (libopenblas0-openmp) instead of the pthreads build the program is linked with, from
# $OPENBLAS_OPENMP_DIR (default: the package's directory; without the package, extract it with
# `apt-get download libopenblas0-openmp && dpkg -x libopenblas0-openmp_*.deb DIR`).
# Example: bash bench/run_layout_bench.sh bench/sweeps/big_task.toml 3 1x1 1x2
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 3 ]] || { sed -n 2,12p "$0" >&2; exit 2; }
sweep=$1 reps=$2
shift 2
layouts=("$@")
bin=${RCSWEEP_BIN:-./build/rcsweep}
[[ -x $bin ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
omp_dir=${OPENBLAS_OPENMP_DIR:-/usr/lib/x86_64-linux-gnu/openblas-openmp}
cores=$(nproc)
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

declare -A times rss_rank rss_all
for ((r = 1; r <= reps; r++)); do
  for layout in "${layouts[@]}"; do
    spec=${layout%%:*} lib=${layout#"$spec"}
    ranks=${spec%x*} threads=${spec#*x}
    bind=(--bind-to none)
    ((ranks * threads <= cores)) && bind=(--map-by "slot:PE=$threads")
    env=()
    if [[ $lib == :openmp ]]; then
      [[ -e $omp_dir/libopenblas.so.0 ]] || { echo "no OpenMP OpenBLAS in $omp_dir" >&2; exit 1; }
      env=(-x "LD_LIBRARY_PATH=$omp_dir")
    fi
    rm -f "$out"/res.*
    start=$(date +%s.%N)
    rc=0
    "${mpi[@]}" "${bind[@]}" "${env[@]}" -n "$ranks" sh -c "/usr/bin/time -f '%U %S %M' -o $out/res.\$OMPI_COMM_WORLD_RANK \
      $(printf '%q ' "$bin" run "$sweep") -o $out/s.h5 --overwrite -q --threads $threads" >/dev/null 2>&1 || rc=$?
    [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "$layout: run failed with exit $rc" >&2; exit 1; }
    t=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.3f", a - b}')
    read -r one all < <(awk '/^[0-9.]+ [0-9.]+ [0-9]+$/ {if ($3 > m) m = $3; s += $3} END {printf "%.0f %.0f\n", m / 1024, s / 1024}' "$out"/res.*)
    times[$layout]+="$t "
    rss_rank[$layout]+="$one "
    rss_all[$layout]+="$all "
    if [[ -e $out/first.h5 ]]; then
      /usr/bin/python3 -c "import sys; sys.path.insert(0, 'tests/e2e'); from conftest import assert_same_results as s; s('$out/first.h5', '$out/s.h5')" ||
        { echo "$layout: the store differs from the first layout's" >&2; exit 1; }
    else
      mv "$out/s.h5" "$out/first.h5"
    fi
    printf 'run %d, %s: %.2f s, peak RSS %s MiB per rank, %s MiB in all\n' "$r" "$layout" "$t" "$one" "$all" >&2
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "sweep: $sweep ($($bin plan "$sweep" | grep -m1 '^points'))"
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $($bin --version | grep -m1 'BLAS kernel'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo "stores: bitwise identical in every layout"
echo
echo "| layout (ranks x threads) | wall times (s) | median (s) | time / ${layouts[0]} | peak RSS of a rank (MiB) | of all ranks (MiB) |"
echo "|---|---|---|---|---|---|"
base=""
for layout in "${layouts[@]}"; do
  m=$(echo "${times[$layout]}" | median)
  [[ -z $base ]] && base=$m
  printf '| %s | %s| %.2f | %.2f | %s | %s |\n' "$layout" "${times[$layout]}" "$m" \
    "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')" "$(echo "${rss_rank[$layout]}" | median)" "$(echo "${rss_all[$layout]}" | median)"
done
