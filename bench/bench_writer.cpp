// The writer's side of the task farm (docs/SCALING.md): bytes per task in a result message, and how
// many results per second rank 0's service thread can take in (unpack + Store::write into a real
// store, rows, flushes and statuses included), per output setting and batch size.
//   bench_writer [TASKS] [REPS] [DIR]   (default 4096 tasks per store, 3 repetitions, stores in $TMPDIR)
// Message sizes are checked three ways: the formula of sweep/protocol.cpp, a real task
// (models::run_task at T = d = 32) packed, and the synthetic result used for the throughput.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../tests/mpi/synthetic_tasks.hpp"
#include "config/sweep_spec.hpp"
#include "models/task_runner.hpp"
#include "plan/bundle_job.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "sweep/driver.hpp"
#include "sweep/protocol.hpp"
#include "sweep/worker.hpp"

namespace rcsweep {
namespace {

struct Setting {
  const char* name;
  const char* output;  // the [output] table's body
};

const Setting settings[] = {
    {"metrics only", "spectra = \"none\""},
    {"spectra last", "spectra = \"last\""},
    {"spectra all", "spectra = \"all\""},
    {"gradients all", "gradients = \"all\""},
};

constexpr int depth = 10;

plan::Plan make(const Setting& s, int n, int tasks) {
  const std::string text = "[sweep]\nname = \"bench-writer\"\nseed = 1\nreplicates = " + std::to_string(tasks) +
                           "\n[model]\ninput = \"sphere\"\ndepth = " + std::to_string(depth) +
                           "\nT = " + std::to_string(n) + "\nd = " + std::to_string(n) + "\n[output]\n" + s.output +
                           "\n";
  return plan::make_plan(config::parse_sweep(text, "bench_writer"));
}

std::size_t packed_bytes(const store::TaskResult& r) {
  std::vector<char> buf;
  sweep::pack(r, buf);
  return buf.size();
}

/// Bytes of one done task's message by the layout of sweep/protocol.cpp: id, status, wall time,
/// rank, message (empty); the layer metrics; four per-layer lists (X spectra, mixer singular
/// values and eigenvalue parts) each with a count per layer; the theory row; two gradient vectors.
std::size_t formula_bytes(const plan::Plan& p, std::uint64_t t) {
  const std::size_t L1 = static_cast<std::size_t>(p.max_depth) + 1, u64 = 8, f64 = 8;
  std::size_t spectra = 0, mixer = 0;
  for (int l = 0; l <= p.max_depth; ++l) {
    spectra += p.spectrum_at(l) ? p.spectrum_length(t) : 0;
    mixer += p.mixer_spectrum_at(l) ? p.mixer_spectrum_length(t) : 0;
  }
  const std::size_t grad = p.gradient_depths().size() * static_cast<std::size_t>(p.max_depth);
  return (8 + 1 + 8 + 4 + u64) + (u64 + L1 * metrics::n_layer_metrics * f64) + 4 * (u64 + L1 * u64) +
         (spectra + 3 * mixer) * f64 + models::n_theory * f64 + 2 * (u64 + grad * f64);
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace
}  // namespace rcsweep

int main(int argc, char** argv) {
  using namespace rcsweep;
  const int n_tasks = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::filesystem::path dir = argc > 3 ? argv[3] : std::filesystem::temp_directory_path();
  if (n_tasks < 1 || reps < 1) {
    std::fprintf(stderr, "usage: bench_writer [TASKS >= 1] [REPS >= 1] [DIR]\n");
    return 2;
  }
  int bad = 0;

  std::printf("## Bytes per task in a result message (depth %d, so %d layers)\n\n", depth, depth + 1);
  std::printf(
      "| output | T = d | formula (B) | real task packed (B) | synthetic packed (B) |\n|---|---|---|---|---|\n");
  for (const auto& s : settings) {
    const auto small = make(s, 32, 1);
    const std::size_t real = packed_bytes(sweep::to_result(models::run_task(plan::bundle_job(small, {0})), 0));
    for (const int n : {32, 64, 128, 512}) {
      const auto p = make(s, n, 1);
      const std::size_t f = formula_bytes(p, 0),
                        syn = packed_bytes(sweep::to_result(test::synthetic_output(p, 0, 1.0), 0));
      if (n == 32)
        std::printf("| %s | %d | %zu | %zu | %zu |\n", s.name, n, f, real, syn);
      else
        std::printf("| %s | %d | %zu | | %zu |\n", s.name, n, f, syn);
      if (syn != f || (n == 32 && real != f)) {
        std::fprintf(stderr, "bench_writer: %s at T = d = %d: message sizes disagree\n", s.name, n);
        bad = 1;
      }
    }
  }

  std::printf("\n## Writer throughput: unpack + Store::write (rows, 2 flushes, statuses), %d tasks per store, "
              "tasks in shuffled order, median of %d\n\n",
              n_tasks, reps);
  std::printf("| output | T = d | batch | results/s | MB/s of messages | ms per batch |\n|---|---|---|---|---|---|\n");
  const store::Provenance prov{"bench", "", "", "", "", "", 1, 1};
  for (const auto& s : settings)
    for (const int n : {64, 512}) {
      const auto p = make(s, n, n_tasks);
      std::vector<std::uint64_t> order(p.tasks.size());
      std::iota(order.begin(), order.end(), std::uint64_t{0});
      std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
      const std::size_t bytes = packed_bytes(sweep::to_result(test::synthetic_output(p, 0, 1.0), 0));
      for (const std::size_t batch : {std::size_t{1}, std::size_t{16}, std::size_t{128}, std::size_t{1024}}) {
        if (batch > order.size()) continue;
        // The messages as the service thread receives them: one per batch (packed in advance).
        std::vector<std::vector<char>> messages;
        for (std::size_t i = 0; i < order.size(); i += batch) {
          std::vector<char> buf;
          for (std::size_t j = i; j < std::min(order.size(), i + batch); ++j)
            sweep::pack(sweep::to_result(test::synthetic_output(p, order[j], 1.0), 0), buf);
          messages.push_back(std::move(buf));
        }
        std::vector<double> times;
        for (int rep = 0; rep < reps; ++rep) {
          const auto path = dir / ("rcsweep_bench_writer_" + std::to_string(getpid()) + ".h5");
          auto store = store::Store::create(path, p, prov, true);
          const double t0 = now_s();
          for (const auto& m : messages) store.write(sweep::unpack(m));
          times.push_back(now_s() - t0);
          const auto status = store.task_status();
          if (std::count(status.begin(), status.end(), store::TaskStatus::done) != static_cast<long>(status.size())) {
            std::fprintf(stderr, "bench_writer: not every task written\n");
            bad = 1;
          }
          std::filesystem::remove(path);
        }
        std::sort(times.begin(), times.end());
        const double dt = times[times.size() / 2];
        const double rate = static_cast<double>(order.size()) / dt;
        std::printf("| %s | %d | %zu | %.0f | %.1f | %.2f |\n", s.name, n, batch, rate,
                    rate * static_cast<double>(bytes) / 1e6, 1e3 * dt / static_cast<double>(messages.size()));
        std::fflush(stdout);
      }
    }
  return bad;
}
