#include "sweep/work_queue.hpp"

#include <algorithm>

namespace rcsweep::sweep {

WorkQueue::WorkQueue(const plan::Plan& plan, std::deque<WorkItem> items, std::optional<steady::time_point> deadline,
                     bool growing)
    : plan_(plan),
      items_(std::move(items)),
      deadline_(deadline),
      task_estimate_s_(plan.tasks.size(), 0.0),
      growing_(growing) {
  for (const auto& w : items_) note_estimates(w);
}

std::optional<TaskList> WorkQueue::pop() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !waiting(); });
  return take();
}

std::optional<TaskList> WorkQueue::try_pop(bool& wait) {
  std::lock_guard lock(mutex_);
  wait = waiting();
  return wait ? std::nullopt : take();
}

void WorkQueue::push(std::vector<WorkItem> items) {
  {
    std::lock_guard lock(mutex_);
    for (auto& w : items) {
      note_estimates(w);
      const auto at = std::find_if(items_.begin(), items_.end(),
                                   [&](const WorkItem& x) { return x.seconds < w.seconds; });
      items_.insert(at, std::move(w));
    }
  }
  changed_.notify_all();
}

void WorkQueue::written(std::uint64_t n) {
  {
    std::lock_guard lock(mutex_);
    out_ -= std::min(out_, n);
  }
  changed_.notify_all();
}

bool WorkQueue::empty() {
  std::lock_guard lock(mutex_);
  return items_.empty();
}

void WorkQueue::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
}

void WorkQueue::calibrate(std::uint64_t id, double seconds) {
  std::lock_guard lock(mutex_);
  done_estimate_s_ += task_estimate_s_.at(id);
  done_s_ += seconds;
  if (done_s_ >= 1.0 && done_estimate_s_ > 0.0) scale_ = done_s_ / done_estimate_s_;
}

bool WorkQueue::time_limited() {
  std::lock_guard lock(mutex_);
  return time_limited_;
}

/// Each task's share of its unit's estimate, by flops (for the scaling in calibrate).
void WorkQueue::note_estimates(const WorkItem& w) {
  for (const auto id : w.tasks)
    task_estimate_s_[id] = w.flops > 0.0 ? w.seconds * plan_.tasks[id].flops / w.flops : 0.0;
}

std::optional<TaskList> WorkQueue::take() {
  if (items_.empty() || stop_) return std::nullopt;
  auto it = items_.begin();
  if (deadline_) {
    const auto now = steady::now();
    it = std::find_if(items_.begin(), items_.end(), [&](const WorkItem& w) {
      return now + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(w.seconds * scale_)) <=
             *deadline_;
    });
    if (it == items_.end()) {
      stop_ = time_limited_ = true;
      changed_.notify_all();  // rank 0's compute thread may be waiting in pop()
      return std::nullopt;
    }
  }
  TaskList t = std::move(it->tasks);
  items_.erase(it);
  out_ += t.size();
  return t;
}

}  // namespace rcsweep::sweep
