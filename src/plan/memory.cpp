#include "plan/memory.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "base/error.hpp"
#include "base/units.hpp"
#include "metrics/registry.hpp"
#include "models/block_kind.hpp"
#include "plan/threads.hpp"

namespace rcsweep::plan {
namespace {

// Metrics per layer (the registry's entries, metrics/registry.hpp) and the bytes they take.
constexpr double metrics_per_layer = static_cast<double>(metrics::n_layer_metrics);
constexpr double layer_metric_bytes = static_cast<double>(metrics::metric_bytes_per_layer) * metrics_per_layer;
// glibc's bookkeeping of one heap block, and a std::vector's own three pointers.
constexpr double block_overhead = 16.0, vector_bytes = 24.0;
// A /tasks row in memory (store::TaskRow: ids, status, time, rank and a 256-byte message).
constexpr double task_row_bytes = 296.0;
// Stored results are read back (adaptive replicates, --reuse) this many tasks at a time.
constexpr double read_batch_tasks = 4096.0;
// The touched part of a BLAS buffer: the packed panels of A (P x Q) and of B (Q x the columns, at most
// the whole buffer); P x Q of OpenBLAS's dgemm kernels is at most 256 x 384 (in this model).
constexpr double blas_panel_p = 256.0, blas_panel_q = 384.0;

struct Stored {
  double spectra = 0.0, mixer_spectra = 0.0, gradient_depths = 0.0;  // per task
};

// How many layers of a task store each kind (the counts of Plan::spectrum_at, mixer_spectrum_at and
// gradient_depths, without a loop over the layers).
Stored stored(const Plan& plan) {
  const double L = plan.max_depth;
  const auto count = [&](config::Spectra kind, double all, double last) {
    return kind == config::Spectra::all ? all : kind == config::Spectra::last ? last : 0.0;
  };
  const auto& o = plan.spec.output;
  return {count(o.spectra, L + 1, 1), count(o.mixer_spectra, L, L >= 1 ? 1 : 0), count(o.gradients, L, L >= 1 ? 1 : 0)};
}

// Bytes of one task's rows in the write buffers of store::Store::write: the metrics' rows, the
// gradient rows, and the spectra gathered into one vector that doubles as it grows (with a
// segment of 16 bytes per stored spectrum, in a vector that doubles too).
double write_buffer_bytes(const Plan& plan, const Stored& s, const config::ModelParams& m) {
  const double L1 = plan.max_depth + 1.0, k = std::min(m.T, m.d);
  return 8.0 * (L1 + s.gradient_depths * plan.max_depth) + s.spectra * (16.0 * k + 32.0) +
         3.0 * s.mixer_spectra * (16.0 * m.T + 32.0);
}

double blas_touched_bytes(const Plan& plan) {
  double columns = 0.0;
  for (const auto& m : plan.models) {
    const double hidden = m.mlp == config::Mlp::relu ? static_cast<double>(m.mlp_ratio) * m.d : 0.0;
    columns = std::max({columns, static_cast<double>(m.T), static_cast<double>(m.d), hidden});
  }
  return std::min(blas_buffer_bytes, 8.0 * blas_panel_q * (blas_panel_p + columns));
}

}  // namespace

double task_result_bytes(const Plan& plan, const config::ModelParams& m) {
  const Stored s = stored(plan);
  const double L1 = plan.max_depth + 1.0, k = std::min(m.T, m.d);
  double bytes = layer_metric_bytes * L1 + block_overhead;                     // layers: the metrics per layer
  bytes += 4.0 * (vector_bytes * L1 + block_overhead);                         // spectra, mixer_sv, mixer_eig_re/im
  bytes += s.spectra * (8.0 * k + block_overhead);                             // stored spectra of X
  bytes += 3.0 * s.mixer_spectra * (8.0 * m.T + block_overhead);               // mixer singular values, eigenvalues
  bytes += 2.0 * (8.0 * s.gradient_depths * plan.max_depth + block_overhead);  // gradient norms, errors
  return bytes + 512.0;                                                        // the result itself, its message
}

double task_message_bytes(const Plan& plan, const config::ModelParams& m) {
  const Stored s = stored(plan);
  const double L1 = plan.max_depth + 1.0, k = std::min(m.T, m.d);
  // per layer: its metrics and four list lengths
  return 141.0 + (layer_metric_bytes + 32.0) * L1 + 8.0 * k * s.spectra + 24.0 * m.T * s.mixer_spectra +
         16.0 * plan.max_depth * s.gradient_depths;
}

double RankMemory::resident() const { return unit + std::max(message, writer) + blas + program + model; }
double RankMemory::address_space() const { return resident() + reserved; }

RankMemory rank_memory(const Plan& plan, const RankSetup& setup) {
  RankMemory out;
  const int threads = std::max(setup.threads, 1), blas_threads = std::max(setup.blas_threads, 1);
  const int ranks = std::max(setup.ranks, 1);
  const Stored s = stored(plan);
  const double L1 = plan.max_depth + 1.0, n = static_cast<double>(plan.tasks.size());

  // The unit: the largest bundle on the rank's threads, with its tasks' results.
  double unit_tasks = 0.0, unit_message = 0.0;
  if (!plan.bundles.empty()) {
    const LargestBundle largest = largest_bundle(plan, threads);
    out.largest = largest.index;
    out.unit = static_cast<double>(largest.bytes);
    const Bundle& b = plan.bundles[largest.index];
    out.results = static_cast<double>(b.results_bytes);
    unit_tasks = static_cast<double>(b.tasks.size());
    for (const auto id : b.tasks) unit_message += task_message_bytes(plan, plan.models.at(plan.tasks.at(id).point));
  }
  // A worker packs the unit's results into one buffer, which doubles as it grows.
  if (ranks > 1) out.message = 2.0 * unit_message;

  // Rank 0 writes: the store's offset tables of every task and layer (spectra and mixer spectra),
  // the /tasks rows made when the store is created, and a batch: while rank 0 computes its next
  // unit, up to one unit's results of every rank (its own previous one waiting for the write, the
  // others' arriving together), one message being unpacked, the write buffers.
  double result = 0.0, buffers = 0.0;
  for (const auto& m : plan.models) {
    result = std::max(result, task_result_bytes(plan, m));
    buffers = std::max(buffers, write_buffer_bytes(plan, s, m));
  }
  const double shard_tasks = [&] {
    double t = 0.0;
    for (const auto& b : plan.bundles) t += static_cast<double>(b.tasks.size());
    return t;
  }();
  const double tables = 16.0 * n * L1 + 28.0 * n + task_row_bytes * n;
  const double held = std::min(shard_tasks - unit_tasks, ranks * unit_tasks);  // besides the unit computing
  const double written = std::min(shard_tasks, held + unit_tasks);
  double batch = held * result + written * buffers + (ranks > 1 ? unit_message : 0.0);
  if (setup.reads_results) {  // Store::read_results: whole datasets, then a batch of results
    const double whole = 8.0 * n * (metrics_per_layer * L1 + 7.0 + 2.0 * s.gradient_depths * plan.max_depth) +
                         8.0 * static_cast<double>(plan.spectrum_total() + 3 * plan.mixer_spectrum_total()) +
                         task_row_bytes * n + std::min(read_batch_tasks, n) * result;
    batch = std::max(batch, whole);
  }
  out.writer = tables + batch;

  // Model files: each folder mapped once per rank (every page of it read by the time every block
  // has been converted).
  std::set<std::string> folders;
  for (const auto& m : plan.models)
    if (const auto mapped = models::block_kind(m.block).mapped_bytes)
      if (const std::size_t bytes = mapped(m); bytes > 0 && folders.insert(m.model_folder).second)
        out.model += static_cast<double>(bytes);

  out.blas = blas_touched_bytes(plan) * threads * blas_threads;
  const int blas_workers = std::max(setup.blas_load_threads, blas_threads) - 1;
  out.reserved = program_address_bytes - out.program + blas_buffer_bytes * threads - out.blas +
                 (threads - 1) * thread_stack_bytes + blas_workers * blas_worker_bytes;
  return out;
}

std::string largest_bundle_text(const Plan& plan, const RankMemory& m) {
  if (plan.bundles.empty()) return "the sweep";
  const Bundle& b = plan.bundles.at(m.largest);
  const auto& model = plan.models.at(plan.tasks.at(b.tasks.front()).point);
  const std::size_t n = b.tasks.size();
  return "the largest bundle (" + std::to_string(n) + (n == 1 ? " task" : " tasks") +
         " with T = " + std::to_string(model.T) + ", d = " + std::to_string(model.d) + ", " +
         std::to_string(plan.max_depth) + " layers)";
}

namespace {
/// ": its tasks' results take X (the metrics and more per layer)" when they are most of it.
std::string results_note(const Plan& plan, const RankMemory& m) {
  const double depth_bytes = m.results + std::max(m.message, m.writer);
  if (depth_bytes < 0.5 * m.resident()) return "";
  return "; the results of its " + std::to_string(plan.max_depth + 1) + " layers per task take " +
         human_bytes(depth_bytes) + " of it (" +
         (m.writer > m.message ? "rank 0 collects and writes them" : "and their message") + ")";
}
}  // namespace

std::optional<std::string> address_space_problem(const RankMemory& m, const std::string& what, double address_limit) {
  if (m.address_space() <= address_limit) return std::nullopt;
  return what + " needs about " + human_bytes(m.address_space()) + " of address space per rank (" +
         human_bytes(m.resident() - m.program - m.blas) + " of work, " + human_bytes(m.reserved + m.program + m.blas) +
         " for the program, MPI and the BLAS buffers), more than the limit of " + human_bytes(address_limit) +
         " (RLIMIT_AS, ulimit -v); raise or lift the limit (ulimit -v unlimited) or make the tasks smaller";
}

void check_memory(const Plan& plan, const RankSetup& setup, double budget, const std::string& source,
                  std::optional<double> address_limit) {
  if (plan.bundles.empty()) return;
  const RankMemory m = rank_memory(plan, setup);
  const std::string what = largest_bundle_text(plan, m);
  if (m.resident() > budget)
    throw ConfigError(
        {{"--mem-per-rank",
          what + " needs about " + human_bytes(m.resident()) + " per rank" +
              (setup.threads > 1 ? " on " + std::to_string(setup.threads) + " threads" : std::string()) +
              ", more than the budget of " + human_bytes(budget) + " (" + source + ")" + results_note(plan, m) +
              "; give each rank more memory (fewer ranks per node) or make the "
              "tasks smaller"}});
  if (address_limit)
    if (auto problem = address_space_problem(m, what, *address_limit)) throw ConfigError({{"ulimit -v", *problem}});
}

}  // namespace rcsweep::plan
