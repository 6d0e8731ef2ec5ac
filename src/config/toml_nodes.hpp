// TOML nodes in messages (what was found, the nearest known key) and a table's entries in file
// order. Internal to the config library.
#pragma once
#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rcsweep::config::parsing {

/// ", did you mean 'x'?" for the candidate nearest to `name`, or "".
std::string suggestion(std::string_view name, const std::vector<std::string_view>& candidates);

/// "\"a\", \"b\"": the items quoted, for messages.
std::string quote_list(const std::vector<std::string_view>& items);

/// "a string", "an integer", "a table", ...: the node's type, for messages.
std::string type_name(const toml::node& node);

/// "a string \"x\"", "an integer 3", "a table": what was found, for messages.
std::string describe(const toml::node& node);

/// Entries of a table in file order. toml++ 3.x keeps tables in a std::map (sorted by key), so
/// the order is recovered from where each key was written.
std::vector<std::pair<std::string, const toml::node*>> file_order(const toml::table& table);

}  // namespace rcsweep::config::parsing
