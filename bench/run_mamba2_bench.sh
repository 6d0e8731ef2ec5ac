#!/usr/bin/env bash
# Mamba-2, rcsweep (build/bench/mamba2_layer) on 1 and 2 threads (2: one rank of 2 threads, a
# one-thread BLAS each), alternating run by run:
#   - one layer at mamba2-2.7b's shapes (T = 512, float64) against the dgemm floor of its
#     projections (plain cblas_dgemm, 1 and 2 OpenBLAS threads), the SSD alone, and the
#     projections through linalg::gemm in 1, 2, 4, 8 parts and in the default parts of 256 columns
#     (forward.cpp's weights_split_parts is picked from these);
#   - two whole models, tiny (d_model 64, 4 layers, d_state 16, headdim 16) and mid-size (mamba2-130m's
#     shapes: d_model 768, 24 layers, d_state 128, headdim 64), on one sequence of T = 512 tokens,
#     against a PyTorch float64 forward of the same folders (bench/mamba2_torch.py).
# Prints the machine, then Markdown tables of medians and ratios for docs/BENCHMARKS.md ("Mamba-2").
#   bash bench/run_mamba2_bench.sh [ROUNDS=5] [WORKDIR=/tmp/rcsweep-mamba2-bench]
# (ROUNDS = 0: the tables again from WORKDIR/runs.jsonl, nothing run.)
# Once per WORKDIR: the model folders (tests/python/mamba2_forward --random 43 0 --save-weights, F64:
# 1 GB for the mid-size one) and their token files. Every run: rcsweep's hidden states on 1 and on 2
# threads (mamba2_forward; checked bitwise equal), PyTorch's checked against them (1e-10 relative,
# every layer). Each round: the layer's benchmarks on 1 thread, then on 2; then per model rcsweep 1
# thread, PyTorch 1 thread, rcsweep 2 threads, PyTorch on 2 cores in its two ways (2 torch threads
# and 2 OpenBLAS threads; 1 torch thread and 2 OpenBLAS threads); the load average before each.
# OPENBLAS_CORETYPE is left as the environment sets it (it applies to both). About a minute a round
# on 2 quiet cores (5 rounds: 6 minutes with the first model folders).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
work=${2:-/tmp/rcsweep-mamba2-bench}
py=/usr/bin/python3
bench=./build/bench/mamba2_layer
tool=./build/tests/python/mamba2_forward
[[ -x $bench && -x $tool ]] || { echo "build first: cmake --build build --target mamba2_layer mamba2_forward" >&2; exit 1; }
mkdir -p "$work"
log=$work/runs.jsonl
models=(tiny 130m)
if ((rounds > 0)); then
: >"$log"

# The configs (mamba_ssm's config.json, tests/python/tiny_mamba2.py's writer) and one sequence of
# T = 512 ids per model.
"$py" - "$work" <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, "tests/python")
import numpy as np
import tiny_mamba2
work = Path(sys.argv[1])
for name, cfg in {"tiny": tiny_mamba2.config(64, 4, 16, 16, vocab=1000),
                  "130m": tiny_mamba2.config(768, 24, 128, 64, vocab=50277)}.items():
    (work / f"{name}-config").mkdir(exist_ok=True)
    (work / f"{name}-config" / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    ids = np.random.default_rng(5).integers(0, cfg["vocab_size"], 512)
    (work / f"{name}-ids.txt").write_text(" ".join(map(str, ids)) + "\n")
PY
for m in "${models[@]}"; do
  if [[ ! -f $work/$m/model.safetensors ]]; then
    "$tool" "$work/$m-config" "$work/$m-ids.txt" "$work/$m-random.npy" --random 43 0 --save-weights "$work/$m" >&2
    rm -f "$work/$m-random.npy"
  fi
  OMP_NUM_THREADS=1 "$tool" "$work/$m" "$work/$m-ids.txt" "$work/$m-hidden.npy" >&2
  OMP_NUM_THREADS=2 "$tool" "$work/$m" "$work/$m-ids.txt" "$work/$m-hidden2.npy" >&2
  cmp -s "$work/$m-hidden.npy" "$work/$m-hidden2.npy" || { echo "$m: rcsweep's hidden states differ on 1 and 2 threads" >&2; exit 1; }
  rm -f "$work/$m-hidden2.npy"
  "$py" bench/mamba2_torch.py "$work/$m" "$work/$m-ids.txt" "$work/$m-hidden.npy" --name "$m" --repetitions 0 |
    tee -a "$log" >&2
done

load() { cut -d' ' -f1 /proc/loadavg; }
cpp() {  # FILTER ROUND [MODEL]
  local l; l=$(load)
  local extra=()
  [[ $# -ge 3 ]] && extra=(--model "$work/$3" --ids "$work/$3-ids.txt")
  "$bench" "${extra[@]}" --benchmark_filter="$1" --benchmark_format=json 2>/dev/null |
    "$py" -c 'import json, sys
for b in json.load(sys.stdin)["benchmarks"]:
    print(json.dumps({"impl": "rcsweep", "name": b["run_name"].split("/iterations")[0].split("/real_time")[0],
                      "model": sys.argv[3] or None, "round": int(sys.argv[1]), "load": float(sys.argv[2]),
                      "real_time": b["real_time"], "time_unit": b["time_unit"],
                      **{k: b[k] for k in ("s_forward", "GFLOP/s", "checksum") if k in b}}))' \
      "$2" "$l" "${3:-}" | tee -a "$log" >&2
}
torch() {  # MODEL TORCH_THREADS BLAS_THREADS ROUND
  local l; l=$(load)
  "$py" bench/mamba2_torch.py "$work/$1" "$work/$1-ids.txt" "$work/$1-hidden.npy" --name "$1" --threads "$2" \
    --blas-threads "$3" --repetitions 1 --no-check |
    "$py" -c 'import json, sys
for line in sys.stdin:
    print(json.dumps({**json.loads(line), "round": int(sys.argv[1]), "load": float(sys.argv[2])}))' "$4" "$l" |
    tee -a "$log" >&2
}
for ((r = 1; r <= rounds; r++)); do
  for t in 1 2; do
    cpp "^(layer|dgemm_floor|ssd)/$t/" "$r"
    cpp "^projections/$t/" "$r"
  done
  for m in "${models[@]}"; do
    cpp "^model/1/" "$r" "$m"
    torch "$m" 1 1 "$r"
    cpp "^model/2/" "$r" "$m"
    torch "$m" 2 2 "$r"
    torch "$m" 1 2 "$r"
  done
done
fi

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $(./build/rcsweep --version | tail -n1)"
echo "date: $(date -u -r "$log" '+%Y-%m-%d %H:%M') UTC; $(grep -o '"round": [0-9]*' "$log" | sort -u | wc -l) rounds; runs in $log"
"$py" - "$log" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
checks = [r for r in rows if "check" in r]
runs = [r for r in rows if "round" in r]
med = st.median
def sel(**kw): return [r for r in runs if all(r.get(k) == v for k, v in kw.items())]
def by_round(rs, key="real_time"): return {r["round"]: r[key] for r in rs}
def spread(xs): return f"**{med(xs):.2f}** ({min(xs):.2f}-{max(xs):.2f})"
loads = [r["load"] for r in runs]
print(f"PyTorch {checks[0]['torch']}, OpenBLAS kernel {checks[0]['kernel']}; PyTorch's hidden states against "
      f"rcsweep's: " + ", ".join(f"{c['model']} {c['max_relative']:.1e}" for c in checks) +
      f" relative at most (every layer and the final norm); rcsweep's bitwise the same on 1 and 2 threads; "
      f"load average before the runs {min(loads):.2f}-{max(loads):.2f}\n")

print("One layer at mamba2-2.7b's shapes (d_model 2560, expand 2, d_state 128, headdim 64), T = 512, float64; "
      "the GEMM floor is the layer's flops at the rate of plain cblas_dgemm on in_proj's and out_proj's shapes "
      "(the same cores: 1 or 2 OpenBLAS threads)\n")
print("| cores | layer ms | GFLOP/s | GEMM floor ms | layer ÷ floor | SSD alone ms (share of the layer) |")
print("|---|---|---|---|---|---|")
for t in (1, 2):
    layer = sel(name=f"layer/{t}")
    floor = sel(name=f"dgemm_floor/{t}")
    rate = {r["round"]: r["GFLOP/s"] for r in floor}
    lay = by_round(layer)
    lay_rate = {r["round"]: r["GFLOP/s"] for r in layer}
    ratios = [rate[k] / lay_rate[k] for k in lay_rate if k in rate]
    floor_ms = [lay[k] * lay_rate[k] / rate[k] for k in lay if k in rate]
    ssd = by_round(sel(name=f"ssd/{t}"))
    shares = [ssd[k] / lay[k] for k in lay if k in ssd]
    print(f"| {t} | {med(lay.values()):.0f} | {med(lay_rate.values()):.1f} | {med(floor_ms):.0f} | {spread(ratios)} | "
          f"{med(ssd.values()):.0f} ({100 * med(shares):.0f} %) |")

print("\nin_proj and out_proj through linalg::gemm in at most N parts each (0: the default parts of 256 columns), "
      "÷ the dgemm floor of the same cores, same round\n")
parts = sorted({int(r["name"].split("/")[2]) for r in runs if r.get("name", "").startswith("projections/")})
print("| parts | " + " | ".join(f"{t} thread{'s' if t > 1 else ''} ms | ÷ floor" for t in (1, 2)) + " |")
print("|---|" + "---|---|" * 2)
for p in parts:
    cells = ["default (256 columns)" if p == 0 else str(p)]
    for t in (1, 2):
        pr = by_round(sel(name=f"projections/{t}/{p}"))
        fl = by_round(sel(name=f"dgemm_floor/{t}"))
        cells += [f"{med(pr.values()):.0f}", spread([pr[k] / fl[k] for k in pr if k in fl])]
    print("| " + " | ".join(cells) + " |")

print("\nWhole models on one sequence of T = 512 tokens, float64 (every layer and the final norm; the weights "
      "converted before the timing on both sides): rcsweep against PyTorch (its faster way on 2 cores: torch "
      "threads × OpenBLAS threads)\n")
print("| model | cores | rcsweep s | PyTorch s | rcsweep ÷ PyTorch |")
print("|---|---|---|---|---|")
configs = {1: [(1, 1)], 2: [(2, 2), (1, 2)]}
for m in sorted({r["model"] for r in runs if r.get("impl") == "torch"}, key=lambda m: m != "tiny"):
    for t in (1, 2):
        ours = by_round(sel(impl="rcsweep", name=f"model/{t}", model=m), "s_forward")
        best = min(configs[t], key=lambda c: med(by_round(sel(impl="torch", model=m, threads=c[0], blas_threads=c[1]),
                                                          "s_forward").values()))
        theirs = by_round(sel(impl="torch", model=m, threads=best[0], blas_threads=best[1]), "s_forward")
        how = f" ({best[0]} × {best[1]})" if t > 1 else ""
        print(f"| {m} | {t} | {med(ours.values()):.3f} | {med(theirs.values()):.3f}{how} | "
              f"{spread([ours[k] / theirs[k] for k in ours if k in theirs])} |")
print("\nchecksums (sum of the cubes of the normed output): " + "; ".join(
    f"{m} rcsweep {sel(impl='rcsweep', model=m)[0]['checksum']:.10g}, PyTorch {sel(impl='torch', model=m)[0]['checksum']:.10g}"
    for m in sorted({r['model'] for r in runs if r.get('impl') == 'torch'})))
PY
