// A sweep file read with its command-line overrides and its input file (input = "file": a matrix
// in an HDF5 file, checked against the sweep's T and d before any work).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "config/sweep_spec.hpp"

namespace rcsweep::store {

/// input = "file": read model.input_path (relative to the folder of `sweep_file`), dataset
/// model.input_dataset, into the spec (SweepSpec::set_input_file), after checking its shape
/// against T x d at every grid point whose input is "file". Nothing when the spec names no input
/// path. Throws ConfigError on key model.input_path (exit 2, before any work) when the file cannot
/// be read (store::read_matrix's message) or its shape does not fit, naming how many grid points
/// it misses and the first.
void load_input_file(config::SweepSpec& spec, const std::filesystem::path& sweep_file);

/// config::load_sweep(sweep_file, overrides), then load_input_file.
config::SweepSpec load_sweep_with_input(const std::filesystem::path& sweep_file,
                                        const std::vector<std::string>& overrides);

}  // namespace rcsweep::store
