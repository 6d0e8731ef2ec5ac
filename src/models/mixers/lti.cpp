// The linear time-invariant SSM: M_ij = C A^(i-j) B per head, input-independent (models/layer.cpp).
#include "models/mixers/mixer_kind.hpp"

#include "rng/philox.hpp"

namespace rcsweep::models {
namespace {
// Per head: M X; plus B and C.
double flops(const config::ModelParams& m) {
  const double T = m.T, d = m.d, H = m.heads, N = m.state_dim;
  return H * (2.0 * T * T * d + normal_flops * 2.0 * N);
}

// Per head M X (M is the bundle's).
double seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads;
  return H * p.gemm(T, d, T);
}

MixerDraws draws(const config::ModelParams& m) {
  const std::size_t d = m.d, N = m.state_dim;
  return {.ssm = 2 * d * N};
}

// LTI SSM with scalar gain g = c . b (lambda-skip App. A.8, A.10): M = g L(alpha).
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)X, (void)products, (void)factors, (void)storage;
  const auto T = static_cast<std::size_t>(model.T);
  double g = 1.0;
  if (model.bc_init != config::BcInit::identity) {
    const auto N = static_cast<std::size_t>(model.state_dim);
    const Matrix b = ssm_weight(layer, rng::Tensor::ssm_b, head, 1, N, model.state_dim, random);
    const Matrix c = ssm_weight(layer, rng::Tensor::ssm_c, head, 1, N, model.state_dim, random);
    g = 0.0;
    for (std::size_t n = 0; n < N; ++n) g += b(0, n) * c(0, n);
  }
  Matrix M(T, T, 1.0);
  apply_decay_mask(model.alpha, g, M);
  return M;
}
}  // namespace

extern const MixerKind lti_kind{.mixer = config::Mixer::lti,
                                .name = "lti",
                                .layer_flops = flops,
                                .task_seconds = seconds,
                                .draws = draws,
                                .memory = fixed_mixer_memory,
                                .matrix = matrix};

}  // namespace rcsweep::models
