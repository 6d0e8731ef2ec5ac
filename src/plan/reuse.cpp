#include "plan/reuse.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace rcsweep::plan {
namespace {

/// The canonical text as ordered (key, value) pairs: "sweep.seed", "model.T", "axes.lambda",
/// "zip[1].T", "output.spectra"; the input file's content digest (a comment line) as
/// "model.input_file_content", an encoder's model and token file digest as "model.model_content".
std::vector<std::pair<std::string, std::string>> flatten(const std::string& canonical) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string section;
  int zips = 0;
  std::size_t pos = 0;
  while (pos < canonical.size()) {
    auto end = canonical.find('\n', pos);
    if (end == std::string::npos) end = canonical.size();
    const std::string line = canonical.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    if (line == "[[zip]]") {
      section = "zip[" + std::to_string(zips++) + "]";
    } else if (line.front() == '[') {
      section = line.substr(1, line.size() - 2);
    } else if (constexpr std::string_view digest = "# input file content: "; line.starts_with(digest)) {
      out.emplace_back(section + ".input_file_content", line.substr(digest.size()));
    } else if (constexpr std::string_view model = "# model content: "; line.starts_with(model)) {
      out.emplace_back(section + ".model_content", line.substr(model.size()));
    } else if (const auto eq = line.find(" = "); eq != std::string::npos) {
      out.emplace_back(section + "." + line.substr(0, eq), line.substr(eq + 3));
    }
  }
  return out;
}

std::string shorten(const std::string& value) {
  constexpr std::size_t max = 60;
  return value.size() <= max ? value : value.substr(0, max - 5) + " ...]";
}

/// Keys whose value enters every task's results (besides its parameters): a difference in one of
/// them means nothing can be reused. lambda_layers applies to every task of a sweep that has it
/// (only encoder points accept it), so a sweep that gains, loses or changes it changes them all.
bool changes_every_task(const std::string& key) {
  return key == "sweep.seed" || key.starts_with("output.") || key == "model.input_matrix" ||
         key == "model.mixer_matrix" || key == "model.input_path" || key == "model.input_dataset" ||
         key == "model.input_file_content" || key == "model.model_folder" || key == "model.model_content" ||
         key == "model.lambda_layers";
}

/// A point's full parameter vector as text.
std::string point_key(const Plan& plan, std::size_t p) {
  std::string key;
  for (const auto& v : plan.points[p]) key += config::to_toml(v) + '\x1f';
  return key;
}

}  // namespace

std::vector<std::string> config_differences(const config::SweepSpec& from, const config::SweepSpec& to) {
  const auto a = flatten(from.canonical_toml()), b = flatten(to.canonical_toml());
  std::map<std::string, std::string> in_b(b.begin(), b.end()), in_a(a.begin(), a.end());
  std::vector<std::string> out;
  const auto line = [](const std::string& key, const std::string& old_value, const std::string& new_value) {
    return key + ": " + shorten(old_value) + " -> " + shorten(new_value);
  };
  for (const auto& [key, value] : a) {
    const auto it = in_b.find(key);
    if (it == in_b.end())
      out.push_back(line(key, value, "(absent)"));
    else if (it->second != value)
      out.push_back(line(key, value, it->second));
  }
  for (const auto& [key, value] : b)
    if (!in_a.contains(key)) out.push_back(line(key, "(absent)", value));
  return out;
}

TaskMatch match_tasks(const Plan& from, const Plan& to) {
  TaskMatch match;
  for (const auto& d : config_differences(from.spec, to.spec))
    if (changes_every_task(d.substr(0, d.find(':')))) match.blockers.push_back(d);
  if (from.max_depth != to.max_depth)
    match.blockers.push_back("largest depth L_max (every task runs to it): " + std::to_string(from.max_depth) + " -> " +
                             std::to_string(to.max_depth));
  if (!match.blockers.empty()) return match;

  std::unordered_map<std::string, std::size_t> to_point;
  for (std::size_t p = 0; p < to.points.size(); ++p) to_point.emplace(point_key(to, p), p);
  const std::uint64_t r_from = static_cast<std::uint64_t>(from.spec.replicates);
  const std::uint64_t r_to = static_cast<std::uint64_t>(to.spec.replicates);
  for (std::size_t p = 0; p < from.points.size(); ++p) {
    const auto it = to_point.find(point_key(from, p));
    if (it == to_point.end()) continue;
    const bool same_route = from.models[p].qk_product == to.models[it->second].qk_product;
    for (std::uint64_t r = 0; r < std::min(r_from, r_to); ++r) {
      if (same_route)
        match.pairs.emplace_back(p * r_from + r, it->second * r_to + r);
      else
        match.rerouted.push_back(p * r_from + r);
    }
  }
  return match;
}

}  // namespace rcsweep::plan
