// The identity mixer: M = I (a stack of value maps and skips only; with a gap fix, the fixed M).
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {
namespace {
// Per head: X W_V and the value weights (M X = X is not computed).
double flops(const config::ModelParams& m) { return value_map_flops(m); }

// Per head X W_V; with a gap fix M is no longer I and M X is a product.
double seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads;
  return H * p.gemm(T, d, d) + (m.gap_fix == config::GapFix::none ? 0.0 : H * p.gemm(T, d, T));
}

MixerMemory memory(const config::ModelParams&) { return {.fixed_mixer = true}; }
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)layer, (void)head, (void)X, (void)random, (void)products, (void)factors, (void)storage;
  return Matrix::identity(static_cast<std::size_t>(model.T));
}
}  // namespace

extern const MixerKind identity_kind{config::Mixer::identity,
                                     "identity",
                                     false,
                                     flops,
                                     seconds,
                                     no_draws,
                                     memory,
                                     no_seconds,
                                     no_seconds,
                                     no_dump,
                                     matrix};

}  // namespace rcsweep::models
