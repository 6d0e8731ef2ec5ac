// The task farm's messages on stderr ("[rcsweep] ..."), one function per kind of message. Whether
// a message is shown (RunOptions::progress) is decided by the caller.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace rcsweep::sweep {

/// The store's writer lock is held by a run that is stopping: this run waits up to `wait_s`.
void notice_lock_wait(const std::filesystem::path& output, const std::string& holder, double wait_s);
/// The store was made from another version of the sweep file and grown to this one
/// (`description`: store::describe of the growth, one line per change).
void notice_grown(const std::filesystem::path& output, const std::string& description, std::uint64_t copied);
/// The store's file system has no flock.
void notice_no_flock(const std::filesystem::path& output);
/// --reuse FROM copied `copied` finished tasks; some of its tasks are not of this sweep or shard.
void notice_reused(const std::filesystem::path& from, std::uint64_t copied, std::uint64_t not_in_sweep,
                   std::uint64_t other_shards);

/// What this run computes: its pending tasks (and the replicates an adaptive rule may add), bundles, ranks.
struct PlanNotice {
  bool resumed = false;
  std::filesystem::path output;
  std::uint64_t pending_tasks = 0, possible_tasks = 0, skipped = 0;
  std::size_t bundles = 0;
  int ranks = 1, threads = 1;
};
void notice_plan(const PlanNotice& n);
/// How the pending work was cut into units for `ranks` ranks (plan::describe of the schedule).
void notice_units(int ranks, const std::string& description);
/// A warning about the schedule (plan::idle_warning).
void notice_schedule_warning(const std::string& warning);
/// Rank 0 failed outside a bundle: the job ends now.
void notice_rank0_error(int ranks, const std::string& what);

/// Stop signal `sig`: no new tasks; running bundles get `grace_s`. `teardown`: it came from the
/// launcher, which kills the job next.
void notice_stopping(int sig, double grace_s, bool teardown);
/// The launcher is gone: the run stops now.
void notice_launcher_gone(const std::string& launcher);
/// Rank 0 was held up for `gap_s` seconds: the workers' silence meanwhile is not counted.
void notice_held_up(double gap_s);
/// Worker `rank` on `host` has been silent for `silent_s` seconds: taken for lost.
void notice_rank_lost(int rank, const std::string& host, double silent_s);
/// Task `task` ended other than done (`message` says how).
void notice_task_ended(std::uint64_t task, const std::string& message);

/// The ranks of this run use different BLAS kernels (`kernels`: their names, comma-separated).
void notice_mixed_kernels(const std::string& kernels);
/// This run's kernels differ from those of the store's finished tasks (`stored`: kernel and count).
void notice_new_kernels(const std::string& kernels, const std::string& stored);
/// Results of different BLAS kernels agree to rounding only.
void notice_kernels_agree_to_rounding();

}  // namespace rcsweep::sweep
