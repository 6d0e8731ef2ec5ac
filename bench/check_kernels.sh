#!/usr/bin/env bash
# The bitwise tests under every OpenBLAS kernel this CPU can execute: a task's numbers must not
# depend on its bundle, the rank count, kills and resumes, or shards and merge, whichever kernel
# computes them (docs/GUARANTEES.md). The test suite runs them on the environment's own kernel
# only; this runs them again with OPENBLAS_CORETYPE set to each of
#   Haswell, Zen (AVX2 + FMA), SkylakeX (AVX-512 F/CD/BW/DQ/VL), Cooperlake (also AVX-512 BF16),
#   Sandybridge (AVX), Prescott (SSE3: OpenBLAS's generic x86-64 kernel)
# and says which it skipped and why. Each run first checks that OpenBLAS really uses the kernel
# asked for. Prints a Markdown table for docs/BENCHMARKS.md; exit 1 when any test failed.
#   bash bench/check_kernels.sh [BUILD_DIR]        (default build/, made by scripts/build.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
[[ -x $build/rcsweep ]] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }

kernels=(Haswell Zen SkylakeX Cooperlake Sandybridge Prescott)
need_Haswell="avx2 fma"
need_Zen="avx2 fma"
need_SkylakeX="avx512f avx512cd avx512bw avx512dq avx512vl"
need_Cooperlake="avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16"
need_Sandybridge="avx"
need_Prescott="pni"  # SSE3 (/proc/cpuinfo calls it pni)

# The bitwise tests: bundle composition and operand placement (unit), the MPI farm at 1, 2 and 3
# ranks against a serial computation, the real binary at 1/2/3 ranks, at ranks x threads layouts
# (1 x 1 to 3 x 2, stopped under one and resumed under another), SIGKILL and resume (single
# process and mpiexec), shards + merge, and adaptive replicates (1 and 3 ranks, kills, shards).
unit_filter='TaskRunner.Bundl*:LinalgPlacement.*'
e2e=(tests/e2e/test_cli.py::test_results_are_bitwise_equal_at_1_2_3_ranks
     tests/e2e/test_kill_resume.py::test_sigkill_single_process_then_resume
     tests/e2e/test_kill_resume.py::test_sigkill_mpi_job_then_resume
     tests/e2e/test_kill_resume.py::test_resumed_run_computes_only_missing_tasks
     tests/e2e/test_merge.py::test_shards_in_any_order_merge_to_the_single_run_store
     tests/e2e/test_threads.py
     tests/e2e/test_adaptive.py)
export RCSWEEP_BIN=$build/rcsweep RCSWEEP_SOURCE_DIR=$PWD MPIEXEC=${MPIEXEC:-mpiexec}
[[ $(id -u) -eq 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" \
     "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model" \
     "$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')); environment's" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $(date -u +%Y-%m-%d)"
echo
echo "| OPENBLAS_CORETYPE | kernel in use | unit (bundles, placement) | MPI 1/2/3 ranks | e2e (ranks, threads, kill/resume, merge) | time |"
echo "|---|---|---|---|---|---|"
failed=0
for k in "${kernels[@]}"; do
  need="need_$k"
  # shellcheck disable=SC2086
  if ! has ${!need}; then
    echo "| $k | skipped: the CPU lacks ${!need} | | | | |"
    continue
  fi
  start=$(date +%s)
  export OPENBLAS_CORETYPE=$k
  in_use=$("$build/tests/unit/numerics/test_numerics" --gtest_filter='LinalgPlacement.BlasKernelNamesTheCoreInUse' \
            >"$log/core" 2>&1 && echo ok)
  if [[ $in_use != ok ]]; then
    echo "| $k | skipped: OpenBLAS does not run it here ($(grep -m1 -o 'OpenBLAS [^"]*' "$log/core" || echo '?')) | | | | |"
    continue
  fi
  res_unit=pass res_mpi=pass res_e2e=pass
  for t in tests/unit/models/test_models tests/unit/numerics/test_numerics; do
    "$build/$t" --gtest_filter="$unit_filter" >>"$log/$k.unit" 2>&1 || res_unit=FAIL
  done
  for n in 1 2 3; do
    "$MPIEXEC" -n "$n" --oversubscribe "$build/tests/mpi/test_sweep_mpi" >>"$log/$k.mpi" 2>&1 || res_mpi=FAIL
  done
  /usr/bin/python3 -m pytest -q -p no:cacheprovider "${e2e[@]}" >"$log/$k.e2e" 2>&1 || res_e2e=FAIL
  e2e_count=$(grep -Eo '[0-9]+ passed' "$log/$k.e2e" | head -1)
  for part in unit mpi e2e; do
    r="res_$part"
    if [[ ${!r} == FAIL ]]; then
      failed=1
      echo "---- $k: $part failed:" >&2
      tail -40 "$log/$k.$part" >&2
    fi
  done
  echo "| $k | $("$build/rcsweep" --version | sed -n 's/^BLAS kernel //p') | $res_unit | $res_mpi | $res_e2e (${e2e_count:-0}) | $(( $(date +%s) - start )) s |"
done
unset OPENBLAS_CORETYPE
exit $failed
