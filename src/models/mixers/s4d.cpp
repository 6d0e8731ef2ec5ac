// S4D: one diagonal SSM per channel, a causal convolution of each channel with its kernel; no
// single M (models/s4d.hpp).
#include "models/mixers/mixer_kind.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "base/error.hpp"
#include "models/s4d.hpp"

namespace rcsweep::models {
namespace {
// Per channel: the kernel (T N), the causal convolution (T^2); plus B and C.
double flops(const config::ModelParams& m) {
  const double T = m.T, d = m.d, N = m.state_dim;
  return 2.0 * T * N * d + 2.0 * T * T * d + normal_flops * 2.0 * d * N;
}

// The causal convolution: T (T + 1) / 2 multiply-adds per channel (the kernels are the bundle's).
double seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d;
  return T * (T + 1) / 2 * d / p.conv_rate();
}

MixerDraws draws(const config::ModelParams& m) {
  const std::size_t d = m.d, N = m.state_dim;
  return {.ssm = 2 * d * N};
}

// The kernels, T per channel; no cached M (the convolution applies them).
MixerMemory memory(const config::ModelParams& m) {
  const std::size_t T = m.T, d = m.d;
  return {.kernels = T * d};
}

// The kernels: T d N multiply-adds, vectorised across channels like the convolution but with a
// dependent recurrence per lane: about half its rate (docs/BENCHMARKS.md "S4D causal convolution").
double shared_seconds(const config::ModelParams& m, const LayerPrices& p) {
  return static_cast<double>(m.T) * m.d * m.state_dim / (0.5 * p.conv_rate());
}

MixerDump dump(const config::ModelParams& m) {  // the kernels
  return {{}, {{static_cast<std::uint64_t>(m.T), static_cast<std::uint64_t>(m.d)}}};
}
// One mixer per channel: there is no single M (models/s4d.hpp s4d_kernels).
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)model, (void)layer, (void)head, (void)X, (void)random, (void)products, (void)factors, (void)storage;
  throw Error("s4d has no single mixer matrix");
}

// One causal convolution per channel with the bundle's kernels, C_V = I; no M-metrics (NaN).
void apply(const config::ModelParams& model, int layer, const Matrix& X, double beta, Matrix& acc, RandomSource& random,
           LayerTape* tape, LayerStats* stats) {
  const std::size_t d = X.cols();
  char params[128];
  std::snprintf(params, sizeof params, "s4d_kernels:%d", model.state_dim);
  const Matrix& K = random.derived<Matrix>(layer, params, 0, [&] { return s4d_kernels(model, layer, random); });
  s4d_mix(K, X, model.skip_scale, beta, acc);
  if (tape) {
    tape->s4d_K = K;
    tape->heads[0].W_V = Matrix::identity(d);
    tape->heads[0].V = X;
  }
  if (stats) {
    stats->head0 = metrics::MixerMetrics{};
    stats->max_m_fro = std::max(stats->max_m_fro, random.derived<double>(layer, std::string(params) + ":fro", 0,
                                                                         [&] { return s4d_max_fro(K); }));
    stats->max_cv_fro = std::max(stats->max_cv_fro, std::abs(model.skip_scale) * std::sqrt(static_cast<double>(d)));
  }
}

// The transposed convolution: out[i, c] = sum_{j >= i} K[j - i, c] G[j, c].
Matrix apply_transpose(const LayerTape& tape, const Matrix& G) { return s4d_mix_transpose(tape.s4d_K, G); }
}  // namespace

extern const MixerKind s4d_kind{.mixer = config::Mixer::s4d,
                                .name = "s4d",
                                .per_channel = true,
                                .layer_flops = flops,
                                .task_seconds = seconds,
                                .draws = draws,
                                .memory = memory,
                                .shared_seconds = shared_seconds,
                                .dump = dump,
                                .matrix = matrix,
                                .apply = apply,
                                .apply_transpose = apply_transpose};

}  // namespace rcsweep::models
