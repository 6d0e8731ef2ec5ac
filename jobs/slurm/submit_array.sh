#!/bin/bash
# jobs/slurm/submit_array.sh: submit jobs/slurm/array_job.sh as an array of SHARDS elements and
# jobs/slurm/merge_job.sh to run after all of them succeeded (--dependency=afterok).
#
#   bash jobs/slurm/submit_array.sh SWEEP.toml [OUT.h5 [SHARDS]]
#
# Settings: an argument, else the environment variable, else the default (printed):
#   SWEEP          sweep file (1st argument)                      required
#   OUT            the merged store (2nd argument)                default: <sweep file name>.h5
#   SHARDS         array elements = shards (3rd argument)         default: 4
#   ARRAY_SBATCH   more sbatch options of the array, e.g. "-t 2:00:00 -n 4"   default: none
#   MERGE_SBATCH   more sbatch options of the merge job           default: none
# Every other setting of array_job.sh (RANKS, SHARD_DIR, RCSWEEP, GRACE, ...) is passed on from the
# environment (sbatch exports it). Prints the two job ids.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then  # this header, without the scheduler directives
  awk 'NR > 1 && !/^#/ { exit } NR > 1 && !/^#(SBATCH|PBS)/ { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
  exit 0
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SWEEP=${1:-${SWEEP:-}}
[[ -n $SWEEP ]] || { sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed '$d' >&2; echo "error: no sweep file" >&2; exit 2; }
OUT=${2:-${OUT:-$(basename "${SWEEP%.toml}").h5}}
SHARDS=${3:-${SHARDS:-4}}
ARRAY_SBATCH=${ARRAY_SBATCH:-}
MERGE_SBATCH=${MERGE_SBATCH:-}
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "error: SHARDS=$SHARDS: not a positive integer" >&2; exit 2; }
echo "SWEEP=$SWEEP OUT=$OUT SHARDS=$SHARDS ARRAY_SBATCH=$ARRAY_SBATCH MERGE_SBATCH=$MERGE_SBATCH"
export SWEEP OUT SHARDS
# shellcheck disable=SC2086
array=$(sbatch --parsable --array="0-$((SHARDS - 1))" $ARRAY_SBATCH "$here/array_job.sh")
array=${array%%;*}
# shellcheck disable=SC2086
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes $MERGE_SBATCH "$here/merge_job.sh")
merge=${merge%%;*}
echo "array job $array ($SHARDS shards), merge job $merge (after all succeed)"
