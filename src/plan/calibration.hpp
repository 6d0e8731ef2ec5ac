// This machine's rates for the cost model (plan/cost_model.hpp): measured by `rcsweep calibrate`,
// stored in a TOML file, and loaded by `rcsweep plan` and `rcsweep run` on the same machine.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "linalg/linalg.hpp"
#include "plan/cost_model.hpp"

namespace rcsweep::plan {

/// Measure the rates on one core (1 BLAS thread): dgemm at n = 16..1024, the metrics of signals
/// with decaying singular values and of softmax mixers, dgesdd, normals, softmax entries, simple
/// passes and the S4D convolution, each timed in the thread's CPU time (calibration.cpp's timing
/// method), so other load inflates it less; its duration is in docs/BENCHMARKS.md ("Summary").
/// The BLAS thread count is restored after.
Calibration measure_calibration();

/// What a stored calibration is valid for: CPU model, core count, BLAS core of this machine and,
/// where BLIS is available, its configuration.
std::string machine_id();

/// Where BLIS multiplies faster than OpenBLAS on this machine (Calibration::blis_plain and
/// blis_transposed, and the time ratios they come from, blis_plain_ratio and blis_transposed_ratio): linalg::gemm of two n x n, A B and A B^T apart, timed with each library at
/// n = 16..512, one BLAS thread; BLIS counts as faster from blis_min_gain of OpenBLAS's time
/// down. Each range is the longest run of such sizes, if at least blis_min_sizes long, its ends
/// halfway (geometrically) to the sizes beside it, unbounded when it reaches 512; (0, 0) without
/// BLIS or when it is nowhere faster. About 1.5 s.
inline constexpr double blis_min_gain = 0.97;
inline constexpr std::size_t blis_min_sizes = 2;
void measure_blis_range(Calibration& c);
/// The calibration's ranges as linalg's.
linalg::BlisRange blis_range(const Calibration& c);

/// Where the calibration of this machine is stored: $RCSWEEP_CALIBRATION if set, else
/// $XDG_CACHE_HOME/rcsweep/calibration.toml, else ~/.cache/rcsweep/calibration.toml, else
/// rcsweep/calibration.toml in the temporary directory.
std::filesystem::path calibration_path();

/// The stored calibration when the file exists, parses and was measured on this machine
/// (machine_id()); nullopt otherwise (a damaged file or another machine's is measured again).
std::optional<Calibration> load_calibration(const std::filesystem::path& path);

/// Write `c` as TOML (to_toml) to `path`, creating its folder. False when it cannot be written.
bool save_calibration(const Calibration& c, const std::filesystem::path& path);

}  // namespace rcsweep::plan
