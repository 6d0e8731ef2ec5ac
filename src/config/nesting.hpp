// A bound on the nesting of TOML text, checked before the text reaches toml++ (whose parser and
// destructors recurse once per level: a table header of 50 000 dotted parts overflows the stack).
// Internal to the config library.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace rcsweep::config {

/// Deepest nesting accepted in a sweep file and in an override: tables of a header or a dotted key
/// (one level per part), arrays and inline tables, counted together along every path into the
/// document. A sweep file needs about 5.
inline constexpr int max_nesting = 64;

/// Where (1-based line and column, in bytes) `text` first nests deeper than max_nesting, counted
/// from `depth` (the levels above the text: an override's key path). A conservative scan, not a
/// parser: strings and comments are skipped, and malformed text is left to toml++ unless it nests
/// too deep.
struct NestingPosition {
  std::size_t line = 0, column = 0;
};
std::optional<NestingPosition> too_deep(std::string_view text, int depth = 0);

}  // namespace rcsweep::config
