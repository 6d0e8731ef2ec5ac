// What the subcommands of the rcsweep program share: the check of a store path, reading a store in a
// child process, and this machine's memory and BLAS threads.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace rcsweep::cli {

// arguments.cpp

/// A store path that cannot even be looked at (a symbolic link loop, a name too long, a part that
/// is not a directory) is refused on --output (exit 2) before any work; a missing file is a new store.
void check_store_path(const std::filesystem::path& path);

// child_reader.cpp

/// Run `read` (returning an exit code) in a child process, so that a crash of the HDF5 library on
/// a damaged file cannot take this process down: HDF5 1.10 reads some damaged files out of bounds
/// instead of failing (a corrupted global heap, where variable-length string attributes live,
/// makes H5Aread copy past its buffer: SIGSEGV), or loops forever (RCSWEEP_STORE_READ_TIMEOUT,
/// default 120 s). Returns the child's exit code, or nullopt with `crash` saying what happened when
/// the child was killed.
std::optional<int> in_child(const std::function<int()>& read, std::string& crash);

/// The message of a store whose reading in_child crashed or timed out.
std::string crashed_message(const std::filesystem::path& path, const std::string& crash);

// machine.cpp

/// This machine's physical memory in bytes, or the memory limit of its control group (a job's, a
/// container's: base/platform.hpp) where that is smaller.
double physical_memory_bytes();

/// Threads OpenBLAS started when it was loaded (its thread count before any call sets it).
int blas_load_threads();

}  // namespace rcsweep::cli
