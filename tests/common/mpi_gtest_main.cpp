// main() of the GoogleTest programs that run under mpiexec (linked by rcsweep_mpi_test).
#include <gtest/gtest.h>

#include "sweep/mpi.hpp"

int main(int argc, char** argv) {
  rcsweep::mpi::Session session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // Only rank 0 reports, so the output is readable; every rank runs the collective parts.
  if (rcsweep::mpi::comm_rank(MPI_COMM_WORLD) != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
