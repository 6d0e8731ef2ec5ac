// The matrix mixer: the [model] mixer_matrix, the same T x T M at every layer and head.
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {
namespace {
// The [model] mixer_matrix, the same at every layer and head.
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)layer, (void)head, (void)X, (void)random, (void)products, (void)factors, (void)storage;
  const auto T = static_cast<std::size_t>(model.T);
  return given_matrix(model.mixer_matrix.get(), T, T, "mixer = \"matrix\" (mixer_matrix)");
}
}  // namespace

extern const MixerKind matrix_kind{.mixer = config::Mixer::matrix,
                                   .name = "matrix",
                                   .layer_flops = value_map_flops,       // per head X W_V and the value weights
                                   .task_seconds = given_mixer_seconds,  // M is the bundle's
                                   .memory = fixed_mixer_memory,
                                   .matrix = matrix};

}  // namespace rcsweep::models
