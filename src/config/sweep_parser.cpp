// Parsing and validating a sweep file (docs/CONFIG.md "Validation"): every problem collected with
// its key path, command-line overrides applied first.
#include "config/sweep_spec.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>
#include <utility>

#include "base/error.hpp"
#include "config/nesting.hpp"
#include "config/overrides_toml.hpp"
#include "metrics/metrics.hpp"

namespace rcsweep::config {
namespace {

// Points, and points x replicates (tasks): `plan` holds and prices every task (about 2 to 5 s and
// 0.5 to 1.5 GB for a million).
constexpr std::size_t max_grid = 1'000'000;
// What a store holds (docs/CONFIG.md "Limits"): rows of each per-layer metric (tasks x layers; 13
// float64 datasets of this many rows: 28 GiB), and values of each spectrum and gradient dataset
// (32 GiB each). `plan` walks every task's layers, so the rows also bound its time.
constexpr std::uint64_t max_layer_rows = std::uint64_t{1} << 28;
constexpr std::uint64_t max_stored_values = std::uint64_t{1} << 32;
// Spectra of one kind stored (tasks x stored layers): `plan` prices each one.
constexpr std::uint64_t max_stored_spectra = std::uint64_t{1} << 26;
constexpr std::size_t max_grid_problems = 10;  // distinct check_model() problems listed
constexpr std::size_t max_issues = 100;        // problems listed (a file of a million bad keys: the first 100)

using Issues = std::vector<ConfigIssue>;

// ---------------------------------------------------------------------------------------------
// Small text helpers

std::string suggestion(std::string_view name, const std::vector<std::string_view>& candidates) {
  const auto best = nearest(name, candidates);
  return best.empty() ? std::string() : ", did you mean '" + std::string(best) + "'?";
}

std::vector<std::string_view> param_names() {
  std::vector<std::string_view> names;
  for (const auto& info : model_params()) names.push_back(info.name);
  return names;
}

/// [model] keys that are not registry parameters: matrices and the input file. Given once under
/// [model]; never swept.
const std::vector<std::string_view>& model_extra_keys() {
  static const std::vector<std::string_view> keys = {"input_matrix", "mixer_matrix", "input_path", "input_dataset"};
  return keys;
}

bool is_model_extra(std::string_view key) {
  const auto& keys = model_extra_keys();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

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

/// Registry parameters and the extra [model] keys, for suggestions.
std::vector<std::string_view> model_key_names() {
  auto names = param_names();
  for (const auto k : model_extra_keys()) names.push_back(k);
  return names;
}

std::string quote_list(const std::vector<std::string_view>& items) {
  std::string out;
  for (const auto item : items) {
    if (!out.empty()) out += ", ";
    out += '"';
    out += item;
    out += '"';
  }
  return out;
}

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    default: return "an unknown value";
  }
}

/// The value as it appears in the file, for messages.
std::string node_text(const toml::node& node) {
  if (const auto* s = node.as_string()) return toml_string(s->get());
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) return to_toml(f->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  return type_name(node);
}

/// "a string \"x\"", "an integer 3", "a table": what was found, for messages.
std::string describe(const toml::node& node) {
  if (node.is_array() || node.is_table() || node.is_date() || node.is_time() || node.is_date_time())
    return type_name(node);
  return type_name(node) + " " + node_text(node);
}

/// Entries of a table in file order. toml++ 3.x keeps tables in a std::map (sorted by key), so
/// the order is recovered from where each key was written.
std::vector<std::pair<std::string, const toml::node*>> file_order(const toml::table& table) {
  struct Entry {
    std::string key;
    const toml::node* node;
    toml::source_position pos;
  };
  std::vector<Entry> entries;
  for (auto&& [key, node] : table) entries.push_back({std::string(key.str()), &node, key.source().begin});
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.pos.line != b.pos.line) return a.pos.line < b.pos.line;
    return a.pos.column < b.pos.column;
  });
  std::vector<std::pair<std::string, const toml::node*>> out;
  for (auto& e : entries) out.emplace_back(std::move(e.key), e.node);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Values

/// Validate one scalar against a parameter's kind; real and scale numbers become doubles, so
/// `lambda = 1` and `lambda = 1.0` give the same spec.
std::optional<ParamValue> parse_value(const toml::node& node, const ParamInfo& info, const std::string& key,
                                      Issues& issues) {
  auto fail = [&](std::string problem) -> std::optional<ParamValue> {
    issues.push_back({key, std::move(problem)});
    return std::nullopt;
  };
  switch (info.kind) {
    case ParamKind::integer: {
      if (const auto* f = node.as_floating_point()) {
        const double v = f->get();
        if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15)
          return fail("must be an integer (write " + std::to_string(static_cast<std::int64_t>(v)) + ", not " +
                      to_toml(v) + ")");
        return fail("must be an integer, got " + to_toml(v));
      }
      const auto* i = node.as_integer();
      if (!i) return fail("must be an integer, got " + describe(node));
      const std::int64_t v = i->get();
      if (v < info.min_int) return fail("must be >= " + std::to_string(info.min_int) + ", got " + std::to_string(v));
      if (v > info.max_int)
        return fail("must be <= " + std::to_string(info.max_int) + ", got " + std::to_string(v) +
                    " (docs/CONFIG.md \"Limits\")");
      return ParamValue{v};
    }
    case ParamKind::real:
    case ParamKind::scale: {
      const bool scale = info.kind == ParamKind::scale;
      double v = 0.0;
      if (const auto* i = node.as_integer()) {
        v = static_cast<double>(i->get());
      } else if (const auto* f = node.as_floating_point()) {
        v = f->get();
      } else if (const auto* s = node.as_string(); s && scale) {
        if (s->get() == "inv_sqrt_d") return ParamValue{std::string("inv_sqrt_d")};
        return fail("must be a positive number or \"inv_sqrt_d\", got " + toml_string(s->get()));
      } else if (s && !info.choices.empty()) {  // a real that also takes keywords (lambda_mlp = "lambda")
        for (const auto c : info.choices)
          if (c == s->get()) return ParamValue{s->get()};
        return fail("must be a number or one of " + quote_list(info.choices) + ", got " + toml_string(s->get()));
      } else {
        return fail(std::string(scale ? "must be a positive number or \"inv_sqrt_d\"" : "must be a number") + ", got " +
                    describe(node));
      }
      if (!std::isfinite(v)) return fail("must be a finite number, got " + to_toml(v));
      if (info.positive && v <= 0.0) return fail("must be > 0, got " + to_toml(v));
      return ParamValue{v};
    }
    case ParamKind::choice: {
      const auto* s = node.as_string();
      if (s) {
        for (const auto c : info.choices)
          if (c == s->get()) return ParamValue{s->get()};
        return fail("must be one of " + quote_list(info.choices) + ", got " + toml_string(s->get()));
      }
      return fail("must be one of " + quote_list(info.choices) + ", got " + describe(node));
    }
  }
  return fail("unsupported parameter kind");
}

// ---------------------------------------------------------------------------------------------
// The parser: walks the document once, collecting every issue.

class Parser {
 public:
  explicit Parser(const toml::table& root) : root_(root) {}

  SweepSpec run() {
    const auto& reg = model_params();
    spec_.base.resize(reg.size());
    for (std::size_t i = 0; i < reg.size(); ++i) spec_.base[i] = reg[i].default_value;

    bool have_sweep = false;
    for (const auto& [key, node] : file_order(root_)) {
      if (key == "sweep") {
        have_sweep = true;
        if (const auto* t = require_table(key, *node)) parse_sweep_table(*t);
      } else if (key == "model") {
        if (const auto* t = require_table(key, *node)) parse_model(*t);
      } else if (key == "axes") {
        if (const auto* t = require_table(key, *node)) parse_axes(*t);
      } else if (key == "zip") {
        parse_zips(*node);
      } else if (key == "output") {
        if (const auto* t = require_table(key, *node)) parse_output(*t);
      } else if (param_index(key)) {
        misplaced_.insert(key);
        issue(key, "parameter '" + key + "' must be under [model] (a scalar) or [axes] (a list)");
      } else if (node->is_table()) {
        issue(key, "unknown table [" + key + "]" + suggestion(key, {"sweep", "model", "axes", "zip", "output"}) +
                       " (known: [sweep], [model], [axes], [[zip]], [output])");
      } else {
        issue(key, "unknown top-level key '" + key + "'" +
                       suggestion(key, {"sweep", "model", "axes", "zip", "output"}) +
                       "; keys belong in a table such as [sweep] or [model]");
      }
    }
    // [axes] dimensions first, then the [[zip]] tables, whatever their order in the file.
    for (auto& dim : zip_dims_) spec_.dims.push_back(std::move(dim));
    if (!have_sweep) issue("sweep.name", "required: a [sweep] table with name = \"...\"");

    for (const auto& info : reg)
      if (info.required && !given_at_.count(std::string(info.name)) && !misplaced_.count(std::string(info.name)))
        issue("model." + std::string(info.name),
              "required parameter '" + std::string(info.name) + "' is missing: give it under [model] or [axes]");

    if (issues_.empty()) check_model_extras();

    std::sort(spec_.depth_axis.begin(), spec_.depth_axis.end());
    spec_.depth_axis.erase(std::unique(spec_.depth_axis.begin(), spec_.depth_axis.end()), spec_.depth_axis.end());

    if (issues_.empty() && spec_.output.gradients != Spectra::none && spec_.max_depth() == 0)
      issue("output.gradients", "gradient norms need depth >= 1 (the sweep's depth is 0)");
    for (std::size_t k = 0; k < spec_.adaptive.targets.size() && issues_.empty(); ++k)
      if (spec_.adaptive.targets[k].layer > spec_.max_depth())
        issue(target_paths_[k] + ".layer", "is " + std::to_string(spec_.adaptive.targets[k].layer) +
                                               ", beyond the sweep's depth " + std::to_string(spec_.max_depth()));
    if (issues_.empty()) check_size();
    if (issues_.empty()) check_grid();
    if (dropped_ > 0)
      issues_.push_back({"", "and " + std::to_string(dropped_) + " more problems: only the first " +
                                 std::to_string(max_issues) + " are listed"});
    if (!issues_.empty()) throw ConfigError(std::move(issues_));
    return std::move(spec_);
  }

 private:
  /// Records a problem; past max_issues only counts it.
  void issue(std::string key, std::string problem) {
    if (full())
      ++dropped_;
    else
      issues_.push_back({std::move(key), std::move(problem)});
  }
  bool full() const { return issues_.size() >= max_issues; }

  /// An unknown parameter name; a misspelt required parameter is then not also reported missing.
  void unknown_param(const std::string& path, const std::string& name) {
    if (full()) {  // not even a suggestion to compute
      issue(path, "");
      return;
    }
    const auto best = nearest(name, model_key_names());
    if (!best.empty()) misplaced_.insert(std::string(best));
    issue(path, "unknown parameter '" + name + "'" + suggestion(name, model_key_names()));
  }

  /// An extra [model] key (matrix, input file) under [axes] or a [[zip]] table.
  void not_sweepable(const std::string& path, const std::string& key) {
    issue(path, "'" + key + "' is not sweepable: give it once under [model]");
  }

  /// A matrix given as a non-empty list of equally long, non-empty rows of finite numbers.
  std::shared_ptr<const Matrix> parse_matrix(const toml::node& node, const std::string& path) {
    const auto* arr = node.as_array();
    if (!arr || arr->empty()) {
      issue(path, "must be a non-empty list of rows, e.g. [[1.0, 0.0], [0.0, 1.0]], got " +
                      (arr ? std::string("an empty list") : describe(node)));
      return nullptr;
    }
    bool ok = true;
    std::size_t cols = 0, first = 0;  // length of the first well-formed row, and its index
    std::vector<std::vector<double>> rows;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const std::string row_path = path + "[" + std::to_string(i) + "]";
      const auto* row = arr->get(i)->as_array();
      if (!row || row->empty()) {
        issue(row_path, "must be a non-empty list of numbers (row " + std::to_string(i) + "), got " +
                            (row ? std::string("an empty list") : describe(*arr->get(i))));
        ok = false;
        continue;
      }
      std::vector<double> values;
      for (std::size_t j = 0; j < row->size(); ++j) {
        const toml::node& x = *row->get(j);
        const std::string x_path = row_path + "[" + std::to_string(j) + "]";
        double v = 0.0;
        if (const auto* in = x.as_integer()) {
          v = static_cast<double>(in->get());
        } else if (const auto* f = x.as_floating_point()) {
          v = f->get();
        } else {
          issue(x_path, "must be a number, got " + describe(x));
          ok = false;
          continue;
        }
        if (!std::isfinite(v)) {
          issue(x_path, "must be a finite number, got " + to_toml(v));
          ok = false;
        }
        values.push_back(v);
      }
      if (rows.empty()) {
        cols = row->size();
        first = i;
      }
      if (row->size() != cols) {
        issue(row_path, "row " + std::to_string(i) + " has " + std::to_string(row->size()) + " numbers but row " +
                            std::to_string(first) + " has " + std::to_string(cols) +
                            ": every row needs the same length");
        ok = false;
      }
      rows.push_back(std::move(values));
    }
    if (!ok) return nullptr;
    auto A = std::make_shared<Matrix>(rows.size(), cols);
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t j = 0; j < cols; ++j) (*A)(i, j) = rows[i][j];
    return A;
  }

  void parse_model_extra(const std::string& key, const toml::node& node, const std::string& path) {
    extra_given_.insert(key);
    if (key == "input_matrix") {
      spec_.input_matrix = parse_matrix(node, path);
    } else if (key == "mixer_matrix") {
      spec_.mixer_matrix = parse_matrix(node, path);
    } else {
      const auto* s = node.as_string();
      if (!s || s->get().empty()) {
        issue(path, std::string("must be a non-empty string (") +
                        (key == "input_path" ? "an HDF5 file, relative to the sweep file's folder"
                                             : "the name of a T x d float64 dataset in input_path") +
                        "), got " + (s ? std::string("an empty string") : describe(node)));
        return;
      }
      if (s->get().find('\0') != std::string::npos) {  // a C path or HDF5 name would end there
        issue(path, "must not hold a NUL character, got " + toml_string(s->get()));
        return;
      }
      (key == "input_path" ? spec_.input_path : spec_.input_dataset) = s->get();
    }
  }

  /// Whether the choice parameter `name` takes the value `choice` at some grid point.
  bool may_be(const std::string& name, std::string_view choice) const {
    if (!swept(name)) return std::get<std::string>(param_value(spec_.base, name)) == choice;
    const auto has = [&](const Dim& dim) {
      for (std::size_t c = 0; c < dim.params.size(); ++c)
        if (dim.params[c] == name)
          for (const auto& v : dim.columns[c])
            if (std::get<std::string>(v) == choice) return true;
      return false;
    };
    return std::any_of(spec_.dims.begin(), spec_.dims.end(), has) ||
           std::any_of(zip_dims_.begin(), zip_dims_.end(), has);
  }

  /// The extra [model] keys against the input and mixer they belong to.
  void check_model_extras() {
    const bool input_matrix = may_be("input", "matrix"), input_file = may_be("input", "file");
    const auto used_with = [&](const char* key, const char* param, const char* choice, bool used) {
      if (extra_given_.count(key) && !used)
        issue(std::string("model.") + key, std::string("is only used with ") + param + " = \"" + choice + "\", but " +
                                               param + " is never \"" + choice + "\" in this sweep");
    };
    used_with("input_matrix", "input", "matrix", input_matrix);
    used_with("mixer_matrix", "mixer", "matrix", may_be("mixer", "matrix"));
    used_with("input_path", "input", "file", input_file);
    used_with("input_dataset", "input", "file", input_file);
    if (input_file && !extra_given_.count("input_path"))
      issue("model.input_path", "required with input = \"file\": the HDF5 file holding the T x d input");
  }

  const toml::table* require_table(const std::string& key, const toml::node& node) {
    if (const auto* t = node.as_table()) return t;
    issue(key, "must be a table ([" + key + "]), got " + type_name(node));
    return nullptr;
  }

  /// Records where a parameter is given; false (and an issue) when it was given before.
  bool claim(const std::string& name, const std::string& place) {
    const auto [it, inserted] = given_at_.emplace(name, place);
    if (!inserted)
      issue(place + "." + name, "parameter '" + name + "' is given in both " + it->second + " and " + place +
                                    "; give it in one place only");
    return inserted;
  }

  void parse_sweep_table(const toml::table& table) {
    bool have_name = false;
    for (const auto& [key, node] : file_order(table)) {
      const std::string path = "sweep." + key;
      if (key == "name") {
        have_name = true;
        if (const auto* s = node->as_string()) {
          if (s->get().empty())
            issue(path, "must not be empty");
          else if (const std::string problem = name_problem(s->get()); !problem.empty())
            issue(path, problem + ", got " + toml_string(s->get()));
          spec_.name = s->get();
        } else {
          issue(path, "must be a string, got " + type_name(*node));
        }
      } else if (key == "seed") {
        const auto* i = node->as_integer();
        if (!i)
          issue(path, "must be a non-negative integer, got " + describe(*node));
        else if (i->get() < 0)
          issue(path, "must be a non-negative integer, got " + std::to_string(i->get()));
        else
          spec_.seed = static_cast<std::uint64_t>(i->get());
      } else if (key == "replicates") {
        const auto* i = node->as_integer();
        if (const auto* t = node->as_table())
          parse_adaptive(*t);
        else if (!i)
          issue(path,
                "must be an integer >= 1 or a table { min, max, step, targets } (adaptive), got " + describe(*node));
        else if (i->get() < 1)
          issue(path, "must be an integer >= 1, got " + std::to_string(i->get()));
        else if (i->get() > static_cast<std::int64_t>(max_grid))
          issue(path, "must be <= " + std::to_string(max_grid) + ", got " + std::to_string(i->get()));
        else
          spec_.replicates = static_cast<int>(i->get());
      } else {
        if (param_index(key)) misplaced_.insert(key);
        issue(path, "unknown key '" + key + "' in [sweep]" +
                        (param_index(key)
                             ? std::string(": model parameters go under [model] or [axes]")
                             : suggestion(key, {"name", "seed", "replicates"}) + " (known: name, seed, replicates)"));
      }
    }
    if (!have_name) issue("sweep.name", "required: the sweep's name (a string)");
  }

  /// An integer key of [sweep.replicates] in [lo, hi], or nothing (an issue recorded).
  std::optional<int> count_key(const toml::table& table, const char* key, int lo) {
    const std::string path = std::string("sweep.replicates.") + key;
    const auto* node = table.get(key);
    if (!node) {
      issue(path, "required: an integer >= " + std::to_string(lo));
      return std::nullopt;
    }
    const auto* i = node->as_integer();
    if (!i || i->get() < lo || i->get() > static_cast<std::int64_t>(max_grid)) {
      issue(path, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(max_grid) + ", got " +
                      describe(*node));
      return std::nullopt;
    }
    return static_cast<int>(i->get());
  }

  /// [sweep.replicates] = { min, max, step, targets = [{ metric, layer, rel_se | abs_se }, ...] }.
  void parse_adaptive(const toml::table& table) {
    static const std::vector<std::string_view> known = {"min", "max", "step", "targets"};
    for (const auto& [key, node] : file_order(table))
      if (std::find(known.begin(), known.end(), key) == known.end())
        issue("sweep.replicates." + key, "unknown key '" + key + "' in [sweep.replicates]" + suggestion(key, known) +
                                             " (known: min, max, step, targets)");
    const auto min = count_key(table, "min", 2), max = count_key(table, "max", 2), step = count_key(table, "step", 1);
    if (min && max && *min > *max)
      issue("sweep.replicates.min", "must be <= max (" + std::to_string(*max) + "), got " + std::to_string(*min));
    spec_.replicates = max.value_or(spec_.replicates);
    spec_.adaptive.min = min.value_or(0);
    spec_.adaptive.step = step.value_or(0);
    const auto* targets = table.get("targets");
    const auto* list = targets ? targets->as_array() : nullptr;
    if (!list || list->empty()) {
      issue("sweep.replicates.targets",
            std::string(targets ? "must be a non-empty list of tables, got " + describe(*targets) : "required") +
                ": e.g. targets = [{ metric = \"sr_cov\", layer = \"last\", rel_se = 0.02 }]");
      return;
    }
    for (std::size_t k = 0; k < list->size(); ++k) {
      const std::string path = "sweep.replicates.targets[" + std::to_string(k) + "]";
      const auto* t = (*list)[k].as_table();
      if (!t) {
        issue(path, "must be a table { metric, layer, rel_se or abs_se }, got " + describe((*list)[k]));
        continue;
      }
      parse_target(*t, path);
    }
  }

  void parse_target(const toml::table& table, const std::string& path) {
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
          issue(at, "must be a per-layer metric (" + quote_list(names) + "), got " + describe(*node) +
                        (s ? suggestion(s->get(), names) : std::string()));
      } else if (key == "layer") {
        const auto* s = node->as_string();
        const auto* i = node->as_integer();
        if (s && s->get() == "last")
          target.layer = -1;
        else if (i && i->get() >= 0 && i->get() <= std::numeric_limits<int>::max())
          target.layer = static_cast<int>(i->get());
        else
          issue(at, "must be \"last\" or a layer 0..depth, got " + describe(*node));
      } else if (key == "rel_se" || key == "abs_se") {
        const auto* f = node->as_floating_point();
        const auto* i = node->as_integer();
        const double v = f ? f->get() : i ? static_cast<double>(i->get()) : -1.0;
        if (!(v > 0.0) || !std::isfinite(v))
          issue(at, "must be a number > 0 (largest standard error of the mean" +
                        std::string(key == "rel_se" ? ", relative to |mean|" : "") + "), got " + describe(*node));
        else
          (key == "rel_se" ? target.rel_se : target.abs_se) = v;
      } else {
        issue(at, "unknown key '" + key + "' in a target" + suggestion(key, known) +
                      " (known: metric, layer, rel_se, abs_se)");
      }
    }
    if (!table.get("metric")) issue(path + ".metric", "required: the metric whose standard error is checked");
    if (!table.get("rel_se") && !table.get("abs_se"))
      issue(path, "needs rel_se (standard error / |mean|) or abs_se (standard error), or both");
    spec_.adaptive.targets.push_back(std::move(target));
    target_paths_.push_back(path);
  }

  void parse_model(const toml::table& table) {
    for (const auto& [key, node] : file_order(table)) {
      const std::string path = "model." + key;
      if (is_model_extra(key)) {
        parse_model_extra(key, *node, path);
        continue;
      }
      const auto idx = param_index(key);
      if (!idx) {
        unknown_param(path, key);
        continue;
      }
      if (!claim(key, "model")) continue;
      if (node->is_array()) {
        issue(path, "[model] takes one value; to sweep '" + key + "' list its values under [axes]");
        continue;
      }
      if (auto v = parse_value(*node, model_params()[*idx], path, issues_)) spec_.base[*idx] = std::move(*v);
    }
  }

  /// Parses the list of `param` at `path`; nullopt when any element (or the list) is invalid.
  std::optional<std::vector<ParamValue>> parse_list(const toml::node& node, const ParamInfo& info,
                                                    const std::string& path, const char* where) {
    const auto* arr = node.as_array();
    if (!arr) {
      issue(path, std::string("must be a list (array) of values, got ") + describe(node) + where);
      return std::nullopt;
    }
    if (arr->empty()) {
      issue(path, "empty list: give at least one value");
      return std::nullopt;
    }
    std::vector<ParamValue> values;
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto v = parse_value(*arr->get(i), info, path + "[" + std::to_string(i) + "]", issues_);
      if (v)
        values.push_back(std::move(*v));
      else
        ok = false;
    }
    if (!ok) return std::nullopt;
    return values;
  }

  void parse_axes(const toml::table& table) {
    for (const auto& [key, node] : file_order(table)) {
      const std::string path = "axes." + key;
      if (is_model_extra(key)) {
        not_sweepable(path, key);
        continue;
      }
      const auto idx = param_index(key);
      if (!idx) {
        unknown_param(path, key);
        continue;
      }
      if (!claim(key, "axes")) continue;
      auto values = parse_list(*node, model_params()[*idx], path, "; a single value belongs under [model]");
      if (!values) continue;
      std::map<ParamValue, std::size_t> seen;
      bool unique = true;
      for (std::size_t i = 0; i < values->size(); ++i) {
        const auto [it, inserted] = seen.emplace((*values)[i], i);
        if (!inserted) {
          unique = false;
          issue(path + "[" + std::to_string(i) + "]", "duplicate value " + to_text((*values)[i]) + " (same as [" +
                                                          std::to_string(it->second) +
                                                          "]): it would create identical grid points");
        }
      }
      if (!unique) continue;
      if (key == "depth") {
        for (const auto& v : *values) spec_.depth_axis.push_back(std::get<std::int64_t>(v));
      } else {
        spec_.dims.push_back(Dim{key, {key}, {std::move(*values)}});
      }
    }
  }

  void parse_zips(const toml::node& node) {
    const auto* arr = node.as_array();
    if (!arr || !arr->is_array_of_tables()) {
      issue("zip", "must be an array of tables: write each group as a [[zip]] table");
      return;
    }
    for (std::size_t k = 0; k < arr->size(); ++k) parse_zip(*arr->get(k)->as_table(), k);
  }

  void parse_zip(const toml::table& table, std::size_t k) {
    const std::string place = "zip[" + std::to_string(k) + "]";
    if (table.empty()) {
      issue(place, "empty [[zip]] table: give at least one parameter list");
      return;
    }
    Dim dim;
    dim.name = "zip" + std::to_string(k);
    bool ok = true;
    std::vector<std::pair<std::string, std::size_t>> lengths;
    for (const auto& [key, node] : file_order(table)) {
      const std::string path = place + "." + key;
      if (is_model_extra(key)) {
        not_sweepable(path, key);
        ok = false;
        continue;
      }
      const auto idx = param_index(key);
      if (!idx) {
        unknown_param(path, key);
        ok = false;
        continue;
      }
      if (key == "depth") {
        issue(path, "depth is not a task dimension (every task runs to the largest depth and records each "
                    "layer): list it under [axes] or give it under [model]");
        given_at_.emplace(key, place);  // no second "missing" error
        ok = false;
        continue;
      }
      if (!claim(key, place)) {
        ok = false;
        continue;
      }
      if (const auto* a = node->as_array()) lengths.emplace_back(key, a->size());
      auto values = parse_list(*node, model_params()[*idx], path, "; every [[zip]] entry is a list");
      if (!values) {
        ok = false;
        continue;
      }
      dim.params.push_back(key);
      dim.columns.push_back(std::move(*values));
    }
    bool equal = true;
    for (const auto& [name, len] : lengths) equal = equal && len == lengths.front().second;
    if (!equal) {
      std::string text;
      for (const auto& [name, len] : lengths) text += (text.empty() ? "" : ", ") + name + " has " + std::to_string(len);
      issue(place, "lists of unequal length (" + text + "): every list of one [[zip]] needs the same length");
      ok = false;
    }
    if (!ok) return;
    std::map<std::vector<ParamValue>, std::size_t> seen;
    for (std::size_t i = 0; i < dim.size(); ++i) {
      std::vector<ParamValue> row;
      for (const auto& column : dim.columns) row.push_back(column[i]);
      const auto [it, inserted] = seen.emplace(std::move(row), i);
      if (!inserted) {
        issue(place, "entry " + std::to_string(i) + " repeats entry " + std::to_string(it->second) +
                         ": it would create identical grid points");
        ok = false;
      }
    }
    if (ok) zip_dims_.push_back(std::move(dim));
  }

  void parse_output(const toml::table& table) {
    static const std::vector<std::string_view> known = {"spectra", "mixer_spectra", "gradients", "grad_method",
                                                        "grad_probes"};
    for (const auto& [key, node] : file_order(table)) {
      const std::string path = "output." + key;
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        issue(path, "unknown key '" + key + "' in [output]" + suggestion(key, known) +
                        " (known: spectra, mixer_spectra, gradients, grad_method, grad_probes)");
        continue;
      }
      if (key == "grad_probes") {
        const auto* v = node->as_integer();
        if (!v || v->get() < 2 || v->get() > 100000)
          issue(path, "must be an integer from 2 to 100000 (Hutchinson probes per task), got " + describe(*node));
        else
          spec_.output.grad_probes = static_cast<int>(v->get());
        continue;
      }
      const auto* s = node->as_string();
      if (key == "grad_method") {
        if (s && s->get() == "auto")
          spec_.output.grad_method = GradMethod::automatic;
        else if (s && s->get() == "exact")
          spec_.output.grad_method = GradMethod::exact;
        else if (s && s->get() == "hutchinson")
          spec_.output.grad_method = GradMethod::hutchinson;
        else
          issue(path, "must be one of \"auto\", \"exact\", \"hutchinson\", got " + describe(*node));
        continue;
      }
      Spectra& target = key == "spectra"         ? spec_.output.spectra
                        : key == "mixer_spectra" ? spec_.output.mixer_spectra
                                                 : spec_.output.gradients;
      if (s && s->get() == "none")
        target = Spectra::none;
      else if (s && s->get() == "last")
        target = Spectra::last;
      else if (s && s->get() == "all")
        target = Spectra::all;
      else
        issue(path, "must be one of \"none\", \"last\", \"all\", got " + describe(*node));
    }
  }

  void check_size() {
    std::size_t points = 1;
    bool too_many = false;
    for (const auto& dim : spec_.dims) {
      if (points > max_grid / std::max<std::size_t>(dim.size(), 1)) too_many = true;
      points = too_many ? max_grid + 1 : points * dim.size();
    }
    if (too_many || points > max_grid) {
      issue("axes", "the grid has more than " + std::to_string(max_grid) + " points" +
                        (too_many ? std::string() : " (" + std::to_string(points) + ")") +
                        "; split the sweep into several files");
      return;
    }
    const auto reps = static_cast<std::size_t>(spec_.replicates);
    if (points > max_grid / reps) {
      issue("sweep.replicates", std::to_string(points) + " points x " + std::to_string(reps) +
                                    " replicates is more than " + std::to_string(max_grid) +
                                    " tasks; split the sweep into several files");
      return;
    }
    const std::uint64_t tasks = points * reps, layers = static_cast<std::uint64_t>(spec_.max_depth()) + 1;
    if (tasks * layers > max_layer_rows)
      issue(location("depth"), std::to_string(tasks) + " tasks x " + std::to_string(layers) + " layers (0.." +
                                   std::to_string(layers - 1) + ") is " + std::to_string(tasks * layers) +
                                   " rows of per-layer metrics, more than the " + std::to_string(max_layer_rows) +
                                   " a store holds (docs/CONFIG.md \"Limits\"); fewer layers or tasks, or split "
                                   "the sweep into several files");
  }

  /// The stored spectra and gradient norms against max_stored_values, from the sums over the grid
  /// points of min(T, d) (a spectrum of X) and T (a mixer spectrum).
  void check_stored(std::uint64_t sum_min_Td, std::uint64_t sum_T) {
    const auto reps = static_cast<std::uint64_t>(spec_.replicates);
    const auto L = static_cast<std::uint64_t>(spec_.max_depth());
    const std::uint64_t tasks = spec_.n_points() * reps;
    const auto layers = [&](Spectra s, std::uint64_t first) -> std::uint64_t {
      if (s == Spectra::none || L < first) return 0;
      return s == Spectra::last ? 1 : L + 1 - first;
    };
    const std::string advice = " (docs/CONFIG.md \"Limits\"); store fewer layers (\"last\"), or split the sweep into "
                               "several files";
    const auto check = [&](const char* key, std::uint64_t values, const std::string& what) {
      if (values > max_stored_values)
        issue(key, what + " is " + std::to_string(values) + " values, more than the " +
                       std::to_string(max_stored_values) + " a store holds in one dataset" + advice);
    };
    const auto check_spectra = [&](const char* key, std::uint64_t stored, std::uint64_t values, const std::string& what,
                                   const char* length) {
      if (stored > max_stored_spectra)
        issue(key, what + ": " + std::to_string(tasks) + " tasks x " +
                       std::to_string(stored / std::max<std::uint64_t>(tasks, 1)) + " layers is " +
                       std::to_string(stored) + " spectra, more than the " + std::to_string(max_stored_spectra) +
                       " a sweep may store" + advice);
      else
        check(key, values,
              what + ": " + std::to_string(tasks) + " tasks x " +
                  std::to_string(stored / std::max<std::uint64_t>(tasks, 1)) + " layers x " + length);
    };
    const auto& out = spec_.output;
    check_spectra("output.spectra", tasks * layers(out.spectra, 0), reps * sum_min_Td * layers(out.spectra, 0),
                  "singular values of X", "min(T, d)");
    check_spectra("output.mixer_spectra", tasks * layers(out.mixer_spectra, 1),
                  reps * sum_T * layers(out.mixer_spectra, 1), "mixer spectra", "T");
    if (out.gradients != Spectra::none)
      check("output.gradients", tasks * L * (out.gradients == Spectra::all ? L : 1),
            "gradient norms: " + std::to_string(tasks) + " tasks x " + std::to_string(L) + " layers" +
                (out.gradients == Spectra::all ? " x " + std::to_string(L) + " output depths" : std::string()));
  }

  /// The key path where a parameter was given (its default counts as [model]).
  std::string location(const std::string& name) const {
    const auto it = given_at_.find(name);
    return (it == given_at_.end() ? std::string("model") : it->second) + "." + name;
  }

  bool swept(const std::string& name) const {
    const auto it = given_at_.find(name);
    return it != given_at_.end() && it->second != "model";
  }

  /// The key to blame for a check_model() problem reported on `key`: the parameter itself when it
  /// is swept, else the first swept parameter the check involves (the sweep made the point bad).
  std::string blame(const std::string& key) const {
    static const std::map<std::string, std::vector<std::string>> involved = {{"input", {"input", "T", "d"}}};
    if (key.starts_with("output.")) return key;
    if (swept(key) || !param_index(key)) return param_index(key) ? location(key) : "model." + key;
    if (const auto it = involved.find(key); it != involved.end())
      for (const auto& name : it->second)
        if (swept(name)) return location(name);
    return location(key);
  }

  std::string describe_point(const std::vector<std::size_t>& index) const {
    std::string out;
    for (std::size_t k = 0; k < spec_.dims.size(); ++k)
      for (std::size_t p = 0; p < spec_.dims[k].params.size(); ++p)
        out += (out.empty() ? "" : ", ") + spec_.dims[k].params[p] + " = " +
               to_text(spec_.dims[k].columns[p][index[k]]);
    return out;
  }

  /// Runs check_model() on every grid point (an odometer over the dims: only the changed
  /// dimension's values are rewritten) and reports each distinct problem once.
  void check_grid() {
    struct Problem {
      std::string key;
      std::string first_message;
      std::string example;
      std::size_t count = 0;
    };
    std::vector<Problem> problems;
    std::map<std::pair<std::string, std::string>, std::size_t> by_key;
    bool truncated = false;

    const std::size_t n = spec_.n_points();
    std::vector<ParamValue> values = spec_.point(0);
    std::vector<std::size_t> index(spec_.dims.size(), 0);
    std::vector<std::vector<std::size_t>> column_param(spec_.dims.size());
    for (std::size_t k = 0; k < spec_.dims.size(); ++k)
      for (const auto& name : spec_.dims[k].params) column_param[k].push_back(*param_index(name));
    const std::size_t T_at = *param_index("T"), d_at = *param_index("d");
    std::uint64_t sum_min_Td = 0, sum_T = 0;  // over the points: the lengths of their stored spectra

    for (std::size_t p = 0; p < n && !truncated; ++p) {
      if (p > 0) {
        for (std::size_t k = spec_.dims.size(); k-- > 0;) {
          index[k] = index[k] + 1 == spec_.dims[k].size() ? 0 : index[k] + 1;
          for (std::size_t c = 0; c < column_param[k].size(); ++c)
            values[column_param[k][c]] = spec_.dims[k].columns[c][index[k]];
          if (index[k] != 0) break;
        }
      }
      const auto T = static_cast<std::uint64_t>(std::get<std::int64_t>(values[T_at]));
      sum_min_Td += std::min(T, static_cast<std::uint64_t>(std::get<std::int64_t>(values[d_at])));
      sum_T += T;
      const ModelParams model = spec_.model(values);
      auto model_problems = check_model(model);
      if (spec_.output.gradients != Spectra::none && spec_.output.grad_method == GradMethod::exact &&
          !model.linear_stack())
        model_problems.emplace_back(
            "output.grad_method",
            "\"exact\" needs a linear stack (input-independent mixer other than s4d, one head, lambda = 0, "
            "no norm, gate or MLP); use \"auto\" (exact where it applies, Hutchinson elsewhere)");
      for (auto& [param, message] : model_problems) {
        const std::string key = blame(param);
        const auto [it, inserted] = by_key.emplace(std::make_pair(key, param), problems.size());
        if (inserted) {
          if (problems.size() == max_grid_problems) {
            truncated = true;
            break;
          }
          problems.push_back({key, message, "point " + std::to_string(p) + " (" + describe_point(index) + ")", 0});
        }
        ++problems[it->second].count;
      }
    }
    for (const auto& pr : problems) {
      std::string where;
      if (spec_.dims.empty())
        where = "";
      else if (truncated)
        where = "; e.g. at " + pr.example;
      else
        where = "; at " + std::to_string(pr.count) + " of " + std::to_string(n) + " grid points, e.g. " + pr.example;
      issue(pr.key, pr.first_message + where);
    }
    if (truncated)
      issue("", "more grid points fail the model checks; only the first " + std::to_string(max_grid_problems) +
                    " distinct problems are listed");
    else
      check_stored(sum_min_Td, sum_T);
  }

  const toml::table& root_;
  SweepSpec spec_;
  Issues issues_;
  std::size_t dropped_ = 0;                      // problems past max_issues, counted only
  std::map<std::string, std::string> given_at_;  // parameter -> "model", "axes" or "zip[k]"
  std::vector<Dim> zip_dims_;                    // [[zip]] dimensions, appended after the axes
  std::vector<std::string> target_paths_;        // key path of each adaptive replicate target
  std::set<std::string> misplaced_;              // parameters already reported (misplaced or misspelt): not "missing"
  std::set<std::string> extra_given_;            // extra [model] keys given (input_matrix, input_path, ...)
};

/// A plain [axes] dimension (one parameter, named after it), as opposed to a [[zip]] table.
}  // namespace

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
    spec = Parser(root).run();
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

namespace {

/// The problem of a path that open() or stat() refused with `err`.
std::string path_errno_problem(int err) {
  switch (err) {
    case ENOENT: return "no such file";
    case ELOOP: return "too many levels of symbolic links (a symbolic link loop?)";
    case ENAMETOOLONG: return "the name is too long";
    case ENOTDIR: return "a part of the path is not a directory";
    case EACCES: return "permission denied";
    default: return std::strerror(err);
  }
}

/// The problem of a file of type and size `st` as a sweep file, or "".
std::string file_type_problem(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(st.st_mode)) return "it is a character device, not a regular file";
  if (S_ISBLK(st.st_mode)) return "it is a block device, not a regular file";
  if (S_ISSOCK(st.st_mode)) return "it is a socket, not a regular file";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (static_cast<std::uintmax_t>(st.st_size) > max_sweep_file_bytes)
    return "it has " + std::to_string(st.st_size) + " bytes, more than the " +
           std::to_string(max_sweep_file_bytes >> 20) + " MiB (" + std::to_string(max_sweep_file_bytes) +
           " bytes) a sweep file may have";
  return "";
}

ConfigError unreadable(const std::filesystem::path& path, const std::string& problem) {
  return ConfigError({{"", "cannot read sweep file '" + printable(path.string()) + "': " + problem}});
}

}  // namespace

std::string sweep_file_problem(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path_errno_problem(errno);
  return file_type_problem(st);
}

std::string read_sweep_file(const std::filesystem::path& path) {
  // stat first: a FIFO or a device is never opened (opening a FIFO waits for a writer).
  if (const std::string problem = sweep_file_problem(path); !problem.empty()) throw unreadable(path, problem);
  // O_NONBLOCK: should the name have become a FIFO since, open() returns at once; fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw unreadable(path, path_errno_problem(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw unreadable(path, path_errno_problem(errno));
  if (const std::string problem = file_type_problem(st); !problem.empty()) throw unreadable(path, problem);
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw unreadable(path, std::string("read error: ") + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_sweep_file_bytes)  // grew while being read
      throw unreadable(
          path, "it has more than the " + std::to_string(max_sweep_file_bytes >> 20) + " MiB a sweep file may have");
  }
  return text;
}

SweepSpec load_sweep(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  return parse_sweep(read_sweep_file(path), path.string(), overrides);
}

}  // namespace rcsweep::config
