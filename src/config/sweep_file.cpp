// Reading a sweep file (sweep_spec.hpp): a regular file of at most max_sweep_file_bytes, never a
// FIFO or a device.
#include "config/sweep_spec.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.hpp"

namespace rcsweep::config {
namespace {

/// The problem of a path that open() or stat() refused with `err`.
std::string path_errno_problem(int err) {
  switch (err) {
    case ENOENT: return "no such file";
    case ELOOP: return "too many levels of symbolic links (a symbolic link loop?)";
    case ENAMETOOLONG: return "the name is too long";
    case ENOTDIR: return "a part of the path is not a directory";
    case EACCES: return "permission denied";
    default: return std::strerror(err);
  }
}

/// The problem of a file of type and size `st` as a sweep file, or "".
std::string file_type_problem(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(st.st_mode)) return "it is a character device, not a regular file";
  if (S_ISBLK(st.st_mode)) return "it is a block device, not a regular file";
  if (S_ISSOCK(st.st_mode)) return "it is a socket, not a regular file";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (static_cast<std::uintmax_t>(st.st_size) > max_sweep_file_bytes)
    return "it has " + std::to_string(st.st_size) + " bytes, more than the " +
           std::to_string(max_sweep_file_bytes >> 20) + " MiB (" + std::to_string(max_sweep_file_bytes) +
           " bytes) a sweep file may have";
  return "";
}

ConfigError unreadable(const std::filesystem::path& path, const std::string& problem) {
  return ConfigError({{"", "cannot read sweep file '" + printable(path.string()) + "': " + problem}});
}

}  // namespace

std::string sweep_file_problem(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path_errno_problem(errno);
  return file_type_problem(st);
}

std::string read_sweep_file(const std::filesystem::path& path) {
  // stat first: a FIFO or a device is never opened (opening a FIFO waits for a writer).
  if (const std::string problem = sweep_file_problem(path); !problem.empty()) throw unreadable(path, problem);
  // O_NONBLOCK: should the name have become a FIFO since, open() returns at once; fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw unreadable(path, path_errno_problem(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw unreadable(path, path_errno_problem(errno));
  if (const std::string problem = file_type_problem(st); !problem.empty()) throw unreadable(path, problem);
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw unreadable(path, std::string("read error: ") + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_sweep_file_bytes)  // grew while being read
      throw unreadable(
          path, "it has more than the " + std::to_string(max_sweep_file_bytes >> 20) + " MiB a sweep file may have");
  }
  return text;
}

SweepSpec load_sweep(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  return parse_sweep(read_sweep_file(path), path.string(), overrides);
}

}  // namespace rcsweep::config
