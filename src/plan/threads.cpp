#include "plan/threads.hpp"

#include <algorithm>
#include <functional>

#include "plan/schedule.hpp"

namespace rcsweep::plan {

ThreadMode thread_mode(const Plan& plan, const std::vector<std::uint64_t>& tasks, int threads) {
  if (threads <= 1 || tasks.size() < 2) return ThreadMode::layer;
  double largest = 0.0;
  for (const auto id : tasks) largest = std::max(largest, layer_flops(plan.models.at(plan.tasks.at(id).point)));
  return largest >= layer_split_min_flops ? ThreadMode::layer : ThreadMode::tasks;
}

std::string to_string(ThreadMode mode) { return mode == ThreadMode::tasks ? "tasks" : "layer"; }

double unit_seconds(ThreadMode mode, const std::vector<double>& task_s, double shared_s, int threads) {
  threads = std::max(threads, 1);
  if (mode == ThreadMode::layer) {
    double sum = shared_s;
    for (const double s : task_s) sum += s;
    return sum / threads;
  }
  std::vector<double> sorted = task_s;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  return shared_s + hand_out_makespan(sorted, threads);
}

std::size_t unit_bytes(const Bundle& bundle, ThreadMode mode, int threads, std::size_t tasks) {
  const std::size_t concurrent = mode == ThreadMode::tasks
                                     ? std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), tasks)
                                     : 1;
  return bundle.shared_bytes + bundle.state_bytes + concurrent * bundle.scratch_bytes;
}

}  // namespace rcsweep::plan
