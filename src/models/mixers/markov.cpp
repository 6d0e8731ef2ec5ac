// The Markov mixer: a row-stochastic M = rownormalise(exp(sigma_A G)) of Gaussian draws G per head
// and layer, input-independent (models/layer.cpp markov_rows).
#include "models/mixers/mixer_kind.hpp"

#include "rng/philox.hpp"

namespace rcsweep::models {
namespace {
// Per head: the T x T draws and their map, M X, (M X) W_V; plus the value weights.
double flops(const config::ModelParams& m) {
  const double T = m.T, d = m.d, H = m.heads;
  return H * (normal_flops * T * T + exp_flops * T * T + 2.0 * T * T * d + 2.0 * T * d * d + normal_flops * d * d);
}

MixerDraws draws(const config::ModelParams& m) {
  const std::size_t T = m.T;
  return {.square = T * T};
}

Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)X, (void)products, (void)factors, (void)storage;
  const auto T = static_cast<std::size_t>(model.T);
  Matrix M = random.normal(layer, rng::Tensor::markov, head, T, T);
  markov_rows(model.sigma_A, M);
  return M;
}
}  // namespace

extern const MixerKind markov_kind{.mixer = config::Mixer::markov,
                                   .name = "markov",
                                   .layer_flops = flops,
                                   .task_seconds = given_mixer_seconds,  // the draws and their map are the bundle's
                                   .draws = draws,
                                   .memory = fixed_mixer_memory,
                                   .matrix = matrix};

}  // namespace rcsweep::models
