// Parsing and validating a sweep file (docs/CONFIG.md "Validation"): every problem collected with
// its key path, command-line overrides applied first.
#include "config/sweep_spec.hpp"

#include <algorithm>
#include <optional>
#include <toml++/toml.h>
#include <utility>

#include "base/error.hpp"
#include "config/nesting.hpp"
#include "config/overrides_toml.hpp"
#include "config/parse_state.hpp"
#include "config/sweep_checks.hpp"
#include "config/sweep_tables.hpp"
#include "config/toml_nodes.hpp"

namespace rcsweep::config {
namespace parsing {
namespace {

/// Reads the top-level tables in file order; then the [[zip]] dimensions follow the [axes] ones.
void read_tables(ParseState& st, const toml::table& root) {
  const auto& reg = model_params();
  st.spec.base.resize(reg.size());
  for (std::size_t i = 0; i < reg.size(); ++i) st.spec.base[i] = reg[i].default_value;

  bool have_sweep = false;
  for (const auto& [key, node] : file_order(root)) {
    if (key == "sweep") {
      have_sweep = true;
      if (const auto* t = st.require_table(key, *node)) parse_sweep_table(st, *t);
    } else if (key == "model") {
      if (const auto* t = st.require_table(key, *node)) parse_model(st, *t);
    } else if (key == "axes") {
      if (const auto* t = st.require_table(key, *node)) parse_axes(st, *t);
    } else if (key == "zip") {
      parse_zips(st, *node);
    } else if (key == "output") {
      if (const auto* t = st.require_table(key, *node)) parse_output(st, *t);
    } else if (param_index(key)) {
      st.misplaced.insert(key);
      st.issue(key, "parameter '" + key + "' must be under [model] (a scalar) or [axes] (a list)");
    } else if (node->is_table()) {
      st.issue(key, "unknown table [" + key + "]" + suggestion(key, {"sweep", "model", "axes", "zip", "output"}) +
                        " (known: [sweep], [model], [axes], [[zip]], [output])");
    } else {
      st.issue(key, "unknown top-level key '" + key + "'" +
                        suggestion(key, {"sweep", "model", "axes", "zip", "output"}) +
                        "; keys belong in a table such as [sweep] or [model]");
    }
  }
  // [axes] dimensions first, then the [[zip]] tables, whatever their order in the file.
  for (auto& dim : st.zip_dims) st.spec.dims.push_back(std::move(dim));
  if (!have_sweep) st.issue("sweep.name", "required: a [sweep] table with name = \"...\"");
}

/// Checks across the tables: required parameters, the depth axis, gradients and replicate targets
/// against the depth, then the grid.
void check_document(ParseState& st) {
  const auto& reg = model_params();
  for (const auto& info : reg)
    if (info.required && !st.given_at.count(std::string(info.name)) && !st.misplaced.count(std::string(info.name)))
      st.issue("model." + std::string(info.name),
               "required parameter '" + std::string(info.name) + "' is missing: give it under [model] or [axes]");

  if (st.issues.empty()) check_model_extras(st);

  std::sort(st.spec.depth_axis.begin(), st.spec.depth_axis.end());
  st.spec.depth_axis.erase(std::unique(st.spec.depth_axis.begin(), st.spec.depth_axis.end()), st.spec.depth_axis.end());
  if (st.issues.empty()) check_lambda_layers(st);

  if (st.issues.empty() && st.spec.output.gradients != Spectra::none && st.spec.max_depth() == 0)
    st.issue("output.gradients", "gradient norms need depth >= 1 (the sweep's depth is 0)");
  for (std::size_t k = 0; k < st.spec.adaptive.targets.size() && st.issues.empty(); ++k)
    if (st.spec.adaptive.targets[k].layer > st.spec.max_depth())
      st.issue(st.target_paths[k] + ".layer", "is " + std::to_string(st.spec.adaptive.targets[k].layer) +
                                                  ", beyond the sweep's depth " + std::to_string(st.spec.max_depth()));
  for (std::size_t k = 0; k < st.spec.adaptive.targets.size() && st.issues.empty(); ++k)
    if (!st.spec.output.metrics[metrics::metric_index(st.spec.adaptive.targets[k].metric)])
      st.issue(st.target_paths[k] + ".metric",
               "'" + st.spec.adaptive.targets[k].metric + "' is not computed: add it to output.metrics");
  if (st.issues.empty()) check_size(st);
  if (st.issues.empty()) check_grid(st);
}

/// The SweepSpec of a parsed document; throws ConfigError with every problem.
SweepSpec parse_root(const toml::table& root) {
  ParseState st;
  read_tables(st, root);
  check_document(st);
  if (st.dropped > 0)
    st.issues.push_back({"", "and " + std::to_string(st.dropped) + " more problems: only the first " +
                                 std::to_string(max_issues) + " are listed"});
  if (!st.issues.empty()) throw ConfigError(std::move(st.issues));
  return std::move(st.spec);
}

}  // namespace
}  // namespace parsing

namespace {

SweepSpec parse_document(std::string_view toml_text, std::string_view source_name,
                         const std::vector<std::string>& overrides) {
  // Every problem at once: the malformed overrides, and those of the file with the others applied.
  std::vector<ConfigIssue> issues;
  std::vector<Override> parsed;
  for (const auto& text : overrides) {
    try {
      parsed.push_back(parse_override(text));
    } catch (const ConfigError& e) {
      issues.insert(issues.end(), e.issues().begin(), e.issues().end());
    }
  }
  const auto with_overrides = [&](std::vector<ConfigIssue> more) {
    issues.insert(issues.end(), more.begin(), more.end());
    return ConfigError(std::move(issues));
  };
  if (const auto pos = too_deep(toml_text))
    throw with_overrides(
        {{"", "TOML nesting too deep in " + printable(source_name) + " at line " + std::to_string(pos->line) +
                  ", column " + std::to_string(pos->column) + ": more than " + std::to_string(max_nesting) +
                  " levels of tables, dotted key parts, arrays and inline tables (a sweep file "
                  "needs about 5)"}});
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& err) {
    const auto& pos = err.source().begin;
    throw with_overrides(
        {{"", "TOML syntax error in " + std::string(source_name) + " at line " + std::to_string(pos.line) +
                  ", column " + std::to_string(pos.column) + ": " + std::string(err.description())}});
  }
  try {
    apply_overrides(root, parsed);
  } catch (const ConfigError& e) {
    issues.insert(issues.end(), e.issues().begin(), e.issues().end());
  }
  std::optional<SweepSpec> spec;
  try {
    spec = parsing::parse_root(root);
  } catch (const ConfigError& e) {
    auto more = e.issues();
    mark_overridden(more, parsed);
    issues.insert(issues.end(), more.begin(), more.end());
  }
  if (!issues.empty()) throw ConfigError(std::move(issues));
  spec->overrides = overrides;
  return std::move(*spec);
}

}  // namespace

SweepSpec parse_sweep(std::string_view toml_text, std::string_view source_name,
                      const std::vector<std::string>& overrides) {
  try {
    return parse_document(toml_text, source_name, overrides);
  } catch (const ConfigError& e) {
    // Keys and values of the file in messages: a NUL would cut the message where it is printed, a
    // line break or an escape sequence would forge or hide lines.
    // A key or message made huge by the file (a key of megabytes) is cut.
    const auto cut = [](const std::string& text, std::size_t most) {
      if (text.size() <= most) return printable(text);
      return printable(std::string_view(text).substr(0, most)) + "... (" + std::to_string(text.size()) + " bytes)";
    };
    std::vector<ConfigIssue> issues;
    for (const auto& issue : e.issues()) issues.push_back({cut(issue.key, 200), cut(issue.problem, 2000)});
    throw ConfigError(std::move(issues));
  }
}

}  // namespace rcsweep::config
