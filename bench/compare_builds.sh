#!/usr/bin/env bash
# Two rcsweep binaries on one sweep, alternating run by run so that drift of the machine (other
# load, frequency) hits both alike: wall and CPU (user + sys) seconds of every run, the medians and
# the ratios B / A, as a Markdown table for docs/BENCHMARKS.md. The CPU time is the steadier
# figure on a shared machine. Also checks that both stores hold the same bits.
#   bash bench/compare_builds.sh A_BIN B_BIN [SWEEP.toml] [REPS] [RANKS]
# Default: the Mind the Gap stable-rank grid, 3 repetitions, 1 rank.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?usage: compare_builds.sh A_BIN B_BIN [SWEEP.toml] [REPS] [RANKS]}
b=${2:?usage: compare_builds.sh A_BIN B_BIN [SWEEP.toml] [REPS] [RANKS]}
sweep=${3:-bench/sweeps/mind_the_gap_stable_rank.toml}
reps=${4:-3}
ranks=${5:-1}
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0 -n "$ranks")
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

declare -A wall cpu
for ((r = 1; r <= reps; r++)); do
  for which in a b; do
    bin=${!which}
    rc=0
    /usr/bin/time -f '%e %U %S' -o "$out/time" "${mpi[@]}" "$bin" run "$sweep" -o "$out/$which.h5" --overwrite -q \
      >/dev/null 2>&1 || rc=$?
    [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "$bin failed with exit $rc" >&2; exit 1; }
    read -r e u s < <(tail -1 "$out/time")
    wall[$which]+="$e "
    cpu[$which]+="$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f", u + s}') "
    printf 'run %d, %s: %.2f s wall\n' "$r" "$which" "$e" >&2
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
same=$(/usr/bin/python3 - "$out/a.h5" "$out/b.h5" <<'EOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
diff = []
for n in names:
    x, y = a[n][()], b[n][()]
    if n == "tasks":  # wall_s and rank differ from run to run
        x, y = x[["id", "status", "message"]], y[["id", "status", "message"]]
    if x.dtype.kind == "O":  # variable-length strings: compare the values, not the pointers
        x, y = x.tolist(), y.tolist()
    else:
        x, y = x.tobytes(), y.tobytes()
    if x != y:
        diff.append(n)
print(("bitwise equal" if not diff else "differ in " + ", ".join(diff)) + "; BLAS: " + a.attrs["blas"])
EOF
)
echo "sweep: $sweep, $ranks rank(s), $reps alternating runs each; stores: $same"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo "A = $a, B = $b"
echo
echo "| build | wall times (s) | median wall (s) | CPU times (s) | median CPU (s) |"
echo "|---|---|---|---|---|"
for which in a b; do
  printf '| %s | %s| %.2f | %s| %.2f |\n' "${which^^}" "${wall[$which]}" "$(echo "${wall[$which]}" | median)" \
    "${cpu[$which]}" "$(echo "${cpu[$which]}" | median)"
done
ratio() { awk -v x="$(echo "$1" | median)" -v y="$(echo "$2" | median)" 'BEGIN {printf "%.3f", y / x}'; }
echo
echo "B / A: wall $(ratio "${wall[a]}" "${wall[b]}"), CPU $(ratio "${cpu[a]}" "${cpu[b]}")"
