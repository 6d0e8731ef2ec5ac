// [axes] and [[zip]] of a sweep document: the dimensions of the grid, checked for repeated values
// and entries (sweep_tables.hpp).
#include "config/sweep_tables.hpp"

#include <map>
#include <utility>

#include "config/toml_nodes.hpp"

namespace rcsweep::config::parsing {
namespace {

/// The [[zip]] table number `k`: one dimension whose lists move together, kept (in st.zip_dims) only
/// when every list is valid, the lists are equally long and no entry repeats.
void parse_zip(ParseState& st, const toml::table& table, std::size_t k) {
  const std::string place = "zip[" + std::to_string(k) + "]";
  if (table.empty()) {
    st.issue(place, "empty [[zip]] table: give at least one parameter list");
    return;
  }
  Dim dim;
  dim.name = "zip" + std::to_string(k);
  bool ok = true;
  std::vector<std::pair<std::string, std::size_t>> lengths;
  for (const auto& [key, node] : file_order(table)) {
    const std::string path = place + "." + key;
    if (is_model_extra(key)) {
      st.not_sweepable(path, key);
      ok = false;
      continue;
    }
    const auto idx = param_index(key);
    if (!idx) {
      st.unknown_param(path, key);
      ok = false;
      continue;
    }
    if (key == "depth") {
      st.issue(path, "depth is not a task dimension (every task runs to the largest depth and records each "
                     "layer): list it under [axes] or give it under [model]");
      st.given_at.emplace(key, place);  // no second "missing" error
      ok = false;
      continue;
    }
    if (!st.claim(key, place)) {
      ok = false;
      continue;
    }
    if (const auto* a = node->as_array()) lengths.emplace_back(key, a->size());
    auto values = parse_list(st, *node, model_params()[*idx], path, "; every [[zip]] entry is a list");
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
    st.issue(place, "lists of unequal length (" + text + "): every list of one [[zip]] needs the same length");
    ok = false;
  }
  if (!ok) return;
  std::map<std::vector<ParamValue>, std::size_t> seen;
  for (std::size_t i = 0; i < dim.size(); ++i) {
    std::vector<ParamValue> row;
    for (const auto& column : dim.columns) row.push_back(column[i]);
    const auto [it, inserted] = seen.emplace(std::move(row), i);
    if (!inserted) {
      st.issue(place, "entry " + std::to_string(i) + " repeats entry " + std::to_string(it->second) +
                          ": it would create identical grid points");
      ok = false;
    }
  }
  if (ok) st.zip_dims.push_back(std::move(dim));
}

}  // namespace

void parse_axes(ParseState& st, const toml::table& table) {
  for (const auto& [key, node] : file_order(table)) {
    const std::string path = "axes." + key;
    if (is_model_extra(key)) {
      st.not_sweepable(path, key);
      continue;
    }
    const auto idx = param_index(key);
    if (!idx) {
      st.unknown_param(path, key);
      continue;
    }
    if (!st.claim(key, "axes")) continue;
    auto values = parse_list(st, *node, model_params()[*idx], path, "; a single value belongs under [model]");
    if (!values) continue;
    std::map<ParamValue, std::size_t> seen;
    bool unique = true;
    for (std::size_t i = 0; i < values->size(); ++i) {
      const auto [it, inserted] = seen.emplace((*values)[i], i);
      if (!inserted) {
        unique = false;
        st.issue(path + "[" + std::to_string(i) + "]", "duplicate value " + to_text((*values)[i]) + " (same as [" +
                                                           std::to_string(it->second) +
                                                           "]): it would create identical grid points");
      }
    }
    if (!unique) continue;
    if (key == "depth") {
      for (const auto& v : *values) st.spec.depth_axis.push_back(std::get<std::int64_t>(v));
    } else {
      st.spec.dims.push_back(Dim{key, {key}, {std::move(*values)}});
    }
  }
}

void parse_zips(ParseState& st, const toml::node& node) {
  const auto* arr = node.as_array();
  if (!arr || !arr->is_array_of_tables()) {
    st.issue("zip", "must be an array of tables: write each group as a [[zip]] table");
    return;
  }
  for (std::size_t k = 0; k < arr->size(); ++k) parse_zip(st, *arr->get(k)->as_table(), k);
}

}  // namespace rcsweep::config::parsing
