#include "plan/schedule.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

namespace rcsweep::plan {
namespace {

// A slice: the tasks [begin, end) of its bundle and their estimated seconds (shared work included).
struct Slice {
  std::size_t begin = 0, end = 0;
  double seconds = 0.0;
};

// `b` cut into k contiguous slices of about equal estimated time (1 <= k <= its tasks): each cut
// goes where the cumulative time of the tasks' midpoints passes j / k of the total, but leaves
// every slice at least one task.
std::vector<Slice> cut(const BundleWork& b, std::size_t k) {
  const std::size_t n = b.tasks.size();
  const double total = std::accumulate(b.task_s.begin(), b.task_s.end(), 0.0);
  std::vector<Slice> slices(k);
  std::size_t i = 0;
  double cum = 0.0;
  for (std::size_t j = 0; j < k; ++j) {
    Slice& s = slices[j];
    s.begin = i;
    s.seconds = b.shared_s;
    const double target = total * static_cast<double>(j + 1) / static_cast<double>(k);
    const std::size_t last = j + 1 == k ? n : n - (k - j - 1);  // leave one task per later slice
    while (i < last && (i == s.begin || j + 1 == k || cum + 0.5 * b.task_s[i] < target)) {
      cum += b.task_s[i];
      s.seconds += b.task_s[i];
      ++i;
    }
    s.end = i;
  }
  return slices;
}

// Unit seconds, largest first.
std::vector<double> unit_seconds(const std::vector<std::vector<Slice>>& slices) {
  std::vector<double> s;
  for (const auto& b : slices)
    for (const auto& x : b) s.push_back(x.seconds);
  std::sort(s.begin(), s.end(), std::greater<>());
  return s;
}

std::string plural(std::size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

std::string percent(double x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * x);
  return buf;
}

}  // namespace

double BundleWork::seconds() const { return std::accumulate(task_s.begin(), task_s.end(), shared_s); }

double Schedule::utilisation() const {
  return makespan_s > 0.0 ? work_s / (ranks * makespan_s)
                          : (units.size() >= static_cast<std::size_t>(ranks) ? 1.0 : 0.0);
}

double hand_out_makespan(const std::vector<double>& seconds, int ranks) {
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int r = 0; r < std::max(ranks, 1); ++r) free_at.push(0.0);
  double makespan = 0.0;
  for (const double s : seconds) {
    const double end = free_at.top() + s;
    free_at.pop();
    free_at.push(end);
    makespan = std::max(makespan, end);
  }
  return makespan;
}

namespace {

double largest_slice(const std::vector<Slice>& v) {
  double m = 0.0;
  for (const auto& x : v) m = std::max(m, x.seconds);
  return m;
}

/// The bundles as they are cut: k[b] slices of bundle b (0 for an empty bundle), and the slices.
struct Cuts {
  const std::vector<BundleWork>& bundles;
  std::vector<std::size_t> k;
  std::vector<std::vector<Slice>> slices;

  /// The bundle holding the largest unit that can still be cut, and that unit's seconds (the
  /// bundle is bundles.size() when every bundle is cut into single tasks).
  std::pair<std::size_t, double> pick_largest() const {
    std::size_t pick = bundles.size();
    double largest = -1.0;
    for (std::size_t b = 0; b < bundles.size(); ++b) {
      if (k[b] == 0 || k[b] >= bundles[b].tasks.size()) continue;
      if (const double m = largest_slice(slices[b]); m > largest) largest = m, pick = b;
    }
    return std::make_pair(pick, largest);
  }

  /// The fewest more slices of bundle `pick` that make its largest one smaller than `largest`.
  void cut_smaller(std::size_t pick, double largest) {
    do {
      slices[pick] = cut(bundles[pick], ++k[pick]);
    } while (k[pick] < bundles[pick].tasks.size() && largest_slice(slices[pick]) >= largest);
  }
};

/// Cut further while it may pay: the bundle holding the largest unit gets the fewest more slices
/// that make its largest one smaller. The best makespan found is kept, and the search goes on
/// through as many cuts that do not improve it as there are bundles, + 8 (bundles whose largest
/// slices are equal only pay once all of them are cut). A gain under 1 % is not worth a cut:
/// slices also repeat work the cost model does not price (their hand-out, allocations). Returns
/// the cuts of the best makespan, and that makespan in `best`.
std::vector<std::size_t> cut_for_makespan(Cuts& c, const Schedule& out, int ranks, double& best) {
  best = hand_out_makespan(unit_seconds(c.slices), ranks);
  std::vector<std::size_t> best_k = c.k;
  const auto patience = static_cast<int>(out.bundles) + 8;
  for (int stale = 0; ranks > 1 && stale <= patience && best > 1.01 * out.bundle_work_s / ranks;) {
    const auto [pick, largest] = c.pick_largest();
    if (pick == c.bundles.size()) break;  // every bundle is cut into single tasks
    c.cut_smaller(pick, largest);
    const double m = hand_out_makespan(unit_seconds(c.slices), ranks);
    if (m < 0.99 * best) {
      best = m;
      best_k = c.k;
      stale = 0;
    } else {
      ++stale;
    }
  }
  return best_k;
}

/// Then, where that costs little, smaller units: a rank slowed by what the model does not see
/// (another process on its core, a task slower than estimated) leaves its later units to the
/// others when every rank has several to take. Cut on (from `best_k`) while there are fewer than
/// `units_per_rank` units per rank and the slices repeat under `repeat_budget` of the work; the
/// last cut that leaves the estimated makespan within 1 % of `best` wins (into `best_k`).
void cut_for_balance(Cuts& c, const Schedule& out, int ranks, double best, std::vector<std::size_t>& best_k) {
  constexpr std::size_t units_per_rank = 4;
  constexpr double repeat_budget = 0.02;
  c.k = best_k;
  for (std::size_t b = 0; b < c.bundles.size(); ++b)
    if (c.k[b] > 0) c.slices[b] = cut(c.bundles[b], c.k[b]);
  for (const double limit = 1.01 * best; ranks > 1;) {
    if (std::accumulate(c.k.begin(), c.k.end(), std::size_t{0}) >= units_per_rank * static_cast<std::size_t>(ranks))
      break;
    const auto [pick, largest] = c.pick_largest();
    if (pick == c.bundles.size()) break;
    c.cut_smaller(pick, largest);
    const auto seconds = unit_seconds(c.slices);
    if (std::accumulate(seconds.begin(), seconds.end(), 0.0) > (1.0 + repeat_budget) * out.bundle_work_s) break;
    if (hand_out_makespan(seconds, ranks) <= limit) best_k = c.k;  // else the next cut may even it out
  }
}

/// The units of bundles cut into k[b] slices each, largest first, and their makespan.
void add_units(Schedule& out, const std::vector<BundleWork>& bundles, const std::vector<std::size_t>& k) {
  for (std::size_t b = 0; b < bundles.size(); ++b) {
    if (k[b] == 0) continue;
    out.split_bundles += k[b] > 1;
    for (const auto& s : cut(bundles[b], k[b])) {
      WorkUnit u;
      u.bundle = b;
      u.seconds = s.seconds;
      u.tasks.assign(bundles[b].tasks.begin() + static_cast<std::ptrdiff_t>(s.begin),
                     bundles[b].tasks.begin() + static_cast<std::ptrdiff_t>(s.end));
      out.work_s += s.seconds;
      out.units.push_back(std::move(u));
    }
  }
  std::stable_sort(out.units.begin(), out.units.end(),
                   [](const WorkUnit& a, const WorkUnit& b) { return a.seconds > b.seconds; });
  std::vector<double> seconds;
  for (const auto& u : out.units) seconds.push_back(u.seconds);
  out.makespan_s = hand_out_makespan(seconds, out.ranks);
}

}  // namespace

Schedule make_schedule(const std::vector<BundleWork>& bundles, int ranks) {
  ranks = std::max(ranks, 1);
  Schedule out;
  out.ranks = ranks;
  Cuts c{bundles, std::vector<std::size_t>(bundles.size(), 0), std::vector<std::vector<Slice>>(bundles.size())};
  for (std::size_t b = 0; b < bundles.size(); ++b) {
    if (bundles[b].tasks.empty()) continue;
    c.k[b] = 1;
    c.slices[b] = cut(bundles[b], 1);
    out.bundle_work_s += c.slices[b][0].seconds;
    out.tasks += bundles[b].tasks.size();
    ++out.bundles;
  }
  double best = 0.0;
  std::vector<std::size_t> best_k = cut_for_makespan(c, out, ranks, best);
  cut_for_balance(c, out, ranks, best, best_k);
  add_units(out, bundles, best_k);
  return out;
}

int fewest_ranks(const std::vector<BundleWork>& bundles, int ranks, double slower) {
  const double limit = (1.0 + slower) * make_schedule(bundles, ranks).makespan_s;
  int lo = 1, hi = ranks;  // bisection: the makespan hardly ever grows with the ranks
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (make_schedule(bundles, mid).makespan_s <= limit)
      hi = mid;
    else
      lo = mid + 1;
  }
  return hi;
}

std::string describe(const Schedule& s) {
  if (s.units.empty()) return "nothing to run";
  const std::size_t whole = s.bundles - s.split_bundles, slices = s.units.size() - whole;
  std::string units;
  if (whole > 0) units = plural(whole, "bundle");
  if (slices > 0)
    units += (units.empty() ? "" : ", ") + plural(slices, "slice") + " of " + plural(s.split_bundles, "bundle");
  std::string text = "expected utilisation " + percent(s.utilisation()) + " (units: " + units;
  if (s.bundle_work_s > 0.0 && s.work_s > 1.005 * s.bundle_work_s)
    text += "; the slices repeat shared work: +" + percent(s.work_s / s.bundle_work_s - 1.0);
  return text + ")";
}

std::string idle_warning(const Schedule& s, const std::vector<BundleWork>& bundles, double min_utilisation) {
  if (s.ranks <= 1 || s.tasks == 0) return "";
  if (s.tasks < static_cast<std::size_t>(s.ranks))
    return "only " + plural(s.tasks, "task") + " for " + plural(static_cast<std::size_t>(s.ranks), "rank") + ": " +
           plural(static_cast<std::size_t>(s.ranks) - s.tasks, "rank") +
           " will have nothing to do (a task is never split across ranks); run with -n " + std::to_string(s.tasks);
  if (s.utilisation() >= min_utilisation) return "";
  const int fewer = fewest_ranks(bundles, s.ranks, 0.02);
  const Schedule alt = make_schedule(bundles, fewer);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "ranks will idle: %s of the time of %d ranks is expected busy; the largest unit (%s) takes about "
                "%.3g s against %.3g s of work per rank (too few or too unequal tasks for %d ranks); -n %d keeps %s "
                "busy, about %.3g s instead of %.3g s",
                percent(s.utilisation()).c_str(), s.ranks, plural(s.units.front().tasks.size(), "task").c_str(),
                s.units.front().seconds, s.work_s / s.ranks, s.ranks, fewer, percent(alt.utilisation()).c_str(),
                alt.makespan_s, s.makespan_s);
  return buf;
}

}  // namespace rcsweep::plan
