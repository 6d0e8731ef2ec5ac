#!/bin/bash
# jobs/pbs/merge_job.sh: join the shard stores of jobs/pbs/array_job.sh into one store
# (`rcsweep merge`), equal to a single run's. Submit it after the array, with a dependency:
#
#   qsub -W depend=afterok:ARRAY_ID -v SWEEP=s.toml,OUT=s.h5,SHARDS=8 jobs/pbs/merge_job.sh
# (ARRAY_ID as qsub printed it, e.g. 1234[].server; jobs/pbs/submit_array.sh does both).
#
# Settings: an argument (when run by hand: bash merge_job.sh SWEEP OUT), else the environment
# variable (qsub -v, or -V which this script asks for), else the default (all printed in the log):
#   SWEEP       sweep file (only its name is used)                 default: sweep.toml
#   OUT         the merged store to create                         default: <sweep file name>.h5
#   SHARDS      number of shards                                   default: the shard-*-of-N.h5
#               stores in SHARD_DIR (all must agree on N)
#   SHARD_DIR   where array_job.sh wrote the shard stores          default: <OUT without .h5>.shards
#   RCSWEEP     the rcsweep program                                default: rcsweep (on PATH)
#   RCSWEEP_SETUP  a file sourced before anything runs, e.g. `module load hdf5`; must exist if set
#   MERGE_ARGS  more options of `rcsweep merge`, e.g. --overwrite   default: none
# A missing, duplicated, unfinished or foreign shard makes rcsweep merge refuse (exit 2, nothing
# written); the shard stores are kept either way (delete them yourself once the merge is checked).
#PBS -N rcsweep-merge
#PBS -l select=1:ncpus=1
#PBS -l walltime=00:30:00
#PBS -j oe
#PBS -V
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then  # this header, without the scheduler directives
  awk 'NR > 1 && !/^#/ { exit } NR > 1 && !/^#(SBATCH|PBS)/ { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
  exit 0
fi
# The site's setup (module load ..., a spack or conda environment), before anything else runs.
RCSWEEP_SETUP=${RCSWEEP_SETUP:-}
if [[ -n $RCSWEEP_SETUP ]]; then
  [[ -f $RCSWEEP_SETUP && -r $RCSWEEP_SETUP ]] || { echo "error: RCSWEEP_SETUP=$RCSWEEP_SETUP: no readable file" >&2; exit 2; }
  echo "sourcing RCSWEEP_SETUP=$RCSWEEP_SETUP"
  set +u  # module and environment scripts often read unset variables
  # shellcheck disable=SC1090
  source "$RCSWEEP_SETUP"
  set -u
fi

SWEEP=${1:-${SWEEP:-sweep.toml}}
OUT=${2:-${OUT:-$(basename "${SWEEP%.toml}").h5}}
SHARD_DIR=${SHARD_DIR:-${OUT%.h5}.shards}
RCSWEEP=${RCSWEEP:-rcsweep}
MERGE_ARGS=${MERGE_ARGS:-}
cd "${PBS_O_WORKDIR:-.}"
if [[ -z ${SHARDS:-} ]]; then  # from the names of the shard stores
  first=$(compgen -G "$SHARD_DIR/shard-*-of-*.h5" | head -n 1 || true)
  [[ -n $first ]] || { echo "error: no shard stores SHARD_DIR/shard-*-of-*.h5 in SHARD_DIR=$SHARD_DIR" >&2; exit 2; }
  SHARDS=${first##*-of-}
  SHARDS=${SHARDS%.h5}
fi
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "error: SHARDS=$SHARDS: not a positive integer" >&2; exit 2; }
echo "rcsweep merge job ${PBS_JOBID:-?} on $(hostname) at $(date -u +%FT%TZ)"
echo "  SWEEP=$SWEEP OUT=$OUT SHARDS=$SHARDS SHARD_DIR=$SHARD_DIR RCSWEEP=$RCSWEEP MERGE_ARGS=$MERGE_ARGS"
shards=()
for ((i = 0; i < SHARDS; i++)); do shards+=("$SHARD_DIR/shard-$i-of-$SHARDS.h5"); done
# shellcheck disable=SC2086  # MERGE_ARGS: several words
"$RCSWEEP" merge "$OUT" "${shards[@]}" $MERGE_ARGS
"$RCSWEEP" info "$OUT" | head -n 8
