// The OpenMP threads of one rank (rcsweep run --threads N). Work is split into a fixed partition
// that depends on the shapes only, never on the thread count; the threads take its parts in any
// order, each part computed by the same code whichever thread runs it. So a result is bitwise the
// same on 1, 2 or 64 threads: no reduction is ever split by thread. Every OpenMP construct of the
// project is in parallel.cpp.
#pragma once
#include <cstddef>
#include <functional>

namespace rcsweep::parallel {

/// Set the number of threads a rank computes with (>= 1), once at the start of a run.
void set_threads(int n);
/// The rank's threads (1 unless set_threads said otherwise).
int threads();
/// Processors the rank's threads can run on, `fallback` when unknown. With OpenMP thread binding
/// (OMP_PROC_BIND, or OMP_PLACES alone) the OpenMP runtime binds the calling thread to its first
/// place as the program starts, so its affinity mask says one core: then the number of places,
/// which the runtime makes of the processors the process started with (OMP_PLACES=cores: its
/// cores). Otherwise the calling thread's affinity mask (mpiexec's or srun's binding).
int available_processors(int fallback);
/// The thread count the environment asks for: OMP_NUM_THREADS when it is a positive integer
/// (its first entry for a list), else 1.
int threads_from_environment();

/// Run body(i) for i = 0 .. count - 1 on the rank's threads, each i exactly once, in any order
/// and on any thread (serially when count < 2, with 1 thread, or when already inside a parallel
/// part: parts do not nest). The first exception a part throws is rethrown here after all parts
/// have ended (parts not yet started are then skipped).
void for_each(std::size_t count, const std::function<void(std::size_t)>& body);

/// A fixed partition of n items into consecutive parts of `size` items (the last one shorter).
struct Parts {
  std::size_t n = 0, size = 1;
  std::size_t count() const { return size == 0 ? 0 : (n + size - 1) / size; }
  std::size_t begin(std::size_t part) const { return part * size; }
  std::size_t length(std::size_t part) const { return part + 1 < count() ? size : n - part * size; }
};

/// Rows of a rows x cols matrix in parts of at least `min_entries` entries (one part when the
/// matrix is smaller): for work on rows that are computed independently, where any partition gives
/// the same bits and only the overhead of a part matters.
Parts row_parts(std::size_t rows, std::size_t cols, std::size_t min_entries = std::size_t{1} << 16);

/// for_each over row_parts(rows, cols): body(first_row, end_row).
void for_rows(std::size_t rows, std::size_t cols, const std::function<void(std::size_t, std::size_t)>& body);

}  // namespace rcsweep::parallel
