// Thin MPI wrappers that return values and throw MpiError (the only MPI-facing code besides
// the sweep driver and main).
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

#include "base/error.hpp"

namespace rcsweep::mpi {

inline void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw MpiError(std::string(what) + ": " + std::string(text, static_cast<std::size_t>(len)));
}
inline int comm_rank(MPI_Comm comm) {
  int r = 0;
  check(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}
inline int comm_size(MPI_Comm comm) {
  int n = 0;
  check(MPI_Comm_size(comm, &n), "MPI_Comm_size");
  return n;
}

/// Broadcast a string from `root`.
inline std::string bcast(std::string s, int root, MPI_Comm comm) {
  long n = static_cast<long>(s.size());
  check(MPI_Bcast(&n, 1, MPI_LONG, root, comm), "MPI_Bcast");
  s.resize(static_cast<std::size_t>(n));
  check(MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, root, comm), "MPI_Bcast");
  return s;
}

/// Owns MPI_Init_thread / MPI_Finalize. Requests MPI_THREAD_SERIALIZED: rank 0 runs a service
/// thread that alone makes MPI calls while the main thread computes.
class Session {
 public:
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int thread_level() const { return provided_; }

 private:
  int provided_ = 0;
};

}  // namespace rcsweep::mpi
