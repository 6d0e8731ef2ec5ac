#include "sweep/mpi.hpp"

namespace rcsweep::mpi {

Session::Session(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
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
