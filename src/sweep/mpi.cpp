#include "sweep/mpi.hpp"

#include <cstdlib>

#include "sweep/stop.hpp"

namespace rcsweep::mpi {

Session::Session(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // A process no launcher started is an MPI singleton, for which Open MPI starts a daemon of its
  // own (orted: ~0.1 s of a run's start-up, docs/SCALING.md). Isolated, it runs without one; what
  // that gives up (MPI_Comm_spawn, publish/lookup) rcsweep does not use. Nor does it need a
  // network: the matching transports (MTLs) psm, psm2 and ofi, whose libraries probe for their
  // hardware and time a clock as they load (~0.2 s), are left out. A value already set wins.
  if (!initialized && !sweep::started_by_launcher()) {
    ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    ::setenv("OMPI_MCA_mtl", "^psm,psm2,ofi", 0);
  }
  if (!initialized)
    check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided_), "MPI_Init_thread");
  else
    MPI_Query_thread(&provided_);
  if (provided_ < MPI_THREAD_SERIALIZED)
    throw MpiError("the MPI library does not provide MPI_THREAD_SERIALIZED (got level " + std::to_string(provided_) +
                   ")");
}

Session::~Session() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace rcsweep::mpi
