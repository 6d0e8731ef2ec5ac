// What machine this process runs on (for the store's provenance) and its limits.
#pragma once
#include <optional>
#include <string>

namespace rcsweep {

/// The CPU as "<model name> (family F, model M)" from /proc/cpuinfo (first processor), e.g.
/// "AMD EPYC (family 25, model 17)"; "unknown CPU" where /proc/cpuinfo has no model name.
std::string cpu_model();

/// This process's address-space limit (RLIMIT_AS, `ulimit -v`) in bytes, or nothing when unlimited.
std::optional<double> address_space_limit();

}  // namespace rcsweep
