// The identity mixer: M = I (a stack of value maps and skips only; with a gap fix, the fixed M).
#include "models/mixers/mixer_kind.hpp"

#include "linalg/linalg.hpp"

namespace rcsweep::models {
namespace {
// Per head X W_V; with a gap fix M is no longer I and M X is a product.
double seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads;
  return H * p.gemm(T, d, d) + (m.gap_fix == config::GapFix::none ? 0.0 : H * p.gemm(T, d, T));
}

Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)layer, (void)head, (void)X, (void)random, (void)products, (void)factors, (void)storage;
  return Matrix::identity(static_cast<std::size_t>(model.T));
}

// Without a gap fix M = I: acc = beta acc + alpha V without a T x T product.
void mix(const config::ModelParams& model, const Matrix& M, ConstMatrixView V, double alpha, double beta, Matrix& acc) {
  if (model.gap_fix != config::GapFix::none) {
    linalg::gemm(alpha, M, linalg::Op::none, V, linalg::Op::none, beta, acc);
    return;
  }
  const double* v = V.data;  // contiguous: a full-width row block
  double* y = acc.data();
  for (std::size_t i = 0; i < acc.size(); ++i) y[i] = beta * y[i] + alpha * v[i];
}
}  // namespace

extern const MixerKind identity_kind{
    .mixer = config::Mixer::identity,
    .name = "identity",
    .layer_flops = value_map_flops,  // per head X W_V and the value weights (M X = X is not computed)
    .task_seconds = seconds,
    .memory = fixed_mixer_memory,
    .matrix = matrix,
    .mix = mix};

}  // namespace rcsweep::models
