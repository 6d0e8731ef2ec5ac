// A worker rank of the task farm: asks rank 0 for units (sending the results of its last one),
// computes them, beats its heart meanwhile, abandons a unit when the stop's grace period is over,
// and hands over what it has when its launcher is gone. Also what every rank computes a unit
// with (rank 0 too): compute() and to_result.
#pragma once
#include <mpi.h>

#include <functional>
#include <vector>

#include "models/task_runner.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "sweep/driver.hpp"
#include "sweep/farm.hpp"
#include "sweep/protocol.hpp"  // take_cancel, which run_sweep calls too

namespace rcsweep::sweep {

/// The stored form of a finished task computed on `rank`: done or diverged, its layers, spectra,
/// gradients and theory values (the worker packs it for the writer: protocol.hpp).
store::TaskResult to_result(models::TaskOutput&& out, int rank);

/// Compute one bundle; an exception marks all its tasks failed (the sweep goes on). When
/// `cancelled` says so the bundle is abandoned: only the tasks finished before are returned.
std::vector<store::TaskResult> compute(const BundleRunner& runner, const plan::Plan& plan, const TaskList& tasks,
                                       int rank, const std::function<bool()>& cancelled);

/// The loop of worker `rank` (not 0) until rank 0 says stop or the launcher is gone; counts its
/// units and waits in `summary`.
void run_worker(const BundleRunner& runner, const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm, int rank,
                RunSummary& summary);

}  // namespace rcsweep::sweep
