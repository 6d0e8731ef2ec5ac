#!/bin/bash
# jobs/pbs/array_job.sh: one shard of an rcsweep sweep per PBS array subjob
# (`rcsweep run --shard $PBS_ARRAY_INDEX/$SHARDS`), each rerun across walltime limits;
# jobs/pbs/merge_job.sh then joins the shard stores. Submit both with
#
#   bash jobs/pbs/submit_array.sh SWEEP.toml OUT.h5 [SHARDS]
# or by hand:
#   id=$(qsub -J 0-7 -v SWEEP=s.toml,OUT=s.h5,SHARDS=8 jobs/pbs/array_job.sh)
#   qsub -W depend=afterok:$id -v SWEEP=s.toml,OUT=s.h5,SHARDS=8 jobs/pbs/merge_job.sh
#
# Settings: an argument (when run by hand: bash array_job.sh SWEEP OUT), else the environment
# variable (qsub -v, or -V which this script asks for), else the default (all printed in the log):
#   SWEEP         sweep file                                       default: sweep.toml
#   OUT           the merged store                                 default: <sweep file name>.h5
#   SHARDS        number of shards = subjobs (PBS does not say)    default: 4 (as #PBS -J 0-3)
#   SHARD_DIR     where the shard stores go                        default: <OUT without .h5>.shards
#                 (shard i of n is SHARD_DIR/shard-i-of-n.h5)
#   RANKS         MPI ranks per subjob                             default: lines of $PBS_NODEFILE
#   THREADS       OpenMP threads per rank (rcsweep run --threads)  default: 1
#                 (a hybrid job: ask for mpiprocs = ranks and ompthreads = THREADS per chunk,
#                 ncpus = mpiprocs x THREADS)
#   RCSWEEP       the rcsweep program                              default: rcsweep (on PATH)
#   RCSWEEP_SETUP a file sourced before anything runs, e.g. `module load openmpi hdf5`; must exist if set
#   MPIEXEC       Open MPI's mpiexec, used when RANKS > 1          default: mpiexec (on PATH)
#   STOP_BEFORE   stop this many seconds before the walltime ends (rcsweep --time-limit)  default: 120
#   GRACE         seconds running bundles may finish after SIGTERM  default: 8 (PBS kills 10 s later)
#   MAX_REQUEUES  how often a subjob may rerun itself              default: 20
#   RCSWEEP_ARGS  more options of `rcsweep run`, e.g. "--mem-per-rank 3G"        default: none
# Subjobs, cores and walltime are qsub options (-J, -l select=..., -l walltime=...) on the command
# line. Relative paths are taken from $PBS_O_WORKDIR.
#
# Walltime: as jobs/pbs/mpi_job.sh (--time-limit = walltime left less STOP_BEFORE, SIGTERM forwarded
# as SIGUSR1; on exit code 4 the subjob asks to be rerun with qrerun and resumes its shard store).
# Threads: as jobs/pbs/mpi_job.sh, but a single rank (RANKS=1, no mpiexec) leaves its threads to
# the cores PBS gave the subjob, unbound.
#PBS -N rcsweep-shard
#PBS -J 0-3
#PBS -l select=1:ncpus=1:mpiprocs=1
#PBS -l walltime=01:00:00
#PBS -r y
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
SHARDS=${SHARDS:-4}
SHARD_DIR=${SHARD_DIR:-${OUT%.h5}.shards}
INDEX=${PBS_ARRAY_INDEX:-}
RCSWEEP=${RCSWEEP:-rcsweep}
MPIEXEC=${MPIEXEC:-mpiexec}
STOP_BEFORE=${STOP_BEFORE:-120}
GRACE=${GRACE:-8}
MAX_REQUEUES=${MAX_REQUEUES:-20}
RCSWEEP_ARGS=${RCSWEEP_ARGS:-}
THREADS=${THREADS:-1}
NODEFILE=${PBS_NODEFILE:-}
[[ -n $NODEFILE && -r $NODEFILE ]] || { echo "error: PBS_NODEFILE=$NODEFILE: no node file (run under qsub)" >&2; exit 2; }
RANKS=${RANKS:-$(grep -c . "$NODEFILE")}
cd "${PBS_O_WORKDIR:-.}"

[[ $INDEX =~ ^[0-9]+$ ]] || { echo "error: PBS_ARRAY_INDEX is not set: submit with qsub -J" >&2; exit 2; }
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "error: SHARDS=$SHARDS: not a positive integer" >&2; exit 2; }
(( INDEX < SHARDS )) || { echo "error: array index $INDEX is not below SHARDS=$SHARDS" >&2; exit 2; }
[[ $RANKS =~ ^[1-9][0-9]*$ ]] || { echo "error: RANKS=$RANKS: not a positive integer" >&2; exit 2; }
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "error: THREADS=$THREADS: not a positive integer" >&2; exit 2; }
SHARD_OUT=$SHARD_DIR/shard-$INDEX-of-$SHARDS.h5
mkdir -p "$SHARD_DIR"

info=$(qstat -f "${PBS_JOBID:-none}" 2>/dev/null || true)
field() { sed -n "s/^ *$1 = //p" <<<"$info" | head -n 1; }
seconds() { local IFS=: t=0 p; for p in $1; do t=$((t * 60 + 10#$p)); done; echo "$t"; }
RUNS=$(field run_count)
RESTARTS=$(( ${RUNS:-1} > 0 ? ${RUNS:-1} - 1 : 0 ))
echo "rcsweep job ${PBS_JOBID:-?} (run $((RESTARTS + 1))) on $(hostname) at $(date -u +%FT%TZ)"
echo "  SWEEP=$SWEEP OUT=$OUT SHARD=$INDEX/$SHARDS -> $SHARD_OUT RANKS=$RANKS MPIEXEC=$MPIEXEC THREADS=$THREADS"
echo "  RCSWEEP=$RCSWEEP STOP_BEFORE=$STOP_BEFORE GRACE=$GRACE MAX_REQUEUES=$MAX_REQUEUES RCSWEEP_ARGS=$RCSWEEP_ARGS"

limit=()
wall=$(field Resource_List.walltime)
used=$(field resources_used.walltime)
if [[ -n ${PBS_WALLTIME:-} ]]; then left=$(( PBS_WALLTIME - STOP_BEFORE ))
elif [[ -n $wall ]]; then left=$(( $(seconds "$wall") - $(seconds "${used:-0}") - STOP_BEFORE ))
else left=; fi
if [[ -n $left ]] && (( left > 0 )); then
  limit=(--time-limit "${left}s")
  echo "  walltime ${wall:-${PBS_WALLTIME}s}, used ${used:-0}: rcsweep --time-limit ${left}s"
else
  echo "  walltime unknown or less than STOP_BEFORE=$STOP_BEFORE s: no --time-limit"
fi

export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
threads=()
map=(--map-by core --bind-to core)
if (( THREADS > 1 )); then
  threads=(--threads "$THREADS")
  map=(--map-by "slot:PE=$THREADS" --bind-to core -x OMP_PLACES -x OMP_PROC_BIND)
  if (( RANKS > 1 )); then export OMP_PLACES=cores OMP_PROC_BIND=close; fi  # within the cores of its rank
fi
# shellcheck disable=SC2206
run=("$RCSWEEP" run "$SWEEP" -o "$SHARD_OUT" --shard "$INDEX/$SHARDS" "${threads[@]}" --grace "$GRACE" "${limit[@]}"
     $RCSWEEP_ARGS)
launch=()
if (( RANKS > 1 )); then
  launch=("$MPIEXEC" -n "$RANKS" --hostfile "$NODEFILE" "${map[@]}" -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS
          -x MKL_NUM_THREADS)
  [[ $(id -u) == 0 ]] && launch+=(--allow-run-as-root)
fi

# Run in the background so that this shell can forward PBS's SIGTERM as SIGUSR1 (bash runs traps
# only between commands, and `wait` returns when one arrives).
signalled=0
pid=
# shellcheck disable=SC2317  # called from the traps
forward() {
  echo "$(date -u +%T) $1: asking rcsweep to stop"
  if [[ -n $pid ]]; then signalled=1; kill -USR1 "$pid" 2>/dev/null || true; fi
}
trap 'forward SIGTERM' TERM
trap 'forward SIGUSR1' USR1
"${launch[@]}" "${run[@]}" &
pid=$!
while :; do
  rc=0
  wait "$pid" || rc=$?
  if (( rc > 128 && signalled == 1 )); then signalled=2; continue; fi  # `wait` interrupted by the trap
  break
done
trap - TERM USR1
echo "$(date -u +%T) rcsweep exit code $rc"

# 4: stopped early; killed by the forwarded signal: the store is as after a kill, consistent too.
if (( rc == 4 || (signalled && rc > 128) )); then
  if (( RESTARTS >= MAX_REQUEUES )); then
    echo "not rerun: already ran $((RESTARTS + 1)) times (MAX_REQUEUES); resubmit this subjob" >&2
    exit 4
  fi
  echo "rerunning job $PBS_JOBID to resume $SHARD_OUT"
  if qrerun "$PBS_JOBID"; then exit 0; fi
  echo "qrerun refused (some sites let only operators rerun jobs): resubmit subjob $INDEX (qsub -J $INDEX-$INDEX:1 ...) to resume $SHARD_OUT; the merge job will wait for it only if you submit it again" >&2
  exit 4
fi
exit "$rc"
