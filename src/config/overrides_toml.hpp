// Applying command-line overrides (config/overrides.hpp) to a parsed sweep document, before it is
// validated. Internal to the config library: the only header of it that needs toml++.
#pragma once
#include <toml++/toml.h>

#include <vector>

#include "config/overrides.hpp"

namespace rcsweep::config {

/// Set each override's value at its key path, in order (a later one wins), creating missing
/// tables. A key that the file does not have is placed after the table's other keys (the order of
/// [axes] entries is the grid's order); an existing one keeps its place. `model.P` and `axes.P`
/// also remove P from the other of the two tables, so that an override can move a parameter
/// between a fixed value and an axis. Throws ConfigError (every failing override, each on its key)
/// when a path cannot be set: an index past the last [[zip]] table (or of any array), a step
/// through a value that is not a table, a table array stepped into without an index.
void apply_overrides(toml::table& root, const std::vector<Override>& overrides);

}  // namespace rcsweep::config
