#!/bin/bash
# jobs/slurm/array_job.sh: one shard of an rcsweep sweep per Slurm array element
# (`rcsweep run --shard $SLURM_ARRAY_TASK_ID/$SHARDS`), each resumed across walltime limits by
# requeueing itself; jobs/slurm/merge_job.sh then joins the shard stores. Submit both with
#
#   bash jobs/slurm/submit_array.sh SWEEP.toml OUT.h5 [SHARDS]
# or by hand:
#   id=$(sbatch --parsable --array=0-7 jobs/slurm/array_job.sh SWEEP.toml OUT.h5)
#   sbatch --dependency=afterok:$id jobs/slurm/merge_job.sh SWEEP.toml OUT.h5
#
# Settings: an argument, else the environment variable, else the default (all printed in the log):
#   SWEEP         sweep file (1st argument)                        default: sweep.toml
#   OUT           the merged store (2nd argument)                  default: <sweep file name>.h5
#   SHARDS        number of shards                                 default: $SLURM_ARRAY_TASK_COUNT
#                 (set it when you resubmit only some elements, e.g. --array=3 of 8 shards)
#   SHARD_DIR     where the shard stores go                        default: <OUT without .h5>.shards
#                 (shard i of n is SHARD_DIR/shard-i-of-n.h5)
#   RANKS         MPI ranks per element                            default: $SLURM_NTASKS (1)
#   THREADS       OpenMP threads per rank (rcsweep run --threads)  default: $SLURM_CPUS_PER_TASK (1)
#   LAUNCHER      mpiexec or srun, used when RANKS > 1             default: mpiexec
#   MPIEXEC       the MPI's mpiexec (LAUNCHER=mpiexec)             default: mpiexec (on PATH)
#   MPI_FLAVOUR   openmpi, mpich or intel: mpiexec's binding and environment flags   default: auto,
#                 the MPI `$MPIEXEC --version` names (another MPI: plain mpiexec -n RANKS)
#   SRUN_MPI      srun's --mpi plugin (LAUNCHER=srun); default (no --mpi: Slurm's MpiDefault) or a
#                 plugin name   default: auto, pmix, else pmi2, of `srun --mpi=list`, else default
#   RCSWEEP       the rcsweep program                              default: rcsweep (on PATH)
#   RCSWEEP_SETUP a file sourced before anything runs, e.g. `module load openmpi hdf5`; must exist if set
#   STOP_BEFORE   stop this many seconds before the job's end time (rcsweep --time-limit)  default: 120
#   GRACE         seconds running bundles may finish after the walltime warning   default: 60
#   MAX_REQUEUES  how often an element may requeue itself          default: 20
#   RCSWEEP_ARGS  more options of `rcsweep run`, e.g. "--mem-per-rank 3G"        default: none
#   MERGE_JOB     a merge job script the first element to start submits, to run after every element
#                 succeeded (sbatch --dependency=afterok:ARRAY_ID; `rcsweep plan --emit` writes its own
#                 into the script: built-in)   default: none (submit_array.sh submits the merge)
#   MERGE_SBATCH  more sbatch options of that merge job           default: none
# Elements, tasks and time are sbatch options (--array, -n, -t, --mem...) on the command line.
# Relative paths are taken from the submit directory.
#
# Walltime: as jobs/slurm/mpi_job.sh (--time-limit up to STOP_BEFORE s before the end, and SIGUSR1
# 120 s before it forwarded to rcsweep, which stops cleanly with exit code 4; the element then
# requeues itself and resumes its shard store). A requeued element is pending again, so the merge
# job (afterok) waits for it. Threads (--cpus-per-task=THREADS): as jobs/slurm/mpi_job.sh, but a
# single rank (RANKS=1, no launcher) leaves its threads to the cores Slurm gave the job, unbound.
#SBATCH --job-name=rcsweep-shard
#SBATCH --array=0-3
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=01:00:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=rcsweep-%A_%a.out
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
SHARDS=${SHARDS:-${SLURM_ARRAY_TASK_COUNT:-}}
SHARD_DIR=${SHARD_DIR:-${OUT%.h5}.shards}
INDEX=${SLURM_ARRAY_TASK_ID:-}
RANKS=${RANKS:-${SLURM_NTASKS:-1}}
THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-1}}
LAUNCHER=${LAUNCHER:-mpiexec}
MPIEXEC=${MPIEXEC:-mpiexec}
MPI_FLAVOUR=${MPI_FLAVOUR:-auto}
SRUN_MPI=${SRUN_MPI:-auto}
RCSWEEP=${RCSWEEP:-rcsweep}
STOP_BEFORE=${STOP_BEFORE:-120}
GRACE=${GRACE:-60}
MAX_REQUEUES=${MAX_REQUEUES:-20}
RCSWEEP_ARGS=${RCSWEEP_ARGS:-}
MERGE_JOB=${MERGE_JOB:-none}
MERGE_SBATCH=${MERGE_SBATCH:-}
RESTARTS=${SLURM_RESTART_COUNT:-0}
cd "${SLURM_SUBMIT_DIR:-.}"

[[ $INDEX =~ ^[0-9]+$ ]] || { echo "error: SLURM_ARRAY_TASK_ID is not set: submit with sbatch --array" >&2; exit 2; }
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "error: SHARDS=$SHARDS: not a positive integer" >&2; exit 2; }
(( INDEX < SHARDS )) || { echo "error: array index $INDEX is not below SHARDS=$SHARDS" >&2; exit 2; }
[[ $LAUNCHER == mpiexec || $LAUNCHER == srun ]] || { echo "error: LAUNCHER=$LAUNCHER: not mpiexec or srun" >&2; exit 2; }
[[ $MPI_FLAVOUR =~ ^(auto|openmpi|mpich|intel)$ ]] || { echo "error: MPI_FLAVOUR=$MPI_FLAVOUR: not auto, openmpi, mpich or intel" >&2; exit 2; }
[[ $SRUN_MPI =~ ^[A-Za-z0-9_]+$ ]] || { echo "error: SRUN_MPI=$SRUN_MPI: not auto, default or an MPI plugin of srun --mpi=list" >&2; exit 2; }
[[ $RANKS =~ ^[1-9][0-9]*$ ]] || { echo "error: RANKS=$RANKS: not a positive integer" >&2; exit 2; }
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "error: THREADS=$THREADS: not a positive integer" >&2; exit 2; }
SHARD_OUT=$SHARD_DIR/shard-$INDEX-of-$SHARDS.h5
mkdir -p "$SHARD_DIR"
echo "rcsweep job ${SLURM_JOB_ID:-?} = ${SLURM_ARRAY_JOB_ID:-?}_$INDEX (run $((RESTARTS + 1))) on $(hostname) at $(date -u +%FT%TZ)"
echo "  SWEEP=$SWEEP OUT=$OUT SHARD=$INDEX/$SHARDS -> $SHARD_OUT RANKS=$RANKS LAUNCHER=$LAUNCHER THREADS=$THREADS"
echo "  RCSWEEP=$RCSWEEP STOP_BEFORE=$STOP_BEFORE GRACE=$GRACE MAX_REQUEUES=$MAX_REQUEUES RCSWEEP_ARGS=$RCSWEEP_ARGS"
echo "  MERGE_JOB=$MERGE_JOB MERGE_SBATCH=$MERGE_SBATCH"

# The merge: with MERGE_JOB set, the first element to start submits it to run after every element of this
# array succeeded. A directory in SHARD_DIR named after the array marks it submitted (mkdir is
# atomic, also on NFS): requeued and later elements do not submit it again.
merge_job_text() { cat -- "$MERGE_JOB"; }
submit_merge() {
  local array=${SLURM_ARRAY_JOB_ID:-} id
  [[ -n $array ]] || return 0
  mkdir "$SHARD_DIR/merge-of-$array" 2>/dev/null || return 0
  # shellcheck disable=SC2086  # more options: several words
  if id=$(merge_job_text | SWEEP=$SWEEP OUT=$OUT SHARDS=$SHARDS SHARD_DIR=$SHARD_DIR RCSWEEP=$RCSWEEP \
           sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes $MERGE_SBATCH); then
    echo "  submitted the merge job ${id%%;*}: it runs after every element of array $array succeeded"
  else
    rmdir "$SHARD_DIR/merge-of-$array"  # a later one may try again
    echo "warning: the merge job was not submitted; submit it yourself: sbatch --dependency=afterok:$array jobs/slurm/merge_job.sh $SWEEP $OUT" >&2
  fi
}
if [[ $MERGE_JOB != none ]]; then submit_merge; fi

# The job's end time (Slurm 23.02+ also exports it as SLURM_JOB_END_TIME, which rcsweep reads): no
# bundle is started that would not finish STOP_BEFORE s before it. This does not depend on Slurm's
# --signal warning, which slurmctld sends only when it polls (every 30 s), up to a minute early.
limit=()
end=$(squeue -h -j "${SLURM_JOB_ID:-0}" -o %e 2>/dev/null || true)
if end_s=$(date -d "$end" +%s 2>/dev/null); then
  left=$(( end_s - $(date +%s) - STOP_BEFORE ))
  if (( left > 0 )); then
    limit=(--time-limit "${left}s")
    echo "  job ends $end: rcsweep --time-limit ${left}s"
  else
    echo "  job ends $end, less than STOP_BEFORE=$STOP_BEFORE s away: no --time-limit"
  fi
fi

export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
threads=()
if (( THREADS > 1 )); then
  threads=(--threads "$THREADS")
  if (( RANKS > 1 )); then export OMP_PLACES=cores OMP_PROC_BIND=close; fi  # within the cores of its rank
fi
# shellcheck disable=SC2206
run=("$RCSWEEP" run "$SWEEP" -o "$SHARD_OUT" --shard "$INDEX/$SHARDS" "${threads[@]}" --grace "$GRACE" "${limit[@]}"
     $RCSWEEP_ARGS)
# The launcher (these lines are the same in jobs/slurm/*_job.sh and jobs/pbs/*_job.sh): sets `launch`,
# the command line put before rcsweep's. mpiexec gets the binding and environment flags of the MPI
# it belongs to: MPI_FLAVOUR, or with auto the one `$MPIEXEC --version` names (Open MPI:
# --map-by/--bind-to/-x; MPICH or another Hydra: -bind-to/-map-by core:N, -genv; Intel MPI: -genv
# with I_MPI_PIN_DOMAIN); an MPI it does not name gets a plain `mpiexec -n RANKS`, its own defaults
# for binding and environment. srun (LAUNCHER=srun) gets --mpi=SRUN_MPI, with auto pmix, else pmi2,
# of those `srun --mpi=list` offers, else no --mpi (Slurm's MpiDefault); SRUN_MPI=default: no --mpi.
# `hostfile` (PBS: $PBS_NODEFILE) is passed when set.
set_launch() {
  local flavour=$MPI_FLAVOUR mpi=${SRUN_MPI:-auto} v domain
  local vars=(OMP_NUM_THREADS OPENBLAS_NUM_THREADS MKL_NUM_THREADS)
  if (( THREADS > 1 )); then vars+=(OMP_PLACES OMP_PROC_BIND); fi
  if [[ ${LAUNCHER:-mpiexec} == srun ]]; then
    if [[ $mpi == auto ]]; then
      v=$(timeout 60 srun --mpi=list 2>&1 | sed -e 's/^srun: *//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' || true)
      if grep -qxE 'pmix(_v[0-9]+)?' <<<"$v"; then mpi=pmix
      elif grep -qx pmi2 <<<"$v"; then mpi=pmi2
      else mpi=default; fi
    fi
    launch=(srun)
    if [[ $mpi != default ]]; then launch+=(--mpi="$mpi"); fi
    launch+=(--ntasks="$RANKS" --cpus-per-task="$THREADS" --cpu-bind=cores --kill-on-bad-exit=1)
    echo "  launcher: srun, MPI plugin $mpi (SRUN_MPI=$SRUN_MPI): ${launch[*]}"
    return 0
  fi
  if [[ $flavour == auto ]]; then
    v=$(timeout 60 "$MPIEXEC" --version 2>&1 || true)
    case $v in
      *"Open MPI"* | *OpenRTE*) flavour=openmpi ;;
      *"Intel(R) MPI"*) flavour=intel ;;
      *HYDRA* | *MPICH*) flavour=mpich ;;
      *) flavour=unknown ;;
    esac
  fi
  launch=("$MPIEXEC" -n "$RANKS")
  case $flavour in
    openmpi)
      if [[ -n ${hostfile:-} ]]; then launch+=(--hostfile "$hostfile"); fi
      if (( THREADS > 1 )); then launch+=(--map-by "slot:PE=$THREADS" --bind-to core)
      else launch+=(--map-by core --bind-to core); fi
      for v in "${vars[@]}"; do launch+=(-x "$v"); done
      if [[ $(id -u) == 0 ]]; then launch+=(--allow-run-as-root); fi
      ;;
    mpich | intel)
      if [[ -n ${hostfile:-} ]]; then launch+=(-f "$hostfile"); fi
      if [[ $flavour == intel ]]; then
        domain=core
        if (( THREADS > 1 )); then domain=omp:compact; fi  # OMP_NUM_THREADS cores next to each other
        launch+=(-genv I_MPI_PIN 1 -genv I_MPI_PIN_DOMAIN "$domain")
      elif (( THREADS > 1 )); then launch+=(-bind-to "core:$THREADS" -map-by "core:$THREADS")
      else launch+=(-bind-to core -map-by core); fi
      for v in "${vars[@]}"; do launch+=(-genv "$v" "${!v}"); done
      ;;
    *)
      echo "warning: \`$MPIEXEC --version\` names no MPI this script knows (Open MPI, MPICH, Intel MPI):" \
           "running a plain \`$MPIEXEC -n $RANKS\` (binding, environment and hosts left to that MPI);" \
           "set MPI_FLAVOUR=openmpi, mpich or intel to choose its flags" >&2
      ;;
  esac
  echo "  launcher: $MPIEXEC, MPI $flavour (MPI_FLAVOUR=$MPI_FLAVOUR): ${launch[*]}"
}
launch=()
if (( RANKS > 1 )); then set_launch; fi

# Run in the background so that this shell can forward Slurm's warning signal (bash runs traps only
# between commands, and `wait` returns when one arrives).
signalled=0
pid=
# shellcheck disable=SC2317  # called from the traps
forward() {
  echo "$(date -u +%T) $1: asking rcsweep to stop (resumes after requeue)"
  if [[ -n $pid ]]; then signalled=1; kill -USR1 "$pid" 2>/dev/null || true; fi
}
trap 'forward SIGUSR1' USR1
trap 'forward SIGTERM' TERM
"${launch[@]}" "${run[@]}" &
pid=$!
while :; do
  rc=0
  wait "$pid" || rc=$?
  if (( rc > 128 && signalled == 1 )); then signalled=2; continue; fi  # `wait` interrupted by the trap
  break
done
trap - USR1 TERM
echo "$(date -u +%T) rcsweep exit code $rc"

# 4: stopped early. Killed by the forwarded signal (it came before rcsweep could catch it): the
# store is as after a kill, consistent too.
if (( rc == 4 || (signalled && rc > 128) )); then
  if (( RESTARTS >= MAX_REQUEUES )); then
    echo "not requeued: already requeued $RESTARTS times (MAX_REQUEUES); resubmit this element" >&2
    exit 4
  fi
  echo "requeueing job $SLURM_JOB_ID to resume $SHARD_OUT"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
fi
exit "$rc"
