// What a batch scheduler says of its compute nodes, for `rcsweep plan --emit`: the cores of a node,
// which size a job's ranks when --cores is not given (a job runs there, not on the login node that
// plans it). Runs the scheduler's own commands (the only part of the job scripts that does I/O).
#pragma once
#include <string>
#include <string_view>

#include "plan/job_script.hpp"

namespace rcsweep::plan {

/// The most cores per node in the report of `sinfo -h -o %c` (Slurm: one count per line, "32+"
/// where a line's nodes differ) or of `pbsnodes -a` (PBS: the "resources_available.ncpus = N"
/// lines); 0 when it names none.
int most_cores_per_node(Scheduler scheduler, std::string_view report);

/// The cores per node of the scheduler's compute nodes (of `partition` when given, Slurm only):
/// most_cores_per_node of what `timeout 20 sinfo -h -o %c [-p PARTITION]` or `timeout 20 pbsnodes -a`
/// prints (through the shell, so found on PATH); 0 when the command is missing, fails or says nothing.
int scheduler_cores_per_node(Scheduler scheduler, const std::string& partition);

}  // namespace rcsweep::plan
