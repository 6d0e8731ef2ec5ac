// The HDF5 store, schema version 1 (docs/SCHEMA.md). Only this module sees HDF5.
// One writer (rank 0) with serial HDF5; every dataset is created at start-up with its final
// shape; per batch of finished tasks: write rows, H5Fflush, set status, H5Fflush.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "metrics/metrics.hpp"
#include "models/task_values.hpp"
#include "plan/plan.hpp"
#include "store/writer_lock.hpp"

namespace rcsweep::store {

inline constexpr int schema_version = 2;

/// diverged: X became non-finite at some layer; vanished: X became exactly zero (complete
/// collapse); both are outcomes of the stack with the layers before recorded (models::Outcome).
/// failed: an error, not a property of the stack. not_needed: a replicate an adaptive rule decided
/// not to run (config::AdaptiveReplicates); it has no values, like pending, but counts as finished.
enum class TaskStatus : std::int8_t { pending = 0, done = 1, failed = 2, diverged = 3, not_needed = 4, vanished = 5 };
const char* to_string(TaskStatus s);

/// Where a task was computed. Results are bitwise reproducible on one BLAS kernel; other kernels
/// round differently (docs/GUARANTEES.md).
struct Platform {
  std::string blas_kernel;  ///< linalg::blas_kernel(), e.g. "OpenBLAS 0.3.21 Cooperlake"
  std::string cpu;          ///< rcsweep::cpu_model(), e.g. "AMD EPYC (family 25, model 17)"
  std::string host;         ///< gethostname() of the rank's node, e.g. "node017"
  bool empty() const noexcept { return blas_kernel.empty() && cpu.empty() && host.empty(); }
  friend bool operator==(const Platform&, const Platform&) = default;
};

/// Everything a finished task contributes to the store: its values (models::TaskValues) and how
/// and where it ended.
struct TaskResult : models::TaskValues {
  std::uint64_t task = 0;
  TaskStatus status = TaskStatus::done;
  double wall_s = 0.0;
  int rank = 0;
  std::string message;  ///< e.g. "diverged at layer 7: non-finite X" (at most 255 bytes kept)
  Platform platform;    ///< who computed it (/provenance); empty: not recorded
};

/// Whether an error message (an HDF5 write failure) says the file system is full (ENOSPC).
bool is_disk_full(const std::string& message);

struct Provenance {
  std::string rcsweep_version, git_commit, created, host, blas, hdf5_version;
  int mpi_ranks = 1;
  int threads = 1;       ///< OpenMP threads per rank (run --threads)
  int blas_threads = 1;  ///< BLAS threads per OpenMP thread (run --blas-threads)
};

/// Summary for `rcsweep info` (read-only, no plan needed).
struct StoreInfo {
  std::string format;
  int schema_version = 0;
  std::string plan_hash, config, created, finished, rcsweep_version, git_commit, host, blas, hdf5_version;
  std::vector<std::string> overrides;  ///< command-line overrides the store was made with, as given
  int mpi_ranks = 0, threads = 0, blas_threads = 1;
  std::uint64_t n_tasks = 0, n_points = 0;
  int max_depth = 0;
  std::uint64_t n_pending = 0, n_done = 0, n_failed = 0, n_diverged = 0, n_not_needed = 0, n_vanished = 0;
  std::vector<std::string> axes;      ///< swept parameter names
  std::vector<std::string> datasets;  ///< every dataset path
  std::vector<std::string> reused;    ///< results copied from other stores, one line per copy
  /// Finished (done, failed, diverged, vanished) tasks per platform, in the order platforms first appeared;
  /// an empty Platform counts those not recorded (stores made before /provenance).
  std::vector<std::pair<Platform, std::uint64_t>> platforms;
};

class Store {
 public:
  /// Create a new store for `plan` at lock.path(): built under a temporary name beside it and put
  /// in place only when complete (publish). Without `overwrite` an existing file is never replaced
  /// (StoreError "exists"); with it a regular file at the path is replaced, and stays intact on any
  /// failure or kill before then. The store keeps a copy of the lock while it is open.
  static Store create(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov, bool overwrite);
  /// The same, taking the lock of `path` itself (StoreBusy when another process holds it).
  static Store create(const std::filesystem::path& path, const plan::Plan& plan, const Provenance& prov,
                      bool overwrite);
  /// A new store for `plan` left under its temporary name (WriterLock::make_temporary) until
  /// publish(): merge and growth fill it first. Closed unpublished, its file is removed.
  static Store build(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov);
  /// Put a store made by build() at its path: a hard link that refuses an existing file, or with
  /// `replace` (after an fsync) a rename over the regular file there. Nothing to do once published.
  void publish(bool replace);
  /// Open an existing store to resume `plan`. Throws StoreError naming both hashes when the
  /// store was made from another plan, or when it is not an rcsweep store of schema 1.
  static Store open_resume(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov);
  static Store open_resume(const std::filesystem::path& path, const plan::Plan& plan, const Provenance& prov);
  /// Open an existing store of `plan` read-only, with the same checks as open_resume (merge).
  static Store open_read(const std::filesystem::path& path, const plan::Plan& plan);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  /// Status of every task (index = task id).
  std::vector<TaskStatus> task_status() const;
  /// Finished tasks per platform (as StoreInfo::platforms).
  std::vector<std::pair<Platform, std::uint64_t>> finished_by_platform() const;

  /// The stored results of `tasks`, as they would be passed to write(): writing them into another
  /// store of the same plan reproduces the rows bitwise (NaN included).
  std::vector<TaskResult> read_results(std::span<const std::uint64_t> tasks) const;
  /// Write a batch of results: all rows, flush, then all statuses, flush.
  void write(std::span<const TaskResult> results);
  /// Append a line to the `reused` attribute (where copied results came from, store/reuse.hpp).
  void note_reused(const std::string& line);
  /// Set the `finished` attribute (ISO-8601 UTC) and flush.
  void mark_finished(const std::string& when);
  /// fsync the file (protects against node crashes; H5Fflush alone does not).
  void sync();
  /// The writer is stopping: a writer that meets the store's lock waits for it (WriterLock::note_stopping).
  void note_stopping() const noexcept;

 private:
  static Store open_checked(const std::filesystem::path& path, const plan::Plan& plan, bool read_write);
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Refuse (StoreError), before any work, an output path that create(lock, ..., overwrite) would
/// refuse: an existing file without `overwrite`; with it, anything but a regular file; a missing
/// directory.
void check_output(const WriterLock& lock, bool overwrite);

/// Read the summary of a store. Throws StoreError (never crashes) on a missing, foreign or
/// damaged file.
StoreInfo read_info(const std::filesystem::path& path);

/// Version of the HDF5 library in use, e.g. "1.10.8" (for provenance and `rcsweep info`).
std::string hdf5_library_version();

}  // namespace rcsweep::store
