#include "sweep/units.hpp"

#include <algorithm>
#include <map>

namespace rcsweep::sweep {

bool ended_early(store::TaskStatus s) {
  return s == store::TaskStatus::failed || s == store::TaskStatus::diverged || s == store::TaskStatus::vanished;
}

WorkItem UnitPricer::item(TaskList tasks, double calibrated_s) const {
  WorkItem item;
  item.tasks = std::move(tasks);
  for (const auto id : item.tasks) item.flops += plan.tasks[id].flops;
  item.seconds = calibration ? calibrated_s : item.flops / assumed_flop_rate;
  return item;
}

PendingWork pending_work(const plan::Plan& plan, const Runnable& runnable, const plan::ReplicateRule* rule,
                         const UnitPricer& pricer, int ranks) {
  const auto to_run = [&](std::uint64_t id) { return runnable(id) && (!rule || rule->needed(id)); };
  const plan::Calibration rates = pricer.rates();
  PendingWork w;
  for (const auto& b : plan.bundles) {
    w.in_shard += b.tasks.size();
    TaskList tasks;
    for (const auto id : b.tasks) {
      if (to_run(id)) tasks.push_back(id);
      if (rule && runnable(id) && !rule->needed(id) && !rule->not_needed(id)) {
        ++w.possible_tasks;
        w.possible_flops += plan.tasks[id].flops;
      }
    }
    if (!tasks.empty()) w.bundles.push_back(plan::bundle_work(plan, tasks, rates));
  }
  w.schedule = plan::make_schedule(w.bundles, ranks);
  for (const auto& unit : w.schedule.units) {
    WorkItem item = pricer.item(unit.tasks, unit.seconds);
    w.flops += item.flops;
    w.tasks += item.tasks.size();
    w.units.push_back(std::move(item));
  }
  return w;
}

ReleasedUnits::ReleasedUnits(const plan::Plan& plan, const Runnable& runnable, const UnitPricer& pricer)
    : plan_(plan), runnable_(runnable), pricer_(pricer), bundle_of_(plan.tasks.size()) {
  for (std::size_t i = 0; i < plan.bundles.size(); ++i)
    for (const auto id : plan.bundles[i].tasks) bundle_of_[id] = i;
}

std::vector<WorkItem> ReleasedUnits::operator()(const TaskList& released) const {
  const plan::Calibration rates = pricer_.rates();
  std::map<std::size_t, TaskList> by_bundle;
  for (const auto id : released)
    if (runnable_(id)) by_bundle[bundle_of_[id]].push_back(id);
  std::vector<WorkItem> items;
  for (auto& [b, tasks] : by_bundle) {
    std::sort(tasks.begin(), tasks.end());
    const double s = plan::bundle_work(plan_, tasks, rates).seconds();
    items.push_back(pricer_.item(std::move(tasks), s));
  }
  return items;
}

}  // namespace rcsweep::sweep
