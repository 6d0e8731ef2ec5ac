// The selective SSM (Mamba-2's SSD, scalar decay): M = L o (C B^T), B = X W_B, C = X W_C, L the
// decay mask, per head; input-dependent (models/layer.cpp).
#include "models/mixers/mixer_kind.hpp"

#include <utility>

#include "linalg/linalg.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models {
namespace {
// Per head: B = X W_B, C = X W_C, C B^T, the mask, M X (C_V = I); plus W_B, W_C.
double flops(const config::ModelParams& m) {
  const double T = m.T, d = m.d, H = m.heads, N = m.state_dim;
  return H * (4.0 * T * d * N + 2.0 * T * T * N + 2.0 * T * T * d + normal_flops * 2.0 * d * N);
}

double seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads, N = m.state_dim;
  return H * (2 * p.gemm(T, N, d) + p.gemm(T, T, N) + p.gemm(T, d, T) + T * T / p.pass_rate()) + p.mixer_metrics(T);
}

MixerDraws draws(const config::ModelParams& m) {
  const std::size_t d = m.d, N = m.state_dim;
  return {.ssm = 2 * d * N};
}

// Its mixer is the task's (the planner's scratch); B = X W_B and C = X W_C.
MixerMemory memory(const config::ModelParams& m) {
  const std::size_t T = m.T, N = m.state_dim;
  return {.scratch = 2 * T * N};
}

// M(X) alone: B, C, C B^T and the mask, head 0's metrics.
double input_mixer_seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads, N = m.state_dim;
  return H * (2 * p.gemm(T, N, d) + p.gemm(T, T, N) + T * T / p.pass_rate()) + p.mixer_metrics(T);
}

MixerDump dump(const config::ModelParams& m) {  // W_B, W_C, when drawn (bc_init = "gaussian")
  if (m.bc_init != config::BcInit::gaussian) return {};
  const std::uint64_t d = static_cast<std::uint64_t>(m.d), N = static_cast<std::uint64_t>(m.state_dim);
  return {{{d, N}, {d, N}}, {}};
}
// Selective SSM (Mamba-2 / SSD, lambda-skip §4.2.1, App. A.3): M = L(alpha) ⊙ (C B^T),
// B = X W_B, C = X W_C (T x N); bc_init identity: W_B = W_C = I (N = d).
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)products;
  const auto T = static_cast<std::size_t>(model.T), d = static_cast<std::size_t>(model.d);
  Matrix M = std::move(storage);
  M.resize(T, T);  // every entry written below (beta = 0)
  if (model.bc_init == config::BcInit::identity) {
    linalg::gemm(1.0, X, linalg::Op::none, X, linalg::Op::trans, 0.0, M);
  } else {
    const auto N = static_cast<std::size_t>(model.state_dim);
    Matrix B = linalg::matmul(X, ssm_weight(layer, rng::Tensor::ssm_b, head, d, N, model.state_dim, random));
    Matrix C = linalg::matmul(X, ssm_weight(layer, rng::Tensor::ssm_c, head, d, N, model.state_dim, random));
    linalg::gemm(1.0, C, linalg::Op::none, B, linalg::Op::trans, 0.0, M);
    if (factors) *factors = {std::move(B), std::move(C)};
  }
  apply_decay_mask(model.alpha, 1.0, M);
  return M;
}

// B and C of Gaussian weights are factors of M: its products are scans (ssd_operator).
bool has_factors(const config::ModelParams& m) { return m.bc_init == config::BcInit::gaussian; }
linalg::LinearOperator factors_operator(const config::ModelParams& m, const SsdFactors& factors) {
  return ssd_operator(factors, m.alpha, m.gap_fix == config::GapFix::perp);
}

// What the reverse pass needs: W_B, W_C and B = X W_B, C = X W_C, when drawn.
void record(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
            HeadTape& tape) {
  if (model.bc_init != config::BcInit::gaussian) return;
  const auto d = static_cast<std::size_t>(model.d), N = static_cast<std::size_t>(model.state_dim);
  tape.W_B = ssm_weight(layer, rng::Tensor::ssm_b, head, d, N, model.state_dim, random);
  tape.W_C = ssm_weight(layer, rng::Tensor::ssm_c, head, d, N, model.state_dim, random);
  tape.B = linalg::matmul(X, tape.W_B);
  tape.C = linalg::matmul(X, tape.W_C);
}

// M = L(alpha) * (C B^T): the mask is linear (G <- L * G); then B = C = X (bc_init identity):
// G_X += (G + G^T) X, else C = X W_C, B = X W_B: G_C = G B, G_B = G^T C.
void vjp(const config::ModelParams& model, const HeadTape& head, const Matrix& X, const Matrix& P, Matrix& G_M,
         Matrix& G_X) {
  using linalg::Op;
  (void)P;
  apply_decay_mask(model.alpha, 1.0, G_M);
  if (model.bc_init == config::BcInit::identity) {
    linalg::gemm(1.0, G_M, Op::none, X, Op::none, 1.0, G_X);
    linalg::gemm(1.0, G_M, Op::trans, X, Op::none, 1.0, G_X);
  } else {
    linalg::gemm(1.0, linalg::matmul(G_M, head.B, Op::none, Op::none), Op::none, head.W_C, Op::trans, 1.0, G_X);
    linalg::gemm(1.0, linalg::matmul(G_M, head.C, Op::trans, Op::none), Op::none, head.W_B, Op::trans, 1.0, G_X);
  }
}
}  // namespace

extern const MixerKind ssd_kind{.mixer = config::Mixer::ssd,
                                .name = "ssd",
                                .layer_flops = flops,
                                .task_seconds = seconds,
                                .draws = draws,
                                .memory = memory,
                                .input_mixer_seconds = input_mixer_seconds,
                                .dump = dump,
                                .matrix = matrix,
                                .has_factors = has_factors,
                                .factors_operator = factors_operator,
                                .record = record,
                                .vjp = vjp};

}  // namespace rcsweep::models
