#!/usr/bin/env bash
# Install what is missing, build, and run the example sweep on 2 MPI ranks; then print a summary
# table and write a plot of the stable rank against layer.
#   bash scripts/quickstart.sh [SWEEP.toml] [RANKS]
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-jobs/examples/quick.toml}
ranks=${2:-2}

bash scripts/install_deps.sh
bash scripts/build.sh rcsweep   # only the program: the test command builds the rest

mkdir -p out
name=$(basename "$sweep" .toml)
store=out/$name.h5
mpiexec_cmd="mpiexec --oversubscribe"
[[ $(id -u) -eq 0 ]] && mpiexec_cmd+=" --allow-run-as-root"

./build/rcsweep plan "$sweep"
echo
rc=0
# -n: rcsweep runs mpiexec itself, so that Ctrl-C stops the run cleanly (exit code 4, resumable)
./build/rcsweep run -n "$ranks" --mpiexec "$mpiexec_cmd" "$sweep" -o "$store" || rc=$?
if [[ $rc -ne 0 && $rc -ne 3 ]]; then exit "$rc"; fi   # 3: finished, some tasks failed (recorded)
echo
/usr/bin/python3 scripts/rcsweep_summary.py "$store" --metric sr_cov --png "out/$name.png"
echo
echo "Store: $store (inspect with ./build/rcsweep info $store); plot: out/$name.png"
