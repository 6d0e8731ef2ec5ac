// TOML nodes in messages and a table's entries in file order (toml_nodes.hpp).
#include "config/toml_nodes.hpp"

#include <algorithm>

#include "config/params.hpp"

namespace rcsweep::config::parsing {
namespace {

/// The value as it appears in the file, for messages.
std::string node_text(const toml::node& node) {
  if (const auto* s = node.as_string()) return toml_string(s->get());
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) return to_toml(f->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  return type_name(node);
}

}  // namespace

std::string suggestion(std::string_view name, const std::vector<std::string_view>& candidates) {
  const auto best = nearest(name, candidates);
  return best.empty() ? std::string() : ", did you mean '" + std::string(best) + "'?";
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

std::string describe(const toml::node& node) {
  if (node.is_array() || node.is_table() || node.is_date() || node.is_time() || node.is_date_time())
    return type_name(node);
  return type_name(node) + " " + node_text(node);
}

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

}  // namespace rcsweep::config::parsing
