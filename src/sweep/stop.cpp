#include "sweep/stop.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include "base/error.hpp"

namespace rcsweep::sweep {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_workers_lost = 0;  // rank 0 heard no heartbeat of a worker for too long
volatile std::sig_atomic_t g_teardown = 0;      // g_signal was the launcher's SIGTERM before its SIGKILL
volatile std::sig_atomic_t g_gone = 0;          // the launcher has died
std::atomic<long long> g_when_ns{0};            // CLOCK_MONOTONIC at the signal
std::atomic<unsigned> g_continued{0};           // SIGCONTs received
static_assert(std::atomic<long long>::is_always_lock_free, "the handler needs a lock-free atomic");
static_assert(std::atomic<unsigned>::is_always_lock_free, "the handler needs a lock-free atomic");

// Set by watch_launcher() before any handler that reads them is installed.
pid_t g_launcher = 0;                // the parent process that started this rank (0: not watched)
bool g_launcher_kills = false;       // it is Open MPI's mpiexec or orted: a teardown ends with SIGKILL
double g_kill_timeout_s = 1.0;       // odls_base_sigkill_timeout: SIGTERM to SIGKILL
std::string g_launcher_comm;         // its name, for messages
constexpr unsigned backstop_s = 20;  // a rank whose launcher died is killed (SIGALRM) after this

long long monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe (POSIX)
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// The launcher died. Async-signal-safe: called from the SIGHUP handler and from launcher_gone().
void note_launcher_gone() noexcept {
  if (g_gone) return;
  g_gone = 1;
  if (g_signal == 0) {
    g_when_ns.store(monotonic_ns(), std::memory_order_relaxed);
    g_signal = SIGHUP;
  }
  alarm(
      backstop_s);  // whatever blocks (a long layer, an MPI call), the rank ends; the store is safe as after a SIGKILL
}

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
  if (sig == SIGHUP) {  // installed only under a launcher: its parent-death signal
    // The kernel sends it also when the launcher's thread that forked this rank ends (the
    // launcher lives on): only a new parent says it is gone.
    if (g_launcher > 0 && getppid() != g_launcher) note_launcher_gone();
    return;
  }
  if (g_signal != 0 && (sig == SIGINT || sig == SIGTERM)) {  // asked twice: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  if (g_signal == 0) {
    if (sig == SIGTERM && g_launcher_kills && info != nullptr && info->si_code == SI_USER && info->si_pid == g_launcher)
      g_teardown = 1;
    g_when_ns.store(monotonic_ns(), std::memory_order_relaxed);
    g_signal = sig;
  }
}

extern "C" void on_continue(int) { g_continued.fetch_add(1, std::memory_order_relaxed); }

void install(int sig) {
  struct sigaction sa {};
  sa.sa_sigaction = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(sig, &sa, nullptr);
}

}  // namespace

void install_stop_handlers() {
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) install(sig);
  struct sigaction sa {};
  sa.sa_handler = on_continue;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGCONT, &sa, nullptr);
  // A single process, as under nohup (a second call, after a singleton MPI_Init set PMIX_RANK,
  // leaves this as it is).
  if (g_launcher == 0 && !started_by_launcher()) {
    std::signal(SIGHUP, SIG_IGN);
    std::signal(SIGPIPE, SIG_IGN);  // writes to a pipe whose reader died fail instead of killing the run
  }
}

unsigned times_continued() noexcept { return g_continued.load(std::memory_order_relaxed); }

bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (const char* v = std::getenv(name); v && *v) return true;
  return false;
}

int launcher_rank() {
  if (!started_by_launcher()) return 0;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return 0;
}

bool watch_launcher() {
  if (g_launcher > 0) return true;
  if (!started_by_launcher()) return false;
  const pid_t parent = getppid();
  std::ifstream comm("/proc/" + std::to_string(parent) + "/comm");
  std::getline(comm, g_launcher_comm);
  g_launcher_kills = g_launcher_comm == "mpiexec" || g_launcher_comm == "mpirun" || g_launcher_comm == "orterun" ||
                     g_launcher_comm == "orted";
  // A launcher that died while it started this process left it to init already; a launcher that
  // is itself process 1 (in a container) has its own name.
  const bool orphan = parent == 1 && !g_launcher_kills && g_launcher_comm != "prterun" && g_launcher_comm != "prted" &&
                      g_launcher_comm != "hydra_pmi_proxy" && g_launcher_comm != "slurmstepd";
  if (const char* v = std::getenv("OMPI_MCA_odls_base_sigkill_timeout")) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end != v && *end == '\0' && t >= 0.0) g_kill_timeout_s = t;
  }
  std::signal(SIGPIPE, SIG_IGN);  // writes to a launcher's dead pipe fail instead of killing the rank
  g_launcher = parent;
  install(SIGHUP);
  prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (orphan) note_launcher_gone();
  launcher_gone();  // it may have died before the prctl: no signal then, but another parent
  return true;
}

bool launcher_gone() noexcept {
  if (g_gone) return true;
  if (g_launcher > 0 && getppid() != g_launcher) note_launcher_gone();
  return g_gone != 0;
}

bool launcher_teardown() noexcept { return g_teardown != 0; }

double effective_grace(double grace) noexcept {
  if (launcher_gone()) return 0.0;
  if (g_teardown) return std::min(grace, std::max(0.0, g_kill_timeout_s - 1.0));
  return grace;
}

void note_workers_lost() noexcept { g_workers_lost = 1; }

bool workers_lost() noexcept { return g_workers_lost != 0; }

bool exit_without_finalize() noexcept { return launcher_gone() || g_teardown != 0 || g_workers_lost != 0; }

std::string launcher_name() {
  return (g_launcher_comm.empty() ? std::string("the launcher") : g_launcher_comm) + " (pid " +
         std::to_string(g_launcher) + ")";
}

int stop_signal() noexcept { return g_signal; }

double seconds_since_stop_signal() noexcept {
  if (g_signal == 0) return 0.0;
  return static_cast<double>(monotonic_ns() - g_when_ns.load(std::memory_order_relaxed)) * 1e-9;
}

void clear_stop_signal() noexcept {
  g_signal = 0;
  g_teardown = 0;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

double parse_duration(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return ConfigError({{what, "expected a duration like 90s, 15m, 2h, 1h30m, 1d, or as Slurm writes it: M, M:S, "
                               "H:M:S, D-H, D-H:M or D-H:M:S (a bare number is minutes), got '" +
                                   text + "'"}});
  };
  if (text.empty()) throw bad();
  const auto whole = [&](const std::string& field) {  // a non-negative integer
    if (field.empty() || field.size() > 9 || field.find_first_not_of("0123456789") != std::string::npos) throw bad();
    return std::stol(field);
  };
  double total = 0.0;
  if (text.find_first_of(":-") != std::string::npos) {  // Slurm's [D-]... forms
    std::string rest = text;
    long days = 0;
    const auto dash = rest.find('-');
    if (dash != std::string::npos) {
      days = whole(rest.substr(0, dash));
      rest = rest.substr(dash + 1);
    }
    std::vector<long> f;
    for (std::size_t pos = 0;;) {
      const auto colon = rest.find(':', pos);
      f.push_back(whole(rest.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos)));
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
    if (f.size() > 3) throw bad();
    long h = 0, m = 0, sec = 0;
    if (dash != std::string::npos) {  // D-H, D-H:M, D-H:M:S
      h = f[0];
      m = f.size() > 1 ? f[1] : 0;
      sec = f.size() > 2 ? f[2] : 0;
      if (h >= 24 || m >= 60 || sec >= 60) throw bad();
    } else if (f.size() == 2) {  // M:S
      m = f[0];
      sec = f[1];
      if (sec >= 60) throw bad();
    } else {  // H:M:S
      h = f[0];
      m = f[1];
      sec = f[2];
      if (m >= 60 || sec >= 60) throw bad();
    }
    total = static_cast<double>(((days * 24 + h) * 60 + m) * 60 + sec);
  } else {  // 1h30m, 90s, 2.5h, or a bare number of minutes (Slurm's M)
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t used = 0;
      double value = 0.0;
      try {
        value = std::stod(text.substr(pos), &used);
      } catch (const std::exception&) {
        throw bad();
      }
      if (used == 0 || !(value >= 0.0) || text[pos] == '+' || text[pos] == '-') throw bad();
      pos += used;
      double unit = 60.0;
      if (pos < text.size()) {
        switch (text[pos]) {
          case 's': unit = 1; break;
          case 'm': unit = 60; break;
          case 'h': unit = 3600; break;
          case 'd': unit = 86400; break;
          default: throw bad();
        }
        ++pos;
      } else if (pos != used) {  // a bare number only on its own ("90"), not after "1h"
        throw bad();
      }
      total += value * unit;
    }
  }
  if (!(total > 0.0) || total > 1e9) throw bad();
  return total;
}

std::optional<std::chrono::system_clock::time_point> scheduler_end_time() {
  using clock = std::chrono::system_clock;
  const auto number = [](const char* name) -> std::optional<double> {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(x > 0)) return std::nullopt;
    return x;
  };
  std::optional<clock::time_point> end;
  if (const auto t = number("SLURM_JOB_END_TIME"))
    end = clock::time_point(std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(*t)));
  if (const auto w = number("PBS_WALLTIME")) {
    const auto pbs = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(*w));
    if (!end || pbs < *end) end = pbs;
  }
  return end;
}

}  // namespace rcsweep::sweep
