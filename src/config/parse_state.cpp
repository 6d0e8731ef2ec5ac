// The state of a walk over a sweep document: problems and where parameters were given
// (parse_state.hpp).
#include "config/parse_state.hpp"

#include <algorithm>
#include <utility>

#include "config/toml_nodes.hpp"

namespace rcsweep::config::parsing {
namespace {

std::vector<std::string_view> param_names() {
  std::vector<std::string_view> names;
  for (const auto& info : model_params()) names.push_back(info.name);
  return names;
}

const std::vector<std::string_view>& model_extra_keys() {
  static const std::vector<std::string_view> keys = {"input_matrix",  "mixer_matrix", "input_path",
                                                     "input_dataset", "model_folder", "lambda_layers"};
  return keys;
}

/// Registry parameters and the extra [model] keys, for suggestions.
std::vector<std::string_view> model_key_names() {
  auto names = param_names();
  for (const auto k : model_extra_keys()) names.push_back(k);
  return names;
}

}  // namespace

bool is_model_extra(std::string_view key) {
  const auto& keys = model_extra_keys();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

void ParseState::issue(std::string key, std::string problem) {
  if (full())
    ++dropped;
  else
    issues.push_back({std::move(key), std::move(problem)});
}

void ParseState::unknown_param(const std::string& path, const std::string& name) {
  if (full()) {  // not even a suggestion to compute
    issue(path, "");
    return;
  }
  const auto best = nearest(name, model_key_names());
  if (!best.empty()) misplaced.insert(std::string(best));
  issue(path, "unknown parameter '" + name + "'" + suggestion(name, model_key_names()));
}

void ParseState::not_sweepable(const std::string& path, const std::string& key) {
  issue(path, "'" + key + "' is not sweepable: give it once under [model]");
}

const toml::table* ParseState::require_table(const std::string& key, const toml::node& node) {
  if (const auto* t = node.as_table()) return t;
  issue(key, "must be a table ([" + key + "]), got " + type_name(node));
  return nullptr;
}

bool ParseState::claim(const std::string& name, const std::string& place) {
  const auto [it, inserted] = given_at.emplace(name, place);
  if (!inserted)
    issue(place + "." + name,
          "parameter '" + name + "' is given in both " + it->second + " and " + place + "; give it in one place only");
  return inserted;
}

std::string ParseState::location(const std::string& name) const {
  const auto it = given_at.find(name);
  return (it == given_at.end() ? std::string("model") : it->second) + "." + name;
}

bool ParseState::swept(const std::string& name) const {
  const auto it = given_at.find(name);
  return it != given_at.end() && it->second != "model";
}

}  // namespace rcsweep::config::parsing
