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

std::vector<std::size_t> task_order(const Plan& plan, const std::vector<std::uint64_t>& tasks) {
  struct Group {
    int mixer = 0;
    double cost = 0.0;
    std::vector<std::size_t> members;  // indices into tasks, longest first
  };
  std::vector<double> cost(tasks.size());
  std::vector<Group> groups;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const auto& model = plan.models.at(plan.tasks.at(tasks[i]).point);
    cost[i] = layer_flops(model);
    const int mixer = static_cast<int>(model.mixer);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.mixer == mixer; });
    if (g == groups.end()) g = groups.insert(groups.end(), Group{mixer, 0.0, {}});
    g->cost += cost[i];
    g->members.push_back(i);
  }
  for (auto& g : groups)
    std::stable_sort(g.members.begin(), g.members.end(),
                     [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.cost > b.cost; });
  std::vector<std::size_t> order;
  order.reserve(tasks.size());
  for (const auto& g : groups) order.push_back(g.members.front());
  for (auto g = groups.rbegin(); g != groups.rend(); ++g)
    order.insert(order.end(), g->members.begin() + 1, g->members.end());
  return order;
}

LargestBundle largest_bundle(const Plan& plan, int threads) {
  LargestBundle largest;
  for (std::size_t i = 0; i < plan.bundles.size(); ++i) {
    const Bundle& b = plan.bundles[i];
    if (b.tasks.empty()) continue;
    const std::size_t bytes = unit_bytes(b, thread_mode(plan, b.tasks, threads), threads, b.tasks.size());
    if (bytes > largest.bytes) largest = {i, bytes};
  }
  return largest;
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
  return bundle.shared_bytes + bundle.state_bytes + concurrent * bundle.scratch_bytes + bundle.results_bytes;
}

}  // namespace rcsweep::plan
