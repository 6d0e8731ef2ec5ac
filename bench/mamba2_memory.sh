#!/usr/bin/env bash
# A 64-layer Mamba-2 model of mamba2-2.7b's shapes (jobs/examples/mamba2/mamba2-2.7b/config.json:
# d_model 2560, expand 2, d_state 128, headdim 64) at T = 512 in float64 with its weights kept in
# their stored dtype (BF16, the checkpoint file mapped) and one layer converted to float64 at a
# time: its time and peak memory, against what `rcsweep plan` says. Prints the machine, then a
# Markdown table for docs/BENCHMARKS.md ("Mamba-2").
#   bash bench/mamba2_memory.sh [WORKDIR=/tmp/rcsweep-mamba2-memory] [THREADS=2] [CONFIG]
# (CONFIG: another mamba_ssm config.json instead of mamba2-2.7b's, e.g. to try the script quickly.)
# Once per WORKDIR: the BF16 folder (bench/mamba2_bf16_folder.py: 5.4 GB written tensor by tensor,
# a few minutes) and a token file of 512 ids. Then, each under /usr/bin/time -v with the process's
# RssAnon and RssFile sampled every 0.2 s (/proc/PID/status):
#   rcsweep run   a one-task sweep (block = "mamba2", init = "checkpoint", input = "tokens",
#                 depth 64, the default metrics of every layer) on one rank of THREADS threads,
#                 after `rcsweep plan --json` of the same layout (its time and peak memory);
#   the forward   tests/python/mamba2_forward (the 64 blocks and the final norm, every layer's
#                 hidden state kept for its .npy: 0.7 GB of them) on THREADS threads.
# Each takes about 1 to 3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/rcsweep-mamba2-memory}
threads=${2:-2}
config=${3:-jobs/examples/mamba2/mamba2-2.7b/config.json}
py=/usr/bin/python3
rcsweep=./build/rcsweep
tool=./build/tests/python/mamba2_forward
[[ -x $rcsweep && -x $tool ]] || { echo "build first: cmake --build build --target rcsweep mamba2_forward" >&2; exit 1; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
folder=$work/bf16-$(basename "$(dirname "$(realpath "$config")")")
if [[ ! -f $folder/model.safetensors ]]; then
  "$py" bench/mamba2_bf16_folder.py "$config" "$folder" >&2
fi
read -r d depth vocab < <("$py" -c 'import json, sys
c = json.load(open(sys.argv[1]))
print(c["d_model"], c["n_layer"], c["vocab_size"])' "$config")
"$py" -c 'import sys, numpy as np
print(" ".join(map(str, np.random.default_rng(5).integers(0, int(sys.argv[1]), 512))))' "$vocab" >"$work/ids.txt"
cat >"$work/sweep.toml" <<EOF
# bench/mamba2_memory.sh: one task, every layer of a BF16 checkpoint of $config's shapes.
[sweep]
name = "mamba2_memory"
seed = 1
replicates = 1

[model]
block = "mamba2"
model_folder = "$folder"
init = "checkpoint"
input = "tokens"
input_path = "$work/ids.txt"
T = 512
d = $d
depth = $depth
norm = "rms"
gate = "silu"

[axes]
lambda = [1.0]
EOF

# measure NAME COMMAND...: wall time and peak RSS (/usr/bin/time -v), the largest RssAnon and
# RssFile seen, one JSON line to $work/runs.jsonl.
: >"$work/runs.jsonl"
measure() {
  local name=$1; shift
  local l; l=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -v -o "$work/$name.time" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local tpid=$! pid="" anon=0 file=0
  while kill -0 "$tpid" 2>/dev/null; do
    [[ -z $pid ]] && pid=$(pgrep -P "$tpid" | head -n1 || true)
    if [[ -n $pid && -r /proc/$pid/status ]]; then
      read -r a f < <(awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} END {print a + 0, f + 0}' "/proc/$pid/status" 2>/dev/null || echo "0 0")
      ((a > anon)) && anon=$a
      ((f > file)) && file=$f
    fi
    sleep 0.2
  done
  wait "$tpid" || { echo "$name failed:" >&2; cat "$work/$name.err" >&2; exit 1; }
  "$py" - "$work/$name.time" "$name" "$anon" "$file" "$l" <<'PY' | tee -a "$work/runs.jsonl" >&2
import json, re, sys
text = open(sys.argv[1]).read()
def field(label):
    return re.search(re.escape(label) + r":\s*(.+)", text).group(1).strip()
wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
print(json.dumps({"name": sys.argv[2], "wall_s": seconds, "max_rss_kib": int(field("Maximum resident set size (kbytes)")),
                  "user_s": float(field("User time (seconds)")), "sys_s": float(field("System time (seconds)")),
                  "rss_anon_kib": int(sys.argv[3]), "rss_file_kib": int(sys.argv[4]), "load": float(sys.argv[5])}))
PY
}

"$rcsweep" plan "$work/sweep.toml" --threads "$threads" --json >"$work/plan.json"
measure run "$rcsweep" run "$work/sweep.toml" -o "$work/store.h5" --overwrite --threads "$threads" -q
OMP_NUM_THREADS=$threads measure forward "$tool" "$folder" "$work/ids.txt" "$work/hidden.npy"
rm -f "$work/hidden.npy"

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/^Mem/ {print $2}') GiB; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $("$rcsweep" --version | tail -n1)"
echo "date: $(date -u '+%Y-%m-%d %H:%M') UTC; $(du -h --apparent-size "$folder/model.safetensors" | cut -f1) of BF16 weights; runs in $work/runs.jsonl"
"$py" - "$work/runs.jsonl" "$work/plan.json" "$threads" "$(basename "$folder" | sed 's/^bf16-//')" <<'PY'
import json, sys
runs = {r["name"]: r for r in map(json.loads, open(sys.argv[1]))}
plan = json.load(open(sys.argv[2]))
threads = int(sys.argv[3])
plan_name = sys.argv[4]
gib = 2 ** 30
mem = plan["memory"]
print(f"\nOne task of every layer of a checkpoint of {plan_name}'s shapes, T = 512, float64, weights BF16 (mapped), one rank of "
      f"{threads} threads; load average before: " + ", ".join(f"{n} {r['load']:.2f}" for n, r in runs.items()) + "\n")
print("| run | wall s | CPU s | peak RSS GiB | of it anonymous / file-backed GiB | plan: wall s, core-s, peak GiB | "
      "measured ÷ plan (wall, CPU, memory) |")
print("|---|---|---|---|---|---|---|")
for name, what in (("run", "rcsweep run (one-task sweep, every layer's metrics)"),
                   ("forward", "tests/python/mamba2_forward (forward only, every hidden state kept)")):
    r = runs[name]
    cells = [what, f"{r['wall_s']:.1f}", f"{r['user_s'] + r['sys_s']:.1f}", f"{r['max_rss_kib'] * 1024 / gib:.2f}",
             f"{r['rss_anon_kib'] * 1024 / gib:.2f} / {r['rss_file_kib'] * 1024 / gib:.2f}"]
    if name == "run":
        wall, core, peak = plan["suggested"]["wall_s"], plan["work"]["core_seconds"], mem["peak_bytes"]
        cells += [f"{wall:.1f}, {core:.1f}, {peak / gib:.2f}",
                  f"**{r['wall_s'] / wall:.2f}**, {(r['user_s'] + r['sys_s']) / core:.2f}, "
                  f"**{r['max_rss_kib'] * 1024 / peak:.2f}**"]
    else:
        cells += ["", ""]
    print("| " + " | ".join(cells) + " |")
print(f"\nplan: {plan['work']['core_seconds']:.0f} core-seconds; peak {mem['peak_bytes'] / gib:.2f} GiB of which "
      f"model files mapped {mem['model_bytes'] / gib:.2f} GiB, largest bundle {mem['unit_bytes'] / gib:.2f} GiB; "
      f"within 24 GiB: {'yes' if max(r['max_rss_kib'] for r in runs.values()) * 1024 < 24 * gib else 'NO'}")
PY
