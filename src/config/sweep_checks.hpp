// Checks of a whole sweep document once its tables are read into a ParseState (parse_state.hpp).
// Internal to the config library.
#pragma once
#include "config/parse_state.hpp"

namespace rcsweep::config::parsing {

/// The extra [model] keys against the input, mixer and block they belong to (model_folder: block
/// "encoder" or "mamba2"; input_path: input "file" or "tokens").
void check_model_extras(ParseState& st);

/// lambda_layers against the depth (exactly L_max values: every task runs layers 1..L_max) and
/// against lambda (given anywhere, it is refused: lambda_layers replaces it at every layer). Run
/// once the depth axis is sorted.
void check_lambda_layers(ParseState& st);

/// The grid's points, its tasks (points x replicates) and its rows of per-layer metrics against
/// the limits.
void check_size(ParseState& st);

/// Runs check_model() on every grid point (an odometer over the dims: only the changed
/// dimension's values are rewritten) and reports each distinct problem once; then the stored
/// spectra and gradient norms against the limits.
void check_grid(ParseState& st);

}  // namespace rcsweep::config::parsing
