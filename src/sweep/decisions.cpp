#include "sweep/decisions.hpp"

#include <algorithm>
#include <limits>
#include <span>

#include "sweep/units.hpp"

namespace rcsweep::sweep {

store::TaskResult not_needed_result(std::uint64_t id) {
  store::TaskResult r;
  r.task = id;
  r.status = store::TaskStatus::not_needed;
  r.wall_s = std::numeric_limits<double>::quiet_NaN();
  r.rank = -1;
  return r;
}

plan::ReplicateRule::Decisions record_result(plan::ReplicateRule& rule, const plan::Plan& plan,
                                             const store::TaskResult& r) {
  if (r.status == store::TaskStatus::failed) return rule.record(r.task, std::nullopt);
  return rule.record(r.task, plan::target_values(plan.spec.adaptive, plan.max_depth, r.layers));
}

Decided decide(plan::ReplicateRule& rule, const plan::Plan& plan, const std::vector<store::TaskStatus>& status_at_start,
               const std::vector<store::TaskResult>& batch) {
  Decided out;
  for (const auto& r : batch) {
    const auto d = record_result(rule, plan, r);
    out.released.insert(out.released.end(), d.released.begin(), d.released.end());
    for (const auto id : d.not_needed)
      if (status_at_start[id] == store::TaskStatus::pending) out.not_needed.push_back(not_needed_result(id));
  }
  return out;
}

TaskList replayed_tasks(const plan::Plan& plan, const std::vector<store::TaskStatus>& status, bool retry_failed) {
  TaskList known;
  for (const auto& b : plan.bundles)
    for (const auto id : b.tasks) {
      const auto s = status[id];
      if (s == store::TaskStatus::done || (!retry_failed && ended_early(s))) known.push_back(id);
    }
  std::sort(known.begin(), known.end());
  return known;
}

plan::ReplicateRule replay_decisions(const plan::Plan& plan, store::Store& store,
                                     const std::vector<store::TaskStatus>& status, bool retry_failed) {
  plan::ReplicateRule rule(plan);
  const TaskList known = replayed_tasks(plan, status, retry_failed);
  std::vector<store::TaskResult> dropped;
  constexpr std::size_t batch = 4096;
  for (std::size_t i = 0; i < known.size(); i += batch) {
    const auto part = std::span(known).subspan(i, std::min(batch, known.size() - i));
    for (auto& r : decide(rule, plan, status, store.read_results(part)).not_needed) dropped.push_back(std::move(r));
  }
  store.write(dropped);
  return rule;
}

}  // namespace rcsweep::sweep
