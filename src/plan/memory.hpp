// The memory of a rank: what `rcsweep plan` prints as peak memory and address space, and what
// `rcsweep run` checks against --mem-per-rank (or its share of the node) and against the
// address-space limit (RLIMIT_AS, `ulimit -v`) before any work. Pure: no MPI, no I/O; the constants
// are measured (docs/BENCHMARKS.md "Memory against depth and the address-space limit").
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "plan/plan.hpp"

namespace rcsweep::plan {

/// Resident memory of an idle rank (MPI, BLAS, HDF5 and the program), on top of the work it holds.
inline constexpr double rank_program_bytes = 40.0 * (1 << 20);
/// OpenBLAS's buffer of each thread that calls it (BUFFER_SIZE, 128 MiB in OpenBLAS 0.3.21 on
/// every x86-64 kernel), allocated at its first large product; mostly untouched address space.
inline constexpr double blas_buffer_bytes = 128.0 * (1 << 20);
/// A BLAS worker thread OpenBLAS starts when it is loaded (one per further CPU the process may
/// run on): its buffer, allocated at once, and its stack.
inline constexpr double blas_worker_bytes = 137.0 * (1 << 20);
/// Address space of a rank besides the BLAS buffers and the work: libraries, the threads of MPI
/// and of the store's writer, their stacks and heaps.
inline constexpr double program_address_bytes = 330.0 * (1 << 20);
/// Address space of each further OpenMP thread (--threads): its stack.
inline constexpr double thread_stack_bytes = 8.0 * (1 << 20);

/// Bytes one task's results occupy from its first layer until they are written
/// (models::TaskOutput, then store::TaskResult): per layer the metrics (metrics::layer_metrics, a
/// float64 each) and four spectrum lists, the stored spectra of X and of the mixer, the gradient
/// norms.
double task_result_bytes(const Plan& plan, const config::ModelParams& model);
/// Bytes of one task's packed result, sent from a worker to rank 0 (sweep::pack;
/// docs/SCALING.md "Bytes per task").
double task_message_bytes(const Plan& plan, const config::ModelParams& model);

/// How a run is laid out, as far as its memory goes.
struct RankSetup {
  int threads = 1;             ///< OpenMP threads per rank (run --threads)
  int blas_threads = 1;        ///< BLAS threads per OpenMP thread (run --blas-threads)
  int ranks = 1;               ///< ranks of the job: rank 0 collects every rank's results
  int blas_load_threads = 1;   ///< threads OpenBLAS started when loaded (its thread count before any call)
  bool reads_results = false;  ///< rank 0 first reads stored results (adaptive replicates, --reuse)
};

/// Peak memory of the rank that needs the most. Every rank holds its largest unit (the bundle's
/// working set with its tasks' results); a worker then packs them into one message; rank 0 also
/// keeps the store's per-layer tables and a batch of results from the other ranks.
struct RankMemory {
  std::size_t largest = 0;  ///< index into plan.bundles of the unit counted
  double unit = 0.0;        ///< the largest unit on the rank's threads, its tasks' results included
  double results = 0.0;     ///< of which its tasks' results
  double message = 0.0;     ///< a worker's packed results of that unit (the buffer doubles as it grows)
  double writer = 0.0;      ///< rank 0: store tables, a batch of results, write buffers (or reading stored results)
  double blas = 0.0;        ///< touched part of the BLAS buffers
  double program = rank_program_bytes;
  double model = 0.0;     ///< model files every rank maps once, touched as they convert (an encoder's checkpoint)
  double reserved = 0.0;  ///< address space that is not resident: BLAS buffers and workers, libraries, stacks
  /// Resident bytes: what --mem-per-rank and `plan`'s peak memory count.
  double resident() const;
  /// Address space: what RLIMIT_AS (`ulimit -v`) limits.
  double address_space() const;
};
RankMemory rank_memory(const Plan& plan, const RankSetup& setup);

/// "the largest bundle (4 tasks with T = 48, d = 96, 32 layers)".
std::string largest_bundle_text(const Plan& plan, const RankMemory& m);

/// Refuse a plan whose rank memory does not fit: ConfigError on --mem-per-rank when its resident
/// bytes exceed `budget` (`source` says where the budget comes from), and on `ulimit -v` when its
/// address space exceeds `address_limit` (RLIMIT_AS; none: unlimited). Messages name the limit and
/// the estimate.
void check_memory(const Plan& plan, const RankSetup& setup, double budget, const std::string& source,
                  std::optional<double> address_limit);

/// The address-space refusal alone (ConfigError on `ulimit -v`), or nothing when it fits.
std::optional<std::string> address_space_problem(const RankMemory& m, const std::string& what, double address_limit);

}  // namespace rcsweep::plan
