#!/bin/bash
# jobs/pbs/submit_array.sh: submit jobs/pbs/array_job.sh as an array of SHARDS subjobs (qsub -J) and
# jobs/pbs/merge_job.sh to run after all of them succeeded (-W depend=afterok).
#
#   bash jobs/pbs/submit_array.sh SWEEP.toml [OUT.h5 [SHARDS]]
#
# Settings: an argument, else the environment variable, else the default (printed):
#   SWEEP        sweep file (1st argument)                        required
#   OUT          the merged store (2nd argument)                  default: <sweep file name>.h5
#   SHARDS       subjobs = shards (3rd argument)                  default: 4
#   ARRAY_QSUB   more qsub options of the array, e.g. "-l walltime=2:00:00"   default: none
#   MERGE_QSUB   more qsub options of the merge job               default: none
# Every other setting of array_job.sh (RANKS, SHARD_DIR, RCSWEEP, STOP_BEFORE, ...) is passed on
# from the environment (the scripts ask for qsub -V). Prints the two job ids.
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
ARRAY_QSUB=${ARRAY_QSUB:-}
MERGE_QSUB=${MERGE_QSUB:-}
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "error: SHARDS=$SHARDS: not a positive integer" >&2; exit 2; }
(( SHARDS >= 2 )) || { echo "error: SHARDS=$SHARDS: a PBS array needs 2 subjobs or more (use mpi_job.sh)" >&2; exit 2; }
echo "SWEEP=$SWEEP OUT=$OUT SHARDS=$SHARDS ARRAY_QSUB=$ARRAY_QSUB MERGE_QSUB=$MERGE_QSUB"
vars="SWEEP=$SWEEP,OUT=$OUT,SHARDS=$SHARDS"
# shellcheck disable=SC2086
array=$(qsub -J "0-$((SHARDS - 1))" -v "$vars" $ARRAY_QSUB "$here/array_job.sh")
# shellcheck disable=SC2086
merge=$(qsub -W "depend=afterok:$array" -v "$vars" $MERGE_QSUB "$here/merge_job.sh")
echo "array job $array ($SHARDS shards), merge job $merge (after all succeed)"
