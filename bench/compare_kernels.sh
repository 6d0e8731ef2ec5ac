#!/usr/bin/env bash
# How far results of two OpenBLAS kernels are apart: run one sweep under OPENBLAS_CORETYPE=A and
# =B (same binary, same machine) and compare every metric of every task and layer. Prints, per
# metric, the relative difference |a - b| / max(|a|, |b|) over all finite pairs (median, 99th
# percentile, max) and the number of tasks whose status or NaN pattern differs, as a Markdown
# table for docs/GUARANTEES.md and docs/BENCHMARKS.md.
#   bash bench/compare_kernels.sh A B [SWEEP.toml] [RANKS]
# Default: Haswell against SkylakeX on the Mind the Gap stable-rank grid, 2 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:-Haswell}
b=${2:-SkylakeX}
sweep=${3:-bench/sweeps/mind_the_gap_stable_rank.toml}
ranks=${4:-2}
bin=${RCSWEEP_BIN:-./build/rcsweep}
mpi=(mpiexec --oversubscribe --mca odls_base_sigkill_timeout 0 -n "$ranks")
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for k in "$a" "$b"; do
  rc=0
  OPENBLAS_CORETYPE=$k "${mpi[@]}" -x OPENBLAS_CORETYPE "$bin" run "$sweep" -o "$out/$k.h5" -q >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 0 || $rc -eq 3 ]] || { echo "run under $k failed with exit $rc" >&2; exit 1; }
done
echo "sweep: $sweep, $ranks ranks; machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%Y-%m-%d)"
/usr/bin/python3 - "$out/$a.h5" "$out/$b.h5" <<'EOF'
import sys
import h5py
import numpy as np

fa, fb = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
ka, kb = (f["provenance"].attrs["blas_kernels"] for f in (fa, fb))
sa, sb = fa["tasks"]["status"], fb["tasks"]["status"]
both_done = (sa == 1) & (sb == 1)
print(f"A = {ka}, B = {kb}; {len(sa)} tasks, {int(np.sum(sa != sb))} with another status "
      f"(done/diverged), {int(both_done.sum())} done under both\n")


def rel(x, y):
    ok = np.isfinite(x) & np.isfinite(y)
    d = np.abs(x[ok] - y[ok])
    scale = np.maximum(np.abs(x[ok]), np.abs(y[ok]))
    return np.where(d == 0, 0.0, d / np.where(scale == 0, 1.0, scale)), ok


print("| metric | pairs | bitwise equal | median rel. diff | 99th percentile | max | tasks beyond 1e-8 |")
print("|---|---|---|---|---|---|---|")
groups = [("layers", n) for n in fa["layers"]] + [("theory", n) for n in fa["theory"]]
for group, name in groups:
    x, y = fa[group][name][...][both_done], fb[group][name][...][both_done]
    r, ok = rel(x, y)
    nan_pattern = int(np.sum(np.isfinite(x) != np.isfinite(y)))
    per_task = np.zeros(x.shape[0])
    if x.ndim == 2:
        full = np.zeros(x.shape)
        full[ok] = r
        per_task = full.max(axis=1)
    else:
        per_task[ok] = r
    same = int(np.sum(x.view(np.uint64) == y.view(np.uint64)))
    q = (np.quantile(r, [0.5, 0.99]) if r.size else [np.nan, np.nan])
    print(f"| {group}/{name} | {r.size} | {same} | {q[0]:.1e} | {q[1]:.1e} | {r.max() if r.size else np.nan:.1e} | "
          f"{int(np.sum(per_task > 1e-8))} of {x.shape[0]}{f', {nan_pattern} NaN pattern' if nan_pattern else ''} |")
EOF
