// Thin MPI wrappers that return values and throw MpiError: the ranks, collectives, the MPI
// session. The farm's point-to-point messages are in protocol.hpp.
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
/// The smallest `value` over the ranks of `comm`, on every rank.
inline int allreduce_min(int value, MPI_Comm comm) {
  int out = value;
  check(MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  return out;
}

/// The largest `value` over the ranks of `comm`, on every rank.
inline int allreduce_max(int value, MPI_Comm comm) {
  int out = value;
  check(MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  return out;
}

inline std::string bcast(std::string s, int root, MPI_Comm comm) {
  long n = static_cast<long>(s.size());
  check(MPI_Bcast(&n, 1, MPI_LONG, root, comm), "MPI_Bcast");
  s.resize(static_cast<std::size_t>(n));
  check(MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, root, comm), "MPI_Bcast");
  return s;
}

/// Gather one string from every rank at `root` (index = rank; empty elsewhere).
inline std::vector<std::string> gather(const std::string& s, int root, MPI_Comm comm) {
  const int n = comm_size(comm), rank = comm_rank(comm);
  int len = static_cast<int>(s.size());
  std::vector<int> lens(rank == root ? static_cast<std::size_t>(n) : 0), offsets(lens.size());
  check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm), "MPI_Gather");
  std::string all;
  if (rank == root) {
    for (std::size_t i = 1; i < lens.size(); ++i) offsets[i] = offsets[i - 1] + lens[i - 1];
    all.resize(lens.empty() ? 0 : static_cast<std::size_t>(offsets.back() + lens.back()));
  }
  check(MPI_Gatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, root, comm),
        "MPI_Gatherv");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < lens.size(); ++i)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lens[i])));
  return out;
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
  std::string session_base_;  ///< an isolated singleton's own Open MPI session directory base, removed at the end
};

}  // namespace rcsweep::mpi
