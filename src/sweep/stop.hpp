// Graceful stops (docs/GUARANTEES.md): the signals a cluster or a user sends before killing a run —
// SIGTERM (Slurm and PBS before the kill, `kill`), SIGINT (Ctrl-C) and SIGUSR1/SIGUSR2 (which Open
// MPI's mpiexec forwards to every rank without tearing the job down; ask Slurm for them with
// --signal) — and walltime limits (--time-limit, SLURM_JOB_END_TIME, PBS_WALLTIME).
#pragma once
#include <chrono>
#include <optional>
#include <string>

namespace rcsweep::sweep {

/// Install the handlers of SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 (idempotent). The first of them
/// asks the run to stop; a second SIGINT or SIGTERM kills the process at once (default action).
/// After watch_launcher(), also the handler of SIGHUP, the launcher's death (below). A process not
/// started by a launcher ignores SIGHUP and SIGPIPE: a single process keeps running when its
/// terminal hangs up or its shell dies (and with it the reader of its output), as with nohup.
/// Also the handler of SIGCONT (times_continued).
void install_stop_handlers();

/// How many times this process was continued after being stopped (SIGCONT after SIGSTOP or
/// SIGTSTP: Ctrl-Z then `fg`, `kill -STOP` then `-CONT`, mpiexec forwarding them). While a whole job
/// is stopped its ranks are silent; that is no failure (service.cpp, the heartbeats).
unsigned times_continued() noexcept;

// The launcher (docs/GUARANTEES.md "The launcher"). Under mpiexec every rank is a child of mpiexec
// (or of Open MPI's orted on other nodes). When it dies (kill -9, a lost node daemon) nobody waits
// for the run any more: the ranks stop at once, keep what they finished and exit. When it tears
// the job down (Open MPI's mpiexec and orted answer SIGINT, SIGTERM and SIGHUP with SIGCONT to
// every rank, SIGTERM after odls_base_sigkill_timeout seconds and SIGKILL after as many again),
// the grace period is cut to what is left before the SIGKILL.

/// Whether the environment says this process was started by an MPI launcher (Open MPI's
/// OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, PMI's PMI_RANK / PMI_SIZE). Read it before MPI_Init:
/// a singleton MPI_Init sets PMIX_RANK itself.
bool started_by_launcher();
/// This process's rank as its launcher says (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
/// SLURM_PROCID), without MPI; 0 when not started by one. Commands that need no MPI (plan,
/// calibrate, info) run on rank 0 only.
int launcher_rank();

/// Under a launcher: take the parent process as the launcher, ask the kernel for SIGHUP when it
/// dies (PR_SET_PDEATHSIG) and ignore SIGPIPE (its end of our stdout and stderr is gone then).
/// Call before MPI_Init; does nothing for a process not started by a launcher (a single process
/// keeps running when its shell goes away, as with nohup). Returns whether it watches. A rank
/// whose parent is already init (not a launcher running as process 1) finds it gone at once.
bool watch_launcher();

/// The launcher watched by watch_launcher() has died: the parent process is another one.
/// Checked on every call (getppid) besides the signal; the first time it also arms a
/// backstop: the process is killed (SIGALRM) if it has not exited 20 s later.
bool launcher_gone() noexcept;

/// The stop signal was the launcher tearing the job down (SIGTERM from Open MPI's mpiexec or orted).
bool launcher_teardown() noexcept;

/// The grace period of the current stop: `grace`, cut to 0 when the launcher is gone and to
/// odls_base_sigkill_timeout less 1 s (read from OMPI_MCA_odls_base_sigkill_timeout, default 1) when it
/// tears the job down.
double effective_grace(double grace) noexcept;

/// Rank 0 lost its workers: none of some busy worker's heartbeats came for too long (its node
/// or the network between them failed, while this node lives on). The run ends like one whose
/// launcher is gone: finished results are written, the store closed, no MPI_Finalize.
void note_workers_lost() noexcept;
bool workers_lost() noexcept;

/// Whether this process must end without MPI_Finalize, which would block or fail: the launcher
/// is gone or tearing the job down, or rank 0 lost its workers.
bool exit_without_finalize() noexcept;

/// "mpiexec (pid 123)": the watched launcher, for messages.
std::string launcher_name();

/// The signal that asked this process to stop, 0 when none.
int stop_signal() noexcept;

/// Seconds since that signal arrived (steady clock); 0 when none.
double seconds_since_stop_signal() noexcept;

/// Forget a received signal (tests).
void clear_stop_signal() noexcept;

/// "SIGTERM", "SIGINT", ... for messages.
std::string signal_name(int sig);

/// Parse a duration: "90s", "15m", "2h", "1d", "1h30m", or one of Slurm's time formats, read as
/// Slurm reads them: "M" (a bare number is minutes), "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S".
/// Throws rcsweep::ConfigError on key `what` when malformed or not positive.
double parse_duration(const std::string& text, const std::string& what);

/// The wall-clock end of this job's allocation from the environment, if it says: Slurm's
/// SLURM_JOB_END_TIME (Unix seconds) or PBS_WALLTIME (seconds since the job started, taken as now).
std::optional<std::chrono::system_clock::time_point> scheduler_end_time();

}  // namespace rcsweep::sweep
