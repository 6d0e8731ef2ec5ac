// Exception hierarchy of rcsweep. Exceptions are used inside the program; exit codes are chosen
// only in cli/main.cpp (0 ok, 1 runtime error, 2 usage/config error, 3 failed/diverged tasks).
#pragma once
#include <exception>
#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

namespace rcsweep {

/// Base error: carries the file:line where it was thrown.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::source_location where = std::source_location::current());
  const std::string& where() const noexcept { return where_; }

 private:
  std::string where_;
};

/// One problem in a sweep file: the key path (e.g. "axes.lambda[2]") and what is wrong with it.
struct ConfigIssue {
  std::string key;
  std::string problem;
};

/// All problems found in a sweep file at once. what() lists them one per line as "key: problem".
class ConfigError : public Error {
 public:
  explicit ConfigError(std::vector<ConfigIssue> issues, std::source_location where = std::source_location::current());
  const std::vector<ConfigIssue>& issues() const noexcept { return issues_; }

 private:
  std::vector<ConfigIssue> issues_;
};

/// A BLAS/LAPACK routine reported failure (info != 0).
class LinalgError : public Error {
 public:
  LinalgError(const std::string& routine, long info, std::source_location where = std::source_location::current());
  const std::string& routine() const noexcept { return routine_; }
  long info() const noexcept { return info_; }

 private:
  std::string routine_;
  long info_;
};

/// An HDF5 store problem (not an rcsweep store, wrong plan, I/O failure, ...).
class StoreError : public Error {
 public:
  using Error::Error;
};

/// An MPI call failed.
class MpiError : public Error {
 public:
  using Error::Error;
};

/// Whether `e` is an allocation failure: std::bad_alloc, or std::length_error (a size no vector can hold).
bool is_out_of_memory(const std::exception& e);

/// "out of memory while WHAT (std::bad_alloc): a rank needs about X by the estimate of `rcsweep plan`;
/// ..." (no estimate when `needs_bytes` is 0).
std::string out_of_memory_message(const std::string& what, const std::exception& e, double needs_bytes);

}  // namespace rcsweep
