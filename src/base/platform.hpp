// What machine this process runs on (for the store's provenance) and its limits.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace rcsweep {

/// The CPU as "<model name> (family F, model M)" from /proc/cpuinfo (first processor), e.g.
/// "AMD EPYC (family 25, model 17)"; "unknown CPU" where /proc/cpuinfo has no model name.
std::string cpu_model();

/// This process's address-space limit (RLIMIT_AS, `ulimit -v`) in bytes, or nothing when unlimited.
std::optional<double> address_space_limit();

/// The memory limit of this process's control group in bytes: the job's memory under a batch
/// system that confines jobs with cgroups (Slurm's --mem, PBS), a container's. The smallest
/// `memory.max` (cgroup v2) or `memory.limit_in_bytes` (v1) from the group named in `self`
/// (/proc/self/cgroup) up to the hierarchy's root under `root`; nothing when none is set ("max", or
/// v1's page-rounded 2^63) or none can be read.
std::optional<double> cgroup_memory_limit(const std::filesystem::path& root = "/sys/fs/cgroup",
                                          const std::filesystem::path& self = "/proc/self/cgroup");

}  // namespace rcsweep
