#include "sweep/notices.hpp"

#include <csignal>
#include <cstdio>

#include "sweep/stop.hpp"

namespace rcsweep::sweep {

void notice_lock_wait(const std::filesystem::path& output, const std::string& holder, double wait_s) {
  std::fprintf(stderr, "[rcsweep] %s is still held by a run that is stopping (%s): waiting up to %.0f s\n",
               output.c_str(), holder.c_str(), wait_s);
}

void notice_grown(const std::filesystem::path& output, const std::string& description, std::uint64_t copied) {
  std::fprintf(
      stderr,
      "[rcsweep] %s was made from another version of the sweep file:\n%s[rcsweep] grown to this sweep: %llu finished tasks copied\n",
      output.c_str(), description.c_str(), static_cast<unsigned long long>(copied));
}

void notice_no_flock(const std::filesystem::path& output) {
  std::fprintf(stderr, "[rcsweep] note: the file system of %s has no flock: one writer per store is not enforced\n",
               output.c_str());
}

void notice_reused(const std::filesystem::path& from, std::uint64_t copied, std::uint64_t not_in_sweep,
                   std::uint64_t other_shards) {
  std::fprintf(
      stderr, "[rcsweep] --reuse %s: copied %llu finished tasks%s%s\n", from.c_str(),
      static_cast<unsigned long long>(copied),
      not_in_sweep
          ? (" (" + std::to_string(not_in_sweep) + " of its finished tasks are not tasks of this sweep)").c_str()
          : "",
      other_shards ? (" (" + std::to_string(other_shards) + " belong to other shards)").c_str() : "");
}

void notice_plan(const PlanNotice& n) {
  const std::string threads = n.threads > 1 ? " x " + std::to_string(n.threads) + " threads" : std::string();
  const std::string more = n.possible_tasks > 0 ? " (+ up to " + std::to_string(n.possible_tasks) +
                                                      " replicates as the targets need them)"
                                                : std::string();
  std::fprintf(stderr, "[rcsweep] %s %s: %llu tasks%s in %zu bundles to run on %d rank%s%s (%llu already finished)\n",
               n.resumed ? "resuming" : "writing", n.output.c_str(), static_cast<unsigned long long>(n.pending_tasks),
               more.c_str(), n.bundles, n.ranks, n.ranks == 1 ? "" : "s", threads.c_str(),
               static_cast<unsigned long long>(n.skipped));
}

void notice_units(int ranks, const std::string& description) {
  std::fprintf(stderr, "[rcsweep] ranks %d: %s\n", ranks, description.c_str());
}

void notice_schedule_warning(const std::string& warning) {
  std::fprintf(stderr, "[rcsweep] warning: %s\n", warning.c_str());
}

void notice_rank0_error(int ranks, const std::string& what) {
  std::fprintf(stderr, "[rank 0/%d] error: %s\n", ranks, what.c_str());
  std::fflush(stderr);
}

void notice_stopping(int sig, double grace_s, bool teardown) {
  if (teardown)
    std::fprintf(stderr,
                 "[rcsweep] %s from %s, which kills the job next: no new tasks; running bundles that finish "
                 "within %.0f s are kept, the rest are abandoned\n",
                 signal_name(sig).c_str(), launcher_name().c_str(), grace_s);
  else
    std::fprintf(stderr,
                 "[rcsweep] %s: no new tasks; running bundles that finish within %.0f s are kept, the rest are "
                 "abandoned (%s stops at once)\n",
                 signal_name(sig).c_str(), grace_s,
                 sig == SIGINT || sig == SIGTERM ? "the same signal again" : "a SIGINT or SIGTERM");
}

void notice_launcher_gone(const std::string& launcher) {
  std::fprintf(stderr, "[rcsweep] %s is gone: stopping now; finished tasks are kept\n", launcher.c_str());
}

void notice_held_up(double gap_s) {
  std::fprintf(stderr,
               "[rcsweep] rank 0 was held up for %.0f s (the job stopped, its machine paused, or a slow "
               "write): the workers' silence meanwhile is not counted\n",
               gap_s);
}

void notice_rank_lost(int rank, const std::string& host, double silent_s) {
  std::fprintf(stderr,
               "[rcsweep] rank %d (%s) has not been heard from for %.0f s: its node or the network failed; "
               "stopping now, finished tasks are kept\n",
               rank, host.c_str(), silent_s);
}

void notice_task_ended(std::uint64_t task, const std::string& message) {
  std::fprintf(stderr, "[rcsweep] task %llu %s\n", static_cast<unsigned long long>(task), message.c_str());
}

void notice_mixed_kernels(const std::string& kernels) {
  std::fprintf(stderr, "[rcsweep] note: the ranks of this run use different BLAS kernels (%s)\n", kernels.c_str());
}

void notice_new_kernels(const std::string& kernels, const std::string& stored) {
  std::fprintf(stderr, "[rcsweep] note: this run computes with %s; the store's finished tasks were computed with %s\n",
               kernels.c_str(), stored.c_str());
}

void notice_kernels_agree_to_rounding() {
  std::fprintf(stderr,
               "[rcsweep] results of different BLAS kernels agree to rounding, not bitwise (docs/GUARANTEES.md); "
               "rcsweep info counts the tasks of each\n");
}

}  // namespace rcsweep::sweep
