#include "plan/plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "base/error.hpp"
#include "linalg/linalg.hpp"
#include "metrics/best_residual.hpp"
#include "metrics/metrics.hpp"
#include "models/block_kind.hpp"
#include "models/mixers/mixer_kind.hpp"
#include "plan/memory.hpp"

namespace rcsweep::plan {
namespace {
using config::ModelParams;

// Flop-equivalents of a standard normal and of an exp (models/mixers/mixer_kind.hpp).
constexpr double normal_cost = models::normal_flops;
constexpr double exp_cost = models::exp_flops;

// dgesdd, values only, of an m x n matrix: QR when m >> n, then bidiagonalisation 4mn^2 - 4n^3/3
// and a cheap bidiagonal QR iteration.
double svd_values_flops(double m, double n) {
  if (m < n) std::swap(m, n);
  return 4.0 * m * n * n - 4.0 / 3.0 * n * n * n + 10.0 * n * n;
}

// Attention logits as X (W_Q W_K^T) X^T where that saves flops: the n attention models of the grid
// that share W_Q, W_K (same T, d, d_qk, heads; a bundle holds them for each replicate) save
// 4 T d d_qk + 2 T^2 d_qk - 2 T d^2 - 2 T^2 d per layer and task, and the bundle pays 2 d^2 d_qk
// once per layer for P. Counted over all points, not a shard's, so every shard (and a task
// computed alone) takes the same route and results do not depend on the layout. Ties go to the
// product: at T = d one task alone costs the same either way, so a grid that grows from one
// model of a (T, d) to several keeps its route (and its stored results, plan/reuse.hpp).
void choose_qk_product(std::vector<ModelParams>& models) {
  std::map<std::tuple<int, int, int, int>, int> sharing;
  const auto stack_attention = [](const ModelParams& m) { return m.block == config::Block::stack && m.attention(); };
  for (const auto& m : models)
    if (stack_attention(m)) ++sharing[{m.T, m.d, m.d_qk, m.heads}];
  for (auto& m : models) {
    if (!stack_attention(m)) continue;
    const double T = m.T, d = m.d, dqk = m.d_qk;
    const double n = sharing[{m.T, m.d, m.d_qk, m.heads}];
    const double saved = 4.0 * T * d * dqk + 2.0 * T * T * dqk - 2.0 * T * d * d - 2.0 * T * T * d;
    m.qk_product = n * saved >= 2.0 * d * d * dqk;
  }
}
}  // namespace

double mixer_metrics_flops(double T) {
  if (T < static_cast<double>(metrics::mixer_lanczos_min_order)) return svd_values_flops(T, T);
  const double steps = mixer_lanczos_steps;
  return steps * 4.0 * T * T + 8.0 * steps * steps * T + 2.0 * T * T;
}

double layer_flops(const ModelParams& m) {
  const double T = m.T, d = m.d, H = m.heads;
  if (const auto block = models::block_kind(m.block).layer_flops)  // another block: its descriptor's
    return block(m) + svd_values_flops(T, d) + 8.0 * T * d + mixer_metrics_flops(T);
  double f = models::mixer_kind(m.mixer).layer_flops(m);                 // the mixer's own work (models/mixers/)
  if (m.gap_fix == config::GapFix::outliers) f += H * 22.0 * T * T * T;  // SVD with vectors
  if (m.gap_fix == config::GapFix::perp) f += H * T * T;                 // M - (1/T) 1 1^T
  if (m.gate == config::Gate::silu) f += 2.0 * T * d * d + normal_cost * d * d + exp_cost * T * d;
  if (m.mlp == config::Mlp::relu) {
    const double hidden = m.mlp_ratio * d;
    f += 4.0 * T * d * hidden + normal_cost * 2.0 * d * hidden;
  }
  f += 10.0 * T * d;                          // skip, norm, scaling
  f += svd_values_flops(T, d) + 8.0 * T * d;  // signal metrics
  f += mixer_metrics_flops(T);                // mixer metrics
  return f;
}

double gradient_flops(const ModelParams& m, int max_depth, const std::vector<int>& depths, bool exact, int probes) {
  if (depths.empty()) return 0.0;
  const double T = m.T, d = m.d, L = max_depth;
  const double forward = layer_flops(m) - svd_values_flops(T, d) - mixer_metrics_flops(T);  // without metrics
  double f = L * forward;                                                                   // taped forward
  for (int depth : depths)
    f += exact ? depth * (2.0 * T * T * d + 2.0 * T * d * d + 2.0 * d * d * d)  // M Y, Z W, W R
               : probes * depth * 2.0 * forward;
  return f;
}

std::size_t tape_bytes(const ModelParams& m, int max_depth) {
  const std::size_t T = m.T, d = m.d, dqk = m.d_qk, H = models::mixer_kind(m.mixer).per_channel ? 1 : m.heads;
  std::size_t per_layer = 2 * T * d + H * (T * T + d * d + 2 * d * dqk + 2 * d * m.state_dim);
  if (m.gap_fix == config::GapFix::outliers) per_layer += H * T * T;
  if (m.gate == config::Gate::silu) per_layer += d * d + T * d;
  if (m.mlp == config::Mlp::relu) per_layer += 2 * d * m.mlp_ratio * d + T * m.mlp_ratio * d + T * d;
  return 8 * static_cast<std::size_t>(max_depth) * per_layer;
}

double mixer_spectrum_flops(const ModelParams& m) {
  const double T = m.T;
  // dgesdd values only, plus dgeev without vectors (Hessenberg reduction 10/3 T^3, then the
  // shifted QR iteration, about 10 T^3 in all).
  return svd_values_flops(T, T) + 10.0 * T * T * T;
}

std::size_t MemoryEstimate::shared() const {
  std::size_t sum = 0;
  for (std::size_t k = 0; k < n_parts; ++k) sum += k == layer1_part ? 0 : shared_parts[k];
  return sum;
}

// Counted from what layer.cpp and task_runner.cpp hold at the peak of a layer (measured against
// maximum RSS in docs/BENCHMARKS.md, bench/run_plan_accuracy.sh).
MemoryEstimate memory_estimate(const ModelParams& m) {
  if (const auto block = models::block_kind(m.block).memory) {  // another block: its descriptor's
    const models::BlockMemory b = block(m);
    MemoryEstimate e;
    e.shared_parts[8] = 8 * b.input;
    e.shared_parts[MemoryEstimate::block_weights_part] = 8 * b.weights;
    e.state = 8 * b.state;
    e.scratch = 8 * b.scratch;
    return e;
  }
  const std::size_t T = m.T, d = m.d, dqk = m.d_qk, H = m.heads;
  const std::size_t hidden = m.mlp_ratio * d, k = std::min(T, d);
  const models::MixerKind& kind = models::mixer_kind(m.mixer);
  const models::MixerDraws draws = kind.draws(m);
  const models::MixerMemory mixer = kind.memory(m);
  MemoryEstimate e;
  auto& p = e.shared_parts;
  if (!m.ssm() && m.value_init != config::ValueInit::identity)
    p[0] = H * d * d * (m.value_init == config::ValueInit::orthogonal ? 2 : 1);
  if (m.attention()) p[1] = H * 2 * d * dqk;
  if (m.qk_product) p[2] = H * d * d;
  p[3] = H * draws.square;
  if (mixer.fixed_mixer) p[4] = H * T * T;  // the cached M
  p[5] = H * draws.ssm + mixer.kernels;
  if (m.gate == config::Gate::silu) p[6] = d * d;
  if (m.mlp == config::Mlp::relu) p[7] = 2 * d * hidden;
  p[8] = T * d;  // X_0 (until layer 1 is done)
  p[MemoryEstimate::layer1_part] = H * T * d + (m.input_dependent_mixer() ? H * T * T : 0);  // X_0 W_V, M(X_0)
  e.state = T * d;                                                                           // X between layers
  // One task's layer: Y, X W_V (or the scaled W_V), the logits' X P or Q and K, S = M, the mixer
  // metrics' Lanczos bases (about 100 steps of T + T) or Gram matrix, the signal metrics' Gram
  // matrix and, for a collapsed signal or a stored spectrum, what linalg::singular_values holds.
  std::size_t sc = 2 * T * d + (m.sigma_v != 1.0 ? d * d : 0);
  if (m.attention()) sc += m.qk_product ? T * d : 2 * T * dqk;
  sc += mixer.scratch;
  if (m.input_dependent_mixer()) sc += T * T + (T >= 256 ? 200 * T : T * T);
  if (m.gap_fix == config::GapFix::outliers) sc += 3 * T * T;
  if (m.gate == config::Gate::silu) sc += 2 * T * d;
  if (m.mlp == config::Mlp::relu) sc += T * hidden;
  sc += std::max(k * k, linalg::singular_values_scratch(T, d));
  e.scratch = sc;
  for (auto& part : p) part *= 8;
  e.state *= 8;
  e.scratch *= 8;
  return e;
}

std::vector<int> Plan::gradient_depths() const {
  std::vector<int> depths;
  if (max_depth < 1) return depths;
  switch (spec.output.gradients) {
    case config::Spectra::none: break;
    case config::Spectra::last: depths.push_back(max_depth); break;
    case config::Spectra::all:
      for (int L = 1; L <= max_depth; ++L) depths.push_back(L);
      break;
  }
  return depths;
}

bool Plan::exact_gradients(const config::ModelParams& model) const {
  const auto method = spec.output.grad_method;
  return method == config::GradMethod::exact || (method == config::GradMethod::automatic && model.linear_stack());
}

bool Plan::spectrum_at(int layer) const {
  switch (spec.output.spectra) {
    case config::Spectra::none: return false;
    case config::Spectra::last: return layer == max_depth;
    case config::Spectra::all: return layer >= 0 && layer <= max_depth;
  }
  return false;
}

std::size_t Plan::spectrum_length(std::uint64_t t) const {
  const auto& m = models.at(tasks.at(t).point);
  return static_cast<std::size_t>(std::min(m.T, m.d));
}

std::int64_t Plan::spectrum_offset(std::uint64_t t, int layer) const {
  if (!spectrum_at(layer)) return -1;
  std::int64_t index = 0;  // how many stored spectra of this task come before `layer`
  for (int l = 0; l < layer; ++l) index += spectrum_at(l) ? 1 : 0;
  return spectrum_start_.at(t) + index * static_cast<std::int64_t>(spectrum_length(t));
}

std::int64_t Plan::spectrum_total() const { return spectrum_total_; }

bool Plan::mixer_spectrum_at(int layer) const {
  switch (spec.output.mixer_spectra) {
    case config::Spectra::none: return false;
    case config::Spectra::last: return layer >= 1 && layer == max_depth;
    case config::Spectra::all: return layer >= 1 && layer <= max_depth;
  }
  return false;
}

std::size_t Plan::mixer_spectrum_length(std::uint64_t t) const {
  return static_cast<std::size_t>(models.at(tasks.at(t).point).T);
}

std::int64_t Plan::mixer_spectrum_offset(std::uint64_t t, int layer) const {
  if (!mixer_spectrum_at(layer)) return -1;
  std::int64_t index = 0;  // how many stored mixer spectra of this task come before `layer`
  for (int l = 1; l < layer; ++l) index += mixer_spectrum_at(l) ? 1 : 0;
  return mixer_spectrum_start_.at(t) + index * static_cast<std::int64_t>(mixer_spectrum_length(t));
}

std::int64_t Plan::mixer_spectrum_total() const { return mixer_spectrum_total_; }

double Plan::total_flops() const {
  double total = 0.0;
  for (const auto& b : bundles) total += b.flops;
  return total;
}

namespace {

/// Every grid point's parameters and model.
void add_points(Plan& plan) {
  const std::size_t n_points = plan.spec.n_points();
  plan.points.reserve(n_points);
  plan.models.reserve(n_points);
  for (std::size_t p = 0; p < n_points; ++p) {
    plan.points.push_back(plan.spec.point(p));
    plan.models.push_back(plan.spec.model(plan.points.back()));  // resolve + the spec's matrices
  }
}

/// Every task (points x replicates, in id order) with its flops; `mixer_layers` layers store a
/// mixer spectrum.
void add_tasks(Plan& plan, int mixer_layers) {
  const std::size_t n_points = plan.points.size();
  const int R = plan.spec.replicates;
  const bool best_residual = metrics::signal_needs(plan.spec.output.metrics).best_residual;
  plan.tasks.reserve(n_points * R);
  for (std::size_t p = 0; p < n_points; ++p) {
    const auto& m = plan.models[p];
    // res_best (opt-in): best_residual_passes passes over X of ~8 operations per entry, every layer
    const double best = best_residual ? 8.0 * metrics::best_residual_passes * m.T * m.d : 0.0;
    const double flops = (m.depth + 1) * (layer_flops(m) + best) + mixer_layers * mixer_spectrum_flops(m) +
                         gradient_flops(m, plan.max_depth, plan.gradient_depths(), plan.exact_gradients(m),
                                        plan.spec.output.grad_probes);
    for (int r = 0; r < R; ++r) plan.tasks.push_back({plan.tasks.size(), p, r, flops});
  }
}

/// Where each task's first stored spectrum starts in one flat vector: every task (not only this
/// shard's), in id order, `layers` spectra of `length` values each. Returns the vector's length.
std::int64_t spectrum_starts(const Plan& plan, int layers, std::size_t (Plan::*length)(std::uint64_t) const,
                             std::vector<std::int64_t>& start) {
  start.resize(plan.tasks.size());
  std::int64_t offset = 0;
  for (const auto& t : plan.tasks) {
    start[t.id] = offset;
    offset += layers * static_cast<std::int64_t>((plan.*length)(t.id));
  }
  return offset;
}

/// Bundles: tasks of this shard that draw the same random tensors (replicate, T, d), with their
/// flops and memory.
void add_bundles(Plan& plan, Shard shard) {
  std::map<std::tuple<int, int, int>, std::size_t> bundle_of;
  std::vector<std::array<std::size_t, MemoryEstimate::n_parts>> shared_parts;  // per bundle, by kind
  // Per bundle, what layer 1 caches of the shared X_0 (models::ProductCache): X_0 W_V per value
  // weight, and an input-dependent mixer M(X_0) per mixer (models' mixer_key, gap_fix included).
  struct LayerOne {
    std::set<std::tuple<int, int, int>> block_weights;  // another block's weights: (block, init, init_draw)
    std::size_t block_weights_bytes = 0;
    std::set<std::tuple<int, int, double>> values;
    std::set<std::tuple<int, int, int, int, double, double, int, int, double, int>> mixers;
    std::size_t value_bytes = 0, mixer_bytes = 0, own_mixer_bytes = 0;
  };
  std::vector<LayerOne> layer_one;
  for (const auto& t : plan.tasks) {
    // An adaptive point's decisions need all its replicates in one shard.
    const std::uint64_t shard_key = plan.spec.adaptive.enabled() ? t.point : t.id;
    if (static_cast<int>(shard_key % static_cast<std::uint64_t>(shard.count)) != shard.index) continue;
    const auto& m = plan.models[t.point];
    const auto key = std::make_tuple(t.replicate, m.T, m.d);
    auto [it, inserted] = bundle_of.try_emplace(key, plan.bundles.size());
    if (inserted) plan.bundles.emplace_back();
    auto& b = plan.bundles[it->second];
    b.tasks.push_back(t.id);
    b.flops += t.flops;
    const auto mem = memory_estimate(m);
    if (shared_parts.size() < plan.bundles.size()) shared_parts.resize(plan.bundles.size());
    auto& parts = shared_parts[it->second];
    for (std::size_t k = 0; k < MemoryEstimate::n_parts; ++k) parts[k] = std::max(parts[k], mem.shared_parts[k]);
    if (layer_one.size() < plan.bundles.size()) layer_one.resize(plan.bundles.size());
    auto& one = layer_one[it->second];
    b.state_bytes += mem.state;
    b.results_bytes += static_cast<std::size_t>(task_result_bytes(plan, m));
    const std::size_t tape = plan.spec.output.gradients == config::Spectra::none ? 0 : tape_bytes(m, plan.max_depth);
    const auto best = static_cast<std::size_t>(  // res_best's copies of X (opt-in)
        metrics::signal_needs(plan.spec.output.metrics).best_residual ? 8.0 * metrics::best_residual_scratch * m.T * m.d
                                                                      : 0.0);
    b.scratch_bytes = std::max(b.scratch_bytes, mem.scratch + tape + best);
    if (m.block != config::Block::stack) {  // its weights, one set per init and draw; no layer-1 products
      const int draw = m.init == config::Init::checkpoint ? -2 : m.init_draw;  // a checkpoint has no draw
      if (one.block_weights.insert({static_cast<int>(m.block), static_cast<int>(m.init), draw}).second)
        one.block_weights_bytes += mem.shared_parts[MemoryEstimate::block_weights_part];
      continue;
    }
    const std::size_t T = m.T, d = m.d, H = m.heads;
    if (m.input_scale == 1.0 && !m.ssm() && m.value_init != config::ValueInit::identity &&
        one.values.insert({static_cast<int>(m.input), static_cast<int>(m.value_init), m.sigma_v}).second)
      one.value_bytes += 8 * H * T * d;
    if (m.input_dependent_mixer()) {
      one.own_mixer_bytes = 8 * T * T;  // the task's own mixer in its scratch, not yet allocated at layer 1
      if (m.input_scale == 1.0 &&
          one.mixers
              .insert({static_cast<int>(m.input), static_cast<int>(m.mixer), static_cast<int>(m.gap_fix), m.outliers_r,
                       m.sigma_A, m.sigma_qk, m.d_qk, m.state_dim, m.alpha, static_cast<int>(m.bc_init)})
              .second)
        one.mixer_bytes += 8 * H * T * T;
    }
  }
  // Kinds of shared tensors add up; the layer-1 products exist only where several tasks share X_0.
  // Their mixers M(X_0) stand at layer 1 where the tasks' own mixers (counted in the scratch) stand
  // from layer 2 on: they add what exceeds one own mixer.
  for (std::size_t i = 0; i < plan.bundles.size(); ++i) {
    MemoryEstimate e;
    e.shared_parts = shared_parts[i];
    auto& b = plan.bundles[i];
    const LayerOne& one = layer_one[i];
    e.shared_parts[MemoryEstimate::block_weights_part] = one.block_weights_bytes;
    const std::size_t mixers = one.mixer_bytes > one.own_mixer_bytes ? one.mixer_bytes - one.own_mixer_bytes : 0;
    b.shared_bytes = e.shared() + (b.tasks.size() > 1 ? one.value_bytes + mixers : 0);
  }
}

}  // namespace

Plan make_plan(config::SweepSpec spec, Shard shard) {
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
    throw Error("shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) + " is out of range");
  Plan plan;
  plan.spec = std::move(spec);
  plan.max_depth = plan.spec.max_depth();
  plan.hash = plan.spec.plan_hash();
  add_points(plan);
  choose_qk_product(plan.models);

  int mixer_layers = 0;  // layers with a stored mixer spectrum (the same for every task)
  for (int l = 0; l <= plan.max_depth; ++l) mixer_layers += plan.mixer_spectrum_at(l) ? 1 : 0;
  add_tasks(plan, mixer_layers);

  // Spectra layout: every task (not only this shard's), in id order, its stored layers in order.
  int stored_layers = 0;
  for (int l = 0; l <= plan.max_depth; ++l) stored_layers += plan.spectrum_at(l) ? 1 : 0;
  plan.spectrum_total_ = spectrum_starts(plan, stored_layers, &Plan::spectrum_length, plan.spectrum_start_);
  plan.mixer_spectrum_total_ = spectrum_starts(plan, mixer_layers, &Plan::mixer_spectrum_length,
                                               plan.mixer_spectrum_start_);

  add_bundles(plan, shard);
  std::stable_sort(plan.bundles.begin(), plan.bundles.end(),
                   [](const Bundle& a, const Bundle& b) { return a.flops > b.flops; });
  return plan;
}

}  // namespace rcsweep::plan
