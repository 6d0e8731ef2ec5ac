// [sweep] of a sweep document: name, seed, and replicates, a count or a table of adaptive
// replicates with their targets (sweep_tables.hpp).
#include "config/sweep_tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "config/toml_nodes.hpp"
#include "metrics/metrics.hpp"

namespace rcsweep::config::parsing {
namespace {

constexpr std::size_t max_name_bytes = 200;  // the sweep's name; <name>.h5 is a file name

/// Why `name` cannot be a sweep's name, or "". The name is a file name (the default store
/// <name>.h5) and a job name of the emitted job scripts: one plain component of a path.
std::string name_problem(const std::string& name) {
  const std::string rule = "must be a plain file name (the default store is <name>.h5): ";
  if (name == "." || name == "..") return rule + "not '.' or '..'";
  if (name.find('/') != std::string::npos) return rule + "no '/'";
  if (name.front() == '-') return rule + "no leading '-' (it would read as an option)";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return rule + "no control characters (NUL, tab, line breaks, ...)";
  }
  if (name.size() > max_name_bytes)
    return "must be at most " + std::to_string(max_name_bytes) + " bytes long, got " + std::to_string(name.size());
  return "";
}

/// An integer key of [sweep.replicates] in [lo, hi], or nothing (an issue recorded).
std::optional<int> count_key(ParseState& st, const toml::table& table, const char* key, int lo) {
  const std::string path = std::string("sweep.replicates.") + key;
  const auto* node = table.get(key);
  if (!node) {
    st.issue(path, "required: an integer >= " + std::to_string(lo));
    return std::nullopt;
  }
  const auto* i = node->as_integer();
  if (!i || i->get() < lo || i->get() > static_cast<std::int64_t>(max_grid)) {
    st.issue(path, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(max_grid) + ", got " +
                       describe(*node));
    return std::nullopt;
  }
  return static_cast<int>(i->get());
}

void parse_target(ParseState& st, const toml::table& table, const std::string& path) {
  static const std::vector<std::string_view> known = {"metric", "layer", "rel_se", "abs_se"};
  ReplicateTarget target;
  for (const auto& [key, node] : file_order(table)) {
    const std::string at = path + "." + key;
    if (key == "metric") {
      const auto* s = node->as_string();
      std::vector<std::string_view> names(metrics::layer_metric_names.begin(), metrics::layer_metric_names.end());
      if (s && metrics::metric_index(s->get()) < metrics::n_layer_metrics)
        target.metric = s->get();
      else
        st.issue(at, "must be a per-layer metric (" + quote_list(names) + "), got " + describe(*node) +
                         (s ? suggestion(s->get(), names) : std::string()));
    } else if (key == "layer") {
      const auto* s = node->as_string();
      const auto* i = node->as_integer();
      if (s && s->get() == "last")
        target.layer = -1;
      else if (i && i->get() >= 0 && i->get() <= std::numeric_limits<int>::max())
        target.layer = static_cast<int>(i->get());
      else
        st.issue(at, "must be \"last\" or a layer 0..depth, got " + describe(*node));
    } else if (key == "rel_se" || key == "abs_se") {
      const auto* f = node->as_floating_point();
      const auto* i = node->as_integer();
      const double v = f ? f->get() : i ? static_cast<double>(i->get()) : -1.0;
      if (!(v > 0.0) || !std::isfinite(v))
        st.issue(at, "must be a number > 0 (largest standard error of the mean" +
                         std::string(key == "rel_se" ? ", relative to |mean|" : "") + "), got " + describe(*node));
      else
        (key == "rel_se" ? target.rel_se : target.abs_se) = v;
    } else {
      st.issue(at, "unknown key '" + key + "' in a target" + suggestion(key, known) +
                       " (known: metric, layer, rel_se, abs_se)");
    }
  }
  if (!table.get("metric")) st.issue(path + ".metric", "required: the metric whose standard error is checked");
  if (!table.get("rel_se") && !table.get("abs_se"))
    st.issue(path, "needs rel_se (standard error / |mean|) or abs_se (standard error), or both");
  st.spec.adaptive.targets.push_back(std::move(target));
  st.target_paths.push_back(path);
}

/// [sweep.replicates] = { min, max, step, targets = [{ metric, layer, rel_se | abs_se }, ...] }.
void parse_adaptive(ParseState& st, const toml::table& table) {
  static const std::vector<std::string_view> known = {"min", "max", "step", "targets"};
  for (const auto& [key, node] : file_order(table))
    if (std::find(known.begin(), known.end(), key) == known.end())
      st.issue("sweep.replicates." + key, "unknown key '" + key + "' in [sweep.replicates]" + suggestion(key, known) +
                                              " (known: min, max, step, targets)");
  const auto min = count_key(st, table, "min", 2), max = count_key(st, table, "max", 2),
             step = count_key(st, table, "step", 1);
  if (min && max && *min > *max)
    st.issue("sweep.replicates.min", "must be <= max (" + std::to_string(*max) + "), got " + std::to_string(*min));
  st.spec.replicates = max.value_or(st.spec.replicates);
  st.spec.adaptive.min = min.value_or(0);
  st.spec.adaptive.step = step.value_or(0);
  const auto* targets = table.get("targets");
  const auto* list = targets ? targets->as_array() : nullptr;
  if (!list || list->empty()) {
    st.issue("sweep.replicates.targets",
             std::string(targets ? "must be a non-empty list of tables, got " + describe(*targets) : "required") +
                 ": e.g. targets = [{ metric = \"sr_cov\", layer = \"last\", rel_se = 0.02 }]");
    return;
  }
  for (std::size_t k = 0; k < list->size(); ++k) {
    const std::string path = "sweep.replicates.targets[" + std::to_string(k) + "]";
    const auto* t = (*list)[k].as_table();
    if (!t) {
      st.issue(path, "must be a table { metric, layer, rel_se or abs_se }, got " + describe((*list)[k]));
      continue;
    }
    parse_target(st, *t, path);
  }
}

}  // namespace

void parse_sweep_table(ParseState& st, const toml::table& table) {
  bool have_name = false;
  for (const auto& [key, node] : file_order(table)) {
    const std::string path = "sweep." + key;
    if (key == "name") {
      have_name = true;
      if (const auto* s = node->as_string()) {
        if (s->get().empty())
          st.issue(path, "must not be empty");
        else if (const std::string problem = name_problem(s->get()); !problem.empty())
          st.issue(path, problem + ", got " + toml_string(s->get()));
        st.spec.name = s->get();
      } else {
        st.issue(path, "must be a string, got " + type_name(*node));
      }
    } else if (key == "seed") {
      const auto* i = node->as_integer();
      if (!i)
        st.issue(path, "must be a non-negative integer, got " + describe(*node));
      else if (i->get() < 0)
        st.issue(path, "must be a non-negative integer, got " + std::to_string(i->get()));
      else
        st.spec.seed = static_cast<std::uint64_t>(i->get());
    } else if (key == "replicates") {
      const auto* i = node->as_integer();
      if (const auto* t = node->as_table())
        parse_adaptive(st, *t);
      else if (!i)
        st.issue(path,
                 "must be an integer >= 1 or a table { min, max, step, targets } (adaptive), got " + describe(*node));
      else if (i->get() < 1)
        st.issue(path, "must be an integer >= 1, got " + std::to_string(i->get()));
      else if (i->get() > static_cast<std::int64_t>(max_grid))
        st.issue(path, "must be <= " + std::to_string(max_grid) + ", got " + std::to_string(i->get()));
      else
        st.spec.replicates = static_cast<int>(i->get());
    } else {
      if (param_index(key)) st.misplaced.insert(key);
      st.issue(path, "unknown key '" + key + "' in [sweep]" +
                         (param_index(key)
                              ? std::string(": model parameters go under [model] or [axes]")
                              : suggestion(key, {"name", "seed", "replicates"}) + " (known: name, seed, replicates)"));
    }
  }
  if (!have_name) st.issue("sweep.name", "required: the sweep's name (a string)");
}

}  // namespace rcsweep::config::parsing
