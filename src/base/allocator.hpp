// Process-wide allocator settings for the compute loop.
#pragma once
#include <malloc.h>

namespace rcsweep {

/// Keep large freed blocks in the heap instead of returning them to the OS. glibc serves blocks
/// above M_MMAP_THRESHOLD (128 KiB at start) with mmap and unmaps them on free, so every layer's
/// T x d temporaries were fresh pages, and page faults a large share of the metrics' time
/// (bench_kernels BM_signal_metrics: docs/BENCHMARKS.md "Figures behind choices in the source").
/// The working set of a task is reused anyway.
inline void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace rcsweep
