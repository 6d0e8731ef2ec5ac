// The uniform mixer: M = (1/T) 1 1^T, every token the mean of all (the collapsed limit).
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {
namespace {
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)layer, (void)head, (void)X, (void)random, (void)products, (void)factors, (void)storage;
  const auto T = static_cast<std::size_t>(model.T);
  return Matrix(T, T, 1.0 / static_cast<double>(T));
}
}  // namespace

extern const MixerKind uniform_kind{.mixer = config::Mixer::uniform,
                                    .name = "uniform",
                                    .layer_flops = value_map_flops,       // per head X W_V and the value weights
                                    .task_seconds = given_mixer_seconds,  // M is the bundle's
                                    .memory = fixed_mixer_memory,
                                    .matrix = matrix};

}  // namespace rcsweep::models
