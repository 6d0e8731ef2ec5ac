// `rcsweep calibrate`: a short measurement of this machine's rates for the cost model
// (plan/cost_model.hpp), stored and reused by `rcsweep plan` on the same machine.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "plan/cost_model.hpp"

namespace rcsweep::cli {

/// Measure the rates (about 3 s on one core, 1 BLAS thread): dgemm at n = 16..1024, the metrics of
/// Gaussian signals and softmax mixers, dgesdd, normals, softmax entries and simple passes. Each is
/// the fastest of 3 timings of at least 20 ms, so other load inflates it less.
plan::Calibration measure_calibration();

/// What a stored calibration is valid for: CPU model, core count and BLAS core of this machine.
std::string machine_id();

/// Where the calibration of this machine is stored: $RCSWEEP_CALIBRATION if set, else
/// $XDG_CACHE_HOME/rcsweep/calibration.toml (~/.cache/rcsweep/calibration.toml).
std::filesystem::path calibration_path();

/// The stored calibration when it exists, parses and was measured on this machine (machine_id()).
std::optional<plan::Calibration> load_calibration(const std::filesystem::path& path);

/// `rcsweep calibrate [-o FILE]`: measure, print the rates, store them. Exit code 0, or 1 when the
/// file cannot be written.
int calibrate_command(const std::filesystem::path& output);

}  // namespace rcsweep::cli
