// `rcsweep run -n N ...`: the run on N MPI ranks, started through mpiexec by rcsweep itself, so
// that Ctrl-C, SIGTERM and SIGHUP stop it as they stop a single process (exit code 4, "resume
// with the same command" last). Open MPI's mpiexec cannot do that alone: it answers SIGINT, SIGTERM
// and SIGHUP by killing the job and exits 1 whatever the ranks return, and when a rank exits
// non-zero (4 after SIGUSR1) it ends with its own report that "the job has been aborted"
// (docs/GUARANTEES.md "The launcher").
#pragma once
#include <string>

namespace rcsweep::cli {

/// Run `rcsweep <args>` (this process's own arguments argv[1..], as it was started) as
/// `MPIEXEC -n ranks <this program> <args>`, MPIEXEC being
/// `mpiexec` split at spaces ("mpiexec --oversubscribe"). mpiexec runs in its own process group with
/// stdin from /dev/null and dies with this process (SIGTERM); the first SIGINT, SIGTERM or SIGHUP
/// is forwarded to it as SIGUSR1 (a clean stop of every rank), SIGUSR1/2 as themselves, a second
/// SIGINT or SIGTERM as SIGINT (Open MPI kills the job; this process then dies of that signal),
/// SIGTSTP stops the ranks too. Returns the run's exit code: rank 0 leaves it in the file named by
/// RCSWEEP_EXIT_FILE and the ranks exit 0 (exit_code_for_launcher), else mpiexec's own code
/// (128 + n when a rank died of signal n); 2 when mpiexec cannot be started.
/// With `threads` > 1 each rank gets that many cores (Open MPI's `--map-by slot:PE=threads`), or,
/// when ranks x threads exceed this machine's cores, no binding (`--bind-to none`) and, unless set,
/// OMP_WAIT_POLICY=PASSIVE (threads waiting for a turn sleep instead of spinning): Open MPI's
/// default binds a rank to one core, where its threads would share it. Options the user's MPIEXEC
/// already gives for mapping or binding are left alone. More threads than cores in all
/// (plan::oversubscription) is warned about on stderr, with what is done about it.
int launch_run(int ranks, int threads, const std::string& mpiexec);

/// Whether this process is a rank started by launch_run (`rcsweep run -n`), which has said what
/// it checks before the ranks start (a layout with more threads than cores, for one).
bool launched_by_run_n();

/// At the end of a run on every rank (a collective on MPI_COMM_WORLD): under launch_run
/// (RCSWEEP_EXIT_FILE set) rank 0 writes `code` into that file; when it could, every rank returns 0
/// so that mpiexec ends quietly and launch_run returns `code`. Otherwise returns `code`.
int exit_code_for_launcher(int code);

}  // namespace rcsweep::cli
