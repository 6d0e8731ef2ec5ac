// Where and when results are computed: the time and host for a store's provenance, each rank's
// platform (BLAS kernel, CPU, host: recorded per task), and the note when a run's BLAS kernels
// differ among its ranks or from those of the store's finished tasks.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store/store.hpp"
#include "sweep/events.hpp"

namespace rcsweep::sweep {

/// The current UTC time as ISO 8601 ("2026-11-22T04:32:25Z"), and this host's name (provenance).
std::string utc_now();
std::string hostname();

/// This rank's platform as one text (gathered at rank 0), and back.
std::string platform_text();
store::Platform parse_platform(const std::string& text);

/// The BLAS kernels of a run's ranks compared with those of the store's finished tasks.
struct KernelComparison {
  std::string kernels;      ///< the run's kernels, each once, comma-separated
  std::string stored;       ///< the stored ones, each with its count of tasks
  bool mixed = false;       ///< the ranks use more than one kernel
  bool new_kernel = false;  ///< a rank uses a kernel none of the stored tasks was computed with
};
/// `stored`: store::Store::finished_by_platform (platforms not recorded are left out).
KernelComparison compare_kernels(const std::vector<store::Platform>& ranks,
                                 const std::vector<std::pair<store::Platform, std::uint64_t>>& stored);

/// Report (event::KernelsDiffer) when a run's BLAS kernels differ among its ranks or from those of
/// the store's finished tasks: allowed, but such results agree only to rounding (docs/GUARANTEES.md).
void note_new_kernels(const EventSink& events, const std::vector<store::Platform>& ranks,
                      const std::vector<std::pair<store::Platform, std::uint64_t>>& stored);

}  // namespace rcsweep::sweep
