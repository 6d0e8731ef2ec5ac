// The uniform mixer: M = (1/T) 1 1^T, every token the mean of all (the collapsed limit).
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {
namespace {
// Per head: X W_V and the value weights.
double flops(const config::ModelParams& m) { return value_map_flops(m); }

// Per head M X and (M X) W_V (M is the bundle's).
double seconds(const config::ModelParams& m, const LayerPrices& p) { return given_mixer_seconds(m, p); }

MixerMemory memory(const config::ModelParams&) { return {.fixed_mixer = true}; }
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)layer, (void)head, (void)X, (void)random, (void)products, (void)factors, (void)storage;
  const auto T = static_cast<std::size_t>(model.T);
  return Matrix(T, T, 1.0 / static_cast<double>(T));
}
}  // namespace

extern const MixerKind uniform_kind{.mixer = config::Mixer::uniform,
                                    .name = "uniform",
                                    .layer_flops = flops,
                                    .task_seconds = seconds,
                                    .memory = memory,
                                    .matrix = matrix};

}  // namespace rcsweep::models
