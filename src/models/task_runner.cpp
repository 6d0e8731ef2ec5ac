#include "models/task_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "base/pow2.hpp"
#include "linalg/linalg.hpp"
#include "models/encoder/encoder_task.hpp"
#include "models/mamba2/mamba2_task.hpp"
#include "models/layer.hpp"
#include "models/random_source.hpp"

namespace rcsweep::models {
namespace {

struct Running {
  const config::ModelParams* model;
  TaskOutput out;
  Matrix X;
  long log2_scale = 0;  // X_true = X * 2^log2_scale
  bool alive = true;
  double C_M = 0.0, S = 0.0;  // maxima over layers (lambda-skip Theorem 4.1)
  // max | ||row|| - 1 | of X_0..X_{L-1} (Theorem 4.1's unit rows); measured only for a stack the
  // theorem covers (theorem_covers): NaN otherwise
  double row_deviation = std::numeric_limits<double>::quiet_NaN();
  std::string input_key;  // tasks with the same key (and input_scale) start from the same X_0
  std::unique_ptr<const encoder::TaskEncoder> encoder;  // block "encoder" (encoder_task.hpp), else null
  std::unique_ptr<const mamba2::TaskMamba2> mamba2;     // block "mamba2" (mamba2_task.hpp), else null
  /// A model block (encoder or Mamba-2), not the stack: no theory row, no gradients.
  bool model_block() const noexcept { return encoder || mamba2; }
};

// ln mu(X_l) from the stored metrics: ln(mu_rel) + ln ||X||_F (finite where mu itself overflows).
double log_mu(const TaskOutput& out, int layer) {
  const auto& row = out.layers[layer];
  return std::log(row[metrics::metric_index("mu_rel")]) + row[metrics::metric_index("log_fro")];
}

// x - x is 0 for a finite x and NaN for an infinite or NaN one; the NaN survives the sums. In 4
// independent partial sums, without an early exit: the loop vectorises (a per-element branch did
// not: docs/BENCHMARKS.md "Figures behind choices in the source").
bool all_finite(const Matrix& X) {
  const std::span<const double> v = X.values();
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (std::size_t l = 0; l < 4; ++l) s[l] += v[i + l] - v[i + l];
  for (; i < v.size(); ++i) s[0] += v[i] - v[i];
  return (s[0] + s[1]) + (s[2] + s[3]) == 0.0;
}

// MODELS.md "Scale": a layer that is linear in X and has no norm is carried at unit scale,
// renormalised by an exact power of two so that its largest entry is in [1/2, 1) (no rounding,
// bitwise reproducible); log2_scale keeps the true scale.
// `max_abs` is max |x| of X (finite); returns that of the renormalised X (exact).
double renormalise(Running& r, double max_abs) {
  const int k = renormalise_pow2(r.X.values(), max_abs);
  r.log2_scale += k;
  return std::ldexp(max_abs, -k);
}

// The layer's signal metrics, of X or of the `signal` an encoder measures; `max_abs` >= 0 is max
// |x| of that signal, known already (else found here).
void record(const BundleJob& job, Running& r, int layer, const metrics::MixerMetrics& mm, double max_abs = -1.0,
            const Matrix* signal = nullptr) {
  const bool want_spectrum = job.recording.spectrum_at(layer);
  std::vector<double> spectrum;
  const metrics::MetricSet& selected = job.recording.metrics;
  const auto sm = metrics::signal_metrics(signal ? *signal : r.X, static_cast<double>(r.log2_scale) * std::log(2.0),
                                          want_spectrum ? &spectrum : nullptr, max_abs,
                                          metrics::signal_needs(selected));
  r.out.layers[layer] = metrics::to_row(sm, mm, selected);
  if (want_spectrum) r.out.spectra[layer] = std::move(spectrum);
}

// The mixer spectrum of a layer: singular values and eigenvalues of head 0's M (T x T). A
// non-finite M (possible only in overflowing attention scores) gives NaN values of the same length.
void record_mixer(Running& r, int layer, const Matrix& M) {
  const auto l = static_cast<std::size_t>(layer);
  const auto T = static_cast<std::size_t>(r.model->T);
  const bool finite = M.rows() == T && M.cols() == T && all_finite(M);
  if (!finite) {
    r.out.mixer_sv[l].assign(T, metrics::nan);
    r.out.mixer_eig_re[l].assign(T, metrics::nan);
    r.out.mixer_eig_im[l].assign(T, metrics::nan);
    return;
  }
  r.out.mixer_sv[l] = linalg::singular_values(M);
  const auto eig = linalg::eigenvalues(M);
  r.out.mixer_eig_re[l].resize(T);
  r.out.mixer_eig_im[l].resize(T);
  for (std::size_t i = 0; i < T; ++i) {
    r.out.mixer_eig_re[l][i] = eig[i].real();
    r.out.mixer_eig_im[l][i] = eig[i].imag();
  }
}

/// The task ends at `layer` (diverged or vanished): its metrics there are NaN, like every later layer's.
void mark_ended(Running& r, int layer, Outcome outcome, const std::string& why) {
  r.alive = false;
  r.out.outcome = outcome;
  r.out.message = std::string(outcome == Outcome::vanished ? "vanished" : "diverged") + " at layer " +
                  std::to_string(layer) + ": " + why;
  r.out.layers[layer].fill(metrics::nan);
}

/// The calls of run_bundle's callbacks, under one lock (never concurrently): `cancelled`
/// checks_per_layer times per layer (task_runner.hpp) and before each task's gradients, `on_done`
/// once per task.
class Callbacks {
 public:
  Callbacks(const std::function<void(TaskOutput&&)>& on_done, const std::function<bool()>& cancelled)
      : on_done_(on_done), cancelled_(cancelled) {}

  /// A layer begins with `running_tasks` tasks still alive: its first check.
  void begin_layer(double running_tasks) {
    const std::lock_guard lock(mutex_);
    layer_checks_ = 0;
    stages_passed_ = 0.0;
    stages_owed_ = running_tasks * layer_stages;
    check();
  }
  /// A task passed a stage of the layer: check j (1 <= j < checks_per_layer) once j /
  /// (checks_per_layer - 1) of the owed stages are passed.
  void stage_passed() {
    const std::lock_guard lock(mutex_);
    stages_passed_ += 1.0;
    while (layer_checks_ < checks_per_layer && layer_checks_ * stages_owed_ <= stages_passed_ * (checks_per_layer - 1))
      check();
  }
  /// The layer is over: the checks it still owes.
  void end_layer() {
    const std::lock_guard lock(mutex_);
    while (layer_checks_ < checks_per_layer) check();
  }
  void before_gradients() {
    const std::lock_guard lock(mutex_);
    if (cancelled_ && cancelled_()) throw Cancelled();
  }
  void done(TaskOutput&& out) {
    const std::lock_guard lock(mutex_);
    on_done_(std::move(out));
  }

 private:
  void check() {  // mutex_ held
    ++layer_checks_;
    if (cancelled_ && cancelled_()) throw Cancelled();
  }
  const std::function<void(TaskOutput&&)>& on_done_;
  const std::function<bool()>& cancelled_;
  std::mutex mutex_;
  int layer_checks_ = 0;  ///< the checks made in this layer
  double stages_passed_ = 0.0, stages_owed_ = 0.0;
};

/// T x T allocations lent to the layers (LayerScratch::mixer), one per task computing at a time:
/// taken for a task's layer and given back after it, so the layers reuse them.
class MixerPool {
 public:
  Matrix take() {
    const std::lock_guard lock(mutex_);
    Matrix M;
    if (!spare_.empty()) {
      M = std::move(spare_.back());
      spare_.pop_back();
    }
    return M;
  }
  void give(Matrix&& M) {
    const std::lock_guard lock(mutex_);
    if (!M.empty()) spare_.push_back(std::move(M));
  }
  void clear() { spare_.clear(); }

 private:
  std::mutex mutex_;
  std::vector<Matrix> spare_;
};

/// The bundle's tasks, each starting from its input X_0: one X_0 per input key in `inputs` (the
/// input kind; an encoder's tokens: the embedding of its weights), made once and shared (a task
/// with an input_scale has its own scaled copy).
std::vector<Running> start_runs(const BundleJob& job, RandomSource& random, std::map<std::string, Matrix>& inputs) {
  const auto& m0 = *job.tasks.front().model;
  const int L = job.max_depth;
  metrics::LayerRow nan_row;
  nan_row.fill(metrics::nan);
  std::vector<Running> runs;
  runs.reserve(job.tasks.size());
  for (const auto& t : job.tasks) {
    const auto& model = *t.model;
    if (model.T != m0.T || model.d != m0.d)
      throw Error("run_bundle: task " + std::to_string(t.id) + " is not of this bundle");
    Running r{&model, {}, {}, 0, true, 0.0, 0.0, std::numeric_limits<double>::quiet_NaN(), {}, {}, {}};
    r.out.task = t.id;
    r.out.layers.assign(L + 1, nan_row);
    r.out.spectra.assign(L + 1, {});
    r.out.mixer_sv.assign(L + 1, {});
    r.out.mixer_eig_re.assign(L + 1, {});
    r.out.mixer_eig_im.assign(L + 1, {});
    if (model.block == config::Block::encoder)
      r.encoder = std::make_unique<const encoder::TaskEncoder>(model, job.seed, job.replicate);
    if (model.block == config::Block::mamba2)
      r.mamba2 = std::make_unique<const mamba2::TaskMamba2>(model, job.seed, job.replicate);
    r.input_key = r.encoder  ? r.encoder->input_key()
                  : r.mamba2 ? r.mamba2->input_key()
                             : "input " + std::to_string(static_cast<int>(model.input));
    auto [it, inserted] = inputs.try_emplace(r.input_key);
    if (inserted)
      it->second = r.encoder  ? r.encoder->input(random)
                   : r.mamba2 ? r.mamba2->input(random)
                              : make_input(model, random);
    r.X = it->second;
    if (model.input_scale != 1.0)  // not shared with unscaled tasks: its own copy
      for (double& x : r.X.values()) x *= model.input_scale;
    if (!r.model_block() && theorem_covers(model)) r.row_deviation = row_norm_deviation(r.X);
    runs.push_back(std::move(r));
  }
  return runs;
}

using Clock = std::chrono::steady_clock;

/// Adds the time from its construction to its end to a task's seconds.
struct AddTime {
  Running& r;
  Clock::time_point t0 = Clock::now();
  ~AddTime() { r.out.seconds += std::chrono::duration<double>(Clock::now() - t0).count(); }
};

/// Layer 0: tasks with the same input key and scale share X_0 and so its metrics.
void record_layer0(const BundleJob& job, std::vector<Running>& runs) {
  std::map<std::pair<std::string, double>, const Running*> first_of_input;
  for (auto& r : runs) {
    const AddTime add_time{r};
    auto [it, inserted] = first_of_input.try_emplace(std::make_pair(r.input_key, r.model->input_scale), &r);
    if (inserted) {
      record(job, r, 0, metrics::MixerMetrics{});
    } else {
      r.out.layers[0] = it->second->out.layers[0];
      r.out.spectra[0] = it->second->out.spectra[0];
    }
  }
}

/// One encoder block of a running task (docs/ENCODERS.md "In a sweep"): X_{layer} from X_{layer-1},
/// the metrics of the measured signal (X, or the attention branch) and of head 0's attention
/// probabilities as the layer's mixer, or the end of the task there (X not finite: diverged; X
/// exactly zero: vanished). Its stages: the block, the mixer metrics, the signal metrics.
void run_encoder_layer(const BundleJob& job, Running& r, int layer, RandomSource& random, Callbacks& calls) {
  const AddTime add_time{r};
  encoder::BlockOutputs outputs;
  outputs.keep_head0 = true;
  r.encoder->apply(layer, random, r.X, outputs);
  calls.stage_passed();
  const Matrix& signal = r.encoder->measures_attention() ? outputs.attention : r.X;
  const double max_abs = metrics::finite_max_abs(signal);  // NaN: an entry is not finite
  const double x_max_abs = &signal == &r.X ? max_abs : metrics::finite_max_abs(r.X);
  if (std::isnan(max_abs) || std::isnan(x_max_abs)) {
    mark_ended(r, layer, Outcome::diverged,
               std::string("non-finite values in ") + (std::isnan(x_max_abs) ? "X" : "the attention branch"));
    return;
  }
  const auto mm = metrics::mixer_metrics(outputs.head0, nullptr, metrics::mixer_needs(job.recording.metrics));
  calls.stage_passed();
  record(job, r, layer, mm, max_abs, &signal);
  calls.stage_passed();
  if (x_max_abs == 0.0) {
    mark_ended(r, layer, Outcome::vanished, "every entry of X is zero (the signal collapsed completely)");
    return;
  }
  if (job.recording.mixer_spectrum_at(layer)) record_mixer(r, layer, outputs.head0);
}

/// One Mamba-2 block of a running task (docs/MAMBA2.md "In a sweep"): X_{layer} from X_{layer-1},
/// the metrics of X_{layer} (before the final norm, which no layer applies) and of head 0's T x T
/// mixer matrix M_0 as the layer's mixer, or the end of the task there (X not finite: diverged; X
/// exactly zero: vanished). Its stages: the block, the mixer metrics, the signal metrics.
void run_mamba2_layer(const BundleJob& job, Running& r, int layer, RandomSource& random, Callbacks& calls) {
  const AddTime add_time{r};
  mamba2::BlockOutputs outputs;
  outputs.keep_head0 = true;
  r.mamba2->apply(layer, random, r.X, outputs);
  calls.stage_passed();
  const double max_abs = metrics::finite_max_abs(r.X);  // NaN: an entry is not finite
  if (std::isnan(max_abs)) {
    mark_ended(r, layer, Outcome::diverged, "non-finite values in X");
    return;
  }
  const auto mm = metrics::mixer_metrics(outputs.head0, nullptr, metrics::mixer_needs(job.recording.metrics));
  calls.stage_passed();
  record(job, r, layer, mm, max_abs);
  calls.stage_passed();
  if (max_abs == 0.0) {
    mark_ended(r, layer, Outcome::vanished, "every entry of X is zero (the signal collapsed completely)");
    return;
  }
  if (job.recording.mixer_spectrum_at(layer)) record_mixer(r, layer, outputs.head0);
}

/// One layer of a running task: X_{layer} from X_{layer-1}, its metrics, or the end of the task
/// (diverged, vanished) there.
void run_layer(const BundleJob& job, Running& r, int layer, RandomSource& random, const ProductCache& products,
               Callbacks& calls, MixerPool& mixers) {
  if (r.encoder) return run_encoder_layer(job, r, layer, random, calls);
  if (r.mamba2) return run_mamba2_layer(job, r, layer, random, calls);
  const AddTime add_time{r};
  LayerStats stats;
  stats.keep_head0 = job.recording.mixer_spectrum_at(layer);
  stats.head0_needs = metrics::mixer_needs(job.recording.metrics);
  LayerScratch scratch{mixers.take(), [&calls] { calls.stage_passed(); }};
  apply_layer(*r.model, layer, random, r.X, &stats, products, nullptr, &scratch);
  mixers.give(std::move(scratch.mixer));
  r.C_M = std::max(r.C_M, stats.max_m_fro);
  r.S = std::max(r.S, stats.max_cv_fro);
  double max_abs = metrics::finite_max_abs(r.X);  // NaN: an entry is not finite
  if (std::isnan(max_abs)) {
    if (stats.zero_rows_normed > 0)
      mark_ended(r, layer, Outcome::vanished,
                 std::to_string(stats.zero_rows_normed) +
                     (stats.zero_rows_normed == 1 ? " row of X was" : " rows of X were") +
                     " exactly zero before the rms norm (the signal collapsed completely)");
    else
      mark_ended(r, layer, Outcome::diverged, "non-finite values in X (the layer is not scale-invariant; add a norm)");
    return;
  }
  if (r.model->norm == config::Norm::none && r.model->homogeneous()) max_abs = renormalise(r, max_abs);
  record(job, r, layer, stats.head0, max_abs);
  if (layer < job.max_depth && !std::isnan(r.row_deviation))  // X_layer is the next layer's input
    r.row_deviation = std::max(r.row_deviation, row_norm_deviation(r.X, r.log2_scale));
  constexpr auto log_fro = metrics::metric_index("log_fro");
  if (!std::isfinite(r.out.layers[layer][log_fro])) {
    mark_ended(r, layer, Outcome::vanished, "every entry of X is zero (the signal collapsed completely)");
    return;
  }
  if (stats.keep_head0) record_mixer(r, layer, stats.head0_M);
}

/// After the last layer: a done task's theory quantities, every task's gradient norms (when the
/// job records them), and the task handed over.
void finish_task(const BundleJob& job, Running& r, const std::vector<int>& depths, Callbacks& calls) {
  const int L = job.max_depth;
  if (r.out.outcome == Outcome::done && !r.model_block()) {  // a model block's theory row stays NaN
    const auto& m = *r.model;
    r.out.theory = theory_row({r.C_M, r.S, m.lambda, m.collapse_rate, m.T, m.d, L, log_mu(r.out, 0), log_mu(r.out, L),
                               theorem_covers(m), r.row_deviation});
  }
  if (!depths.empty()) {
    calls.before_gradients();
    const AddTime add_time{r};
    r.out.grad_log10.assign(depths.size() * static_cast<std::size_t>(L), metrics::nan);
    r.out.grad_stderr = r.out.grad_log10;
    if (r.out.outcome == Outcome::done && !r.model_block()) {  // not for model blocks (the sweep's checks refuse them)
      const GradientNorms g = task_gradients(job, r.out.task, depths);
      for (std::size_t k = 0; k < depths.size(); ++k) {
        std::copy(g.log10_g[k].begin(), g.log10_g[k].end(), r.out.grad_log10.begin() + k * L);
        std::copy(g.stderr_log10[k].begin(), g.stderr_log10[k].end(), r.out.grad_stderr.begin() + k * L);
      }
    }
  }
  calls.done(std::move(r.out));
}

}  // namespace

void run_bundle(const BundleJob& job, const std::function<void(TaskOutput&&)>& on_done,
                const std::function<bool()>& cancelled) {
  if (job.tasks.empty()) return;
  if (job.concurrent && job.order.size() != job.tasks.size())
    throw Error("run_bundle: the order of " + std::to_string(job.tasks.size()) + " concurrent tasks has " +
                std::to_string(job.order.size()) + " entries");
  Callbacks calls(on_done, cancelled);
  MixerPool mixers;
  // body(i) for every run i: with several threads the tasks of a small-task unit run concurrently
  // (plan/threads.hpp), the threads taking them in job.order (while one builds a shared product,
  // the others run tasks that do not wait for it); else one after the other, each task's products
  // split over the threads.
  const auto for_each_run = [&](std::size_t count, const std::function<void(std::size_t)>& body) {
    if (job.concurrent)
      parallel::for_each(count, [&](std::size_t i) { body(job.order[i]); });
    else
      for (std::size_t i = 0; i < count; ++i) body(i);
  };
  const auto& m0 = *job.tasks.front().model;
  RandomSource random(job.seed, job.replicate, m0.T, m0.d);
  std::map<std::string, Matrix> inputs;  // one X_0 per input key, shared by the bundle
  std::vector<Running> runs = start_runs(job, random, inputs);
  record_layer0(job, runs);

  // Where a task's products X W are cached at `layer` (models::ProductCache): at layer 1 every task
  // still holds its bundle's X_0 bitwise and shares them with the others (a bundle of one task has
  // nobody to share with, and would only hold them longer).
  const auto product_cache = [&](const Running& r, int layer) {
    if (runs.size() == 1 || layer != 1 || r.model->input_scale != 1.0) return ProductCache{};
    return ProductCache{"input" + std::to_string(static_cast<int>(r.model->input))};
  };
  for (int layer = 1; layer <= job.max_depth; ++layer) {
    calls.begin_layer(
        static_cast<double>(std::count_if(runs.begin(), runs.end(), [](const Running& r) { return r.alive; })));
    for_each_run(runs.size(), [&](std::size_t i) {
      if (runs[i].alive) run_layer(job, runs[i], layer, random, product_cache(runs[i], layer), calls, mixers);
    });
    // The layer's weights, mixers and shared products are not needed any more: free them before
    // the next layer allocates its own (and X_0 after layer 1), which bounds the peak memory.
    random.release();
    if (layer == 1) inputs.clear();
    calls.end_layer();
  }
  mixers.clear();
  const std::vector<int>& depths = job.recording.gradient_depths;
  for_each_run(runs.size(), [&](std::size_t i) { finish_task(job, runs[i], depths, calls); });
}

namespace {
const JobTask& job_task(const BundleJob& job, std::uint64_t task) {
  const auto t = std::find_if(job.tasks.begin(), job.tasks.end(), [&](const JobTask& x) { return x.id == task; });
  if (t == job.tasks.end()) throw Error("task " + std::to_string(task) + " is not in this bundle");
  return *t;
}
}  // namespace

TaskTape record_task(const BundleJob& job, std::uint64_t task) {
  const auto& model = *job_task(job, task).model;
  if (model.block != config::Block::stack)
    throw Error("task " + std::to_string(task) + " has block = \"" +
                (model.block == config::Block::encoder ? "encoder" : "mamba2") +
                "\": its blocks have no taped forward pass (no gradients, no weights dump)");
  RandomSource random(job.seed, job.replicate, model.T, model.d);
  Matrix X0 = make_input(model, random);
  if (model.input_scale != 1.0)
    for (double& x : X0.values()) x *= model.input_scale;
  return record_task(model, random, X0, job.max_depth);
}

GradientNorms task_gradients(const BundleJob& job, std::uint64_t task, const std::vector<int>& depths) {
  const JobTask& t = job_task(job, task);
  const auto& model = *t.model;
  RandomSource random(job.seed, job.replicate, model.T, model.d);
  const TaskTape tape = record_task(job, task);
  return t.exact_gradients ? exact_gradient_norms(model, tape, depths)
                           : hutchinson_gradient_norms(model, tape, depths, job.recording.grad_probes, random);
}

TaskOutput run_task(const BundleJob& job) {
  if (job.tasks.size() != 1) throw Error("run_task: a job of " + std::to_string(job.tasks.size()) + " tasks, not one");
  TaskOutput result;
  run_bundle(job, [&](TaskOutput&& out) { result = std::move(out); });
  return result;
}

}  // namespace rcsweep::models
