#include "store/reuse.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include "base/error.hpp"
#include "config/overrides.hpp"
#include "config/sweep_spec.hpp"
#include "plan/adaptive.hpp"
#include "plan/reuse.hpp"
#include "store/sweep_input.hpp"

namespace rcsweep::store {
namespace {

bool finished_result(TaskStatus s) {
  return s == TaskStatus::done || s == TaskStatus::diverged || s == TaskStatus::vanished;
}

/// The plan a store was made from, rebuilt from its canonical config. An encoder's model folder
/// is the current sweep's (`current`) when the stored sweep names the same one.
plan::Plan stored_plan(const std::filesystem::path& path, const StoreInfo& info, const config::SweepSpec& current) {
  const std::string p = path.string();
  config::SweepSpec spec;
  try {
    spec = stored_sweep(info.config, p);
  } catch (const ConfigError& e) {
    throw StoreError(p + ": cannot read the sweep it was made from:\n" + e.what());
  }
  if (!spec.model_digest.empty() && spec.model_folder == current.model_folder)
    spec.set_encoder_inputs(current.model_folder_path, current.tokens, spec.model_digest);
  plan::Plan plan;
  try {
    plan = plan::make_plan(std::move(spec));
  } catch (const ConfigError& e) {  // another model folder that cannot be opened from here
    throw StoreError(p + ": cannot plan the sweep it was made from (another model folder?):\n" + e.what() +
                     "\nwrite a new store (another -o) or pass --overwrite");
  }
  if (plan.hash != info.plan_hash)
    throw StoreError(p + ": its sweep reads back with plan hash " + plan.hash + ", not its own " + info.plan_hash +
                     " (made by another version of rcsweep?): its results cannot be matched to tasks");
  return plan;
}

/// The old store, its plan and which of its tasks are tasks of the new plan.
struct Source {
  StoreInfo info;
  plan::Plan plan;
  std::optional<Store> store;  // open for reading
  plan::TaskMatch match;
  std::vector<TaskStatus> status;
  ReuseReport report;
};

Source read_source(const std::filesystem::path& from, const plan::Plan& plan) {
  Source s;
  s.info = read_info(from);
  s.plan = stored_plan(from, s.info, plan.spec);
  s.match = plan::match_tasks(s.plan, plan);
  s.report.from_name = s.plan.spec.name;
  s.report.from_hash = s.info.plan_hash;
  s.report.differences = plan::config_differences(s.plan.spec, plan.spec);
  s.report.blockers = s.match.blockers;
  s.store.emplace(Store::open_read(from, s.plan));
  s.status = s.store->task_status();
  // Results go only into tasks of this run's shard (--shard: the plan's bundles hold only those),
  // so that the grown shards of an array job still finish every task exactly once.
  std::vector<bool> in_shard(plan.tasks.size(), false);
  for (const auto& b : plan.bundles)
    for (const auto id : b.tasks) in_shard[id] = true;
  std::erase_if(s.match.pairs, [&](const auto& pair) {
    const bool other = !in_shard[pair.second];
    s.report.other_shards += other && finished_result(s.status[pair.first]);
    return other;
  });
  std::uint64_t matched = 0;
  for (const auto& [old_id, new_id] : s.match.pairs) matched += finished_result(s.status[old_id]);
  for (const auto st : s.status) s.report.finished += finished_result(st);
  for (const auto old_id : s.match.rerouted) s.report.recomputed += finished_result(s.status[old_id]);
  s.report.not_in_sweep = s.report.finished - matched - s.report.recomputed - s.report.other_shards;
  return s;
}

ReuseReport copy(const std::filesystem::path& from, Source&& s, Store& into) {
  const auto status = into.task_status();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> todo;
  for (const auto& pair : s.match.pairs)
    if (finished_result(s.status[pair.first]) && status[pair.second] == TaskStatus::pending) todo.push_back(pair);
  if (todo.empty()) return std::move(s.report);
  constexpr std::size_t batch = 1024;  // bounded memory for stores with large spectra
  for (std::size_t i = 0; i < todo.size(); i += batch) {
    const std::size_t n = std::min(batch, todo.size() - i);
    std::vector<std::uint64_t> ids(n);
    for (std::size_t k = 0; k < n; ++k) ids[k] = todo[i + k].first;
    auto results = s.store->read_results(ids);
    for (std::size_t k = 0; k < n; ++k) results[k].task = todo[i + k].second;
    into.write(results);
  }
  s.report.copied = todo.size();
  into.note_reused(std::to_string(todo.size()) + " tasks from " + from.string() + " (sweep '" + s.report.from_name +
                   "', plan hash " + s.report.from_hash + ")");
  return std::move(s.report);
}

}  // namespace

ReuseReport compare_with_store(const std::filesystem::path& path, const plan::Plan& plan) {
  Source s = read_source(path, plan);
  // What a growth computes: the tasks of the shard that are not copied (failed ones run again),
  // with adaptive replicates only those the rule asks for once it has seen the copied results.
  std::vector<bool> in_shard(plan.tasks.size(), false), copied(plan.tasks.size(), false);
  for (const auto& b : plan.bundles)
    for (const auto id : b.tasks) in_shard[id] = true;
  std::vector<std::uint64_t> old_ids, new_ids;
  if (s.report.blockers.empty())
    for (const auto& [old_id, new_id] : s.match.pairs)
      if (finished_result(s.status[old_id])) {
        copied[new_id] = true;
        old_ids.push_back(old_id);
        new_ids.push_back(new_id);
      }
  if (!plan.spec.adaptive.enabled()) {
    for (std::uint64_t t = 0; t < plan.tasks.size(); ++t) s.report.to_compute_least += in_shard[t] && !copied[t];
    s.report.to_compute_most = s.report.to_compute_least;
    return s.report;
  }
  plan::ReplicateRule rule(plan);
  constexpr std::size_t batch = 1024;  // bounded memory
  for (std::size_t i = 0; i < old_ids.size(); i += batch) {
    const std::size_t n = std::min(batch, old_ids.size() - i);
    const auto results = s.store->read_results(std::span(old_ids).subspan(i, n));
    for (std::size_t k = 0; k < n; ++k)
      rule.record(new_ids[i + k], plan::target_values(plan.spec.adaptive, plan.max_depth, results[k].layers));
  }
  const auto max = static_cast<std::uint64_t>(plan.spec.replicates);
  for (std::size_t p = 0; p < plan.points.size(); ++p) {
    const auto needed = static_cast<std::uint64_t>(rule.needed_count(p));
    for (std::uint64_t r = 0; r < max; ++r) {
      const std::uint64_t id = p * max + r;
      if (!in_shard[id] || copied[id]) continue;
      if (r < needed) ++s.report.to_compute_least;
      if (r < needed || !rule.not_needed(id)) ++s.report.to_compute_most;
    }
  }
  return s.report;
}

ReuseReport reuse_results(const std::filesystem::path& from, Store& into, const plan::Plan& plan) {
  return copy(from, read_source(from, plan), into);
}

ReuseReport grow_in_place(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov) {
  const std::filesystem::path& path = lock.given();
  Source s = read_source(path, plan);
  const std::string p = path.string();
  if (!s.report.blockers.empty() || s.report.not_in_sweep > 0 || s.report.other_shards > 0) {
    const std::string why =
        !s.report.blockers.empty() ? "none of its results fits this sweep"
        : s.report.not_in_sweep > 0
            ? std::to_string(s.report.not_in_sweep) + " of its " + std::to_string(s.report.finished) +
                  " finished tasks are not tasks of this sweep"
            : std::to_string(s.report.other_shards) + " of its " + std::to_string(s.report.finished) +
                  " finished tasks belong to other shards of the grown sweep (merge the shards, grow the merged "
                  "store, or --reuse it into each new shard's store)";
    // Overrides given to either run belong to the sweep too: name both.
    const auto line = [](const std::vector<std::string>& o) {
      return o.empty() ? std::string("none") : config::overrides_line(o);
    };
    const bool overridden = !s.info.overrides.empty() || !plan.spec.overrides.empty();
    const std::string overrides = overridden ? "; the store's overrides: " + line(s.info.overrides) +
                                                   ", this run's: " + line(plan.spec.overrides)
                                             : std::string();
    throw StoreError(p + " (sweep '" + s.report.from_name + "', plan hash " + s.report.from_hash +
                     ") was made from a different sweep file" + (overridden ? " or command-line overrides" : "") +
                     " (plan hash " + plan.hash + overrides + "), and " + why + ", so it is not grown in place:\n" +
                     describe(s.report) + "write a new store (another -o" +
                     (s.report.blockers.empty() ? "; add --reuse " + p + " to copy what fits" : std::string()) +
                     ") or pass --overwrite");
  }
  Store into = Store::build(lock, plan, prov);
  s.report = copy(path, std::move(s), into);
  into.publish(/*replace=*/true);
  return s.report;
}

std::string describe(const ReuseReport& r, std::size_t max_lines) {
  const auto blocks = [&](const std::string& line) {
    return std::find(r.blockers.begin(), r.blockers.end(), line) != r.blockers.end();
  };
  std::string out;
  const std::size_t shown = std::min(max_lines, r.differences.size());
  for (std::size_t i = 0; i < shown; ++i)
    out += "  " + r.differences[i] + (blocks(r.differences[i]) ? "   (changes every task's results)" : "") + "\n";
  if (shown < r.differences.size())
    out += "  ... and " + std::to_string(r.differences.size() - shown) + " more differences\n";
  for (const auto& b : r.blockers)
    if (std::find(r.differences.begin(), r.differences.end(), b) == r.differences.end())
      out += "  " + b + "   (changes every task's results)\n";
  if (r.recomputed > 0)
    out += "  " + std::to_string(r.recomputed) +
           " finished tasks are computed again: the grid's number of attention models of their T and d changed "
           "the order of their logits' products (docs/CONFIG.md \"Growing a sweep\")\n";
  return out;
}

}  // namespace rcsweep::store
