#include "plan/store_size.hpp"

#include <algorithm>
#include <cmath>

#include "config/params.hpp"
#include "metrics/registry.hpp"
#include "models/theory.hpp"

namespace rcsweep::plan {
namespace {

/// Whether every task of the plan is in one of its bundles (not a shard of it).
bool runs_every_task(const Plan& plan) {
  std::size_t n = 0;
  for (const auto& b : plan.bundles) n += b.tasks.size();
  return n == plan.tasks.size();
}

/// The values of task t's stored spectra lie at [first(t), first(t) + count(t) * length(t)).
struct Spans {
  int first = -1;  ///< first layer with a stored spectrum (-1: none)
  std::int64_t count = 0;
};

Spans spans(const Plan& plan, bool mixer) {
  Spans s;
  for (int l = 0; l <= plan.max_depth; ++l)
    if (mixer ? plan.mixer_spectrum_at(l) : plan.spectrum_at(l)) {
      if (s.first < 0) s.first = l;
      ++s.count;
    }
  return s;
}

/// Values per chunk of a flat spectrum dataset of `total` values: up to 65536; by task, about
/// `rows` tasks' spectra (the smallest task's), so a chunk holds few tasks that did not run.
std::uint64_t spectrum_chunk(const Plan& plan, bool mixer, std::int64_t total, bool by_task, std::uint64_t rows) {
  const auto n = static_cast<std::uint64_t>(std::max<std::int64_t>(total, 1));
  std::uint64_t chunk = std::min<std::uint64_t>(n, 65536);
  if (!by_task) return chunk;
  const Spans s = spans(plan, mixer);
  if (s.first < 0) return chunk;
  std::uint64_t smallest = chunk;
  for (std::uint64_t t = 0; t < plan.tasks.size(); ++t) {
    const auto length = mixer ? plan.mixer_spectrum_length(t) : plan.spectrum_length(t);
    smallest = std::min<std::uint64_t>(smallest, std::max<std::uint64_t>(1, length * s.count));
  }
  return std::max<std::uint64_t>(1, std::min(chunk, smallest * rows));
}

/// Bytes of HDF5's chunk index (a version-1 B-tree) of a dataset of `rank` dimensions with
/// `chunks` allocated chunks: nodes of up to 64 entries (each a key of the chunk's size, filter
/// mask and offsets, and a child address). Chunks added in order (every chunk at creation, a
/// shard's as its tasks finish) fill them to about 90 %, HDF5's split ratio for the rightmost
/// node; an adaptive sweep's, added a step of every point at a time, to about 60 %.
double index_bytes(std::uint64_t chunks, int rank, bool in_order) {
  const double node = 24.0 + 65.0 * (8.0 + 8.0 * (rank + 1)) + 64.0 * 8.0;
  const std::uint64_t per_node = in_order ? 57 : 38;
  const auto nodes_over = [&](std::uint64_t entries) -> std::uint64_t {
    return entries <= 64 ? 1 : (entries + per_node - 1) / per_node;
  };
  std::uint64_t total = 0;
  for (std::uint64_t level = nodes_over(chunks);; level = nodes_over(level)) {
    total += level;
    if (level == 1) break;
  }
  return node * static_cast<double>(total);
}

/// The most chunks of a per-task dataset allocated by task: the readers look each one up.
constexpr std::uint64_t chunks_checked = 4096;

/// What every store holds whatever ran: the file's structure, the groups, the datasets' headers
/// and attributes (descriptions, units, scales), the small /axes.
constexpr double structure_bytes = 32.0 * 1024.0;

}  // namespace

StoreLayout store_layout(const Plan& plan) {
  StoreLayout s;
  const auto n = static_cast<std::uint64_t>(plan.tasks.size());
  const auto L1 = static_cast<std::uint64_t>(plan.max_depth) + 1;
  s.by_task = plan.spec.adaptive.enabled() || !runs_every_task(plan);
  const std::uint64_t row_limit = std::max<std::uint64_t>(1, std::min<std::uint64_t>(64, (1u << 20) / (L1 * 8)));
  std::uint64_t rows = row_limit;
  if (s.by_task) {
    // A step of tasks (one task for a shard of a sweep without adaptive replicates), but at most
    // chunks_checked chunks a dataset: every reader checks each chunk (SCHEMA.md "What a store must be").
    const std::uint64_t step = plan.spec.adaptive.enabled()
                                   ? static_cast<std::uint64_t>(std::max(plan.spec.adaptive.step, 1))
                                   : 1;
    rows = std::clamp<std::uint64_t>(std::max(step, (n + chunks_checked - 1) / chunks_checked), 1, row_limit);
  }
  s.task_rows = std::max<std::uint64_t>(1, std::min(n, rows));
  s.theory_rows = s.by_task ? s.task_rows : std::max<std::uint64_t>(1, std::min<std::uint64_t>(n, 65536));
  s.sv_chunk = spectrum_chunk(plan, false, plan.spectrum_total(), s.by_task, s.task_rows);
  s.m_chunk = spectrum_chunk(plan, true, plan.mixer_spectrum_total(), s.by_task, s.task_rows);
  return s;
}

std::uint64_t grad_chunk_rows(const StoreLayout& layout, const std::vector<std::uint64_t>& dims) {
  const std::uint64_t n = dims.empty() ? 1 : dims[0];
  if (layout.by_task) return std::max<std::uint64_t>(1, std::min(n, layout.task_rows));
  const std::uint64_t L = dims.size() > 1 ? std::max<std::uint64_t>(1, dims[1]) : 1;
  return std::max<std::uint64_t>(1, std::min<std::uint64_t>(n, std::max<std::uint64_t>(1, 65536 / (L * dims.size()))));
}

double store_bytes(const Plan& plan, const std::vector<bool>& ran) {
  const StoreLayout s = store_layout(plan);
  const auto n = static_cast<std::uint64_t>(plan.tasks.size());
  const auto L1 = static_cast<double>(plan.max_depth) + 1.0;
  const auto runs = [&](std::uint64_t t) { return !s.by_task || (t < ran.size() && ran[t]); };
  const bool in_order = !s.by_task || !plan.spec.adaptive.enabled();  // the order chunks are allocated in

  // Written at creation: /points, /tasks (289 bytes a row), the spectra's offsets and lengths,
  // /provenance/platform, the stored sweep.
  std::size_t point_row = 8 * plan.spec.dims.size();
  for (const auto& info : config::model_params()) point_row += info.kind == config::ParamKind::choice ? 16 : 8;
  double bytes = structure_bytes + static_cast<double>(plan.spec.canonical_toml().size());
  bytes += static_cast<double>(plan.points.size() * point_row);
  bytes += static_cast<double>(n) * (289.0 + 2.0 * 8.0 + 2.0);
  for (const bool mixer : {false, true})  // the offsets; allocated by task only when a spectrum is stored
    if (!s.by_task || spans(plan, mixer).first >= 0) bytes += static_cast<double>(n) * 8.0 * L1;

  // The per-task results: the chunks that are allocated, and their index.
  const auto chunks_of_rows = [&](std::uint64_t rows) {
    std::uint64_t chunks = 0, last = UINT64_MAX;
    for (std::uint64_t t = 0; t < n; ++t)
      if (runs(t) && t / rows != last) {
        last = t / rows;
        ++chunks;
      }
    return chunks;
  };
  const auto add = [&](std::uint64_t chunks, double chunk_bytes, int rank, std::size_t datasets) {
    bytes += static_cast<double>(datasets) *
             (static_cast<double>(chunks) * chunk_bytes + index_bytes(chunks, rank, in_order));
  };
  add(chunks_of_rows(s.task_rows), static_cast<double>(s.task_rows) * L1 * 8.0, 2, metrics::n_layer_metrics);
  add(chunks_of_rows(s.theory_rows), static_cast<double>(s.theory_rows) * 8.0, 1, models::n_theory);
  const auto depths = plan.gradient_depths().size();
  if (depths > 0) {
    const auto L = static_cast<std::uint64_t>(plan.max_depth);
    const std::uint64_t rows = grad_chunk_rows(s, {n, L});
    add(chunks_of_rows(rows), static_cast<double>(rows * L) * 8.0, 2, 2);
    if (depths > 1) {
      const std::uint64_t rows_all = grad_chunk_rows(s, {n, L, L});
      add(chunks_of_rows(rows_all), static_cast<double>(rows_all * L * L) * 8.0, 3, 2);
    }
  }
  for (const bool mixer : {false, true}) {
    const Spans sp = spans(plan, mixer);
    const std::uint64_t chunk = mixer ? s.m_chunk : s.sv_chunk;
    const std::int64_t total = std::max<std::int64_t>(mixer ? plan.mixer_spectrum_total() : plan.spectrum_total(), 1);
    std::uint64_t chunks = 0;
    if (!s.by_task || sp.first < 0) {
      chunks = (static_cast<std::uint64_t>(total) + chunk - 1) / chunk;
    } else {
      std::uint64_t next = 0;  // the first chunk not yet counted (tasks' spectra lie in id order)
      for (std::uint64_t t = 0; t < n; ++t) {
        if (!runs(t)) continue;
        const auto length = static_cast<std::uint64_t>(mixer ? plan.mixer_spectrum_length(t) : plan.spectrum_length(t));
        if (length == 0) continue;
        const auto start = static_cast<std::uint64_t>(mixer ? plan.mixer_spectrum_offset(t, sp.first)
                                                            : plan.spectrum_offset(t, sp.first));
        const std::uint64_t first = std::max(start / chunk, next);
        const std::uint64_t last = (start + length * static_cast<std::uint64_t>(sp.count) - 1) / chunk;
        if (last >= first) {
          chunks += last - first + 1;
          next = last + 1;
        }
      }
    }
    add(chunks, static_cast<double>(chunk) * 8.0, 1, mixer ? 3 : 1);
  }
  return bytes;
}

StoreSize store_size(const Plan& plan) {
  std::vector<bool> most(plan.tasks.size(), false), least(plan.tasks.size(), false);
  for (const auto& b : plan.bundles)
    for (const std::uint64_t t : b.tasks) {
      most[t] = true;
      least[t] = !plan.spec.adaptive.enabled() || plan.tasks[t].replicate < plan.spec.adaptive.min;
    }
  return {store_bytes(plan, least), store_bytes(plan, most)};
}

}  // namespace rcsweep::plan
