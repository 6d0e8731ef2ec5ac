// Cost-weighted progress and ETA on stderr (rank 0).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

namespace rcsweep::sweep {

class Progress {
 public:
  Progress(double total_flops, std::uint64_t total_tasks, bool enabled);
  void add(double flops);
  /// The total counts tasks that may not run (adaptive replicates): the ETA is printed as an
  /// upper bound ("at most").
  void total_is_bound() { bound_ = true; }
  /// A task of the total that will not run (adaptive replicates: not needed).
  void drop(double flops);
  /// Work done so far in the bundle rank 0 is computing (flops; thread-safe): long bundles then
  /// show progress before their first task finishes.
  void set_partial(double flops) { partial_.store(flops, std::memory_order_relaxed); }
  /// Print a line if the print interval has passed (or always when `force`).
  void report(bool force = false);

 private:
  double total_flops_, done_flops_ = 0.0;
  std::atomic<double> partial_{0.0};
  std::uint64_t total_tasks_, done_tasks_ = 0;
  bool enabled_, tty_;
  bool bound_ = false;      ///< the total may shrink (drop): the ETA is "at most"
  double interval_ = 10.0;  ///< seconds between lines
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace rcsweep::sweep
