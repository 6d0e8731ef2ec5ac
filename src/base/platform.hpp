// What machine this process runs on, for the store's provenance.
#pragma once
#include <string>

namespace rcsweep {

/// The CPU as "<model name> (family F, model M)" from /proc/cpuinfo (first processor), e.g.
/// "AMD EPYC (family 25, model 17)"; "unknown CPU" where /proc/cpuinfo has no model name.
std::string cpu_model();

}  // namespace rcsweep
