#include "cli/launch.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "plan/layout.hpp"
#include "store/writer_lock.hpp"
#include "sweep/mpi.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::cli {
namespace {

constexpr const char* exit_file_env = "RCSWEEP_EXIT_FILE";

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

/// The file rank 0 writes the exit code into: created empty here, removed by the destructor.
struct ExitFile {
  std::string path;
  ExitFile() {
    const char* tmp = std::getenv("TMPDIR");
    std::string name = std::string(tmp && *tmp ? tmp : "/tmp") + "/rcsweep-exit-XXXXXX";
    const int fd = mkstemp(name.data());
    if (fd < 0) throw Error("cannot create a file in " + name.substr(0, name.rfind('/')) + ": " + std::strerror(errno));
    close(fd);
    path = name;
  }
  ~ExitFile() { std::remove(path.c_str()); }
  ExitFile(const ExitFile&) = delete;
  ExitFile& operator=(const ExitFile&) = delete;
  /// The code written by rank 0, 0 when none.
  int code() const {
    std::ifstream in(path);
    int c = 0;
    return in >> c ? c : 0;
  }
};

}  // namespace

namespace {
/// Whether `program` is Open MPI's mpiexec (its --version names Open MPI or OpenRTE).
bool is_open_mpi(const std::string& program) {
  FILE* pipe = ::popen((program + " --version 2>&1").c_str(), "r");
  if (!pipe) return false;
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe)) text += buf;
  ::pclose(pipe);
  return text.find("Open MPI") != std::string::npos || text.find("OpenRTE") != std::string::npos;
}

/// Open MPI's mpiexec refuses to start as root, and more ranks than cores, unless told: add
/// --allow-run-as-root and --oversubscribe where needed and not given (as scripts/quickstart.sh
/// does), saying so.
void add_open_mpi_permissions(std::vector<std::string>& cmd, int ranks) {
  const auto has = [&](const char* flag) { return std::find(cmd.begin(), cmd.end(), flag) != cmd.end(); };
  const char* allowed = std::getenv("OMPI_ALLOW_RUN_AS_ROOT");
  const bool root = geteuid() == 0 && !has("--allow-run-as-root") && !(allowed && *allowed);
  const auto cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool over = ranks > cores && !has("--oversubscribe") && !has("-oversubscribe");
  if ((!root && !over) || !is_open_mpi(cmd[0])) return;
  std::string added;
  if (root) {
    cmd.insert(cmd.begin() + 1, "--allow-run-as-root");
    added += " --allow-run-as-root (running as root)";
  }
  if (over) {
    cmd.insert(cmd.begin() + 1, "--oversubscribe");
    added += std::string(added.empty() ? "" : ",") + " --oversubscribe (" + std::to_string(ranks) + " ranks on " +
             std::to_string(cores) + " cores)";
  }
  std::fprintf(stderr, "[rcsweep] passing Open MPI's mpiexec%s\n", added.c_str());
}

/// This program's arguments as it was started, argv[0..argc) (/proc/self/cmdline: each ends in a NUL).
std::vector<std::string> program_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string word; std::getline(in, word, '\0');) argv.push_back(word);
  if (argv.empty()) throw Error("cannot read this program's arguments from /proc/self/cmdline");
  return argv;
}

/// MPIEXEC split at spaces, with Open MPI's permissions, the placement of `threads` per rank (unless
/// MPIEXEC places them itself), -n ranks, this program and its arguments argv[1..).
std::vector<std::string> mpiexec_command(int ranks, int threads, const std::string& mpiexec,
                                         const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = split_words(mpiexec);
  if (cmd.empty()) throw ConfigError({ConfigIssue{"--mpiexec", "empty command"}});
  add_open_mpi_permissions(cmd, ranks);
  const bool placed = std::any_of(cmd.begin(), cmd.end(), [](const std::string& w) {
    return w.rfind("--map-by", 0) == 0 || w.rfind("--bind-to", 0) == 0 || w.rfind("--cpus-per-proc", 0) == 0;
  });
  const auto cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string over = plan::oversubscription(ranks, threads, cores);
  std::string done;  // what is done about more threads than cores
  if (threads > 1 && !placed) {
    if (over.empty()) {
      cmd.insert(cmd.end(), {"--map-by", "slot:PE=" + std::to_string(threads)});
    } else {
      cmd.insert(cmd.end(), {"--bind-to", "none"});
      setenv("OMP_WAIT_POLICY", "PASSIVE", 0);  // more threads than cores: idle threads sleep, not spin
      const char* policy = std::getenv("OMP_WAIT_POLICY");
      done = std::string("; the ranks run unbound (mpiexec --bind-to none)") +
             (policy && std::strcmp(policy, "PASSIVE") == 0 ? " with OMP_WAIT_POLICY=PASSIVE (idle threads sleep)"
                                                            : "");
    }
  }
  if (!over.empty())
    std::fprintf(stderr,
                 "warning: %s%s; results are the same on any layout, only slower: fewer ranks (-n) "
                 "or threads (--threads)\n",
                 over.c_str(), done.c_str());
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  cmd.insert(cmd.end(), {"-n", std::to_string(ranks), ec ? argv[0] : self.string()});
  cmd.insert(cmd.end(), argv.begin() + 1, argv.end());  // the ranks see -n too: they check the job's size
  return cmd;
}

/// mpiexec's standard output passed through this process when ours is a pipe, FIFO or socket.
/// Open MPI's mpiexec aborts the job when its stdout's reader goes away (SIGPIPE); passed through
/// here, a reader that closes (`rcsweep run -n 2 ... --progress json | head -1`) only ends what it
/// sees: the relay then reads and drops the rest, and the run goes on to its end as a single
/// process does (docs/EVENTS.md "A reader that does not keep up").
class StdoutRelay {
 public:
  /// Whether stdout needs the relay (a pipe, FIFO or socket: a reader that can go away).
  static bool wanted() {
    struct stat st {};
    return ::fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
  }

  StdoutRelay() {
    if (pipe2(fds_, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  }
  StdoutRelay(const StdoutRelay&) = delete;
  StdoutRelay& operator=(const StdoutRelay&) = delete;
  ~StdoutRelay() {
    if (fds_[1] >= 0) close(fds_[1]);
    if (thread_.joinable()) thread_.detach();  // still blocked on a reader: the process exits around it
  }

  /// In the child, before exec: its stdout is the relay's pipe.
  void attach_child() const { dup2(fds_[1], STDOUT_FILENO); }

  /// In this process, after the fork: copy the pipe to stdout until every writer closed it.
  void start() {
    close(fds_[1]);
    fds_[1] = -1;
    thread_ = std::thread([this] {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);  // EPIPE instead of SIGPIPE; signals stay the main thread's
      char buf[1 << 16];
      bool reader = true;
      for (;;) {
        const ssize_t n = read(fds_[0], buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EINTR)) break;
        for (ssize_t off = 0; reader && n > 0 && off < n;) {
          const ssize_t w = write(STDOUT_FILENO, buf + off, static_cast<std::size_t>(n - off));
          if (w > 0)
            off += w;
          else if (w < 0 && errno != EINTR)
            reader = false;  // the reader is gone: drop the rest
        }
      }
      close(fds_[0]);
      done_ = true;
    });
  }

  /// Wait up to `seconds` for what mpiexec wrote to be passed on.
  void finish(double seconds) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done_ && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

 private:
  int fds_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> done_{false};
};

/// Start `cmd` (mpiexec) in a child process of its own group, with this process's signal mask `old`
/// and the exit file in its environment. Returns its pid, or nullopt (after saying why, with the
/// signal mask `old` restored) when it could not be started.
std::optional<pid_t> start_mpiexec(std::vector<std::string>& cmd, const ExitFile& exit_file, const sigset_t& old,
                                   StdoutRelay* relay) {
  std::vector<char*> cargv;
  for (auto& w : cmd) cargv.push_back(w.data());
  cargv.push_back(nullptr);
  int exec_error[2];
  if (pipe2(exec_error, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  const pid_t launcher = getpid();
  const pid_t child = fork();
  if (child < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    // Own process group: the terminal's Ctrl-C reaches only this launcher. As a background group,
    // mpiexec must not read the terminal (stdin from /dev/null) and may write to it even under
    // `stty tostop` (SIGTTOU ignored, kept across exec).
    setpgid(0, 0);
    std::signal(SIGTTOU, SIG_IGN);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // the launcher killed: mpiexec tears the job down
    if (getppid() != launcher) _exit(1);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    if (relay) relay->attach_child();
    setenv(exit_file_env, exit_file.path.c_str(), 1);
    setenv(store::launcher_pid_env, std::to_string(launcher).c_str(), 1);
    execvp(cargv[0], cargv.data());
    const int e = errno;
    (void)!write(exec_error[1], &e, sizeof e);
    _exit(127);
  }
  setpgid(child, child);  // also here, before any signal is forwarded to the group
  if (relay) relay->start();
  close(exec_error[1]);
  int e = 0;
  const bool exec_failed = read(exec_error[0], &e, sizeof e) == static_cast<ssize_t>(sizeof e);
  close(exec_error[0]);
  if (exec_failed) {
    waitpid(child, nullptr, 0);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    std::fprintf(stderr, "error: cannot run '%s': %s (set --mpiexec or RCSWEEP_MPIEXEC)\n", cmd[0].c_str(),
                 std::strerror(e));
    return std::nullopt;
  }
  return child;
}

/// Wait for mpiexec (`child`) while forwarding the signals of `set` to it; returns its wait status.
/// `hard` is the second SIGINT or SIGTERM taken (0 if none): the run was stopped at once.
int wait_forwarding_signals(pid_t child, const sigset_t& set, int& hard) {
  int stops = 0;  // stop signals taken
  int status = 0;
  for (;;) {
    timespec tick{0, 200'000'000};
    siginfo_t info{};
    const int sig = sigtimedwait(&set, &info, &tick);
    if (waitpid(child, &status, WNOHANG) == child) break;
    switch (sig) {
      case SIGINT:
      case SIGTERM:
      case SIGHUP:
        if (++stops == 1) {
          std::fprintf(stderr,
                       "[rcsweep] %s: stopping the run cleanly (passed to the ranks as SIGUSR1); %s again stops it "
                       "at once\n",
                       sweep::signal_name(sig).c_str(), sig == SIGINT ? "Ctrl-C" : sweep::signal_name(sig).c_str());
          kill(child, SIGUSR1);
        } else if (sig != SIGHUP && hard == 0) {
          hard = sig;
          kill(child, SIGINT);  // Open MPI kills the ranks (a second stop signal for them)
        }
        break;
      case SIGUSR1:
      case SIGUSR2:
        ++stops;
        kill(child, sig);
        break;
      case SIGTSTP:  // Ctrl-Z: stop the ranks (mpiexec forwards it) and this process; continue both
        kill(child, SIGTSTP);
        raise(SIGSTOP);
        kill(child, SIGCONT);
        break;
      default: break;
    }
  }
  return status;
}
}  // namespace

int launch_run(int ranks, int threads, const std::string& mpiexec) {
  std::vector<std::string> cmd = mpiexec_command(ranks, threads, mpiexec, program_arguments());
  ExitFile exit_file;

  // The signals are taken with sigtimedwait: blocked from before the fork on, so none is lost.
  sigset_t set, old;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGTSTP, SIGCHLD}) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, &old);
  std::optional<StdoutRelay> relay;
  if (StdoutRelay::wanted()) relay.emplace();
  const auto child = start_mpiexec(cmd, exit_file, old, relay ? &*relay : nullptr);
  if (!child) return 2;
  int hard = 0;  // the second SIGINT/SIGTERM (stop at once)
  const int status = wait_forwarding_signals(*child, set, hard);
  if (relay) relay->finish(2.0);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (hard != 0) {  // stopped at once: end as a single process does, by the signal
    std::fflush(nullptr);
    std::remove(exit_file.path.c_str());
    std::signal(hard, SIG_DFL);
    raise(hard);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (rc != 0) return rc;
  return exit_file.code();
}

bool launched_by_run_n() {
  const char* path = std::getenv(exit_file_env);
  return path && *path;
}

int exit_code_for_launcher(int code) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto ok = std::make_unique<int>(0);
  if (rank == 0 && code != 0) {
    const char* path = std::getenv(exit_file_env);
    if (path && *path) {
      // O_TRUNC without O_CREAT: the launcher made the file; a rank 0 on another node has no such file.
      const int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (fd >= 0) {
        const std::string text = std::to_string(code) + "\n";
        *ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        *ok = close(fd) == 0 && *ok;
      }
    }
  }
  // Every rank learns whether rank 0 wrote it; waiting without spinning (see run_sweep).
  MPI_Request request;
  mpi::check(MPI_Ibcast(ok.get(), 1, MPI_INT, 0, MPI_COMM_WORLD, &request), "MPI_Ibcast");
  for (int done = 0;;) {
    mpi::check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) break;
    if (sweep::launcher_gone()) {  // the others may never join; the buffer is left to MPI
      ok.release();
      return code;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return *ok ? 0 : code;
}

}  // namespace rcsweep::cli
