// The units of work of a run, shared by rank 0's compute thread and its service thread
// (service.hpp): handed out largest first, within the time limit, and added to when results
// release adaptive replicates.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "plan/plan.hpp"
#include "sweep/farm.hpp"

namespace rcsweep::sweep {

/// A unit of work (a bundle's pending tasks, or a slice of them) and its estimated cost.
struct WorkItem {
  TaskList tasks;
  double flops = 0.0;
  double seconds = 0.0;  ///< estimated time on one rank (RunOptions::calibration)
};

/// With a deadline, pop() only hands out a unit (the largest first) whose estimated time fits
/// before it; the estimates are scaled by measured / estimated time of the finished tasks once a
/// second of work is done. With adaptive replicates (`growing`) results may add work (push):
/// while tasks handed out are not yet written, an empty queue means "wait", not "done".
class WorkQueue {
 public:
  WorkQueue(const plan::Plan& plan, std::deque<WorkItem> items, std::optional<steady::time_point> deadline,
            bool growing);
  /// The next unit; waits while more work may still come. Nothing: no more work for this run.
  std::optional<TaskList> pop();
  /// The next unit, nothing when there is none now; `wait` tells whether more may come.
  std::optional<TaskList> try_pop(bool& wait);
  /// Units that results made necessary, inserted largest first.
  void push(std::vector<WorkItem> items);
  /// `n` tasks handed out were written (their results can no longer add work).
  void written(std::uint64_t n);
  bool empty();
  void stop();
  /// Task `id` finished in `seconds`.
  void calibrate(std::uint64_t id, double seconds);
  /// The deadline stopped the hand-out: no unit left fitted before it.
  bool time_limited();

 private:
  bool waiting() const { return growing_ && !stop_ && items_.empty() && out_ > 0; }
  void note_estimates(const WorkItem& w);
  std::optional<TaskList> take();

  const plan::Plan& plan_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<WorkItem> items_;
  std::optional<steady::time_point> deadline_;
  std::vector<double> task_estimate_s_;
  double scale_ = 1.0, done_estimate_s_ = 0.0, done_s_ = 0.0;
  bool stop_ = false, time_limited_ = false;
  bool growing_ = false;
  std::uint64_t out_ = 0;  // tasks handed out whose results are not written yet
};

}  // namespace rcsweep::sweep
