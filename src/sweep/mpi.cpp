#include "sweep/mpi.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "sweep/stop.hpp"

namespace rcsweep::mpi {
namespace {

// Whether every rank of the job runs on this node: no launcher started the process, or Open MPI's
// launcher says so (the same on every rank: the job's size and the node's).
bool job_on_one_node() {
  if (!sweep::started_by_launcher()) return true;
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return size && local && *size && std::string_view(size) == local;
}

}  // namespace

Session::Session(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // A process no launcher started is an MPI singleton, for which Open MPI starts a daemon of its
  // own (orted: docs/BENCHMARKS.md "A single process's start-up"). Isolated, it runs without one; what
  // that gives up (MPI_Comm_spawn, publish/lookup) rcsweep does not use. A job on one node needs
  // no network either (its ranks meet in shared memory): the matching transports (MTLs) psm, psm2
  // and ofi, whose libraries probe for their hardware and time a clock as they load (a fixed cost
  // per rank), are left out. Values already set win.
  if (!initialized && !sweep::started_by_launcher()) {
    ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    // Every isolated singleton is job family 0 to Open MPI, so all of them on a node use the same
    // session directory (<tmp>/ompi.<host>.<uid>/jf.0/1), which each creates and removes: two that
    // start together (a job array's elements on one node) raced, and one failed in orte_init
    // ("A call to mkdir was unable to create the desired directory"). Each gets a base of its own,
    // unless the environment names one.
    if (!std::getenv("OMPI_MCA_orte_tmpdir_base")) {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/rcsweep-mpi-XXXXXX";
      if (::mkdtemp(pattern.data())) {
        session_base_ = pattern;
        ::setenv("OMPI_MCA_orte_tmpdir_base", session_base_.c_str(), 1);
      }
    }
  }
  if (!initialized && job_on_one_node()) ::setenv("OMPI_MCA_mtl", "^psm,psm2,ofi", 0);
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
  if (!session_base_.empty()) {
    std::error_code ignored;  // a leftover directory in TMPDIR is no reason to fail the run
    std::filesystem::remove_all(session_base_, ignored);
  }
}

}  // namespace rcsweep::mpi
