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
void install_stop_handlers();

/// The signal that asked this process to stop, 0 when none.
int stop_signal() noexcept;

/// Seconds since that signal arrived (steady clock); 0 when none.
double seconds_since_stop_signal() noexcept;

/// Forget a received signal (tests).
void clear_stop_signal() noexcept;

/// "SIGTERM", "SIGINT", ... for messages.
std::string signal_name(int sig);

/// Parse a duration: "90" or "90s", "15m", "2h", "1d", "1h30m", or "[D-]HH:MM[:SS]" (Slurm style).
/// Throws rcsweep::ConfigError on key `what` when malformed or not positive.
double parse_duration(const std::string& text, const std::string& what);

/// The wall-clock end of this job's allocation from the environment, if it says: Slurm's
/// SLURM_JOB_END_TIME (Unix seconds) or PBS_WALLTIME (seconds since the job started, taken as now).
std::optional<std::chrono::system_clock::time_point> scheduler_end_time();

}  // namespace rcsweep::sweep
