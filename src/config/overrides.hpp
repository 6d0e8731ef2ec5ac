// Command-line overrides of a sweep file, as in Hydra: `rcsweep run sweep.toml model.T=256
// axes.lambda=[0,0.5,1]`. An override is KEY=VALUE: KEY a dotted key path into the TOML document
// (`sweep.replicates`, `model.T`, `zip[0].T` or `zip.0.T`), VALUE a TOML value (`256`, `[0, 1]`,
// `"softmax"`) or a bare word taken as a string (`softmax`, also inside a list: `[none,perp]`).
// This header reads the overrides' text; config/overrides_toml.hpp applies them to a parsed
// document. Pure: no I/O.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.hpp"

namespace rcsweep::config {

/// One step of a key path: a table key, or an index into an array (the k-th [[zip]] table).
using PathStep = std::variant<std::string, std::size_t>;

struct Override {
  std::string text;            ///< as given on the command line: "axes.lambda=[0,0.5,1]"
  std::vector<PathStep> path;  ///< {"axes", "lambda"}; {"zip", 0, "T"}
  std::string key;             ///< the path as validation issues name it: "axes.lambda", "zip[0].T"
  std::string value;           ///< the value as TOML text: "[0,0.5,1]"; a bare word quoted: "\"softmax\""
};

/// Read one override. Throws ConfigError (one issue naming the override) when it has no '=', an
/// empty or malformed key, or a value that is neither TOML nor a bare word.
Override parse_override(std::string_view text);

/// Read every override; all malformed ones are reported together in one ConfigError.
std::vector<Override> parse_overrides(const std::vector<std::string>& texts);

/// `key` as a dotted key path: "zip[0].T".
std::string key_text(const std::vector<PathStep>& path);

/// Mark each issue on a key an override set (that key, or an element or key below it) as coming
/// from the command line: "... (set on the command line by 'model.T=0')". A later override wins.
void mark_overridden(std::vector<ConfigIssue>& issues, const std::vector<Override>& overrides);

/// The overrides as one line, separated by spaces; one holding a space or a quote is single-quoted
/// so that the line reads back into the same words ("model.T=256 'axes.lambda=[0, 1]'").
std::string overrides_line(const std::vector<std::string>& texts);

}  // namespace rcsweep::config
