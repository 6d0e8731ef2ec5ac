#!/usr/bin/env bash
# bert-base's 12 encoder blocks, rcsweep (build/bench/encoder_block) against a PyTorch float64
# forward of the same model on the same excerpts (bench/encoder_torch.py), on 1 and 2 threads,
# alternating run by run, and the projections against their dgemm floor. Prints the machine, then
# a Markdown table of medians and ratios for docs/BENCHMARKS.md ("Encoder blocks (bert-base)
# against PyTorch").
#   bash bench/run_encoder_bench.sh [ROUNDS=5] [WORKDIR=/tmp/rcsweep-encoder-bench]
# Once per WORKDIR: the model folder (tests/python/encoder_forward --random 37 0 --save-weights,
# 0.9 GB). Every run: rcsweep's hidden states (encoder_block --write-hidden, checked bitwise on 1
# against 2 threads), PyTorch's checked against them (1e-10 relative, every layer and excerpt).
# Each round: rcsweep 1 thread, PyTorch 1 thread, rcsweep 2 threads, PyTorch on 2 cores in its two
# ways (2 torch threads and 2 OpenBLAS threads; 1 torch thread and 2 OpenBLAS threads), then the
# dgemm floor and large squares; the load average before each. OPENBLAS_CORETYPE is left as the
# environment sets it (it applies to both).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
work=${2:-/tmp/rcsweep-encoder-bench}
py=/usr/bin/python3
bench=./build/bench/encoder_block
tool=./build/tests/python/encoder_forward
config=jobs/examples/models/bert-base-uncased
tokens=jobs/examples/tokens/excerpts.txt
[[ -x $bench && -x $tool ]] || { echo "build first: cmake --build build --target encoder_block encoder_forward" >&2; exit 1; }
mkdir -p "$work"
log=$work/runs.jsonl
: >"$log"

if [[ ! -f $work/model/model.safetensors ]]; then
  "$tool" "$config" "$tokens" "$work/encoder_forward.npy" --random 37 0 --save-weights "$work/model" >&2
  rm -f "$work/encoder_forward.npy"
fi
"$bench" --write-hidden "$work/hidden.npy" >&2
"$py" bench/encoder_torch.py "$work/model" "$tokens" "$work/hidden.npy" --repetitions 0 | tee -a "$log" >&2

load() { cut -d' ' -f1 /proc/loadavg; }
cpp() {  # FILTER ROUND
  local l; l=$(load)
  "$bench" --benchmark_filter="$1" --benchmark_format=json 2>/dev/null |
    "$py" -c 'import json, sys
for b in json.load(sys.stdin)["benchmarks"]:
    print(json.dumps({"impl": "rcsweep", "name": b["run_name"].split("/iterations")[0].split("/real_time")[0],
                      "round": int(sys.argv[1]), "load": float(sys.argv[2]), "real_time": b["real_time"],
                      "time_unit": b["time_unit"], **{k: b[k] for k in ("s_excerpt", "GFLOP/s", "checksum") if k in b}}))' \
      "$2" "$l" | tee -a "$log" >&2
}
torch() {  # TORCH_THREADS BLAS_THREADS ROUND
  local l; l=$(load)
  "$py" bench/encoder_torch.py "$work/model" "$tokens" "$work/hidden.npy" --threads "$1" --blas-threads "$2" \
    --repetitions 1 --no-check |
    "$py" -c 'import json, sys
for line in sys.stdin:
    print(json.dumps({**json.loads(line), "round": int(sys.argv[1]), "load": float(sys.argv[2])}))' "$3" "$l" |
    tee -a "$log" >&2
}
# On 2 cores PyTorch runs in two ways: torch.set_num_threads(2) with OpenBLAS on 2 threads, and
# torch on 1 thread with OpenBLAS on 2 (its elementwise work serial, its products parallel).
for ((r = 1; r <= rounds; r++)); do
  cpp "^(forward|projections)/1/" "$r"
  torch 1 1 "$r"
  cpp "^(forward|projections)/2/" "$r"
  torch 2 2 "$r"
  torch 1 2 "$r"
  cpp '^(dgemm_floor|dgemm_square)' "$r"
done

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $(./build/rcsweep --version | tail -n1)"
echo "date: $(date -u '+%Y-%m-%d %H:%M') UTC; $rounds rounds; runs in $log"
"$py" - "$log" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
check = next(r for r in rows if "check" in r)
runs = [r for r in rows if "round" in r]
med = st.median
def sel(**kw): return [r for r in runs if all(r.get(k) == v for k, v in kw.items())]
def by_round(rs, key="s_excerpt"): return {r["round"]: r[key] for r in rs}
loads = [r["load"] for r in runs]
print(f"PyTorch {check['torch']}, OpenBLAS kernel {check['kernel']}; PyTorch's hidden states against rcsweep's: "
      f"{check['max_relative']:.1e} relative at most (13 layers x {check['excerpts']} excerpts); "
      f"load average before the runs {min(loads):.2f}-{max(loads):.2f}\n")
print("| cores | rcsweep s/excerpt | GFLOP/s | PyTorch batch 1 s/excerpt | rcsweep ÷ batch 1 | PyTorch batch 32 s/excerpt | rcsweep ÷ batch 32 |")
print("|---|---|---|---|---|---|---|")
configs = {1: [(1, 1)], 2: [(2, 2), (1, 2)]}  # (torch threads, OpenBLAS threads) on that many cores
for t in (1, 2):
    ours = by_round(sel(impl="rcsweep", name=f"forward/{t}"))
    gf = med(r["GFLOP/s"] for r in sel(impl="rcsweep", name=f"forward/{t}"))
    cells = [f"{t}", f"{med(ours.values()):.3f}", f"{gf:.1f}"]
    for b in (1, 32):
        # PyTorch's faster way on these cores (its median), and the ratio to it round by round
        best = min(configs[t], key=lambda c: med(by_round(sel(impl="torch", threads=c[0], blas_threads=c[1], batch=b)).values()))
        theirs = by_round(sel(impl="torch", threads=best[0], blas_threads=best[1], batch=b))
        ratios = [ours[k] / theirs[k] for k in ours if k in theirs]
        how = f" ({best[0]} × {best[1]})" if t > 1 else ""
        cells += [f"{med(theirs.values()):.3f}{how}", f"**{med(ratios):.2f}** ({min(ratios):.2f}-{max(ratios):.2f})"]
    print("| " + " | ".join(cells) + " |")
print("\nPyTorch on 2 cores, each way (torch threads × OpenBLAS threads: median s/excerpt, CPU time ÷ wall time):",
      "; ".join(f"batch {b}, {c[0]} × {c[1]}: {med(r['s_excerpt'] for r in rs):.3f}, {med(r['cpu_per_wall'] for r in rs):.2f}"
                for b in (1, 32) for c in configs[2]
                for rs in [sel(impl="torch", threads=c[0], blas_threads=c[1], batch=b)]))
floor = by_round(sel(name="dgemm_floor"))
square = {n: med(r["GFLOP/s"] for r in sel(name=f"dgemm_square/{n}")) for n in (1024, 2048)}
print("\n| projections (the six products) | s/excerpt | GFLOP/s | ÷ dgemm floor (same run) | ÷ flops at the 1024³ rate |")
print("|---|---|---|---|---|")
fl = sel(name="dgemm_floor")
flops = med(r["GFLOP/s"] * r["s_excerpt"] for r in fl)  # GFLOP per excerpt
print(f"| dgemm floor: plain cblas_dgemm, 1 thread | {med(floor.values()):.3f} | {med(r['GFLOP/s'] for r in fl):.1f} | 1 | "
      f"{med(floor.values()) / (flops / square[1024]):.2f} |")
for t in (1, 2):
    p = by_round(sel(name=f"projections/{t}"))
    ratios = [p[k] * t / floor[k] for k in p if k in floor]
    g = med(r["GFLOP/s"] for r in sel(name=f"projections/{t}"))
    per_core = " × 2 threads" if t == 2 else ""
    print(f"| linalg::gemm as forward.cpp, {t} thread{'s' if t > 1 else ''} | {med(p.values()):.3f} | {g:.1f} | "
          f"**{med(ratios):.2f}**{per_core} ({min(ratios):.2f}-{max(ratios):.2f}) | {med(p.values()) * t / (flops / square[1024]):.2f}{per_core} |")
print(f"\ndgemm 1 thread: {square[1024]:.1f} GFLOP/s at 1024³, {square[2048]:.1f} at 2048³ (medians); "
      f"checksums: rcsweep {sel(name='forward/1')[0]['checksum']:.6g}, PyTorch {sel(impl='torch')[0]['checksum']:.6g}")
PY
