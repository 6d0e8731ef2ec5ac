// Cost-weighted progress and ETA of a run (rank 0), reported as event::Progress.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

#include "sweep/events.hpp"

namespace rcsweep::sweep {

class Progress {
 public:
  /// Reports to `sink` (empty: nothing) at most every `interval_s` seconds.
  Progress(double total_flops, std::uint64_t total_tasks, EventSink sink, double interval_s);
  void add(double flops);
  /// The total counts tasks that may not run (adaptive replicates): the ETA is an upper bound.
  void total_is_bound() { bound_ = true; }
  /// A task of the total that will not run (adaptive replicates: not needed).
  void drop(double flops);
  /// Work done so far in the bundle rank 0 is computing (flops; thread-safe): long bundles then
  /// show progress before their first task finishes.
  void set_partial(double flops) { partial_.store(flops, std::memory_order_relaxed); }
  /// Report if the interval has passed; `last`: always, as the run's last progress event.
  void report(bool last = false);
  /// The progress now (what report sends).
  event::Progress now(bool last = false) const;

 private:
  double total_flops_, done_flops_ = 0.0;
  std::atomic<double> partial_{0.0};
  std::uint64_t total_tasks_, done_tasks_ = 0;
  EventSink sink_;
  double interval_s_;
  bool bound_ = false;  ///< the total may shrink (drop): the ETA is an upper bound
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace rcsweep::sweep
