// S4D: one diagonal SSM per channel, a causal convolution of each channel with its kernel; no
// single M (models/s4d.hpp).
#include "models/mixers/mixer_kind.hpp"

#include "base/error.hpp"

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
}  // namespace

extern const MixerKind s4d_kind{config::Mixer::s4d, "s4d",      true, flops, seconds, draws, memory,
                                shared_seconds,     no_seconds, dump, matrix};

}  // namespace rcsweep::models
