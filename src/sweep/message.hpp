// Byte encoding of a finished task for the trip from a worker rank to the writer.
#pragma once
#include <vector>

#include "store/store.hpp"

namespace rcsweep::sweep {

/// Append `r` to `buf` (little-endian host layout; all ranks run the same binary).
void pack(const store::TaskResult& r, std::vector<char>& buf);
/// Decode every result in `buf` (as written by one or more pack() calls).
std::vector<store::TaskResult> unpack(const std::vector<char>& buf);

}  // namespace rcsweep::sweep
