// What a walk over a sweep document builds and finds (sweep_parser.cpp): the SweepSpec so far,
// every problem with its key path, and where each parameter was given. The limits a sweep file is
// checked against (docs/CONFIG.md "Limits"). Internal to the config library.
#pragma once
#include <toml++/toml.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"

namespace rcsweep::config::parsing {

// Points, and points x replicates (tasks): `plan` holds and prices every task (about 2 to 5 s and
// 0.5 to 1.5 GB for a million).
inline constexpr std::size_t max_grid = 1'000'000;
// What a store holds (docs/CONFIG.md "Limits"): rows of each per-layer metric (tasks x layers; 13
// float64 datasets of this many rows: 28 GiB), and values of each spectrum and gradient dataset
// (32 GiB each). `plan` walks every task's layers, so the rows also bound its time.
inline constexpr std::uint64_t max_layer_rows = std::uint64_t{1} << 28;
inline constexpr std::uint64_t max_stored_values = std::uint64_t{1} << 32;
// Spectra of one kind stored (tasks x stored layers): `plan` prices each one.
inline constexpr std::uint64_t max_stored_spectra = std::uint64_t{1} << 26;
inline constexpr std::size_t max_grid_problems = 10;  // distinct check_model() problems listed
inline constexpr std::size_t max_issues = 100;        // problems listed (a file of a million bad keys: the first 100)

using Issues = std::vector<ConfigIssue>;

/// The state of one walk over a sweep document: what it built and the problems it found.
struct ParseState {
  SweepSpec spec;
  Issues issues;                                // parse_value() appends here directly
  std::size_t dropped = 0;                      // problems past max_issues, counted only
  std::map<std::string, std::string> given_at;  // parameter -> "model", "axes" or "zip[k]"
  std::vector<Dim> zip_dims;                    // [[zip]] dimensions, appended after the axes
  std::vector<std::string> target_paths;        // key path of each adaptive replicate target
  std::set<std::string> misplaced;              // parameters already reported (misplaced or misspelt): not "missing"
  std::set<std::string> extra_given;            // extra [model] keys given (input_matrix, input_path, ...)

  /// Records a problem; past max_issues only counts it.
  void issue(std::string key, std::string problem);
  bool full() const { return issues.size() >= max_issues; }

  /// An unknown parameter name; a misspelt required parameter is then not also reported missing.
  void unknown_param(const std::string& path, const std::string& name);
  /// An extra [model] key (matrix, input file) under [axes] or a [[zip]] table.
  void not_sweepable(const std::string& path, const std::string& key);
  /// The table at top-level `key`, or null (an issue recorded) when it is not a table.
  const toml::table* require_table(const std::string& key, const toml::node& node);
  /// Records where a parameter is given; false (and an issue) when it was given before.
  bool claim(const std::string& name, const std::string& place);

  /// The key path where a parameter was given (its default counts as [model]).
  std::string location(const std::string& name) const;
  /// Whether a parameter is given under [axes] or a [[zip]] table.
  bool swept(const std::string& name) const;
};

/// [model] keys that are not registry parameters: matrices, the input file, the model folder and
/// lambda_layers. Given once under [model]; never swept.
bool is_model_extra(std::string_view key);

}  // namespace rcsweep::config::parsing
