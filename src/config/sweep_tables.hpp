// The tables of a sweep document, each read into a ParseState (parse_state.hpp): [sweep]
// (sweep_table.cpp), [model] (model_table.cpp), [axes] and [[zip]] (grid_tables.cpp), [output]
// (output_table.cpp), and the parameter values they hold (param_values.cpp). Internal to the
// config library.
#pragma once
#include <toml++/toml.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "config/parse_state.hpp"

namespace rcsweep::config::parsing {

/// Validate one scalar against a parameter's kind; real and scale numbers become doubles, so
/// `lambda = 1` and `lambda = 1.0` give the same spec. A problem goes to `issues` (uncapped).
std::optional<ParamValue> parse_value(const toml::node& node, const ParamInfo& info, const std::string& key,
                                      Issues& issues);

/// Parses the list of `param` at `path`; nullopt when any element (or the list) is invalid.
/// `where` ends the message of a value that is not a list.
std::optional<std::vector<ParamValue>> parse_list(ParseState& st, const toml::node& node, const ParamInfo& info,
                                                  const std::string& path, const char* where);

/// [sweep]: name, seed, replicates (a count, or a table of adaptive replicates).
void parse_sweep_table(ParseState& st, const toml::table& table);

/// [model]: one value per parameter, and the extra keys (matrices, the input file).
void parse_model(ParseState& st, const toml::table& table);

/// [axes]: one list per swept parameter, each a dimension of the grid (depth: the depth axis).
void parse_axes(ParseState& st, const toml::table& table);

/// The [[zip]] tables: each one dimension whose parameters move together; kept in st.zip_dims.
void parse_zips(ParseState& st, const toml::node& node);

/// [output]: spectra, mixer_spectra, gradients, grad_method, grad_probes, metrics.
void parse_output(ParseState& st, const toml::table& table);

}  // namespace rcsweep::config::parsing
