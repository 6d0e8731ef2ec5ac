#include "plan/layout.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "base/error.hpp"
#include "base/units.hpp"
#include "plan/threads.hpp"

namespace rcsweep::plan {
namespace {

std::string gflop(double flops) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", flops / 1e9);
  return buf;
}

std::string plural(long long n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

std::size_t task_count(const std::vector<BundleWork>& work) {
  std::size_t n = 0;
  for (const auto& w : work) n += w.tasks.size();
  return n;
}

/// Whether `tasks` run in layer mode on several threads split their layers: the largest layer
/// reaches layer_split_min_flops. Below it a lone task (layer mode too) has products too small to
/// be cut into parts (linalg's split thresholds are of the same order): it runs as on one thread.
bool layers_split(const Plan& plan, const std::vector<std::uint64_t>& tasks) {
  double largest = 0.0;
  for (const auto id : tasks) largest = std::max(largest, layer_flops(plan.models.at(plan.tasks.at(id).point)));
  return largest >= layer_split_min_flops;
}

/// A unit's estimated seconds on `threads` threads: unit_seconds in its thread_mode, but a unit in
/// layer mode whose layers are not split takes its one-thread time.
double priced_unit(const Plan& plan, const std::vector<std::uint64_t>& tasks, const std::vector<double>& task_s,
                   double shared_s, int threads) {
  const ThreadMode mode = thread_mode(plan, tasks, threads);
  if (mode == ThreadMode::layer && !layers_split(plan, tasks)) threads = 1;
  return unit_seconds(mode, task_s, shared_s, threads);
}

void check_work(const Plan& plan, const std::vector<BundleWork>& work) {
  if (work.size() != plan.bundles.size()) throw std::logic_error("layout: work does not price plan.bundles");
}

/// "4 tasks with T = 48, d = 96, 32 layers"
std::string bundle_text(const Plan& plan, const Bundle& b) {
  const auto& m = plan.models.at(plan.tasks.at(b.tasks.front()).point);
  return plural(static_cast<long long>(b.tasks.size()), "task") + " with T = " + std::to_string(m.T) +
         ", d = " + std::to_string(m.d) + ", " + std::to_string(plan.max_depth) + " layers";
}

/// No layout fits: the error names the memory option that sets the budget.
ConfigError memory_error(const Plan& plan, const LayoutRequest& request, const LayoutEstimate& closest) {
  const std::string bundle = "the largest bundle (" + bundle_text(plan, plan.bundles.at(closest.largest)) +
                             ") needs about " + human_bytes(closest.bytes_per_rank) + " per rank";
  if (request.mem_per_rank > 0)
    return ConfigError({{"--mem-per-rank", bundle + ", more than the budget of " + human_bytes(request.mem_per_rank) +
                                               " (" + request.memory_source +
                                               "); give each rank more memory (fewer ranks per node) or make the "
                                               "tasks smaller"}});
  return ConfigError(
      {{"--mem-per-node", bundle + " with " + describe(closest) + " per node, more than the " +
                              human_bytes(closest.budget_per_rank) + " each rank gets of the node's " +
                              human_bytes(request.mem_per_node) + " (" + request.memory_source +
                              "); give the job nodes with more memory (--mem-per-node) or make the tasks smaller"}});
}

}  // namespace

std::vector<int> thread_candidates(int cores) {
  std::vector<int> out;
  for (int t = 1; t < cores; t *= 2)
    if (cores % t == 0) out.push_back(t);
  out.push_back(std::max(cores, 1));
  return out;
}

Schedule schedule_on_threads(const Plan& plan, const std::vector<BundleWork>& work, int ranks, int threads) {
  Schedule s = make_schedule(work, ranks);
  if (threads <= 1) return s;
  const double one_thread_s = s.work_s;
  s.work_s = 0.0;
  for (auto& u : s.units) {  // a unit is a contiguous run of its bundle's tasks
    const BundleWork& b = work.at(u.bundle);
    const auto first = std::find(b.tasks.begin(), b.tasks.end(), u.tasks.front()) - b.tasks.begin();
    const std::vector<double> task_s(b.task_s.begin() + first,
                                     b.task_s.begin() + first + static_cast<std::ptrdiff_t>(u.tasks.size()));
    u.seconds = priced_unit(plan, u.tasks, task_s, b.shared_s, threads);
    s.work_s += u.seconds;
  }
  std::stable_sort(s.units.begin(), s.units.end(),
                   [](const WorkUnit& a, const WorkUnit& b) { return a.seconds > b.seconds; });
  std::vector<double> seconds;
  for (const auto& u : s.units) seconds.push_back(u.seconds);
  s.makespan_s = hand_out_makespan(seconds, s.ranks);
  if (one_thread_s > 0.0) s.bundle_work_s *= s.work_s / one_thread_s;  // the slices' repeated share kept
  return s;
}

LayoutEstimate estimate_layout(const Plan& plan, const std::vector<BundleWork>& work, const LayoutRequest& request,
                               int threads) {
  check_work(plan, work);
  LayoutEstimate e;
  e.threads = std::max(threads, 1);
  const long long per_node = std::max(1, request.cores_per_node / e.threads);
  const auto tasks = static_cast<long long>(std::max<std::size_t>(1, task_count(work)));
  e.ranks = static_cast<int>(std::min(static_cast<long long>(std::max(request.nodes, 1)) * per_node, tasks));
  e.ranks_per_node = static_cast<int>(std::min<long long>(per_node, e.ranks));
  e.budget_per_rank = request.mem_per_rank > 0 ? request.mem_per_rank : request.mem_per_node / e.ranks_per_node;
  const RankMemory memory = rank_memory(plan, {e.threads, 1, e.ranks, 1, plan.spec.adaptive.enabled()});
  e.largest = memory.largest;
  e.bytes_per_rank = memory.resident();
  e.makespan_s = schedule_on_threads(plan, work, e.ranks, e.threads).makespan_s;
  return e;
}

namespace {

/// Throws ConfigError naming each option of `request` out of range.
void check_request(const LayoutRequest& request) {
  std::vector<ConfigIssue> issues;
  if (request.cores_per_node < 1)
    issues.push_back({"--cores", std::to_string(request.cores_per_node) + ": at least 1 core per node"});
  if (request.nodes < 1) issues.push_back({"--nodes", std::to_string(request.nodes) + ": at least 1 node"});
  if (request.threads < 0 || (request.cores_per_node >= 1 && request.threads > request.cores_per_node))
    issues.push_back({"--threads", std::to_string(request.threads) + ": from 1 to the cores of a node (" +
                                       std::to_string(request.cores_per_node) + ")"});
  if (!(request.mem_per_node > 0) && !(request.mem_per_rank > 0))
    issues.push_back({"--mem-per-node", "no memory per node or per rank given"});
  if (!issues.empty()) throw ConfigError(std::move(issues));
}

/// The flops of the largest layer of this shard's tasks.
double largest_layer_flops(const Plan& plan) {
  double largest_flops = 0.0;
  for (const auto& b : plan.bundles)
    for (const auto id : b.tasks)
      largest_flops = std::max(largest_flops, layer_flops(plan.models.at(plan.tasks.at(id).point)));
  return largest_flops;
}

/// The first layout (fewest threads) within layout_tie of the shortest estimated makespan.
const LayoutEstimate* fastest(const std::vector<const LayoutEstimate*>& fitting) {
  double shortest = fitting.front()->makespan_s;
  for (const auto* e : fitting) shortest = std::min(shortest, e->makespan_s);
  const LayoutEstimate* pick = fitting.front();
  for (const auto* e : fitting)
    if (e->makespan_s <= (1.0 + layout_tie) * shortest) {
      pick = e;
      break;
    }
  return pick;
}

}  // namespace

Layout choose_layout(const Plan& plan, const std::vector<BundleWork>& work, const LayoutRequest& request) {
  check_work(plan, work);
  check_request(request);

  Layout out;
  const auto finish = [&](const LayoutEstimate& e, std::string reason) {
    out.chosen = e;
    out.reason = std::move(reason);
    out.schedule = schedule_on_threads(plan, work, e.ranks, e.threads);
    return out;
  };
  const auto use = [&](const LayoutEstimate& e) {
    return human_bytes(e.bytes_per_rank) + " of " + human_bytes(e.budget_per_rank) + " per rank";
  };
  if (request.threads > 0) {  // forced: only this layout's memory and time
    const auto e = estimate_layout(plan, work, request, request.threads);
    out.candidates = {e};
    if (!e.fits()) throw memory_error(plan, request, e);
    return finish(e, "set by --threads " + std::to_string(request.threads) + "; the largest bundle needs " + use(e) +
                         ", about " + human_seconds(e.makespan_s));
  }

  for (const int t : thread_candidates(request.cores_per_node))
    out.candidates.push_back(estimate_layout(plan, work, request, t));
  const LayoutEstimate& one = out.candidates.front();
  const std::size_t tasks = task_count(work);
  if (tasks == 0) return finish(one, "nothing to run");

  std::vector<const LayoutEstimate*> fitting;
  for (const auto& e : out.candidates)
    if (e.fits()) fitting.push_back(&e);
  if (fitting.empty()) {  // name the layout that comes closest to fitting
    const LayoutEstimate* closest = &one;
    for (const auto& e : out.candidates)
      if (e.budget_per_rank - e.bytes_per_rank > closest->budget_per_rank - closest->bytes_per_rank) closest = &e;
    throw memory_error(plan, request, *closest);
  }

  const double largest_flops = largest_layer_flops(plan);
  const bool big = largest_flops >= layer_split_min_flops;
  const long long cores = static_cast<long long>(request.cores_per_node) * request.nodes;
  if (one.fits() && static_cast<long long>(tasks) >= cores && !big)
    return finish(one, "one rank per core: " + plural(static_cast<long long>(tasks), "task") + " for " +
                           plural(cores, "core") + ", no layer of " + gflop(layer_split_min_flops) +
                           " GFLOP or more, the largest bundle needs " + use(one));

  // Threads may pay: the shortest estimated makespan of the layouts that fit, ties to fewer threads.
  const LayoutEstimate* pick = fastest(fitting);
  std::string why;
  if (!one.fits())
    why = "one rank per core does not fit in memory (the largest bundle needs " + use(one) + ")";
  else if (static_cast<long long>(tasks) < cores)
    why = plural(static_cast<long long>(tasks), "task") + " for " + plural(cores, "core");
  else
    why = "the largest task's layer is about " + gflop(largest_flops) + " GFLOP (split over the threads from " +
          gflop(layer_split_min_flops) + " GFLOP on)";
  if (pick->threads == 1)
    return finish(*pick, why + "; more threads per rank would not be faster, about " + human_seconds(pick->makespan_s));
  std::string reason = why + "; " + plural(pick->threads, "thread") + " per rank: about " +
                       human_seconds(pick->makespan_s);
  if (one.fits()) reason += " instead of " + human_seconds(one.makespan_s) + " with one thread per rank";
  reason += ", the largest bundle needs " + use(*pick);
  return finish(*pick, reason);
}

double longest_task_seconds(const Plan& plan, const std::vector<BundleWork>& work, int threads) {
  check_work(plan, work);
  threads = std::max(threads, 1);
  double longest = 0.0;
  for (const auto& w : work) {
    if (w.tasks.empty()) continue;
    const bool split = layers_split(plan, w.tasks);
    for (const double t : w.task_s) longest = std::max(longest, split ? (t + w.shared_s) / threads : t + w.shared_s);
  }
  return longest;
}

std::string describe(const LayoutEstimate& layout) {
  return plural(layout.ranks_per_node, "rank") + " x " + plural(layout.threads, "thread");
}

std::string oversubscription(int ranks, int threads, int cores) {
  if (ranks < 1 || threads < 1 || cores < 1) return "";
  const long long all = static_cast<long long>(ranks) * threads;
  if (all <= cores) return "";
  // Each thread's share of a core, cores / all, as a fraction in lowest terms while it is short.
  const long long g = std::gcd(all, static_cast<long long>(cores));
  const long long num = cores / g, den = all / g;
  std::string share;
  if (num == 1 && den == 2)
    share = "half a core";
  else if (den <= 16)
    share = std::to_string(num) + "/" + std::to_string(den) + " of a core";
  else
    share = "about " + std::to_string(100 * static_cast<long long>(cores) / all) + "% of a core";
  return plural(ranks, "rank") + " x " + plural(threads, "thread") + " = " + plural(all, "thread") + " on " +
         plural(cores, "core") + ": oversubscribed, each thread gets " + share;
}

}  // namespace rcsweep::plan
