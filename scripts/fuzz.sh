#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer + AddressSanitizer + UBSan, clang) of the sweep-file parser,
# the store reader and the safetensors header parser (docs/FUZZING.md).
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]               build, then run; TARGET: config, store, safetensors (default: all)
#   bash scripts/fuzz.sh --build-only [TARGET...]           only configure and build the harnesses
#   bash scripts/fuzz.sh --no-build [SECONDS] [TARGET...]   only run harnesses built before
#
# Builds the harnesses with clang 16 ($RCSWEEP_FUZZ_CXX, default clang++-16) in their own build tree ($RCSWEEP_FUZZ_BUILD_DIR, default build-fuzz/),
# then runs each target for SECONDS (default 30; the targets run side by side) on a fresh copy of
# its seed corpus and regression inputs: the committed corpus is never modified. Exit 0 when no
# target found anything; 1 on a crash, sanitizer report, leak, timeout or broken invariant (the
# input is kept under <build>/runs/<target>/artifacts/ and the command to reproduce it is
# printed); 77 (a ctest "skip") when clang or libFuzzer is missing, except with CI=true, where that
# is a failure (scripts/install_deps.sh installs them). The main build (tests/fuzz/CMakeLists.txt)
# runs --build-only, which says when clang is missing and exits 0 (the build goes on), so the
# ctest fuzz.short runs --no-build and its time limit covers the fuzzing only.
# Extra libFuzzer flags: RCSWEEP_FUZZ_FLAGS="-jobs=4 -workers=4" etc.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=all
case ${1:-} in
  --build-only) mode=build; shift ;;
  --no-build) mode=run; shift ;;
esac
seconds=30
if [[ $mode != build ]]; then
  seconds=${1:-30}
  shift $(($# > 0 ? 1 : 0))
fi
targets=("$@")
((${#targets[@]} > 0)) || targets=(config store safetensors)
build=${RCSWEEP_FUZZ_BUILD_DIR:-$root/build-fuzz}
fuzz_dir=$root/tests/fuzz

say() { echo "[fuzz] $*"; }
missing_tool() {
  if [[ $mode == build ]]; then
    say "not built: $1 (bash scripts/install_deps.sh installs it)" >&2
    exit 0
  fi
  if [[ ${CI:-} == true ]]; then
    say "error: $1 (CI=true: the fuzz run is required; run scripts/install_deps.sh)" >&2
    exit 1
  fi
  say "skipped: $1 (bash scripts/install_deps.sh installs it)" >&2
  exit 77
}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { say "error: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }
for t in "${targets[@]}"; do
  [[ $t == config || $t == store || $t == safetensors ]] || { say "error: unknown target '$t' (config, store, safetensors)" >&2; exit 2; }
done

# clang 16: clang 14 (Debian's default clang) cannot compile rcsweep (no std::source_location).
cxx=${RCSWEEP_FUZZ_CXX:-clang++-16}
cc=${RCSWEEP_FUZZ_CC:-${cxx/clang++/clang}}
command -v "$cxx" >/dev/null || missing_tool "$cxx not found (Debian package clang-16)"

build_harnesses() {
  local probe
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
  if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
    local err
    err=$(head -c 300 "$probe/err")
    rm -rf "$probe"
    missing_tool "$cxx cannot link libFuzzer with ASan/UBSan (Debian package libclang-rt-16-dev): $err"
  fi
  rm -rf "$probe"
  # -O1, line tables only (full -g makes sweep_spec.cpp take 2 min to compile), assertions on
  # (Debug flags replaced); every rcsweep library gets coverage and sanitizers. HDF5, OpenBLAS and
  # toml++ are Debian's shared libraries: not instrumented (docs/FUZZING.md).
  local flags="-O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
  if [[ ! -f $build/CMakeCache.txt ]]; then
    say "configuring the clang build in $build"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS_DEBUG="" -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DRCSWEEP_BUILD_TESTS=ON \
      -DRCSWEEP_BUILD_BENCH=OFF -DRCSWEEP_BUILD_FUZZERS=ON >"$build.configure.log" 2>&1 ||
      { cat "$build.configure.log" >&2; say "error: configuring $build failed" >&2; exit 1; }
  fi
  say "building ${targets[*]} in $build"
  cmake --build "$build" --target "${targets[@]/#/rcsweep_fuzz_}" >"$build/fuzz-build.log" 2>&1 ||
    { tail -n 60 "$build/fuzz-build.log" >&2; say "error: building the fuzzers failed" >&2; exit 1; }
}

if [[ $mode == run ]]; then
  for t in "${targets[@]}"; do
    [[ -x $build/tests/fuzz/rcsweep_fuzz_$t ]] ||
      { say "error: $build/tests/fuzz/rcsweep_fuzz_$t is not built (the main build makes it; or bash scripts/fuzz.sh --build-only)" >&2; exit 1; }
  done
else
  build_harnesses
fi
[[ $mode == build ]] && exit 0

# ASan: asan.supp silences over-reads inside HDF5 (a defect of HDF5 1.10.8, see the file);
# allocator_may_return_null=1 because HDF5 mallocs sizes read from a damaged file and
# handles a NULL itself (an error, a StoreError for us); without it ASan aborts inside HDF5.
# LSan: HDF5 leaks small buffers on some decode errors (lsan.supp names only its library; an HDF5
# id that rcsweep forgets to close is caught by the store harness itself). Any report is a crash
# that libFuzzer keeps the input of.
export ASAN_OPTIONS=${ASAN_OPTIONS:-suppressions=$fuzz_dir/asan.supp:allocator_may_return_null=1:detect_stack_use_after_return=1:strict_string_checks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$fuzz_dir/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for s in "$(dirname "$(readlink -f "$(command -v "$cxx")")")/llvm-symbolizer" "$(command -v llvm-symbolizer || true)"; do
  [[ -x $s ]] && { export ASAN_SYMBOLIZER_PATH=$s; break; }
done

pids=()
for t in "${targets[@]}"; do
  run=$build/runs/$t
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts"
  cp -r "$fuzz_dir/corpus/$t/." "$fuzz_dir/regressions/$t/." "$run/corpus/"
  rm -f "$run/corpus/README.md"
  dict=()
  [[ -f $fuzz_dir/$t.dict ]] && dict=(-dict="$fuzz_dir/$t.dict")
  say "running $t for ${seconds}s on $(find "$run/corpus" -type f | wc -l) seed inputs (log: $run/fuzz.log)"
  # -timeout=120: a seed that makes HDF5 malloc and clear gigabytes under ASan takes seconds on a
  # quiet machine and tens of seconds on a loaded one; a hang still ends the run.
  # -malloc_limit_mb: HDF5 mallocs sizes read from the file (16 GiB seen) before finding the file
  # too short; that untouched memory is no bug. What is touched still counts (-rss_limit_mb).
  # shellcheck disable=SC2086  # RCSWEEP_FUZZ_FLAGS is a list of flags
  "$build/tests/fuzz/rcsweep_fuzz_$t" -max_total_time="$seconds" -timeout=120 -rss_limit_mb=2560 -malloc_limit_mb=1048576 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$run/artifacts/" "${dict[@]}" \
    ${RCSWEEP_FUZZ_FLAGS:-} "$run/corpus" >"$run/fuzz.log" 2>&1 &
  pids+=($!)
done

status=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  run=$build/runs/$t
  if wait "${pids[$i]}"; then
    say "$t: no crash ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$run/fuzz.log" | grep -o '[0-9]*$' || echo '?') runs, corpus $(find "$run/corpus" -type f | wc -l) inputs)"
  else
    status=1
    say "$t: FAILED; last lines of $run/fuzz.log:" >&2
    tail -n 40 "$run/fuzz.log" >&2
    for a in "$run"/artifacts/*; do
      [[ -e $a ]] || continue
      say "  input kept: $a" >&2
      say "  reproduce: $build/tests/fuzz/rcsweep_fuzz_$t $a" >&2
    done
    say "  fix the bug, then add the input to tests/fuzz/regressions/$t/ (docs/FUZZING.md)" >&2
  fi
done
exit $status
