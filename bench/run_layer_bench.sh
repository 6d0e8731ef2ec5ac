#!/usr/bin/env bash
# Layer efficiency: run bench_layers from an existing build directory (this
# script builds nothing) and print Markdown tables: machine limits, per-layer time against the
# GEMM bound (ratio), and the breakdown of every layer. Medians over the repetitions.
#   bash bench/run_layer_bench.sh BUILD_DIR [REPETITIONS=3] [extra benchmark args...]
#   e.g. bash bench/run_layer_bench.sh /tmp/build_bench 3 --benchmark_filter='T=512'
set -euo pipefail
build=${1:?usage: run_layer_bench.sh BUILD_DIR [REPETITIONS] [benchmark args...]}
reps=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
bin="$build/bench/bench_layers"
[[ -x $bin ]] || { echo "no $bin (configure with -DRCSWEEP_BUILD_BENCH=ON and build bench_layers)" >&2; exit 2; }
json=$(mktemp /tmp/bench_layers.XXXXXX.json)
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}, $(date -u +%Y-%m-%dT%H:%MZ), json: $json" >&2
"$bin" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true --benchmark_min_time=0.3 \
  --benchmark_out="$json" --benchmark_out_format=json "$@" >&2
/usr/bin/python3 - "$json" <<'PY'
import json, sys
allruns = json.load(open(sys.argv[1]))["benchmarks"]
runs = [b for b in allruns if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
runs = runs or allruns  # one repetition: no aggregates
def name(b): return b["run_name"].removesuffix("/manual_time")
def ms(s): return f"{1e3 * s:.1f}"
print("### Machine limits (1 BLAS thread)\n\n| kernel | median time (ms) | GFLOP/s |\n|---|---|---|")
for b in runs:
    if name(b).startswith("limits/"):
        g = b.get("GFLOP/s")
        print(f"| {name(b)[7:]} | {b['real_time']:.2f} | {g if g else float('nan'):.1f} |".replace("| nan |", "| – |"))
print("\n### Layer time against the GEMM bound\n")
print("| mixer | T | d | spectrum | time/layer (ms) | GEMM GFLOP | dgemm rate used (GFLOP/s) | bound (ms) | ratio | ratio, metric Gram in the bound |")
print("|---|---|---|---|---|---|---|---|---|---|")
for b in runs:
    if name(b).startswith("layer/"):
        _, mixer, T, d, sp = name(b).split("/")
        print(f"| {mixer} | {T[2:]} | {d[2:]} | {'X' if sp.endswith('1') else '–'} | {ms(b['layer_s'])} | "
              f"{b['gemm_flops'] / 1e9:.2f} | {b['dgemm_GFLOPs']:.1f} | {ms(b['bound_s'])} | **{b['ratio']:.2f}** | {b.get('ratio_with_gram', float('nan')):.2f} |")
print("\n### Layers as tasks of a bundle of 8 pay them (shared weights, mixers and W_Q W_K^T)\n")
print("| mixer | T | d | spectrum | time/layer per task (ms) | GEMM GFLOP per task | bound (ms) | ratio | ratio, metric Gram in the bound |")
print("|---|---|---|---|---|---|---|---|---|")
for b in runs:
    if name(b).startswith("bundle/"):
        _, mixer, T, d, sp = name(b).split("/")
        print(f"| {mixer} | {T[2:]} | {d[2:]} | {'X' if sp.endswith('1') else '–'} | {ms(b['layer_s'])} | {b['gemm_flops'] / 1e9:.2f} | "
              f"{ms(b['bound_s'])} | **{b['ratio']:.2f}** | {b['ratio_with_gram']:.2f} |")
print("\n### Breakdown (ms per layer; route 1 = Gram + eigensolve, 2 = dgesdd, 3 = Lanczos for a collapsed spectrum)\n")
print("| mixer | T | d | layer | rng | products | elementwise | s4d kernels | mixer metrics (route) | signal metrics (route) | other |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for b in runs:
    if name(b).startswith("breakdown/"):
        _, mixer, T, d = name(b).split("/")
        route = lambda r: f" ({int(round(r))})" if r else ""
        print(f"| {mixer} | {T[2:]} | {d[2:]} | {ms(b['layer_s'])} | {ms(b['rng_s'])} | {ms(b['products_s'])} | "
              f"{ms(b['elementwise_s'])} | {ms(b['s4d_kernels_s'])} | {ms(b['mixer_metrics_s'])}{route(b['mixer_route'])} | "
              f"{ms(b['signal_metrics_s'])}{route(b['signal_route'])} | {ms(b['other_s'])} |")
PY
