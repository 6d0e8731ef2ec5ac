// Shared step of the MPI tests: run a plan collectively into a fresh temporary store.
#pragma once
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "plan/plan.hpp"
#include "sweep/driver.hpp"
#include "sweep/mpi.hpp"

namespace rcsweep::test {

struct MpiRun {
  std::string path;  ///< the store (rank 0's temporary file name, the same on every rank)
  sweep::RunSummary summary;
};

/// Run `plan` on MPI_COMM_WORLD into <tmp>/<stem>_<pid of rank 0>.h5, quietly; all ranks return
/// after a barrier. The caller removes the file.
inline MpiRun run_into_temp_store(const plan::Plan& plan, const std::string& stem) {
  MpiRun r;
  if (mpi::comm_rank(MPI_COMM_WORLD) == 0)
    r.path = (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(getpid()) + ".h5")).string();
  r.path = mpi::bcast(r.path, 0, MPI_COMM_WORLD);
  sweep::RunOptions opt;
  opt.output = r.path;
  opt.overwrite = true;
  r.summary = sweep::run_sweep(plan, opt, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  return r;
}

}  // namespace rcsweep::test
