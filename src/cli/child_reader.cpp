// A store read in a child process, so that a damaged file that crashes HDF5 cannot end the program.
#include "cli/cli_internal.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"

namespace rcsweep::cli {
namespace {
/// How long reading a store may take in in_child (RCSWEEP_STORE_READ_TIMEOUT overrides, for tests).
unsigned read_timeout_s() {
  const char* v = std::getenv("RCSWEEP_STORE_READ_TIMEOUT");
  const long t = v ? std::strtol(v, nullptr, 10) : 0;
  return t > 0 ? static_cast<unsigned>(t) : 120u;
}

}  // namespace

std::optional<int> in_child(const std::function<int()>& read, std::string& crash) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) return read();  // no process to spare: read it here
  if (child == 0) {
    // the plain default action: no crash report from a handler inherited from MPI
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    alarm(read_timeout_s());  // a damaged file can also make HDF5 loop forever
    int rc = 1;
    try {
      rc = read();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    crash = "reading it did not finish within " + std::to_string(read_timeout_s()) + " s";
  else
    crash = std::string("reading it crashed the HDF5 library: ") +
            (WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "unknown status");
  return std::nullopt;
}

std::string crashed_message(const std::filesystem::path& path, const std::string& crash) {
  return path.string() + ": damaged HDF5 file (" + crash + ")";
}

}  // namespace rcsweep::cli
