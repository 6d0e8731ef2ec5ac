// A unit of the plan's tasks as models::run_bundle runs it: the tasks' models, the seed, the
// replicate, the depth and the [output] selection, and how the rank's threads share the tasks
// (plan/threads.hpp). Pure: no MPI, no I/O.
#pragma once
#include <cstdint>
#include <vector>

#include "base/parallel.hpp"
#include "models/bundle_job.hpp"
#include "plan/plan.hpp"

namespace rcsweep::plan {

/// The job of running `tasks` (ids of plan.tasks, all of one bundle: same replicate, T and d) on
/// `threads` threads; the job points into plan.models (it must not outlive the plan). Throws Error
/// for an empty list, an unknown id or tasks of different replicates (run_bundle itself refuses
/// different T or d).
models::BundleJob bundle_job(const Plan& plan, const std::vector<std::uint64_t>& tasks,
                             int threads = parallel::threads());

/// What the plan records of every task ([output]: metrics, spectra, gradients), for layers 0..max_depth.
models::Recording recording(const Plan& plan);

}  // namespace rcsweep::plan
