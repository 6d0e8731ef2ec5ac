#!/bin/bash
# jobs/slurm/mpi_job.sh: one rcsweep sweep as one (multi-node) MPI job on Slurm, resumed across
# walltime limits by requeueing itself.
#
#   sbatch [SBATCH OPTIONS] jobs/slurm/mpi_job.sh [SWEEP.toml [OUT.h5]]
#   e.g. sbatch -N 4 -t 12:00:00 jobs/slurm/mpi_job.sh bench/sweeps/mind_the_gap_stable_rank.toml mtg.h5
#
# Settings: an argument, else the environment variable, else the default (all printed in the log):
#   SWEEP         sweep file (1st argument)                        default: sweep.toml
#   OUT           output store (2nd argument)                      default: <sweep file name>.h5
#   RANKS         MPI ranks                                        default: $SLURM_NTASKS if you gave
#                 -n/--ntasks-per-node, else one per THREADS physical cores of every allocated node
#   THREADS       OpenMP threads per rank (rcsweep run --threads)  default: $SLURM_CPUS_PER_TASK if you
#                 gave -c/--cpus-per-task, else 1
#   LAUNCHER      mpiexec or srun                                  default: mpiexec
#   MPIEXEC       the MPI's mpiexec (LAUNCHER=mpiexec)             default: mpiexec (on PATH)
#   MPI_FLAVOUR   openmpi, mpich or intel: mpiexec's binding and environment flags   default: auto,
#                 the MPI `$MPIEXEC --version` names (another MPI: plain mpiexec -n RANKS)
#   SRUN_MPI      srun's --mpi plugin (LAUNCHER=srun); default (no --mpi: Slurm's MpiDefault) or a
#                 plugin name   default: auto, pmix, else pmi2, of `srun --mpi=list`, else default
#   RCSWEEP       the rcsweep program                              default: rcsweep (on PATH)
#   RCSWEEP_SETUP a file sourced before anything runs, e.g. `module load openmpi hdf5`; must exist if set
#   STOP_BEFORE   stop this many seconds before the job's end time (rcsweep --time-limit)  default: 120
#   GRACE         seconds running bundles may finish after the walltime warning   default: 60
#   MAX_REQUEUES  how often the job may requeue itself             default: 20
#   RCSWEEP_ARGS  more options of `rcsweep run`, e.g. "--mem-per-rank 3G"        default: none
# Nodes and time are sbatch options (-N, -t, --ntasks-per-node, --mem...) given on the command line,
# which override the #SBATCH lines below. Relative paths are taken from the submit directory.
#
# Layout (docs/CLUSTER.md): one rank per core, one BLAS/OpenMP thread per rank, ranks bound to
# cores. With THREADS > 1 (a hybrid job: --ntasks-per-node=R --cpus-per-task=THREADS) every rank is
# bound to THREADS cores (e.g. Open MPI's mpiexec --map-by slot:PE=THREADS, srun --cpus-per-task) and runs
# `rcsweep run --threads THREADS`, its OpenMP threads one per core (OMP_PLACES=cores,
# OMP_PROC_BIND=close), each with one BLAS thread. Walltime: rcsweep gets --time-limit = the time left until STOP_BEFORE s before the job's
# end, and starts no bundle that would overrun it. Besides, Slurm sends SIGUSR1 to this shell 120 s
# before the limit (--signal=B:USR1@120; slurmctld sends it when it polls, every 30 s, so up to a
# minute early); the shell forwards it to mpiexec/srun, which forward it to every rank; rcsweep stops
# handing out work, keeps the bundles that finish within GRACE s, flushes the store and exits 4.
# On exit code 4 the job requeues itself (scontrol requeue) and its next run resumes the same
# store. Otherwise the job's exit code is rcsweep's: 0 all done (diverged and vanished tasks are
# outcomes), 3 done with failed tasks, 2 sweep/usage error, 1 runtime error (docs/ERRORS.md).
#SBATCH --job-name=rcsweep
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --time=01:00:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=rcsweep-%j.out
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
LAUNCHER=${LAUNCHER:-mpiexec}
MPIEXEC=${MPIEXEC:-mpiexec}
MPI_FLAVOUR=${MPI_FLAVOUR:-auto}
SRUN_MPI=${SRUN_MPI:-auto}
RCSWEEP=${RCSWEEP:-rcsweep}
STOP_BEFORE=${STOP_BEFORE:-120}
GRACE=${GRACE:-60}
MAX_REQUEUES=${MAX_REQUEUES:-20}
RCSWEEP_ARGS=${RCSWEEP_ARGS:-}
NODES=${SLURM_JOB_NUM_NODES:-1}
THREADS=${THREADS:-${SLURM_CPUS_PER_TASK:-1}}
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "error: THREADS=$THREADS: not a positive integer" >&2; exit 2; }
if [[ -z ${RANKS:-} ]]; then  # -n/--ntasks-per-node if given, else one per THREADS physical cores of each node
  RANKS=${SLURM_NTASKS:-$(( $(lscpu -p=CORE,SOCKET | grep -v '^#' | sort -u | wc -l) * NODES / THREADS ))}
fi
RESTARTS=${SLURM_RESTART_COUNT:-0}
cd "${SLURM_SUBMIT_DIR:-.}"

[[ $LAUNCHER == mpiexec || $LAUNCHER == srun ]] || { echo "error: LAUNCHER=$LAUNCHER: not mpiexec or srun" >&2; exit 2; }
[[ $MPI_FLAVOUR =~ ^(auto|openmpi|mpich|intel)$ ]] || { echo "error: MPI_FLAVOUR=$MPI_FLAVOUR: not auto, openmpi, mpich or intel" >&2; exit 2; }
[[ $SRUN_MPI =~ ^[A-Za-z0-9_]+$ ]] || { echo "error: SRUN_MPI=$SRUN_MPI: not auto, default or an MPI plugin of srun --mpi=list" >&2; exit 2; }
[[ $RANKS =~ ^[1-9][0-9]*$ ]] || { echo "error: RANKS=$RANKS: not a positive integer" >&2; exit 2; }
echo "rcsweep job ${SLURM_JOB_ID:-?} (run $((RESTARTS + 1))) on $(hostname) at $(date -u +%FT%TZ)"
echo "  SWEEP=$SWEEP OUT=$OUT RANKS=$RANKS NODES=$NODES LAUNCHER=$LAUNCHER THREADS=$THREADS"
echo "  RCSWEEP=$RCSWEEP STOP_BEFORE=$STOP_BEFORE GRACE=$GRACE MAX_REQUEUES=$MAX_REQUEUES RCSWEEP_ARGS=$RCSWEEP_ARGS"

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
if (( THREADS > 1 )); then  # THREADS cores per rank, one OpenMP thread on each
  export OMP_PLACES=cores OMP_PROC_BIND=close
  threads=(--threads "$THREADS")
fi
# shellcheck disable=SC2206
run=("$RCSWEEP" run "$SWEEP" -o "$OUT" "${threads[@]}" --grace "$GRACE" "${limit[@]}" $RCSWEEP_ARGS)
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
set_launch

# Run the launcher in the background so that this shell can forward Slurm's warning signal (bash
# runs traps only between commands, and `wait` returns when one arrives).
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
    echo "not requeued: already requeued $RESTARTS times (MAX_REQUEUES); resubmit to continue" >&2
    exit 4
  fi
  echo "requeueing job $SLURM_JOB_ID to resume $OUT"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
fi
exit "$rc"
