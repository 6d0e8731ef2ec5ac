#include "sweep/stop.hpp"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <ctime>

#include "base/error.hpp"

namespace rcsweep::sweep {
namespace {

volatile std::sig_atomic_t g_signal = 0;
std::atomic<long long> g_when_ns{0};  // CLOCK_MONOTONIC at the signal
static_assert(std::atomic<long long>::is_always_lock_free, "the handler needs a lock-free atomic");

long long monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe (POSIX)
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0 && (sig == SIGINT || sig == SIGTERM)) {  // asked twice: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  if (g_signal == 0) {
    g_when_ns.store(monotonic_ns(), std::memory_order_relaxed);
    g_signal = sig;
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);
}

int stop_signal() noexcept { return g_signal; }

double seconds_since_stop_signal() noexcept {
  if (g_signal == 0) return 0.0;
  return static_cast<double>(monotonic_ns() - g_when_ns.load(std::memory_order_relaxed)) * 1e-9;
}

void clear_stop_signal() noexcept { g_signal = 0; }

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "signal " + std::to_string(sig);
  }
}

double parse_duration(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return ConfigError({{what, "expected a duration like 90s, 15m, 2h, 1h30m, 1d or [D-]HH:MM[:SS], got '" + text +
                                   "'"}});
  };
  if (text.empty()) throw bad();
  double total = 0.0;
  if (text.find(':') != std::string::npos) {  // [D-]HH:MM[:SS]
    std::string rest = text;
    long days = 0;
    if (const auto dash = rest.find('-'); dash != std::string::npos) {
      std::size_t used = 0;
      try {
        days = std::stol(rest.substr(0, dash), &used);
      } catch (const std::exception&) {
        throw bad();
      }
      if (used != dash || days < 0) throw bad();
      rest = rest.substr(dash + 1);
    }
    long parts[3] = {0, 0, 0};
    int n = 0;
    std::size_t pos = 0;
    while (pos <= rest.size()) {
      const auto colon = rest.find(':', pos);
      const std::string field = rest.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (field.empty() || n == 3 || field.find_first_not_of("0123456789") != std::string::npos) throw bad();
      parts[n++] = std::stol(field);
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
    if (n < 2 || parts[1] >= 60 || parts[2] >= 60) throw bad();
    total = static_cast<double>(days * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]);
  } else {  // 1h30m, 90, 90s, 2.5h
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
      double unit = 1.0;
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
