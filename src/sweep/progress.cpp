#include "sweep/progress.hpp"

#include <algorithm>
#include <utility>

namespace rcsweep::sweep {

Progress::Progress(double total_flops, std::uint64_t total_tasks, EventSink sink, double interval_s)
    : total_flops_(total_flops),
      total_tasks_(total_tasks),
      sink_(std::move(sink)),
      interval_s_(interval_s),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::add(double flops) {
  done_flops_ += flops;
  ++done_tasks_;
}

void Progress::drop(double flops) {
  total_flops_ -= flops;
  if (total_tasks_ > 0) --total_tasks_;
}

event::Progress Progress::now(bool last) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double done = done_flops_ + partial_.load(std::memory_order_relaxed);
  const double frac = total_flops_ > 0 ? std::min(1.0, done / total_flops_) : 1.0;
  event::Progress p;
  p.tasks_done = done_tasks_;
  p.tasks_total = total_tasks_;
  p.fraction = frac;
  p.elapsed_s = elapsed;
  p.eta_s = frac > 0 ? elapsed * std::max(0.0, 1.0 - frac) / frac : -1.0;
  p.eta_is_bound = bound_ && done_tasks_ < total_tasks_;
  p.last = last;
  return p;
}

void Progress::report(bool last) {
  if (!sink_) return;
  const auto t = std::chrono::steady_clock::now();
  if (!last && std::chrono::duration<double>(t - last_).count() < interval_s_) return;
  last_ = t;
  sink_(now(last));
}

}  // namespace rcsweep::sweep
