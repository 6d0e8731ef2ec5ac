#!/bin/bash
# jobs/pbs/mpi_job.sh: one rcsweep sweep as one (multi-node) MPI job on PBS Pro / OpenPBS, resumed
# across walltime limits by rerunning itself.
#
#   qsub [QSUB OPTIONS] -v SWEEP=sweep.toml,OUT=out.h5 jobs/pbs/mpi_job.sh
#   e.g. qsub -l select=4:ncpus=64:mpiprocs=64 -l walltime=12:00:00 \
#             -v SWEEP=bench/sweeps/mind_the_gap_stable_rank.toml,OUT=mtg.h5 jobs/pbs/mpi_job.sh
#
# Settings: an argument (when run by hand: bash mpi_job.sh SWEEP OUT), else the environment variable
# (qsub -v, or -V which this script asks for), else the default (all printed in the job log):
#   SWEEP         sweep file                                       default: sweep.toml
#   OUT           output store                                     default: <sweep file name>.h5
#   RANKS         MPI ranks                                        default: lines of $PBS_NODEFILE
#                 (PBS writes a node once per mpiproc: ask for mpiprocs = ncpus = cores)
#   THREADS       OpenMP threads per rank (rcsweep run --threads)  default: 1
#                 (a hybrid job: ask for mpiprocs = ranks and ompthreads = THREADS per chunk,
#                 ncpus = mpiprocs x THREADS)
#   RCSWEEP       the rcsweep program                              default: rcsweep (on PATH)
#   RCSWEEP_SETUP a file sourced before anything runs, e.g. `module load openmpi hdf5`; must exist if set
#   MPIEXEC       the MPI's mpiexec                                default: mpiexec (on PATH)
#   MPI_FLAVOUR   openmpi, mpich or intel: mpiexec's binding, environment and host file flags
#                 default: auto, the MPI `$MPIEXEC --version` names (another MPI: plain mpiexec -n RANKS)
#   STOP_BEFORE   stop this many seconds before the walltime ends (rcsweep --time-limit)  default: 120
#   GRACE         seconds running bundles may finish after SIGTERM  default: 8 (PBS kills 10 s later)
#   MAX_REQUEUES  how often the job may rerun itself               default: 20
#   RCSWEEP_ARGS  more options of `rcsweep run`, e.g. "--mem-per-rank 3G"        default: none
# Nodes, cores and walltime are qsub options (-l select=..., -l walltime=...) on the command line,
# which override the #PBS lines below. Relative paths are taken from $PBS_O_WORKDIR.
#
# Layout (docs/CLUSTER.md): one rank per core, one BLAS/OpenMP thread per rank, ranks bound to
# cores; with THREADS > 1 every rank is bound to THREADS cores (e.g. Open MPI's mpiexec --map-by slot:PE=THREADS)
# and runs `rcsweep run --threads THREADS`, its OpenMP threads one per core (OMP_PLACES=cores,
# OMP_PROC_BIND=close), each with one BLAS thread. mpiexec reads the hosts from $PBS_NODEFILE (Open MPI built without PBS's tm starts the
# remote ranks with ssh). Walltime: PBS gives no warning before the limit (SIGTERM, then SIGKILL
# kill_delay = 10 s later), so rcsweep gets --time-limit = the walltime left (qstat, or
# PBS_WALLTIME) less STOP_BEFORE, and starts no bundle that would overrun it; a SIGTERM is still
# forwarded as SIGUSR1 (clean stop within GRACE s). On exit code 4 (stopped early) the job asks PBS
# to run it again (qrerun; the store is resumed); where users may not qrerun, it prints the qsub
# command that resumes it. Exit code otherwise rcsweep's: 0 all done (diverged and vanished tasks
# are outcomes), 3 done with failed tasks, 2 sweep/usage error, 1 runtime error (docs/ERRORS.md).
#PBS -N rcsweep
#PBS -l select=1:ncpus=8:mpiprocs=8
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
RCSWEEP=${RCSWEEP:-rcsweep}
MPIEXEC=${MPIEXEC:-mpiexec}
MPI_FLAVOUR=${MPI_FLAVOUR:-auto}
STOP_BEFORE=${STOP_BEFORE:-120}
GRACE=${GRACE:-8}
MAX_REQUEUES=${MAX_REQUEUES:-20}
RCSWEEP_ARGS=${RCSWEEP_ARGS:-}
THREADS=${THREADS:-1}
NODEFILE=${PBS_NODEFILE:-}
[[ -n $NODEFILE && -r $NODEFILE ]] || { echo "error: PBS_NODEFILE=$NODEFILE: no node file (run under qsub)" >&2; exit 2; }
RANKS=${RANKS:-$(grep -c . "$NODEFILE")}
NODES=$(sort -u "$NODEFILE" | grep -c .)
cd "${PBS_O_WORKDIR:-.}"

# What PBS knows of this job: walltime asked and used, how often it ran.
info=$(qstat -f "${PBS_JOBID:-none}" 2>/dev/null || true)
field() { sed -n "s/^ *$1 = //p" <<<"$info" | head -n 1; }
seconds() { local IFS=: t=0 p; for p in $1; do t=$((t * 60 + 10#$p)); done; echo "$t"; }
RUNS=$(field run_count)
RESTARTS=$(( ${RUNS:-1} > 0 ? ${RUNS:-1} - 1 : 0 ))
[[ $RANKS =~ ^[1-9][0-9]*$ ]] || { echo "error: RANKS=$RANKS: not a positive integer" >&2; exit 2; }
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || { echo "error: THREADS=$THREADS: not a positive integer" >&2; exit 2; }
[[ $MPI_FLAVOUR =~ ^(auto|openmpi|mpich|intel)$ ]] || { echo "error: MPI_FLAVOUR=$MPI_FLAVOUR: not auto, openmpi, mpich or intel" >&2; exit 2; }
echo "rcsweep job ${PBS_JOBID:-?} (run $((RESTARTS + 1))) on $(hostname) at $(date -u +%FT%TZ)"
echo "  SWEEP=$SWEEP OUT=$OUT RANKS=$RANKS NODES=$NODES MPIEXEC=$MPIEXEC THREADS=$THREADS"
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
hostfile=$NODEFILE
set_launch

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
    echo "not rerun: already ran $((RESTARTS + 1)) times (MAX_REQUEUES); resubmit to continue" >&2
    exit 4
  fi
  echo "rerunning job $PBS_JOBID to resume $OUT"
  if qrerun "$PBS_JOBID"; then exit 0; fi
  echo "qrerun refused (some sites let only operators rerun jobs): submit the same job again to resume $OUT" >&2
  exit 4
fi
exit "$rc"
