// Attention mixers: M = map(X W_Q (X W_K)^T / sqrt(d_qk)) per head, the map softmax (Mind the Gap
// eq. (1)), ReLU(S) / T or sigmoid(S - ln T) (Mind the Gap Fig. 1(c), (d)); the logits are
// models/layer.cpp's attention_logits. Each map has its reverse pass here.
#include "models/mixers/mixer_kind.hpp"

#include <cmath>
#include <span>
#include <utility>

#include "base/parallel.hpp"
#include "linalg/linalg.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models {
namespace {
// Per head: Q = X W_Q, K = X W_K, S = Q K^T, the entrywise map, M X, (M X) W_V; plus the weights.
// With qk_product: X P and (X P) X^T instead (P itself is the bundle's, not counted here).
double flops(const config::ModelParams& m) {
  const double T = m.T, d = m.d, dqk = m.d_qk, H = m.heads;
  return H * ((m.qk_product ? 2.0 * T * d * d + 2.0 * T * T * d : 4.0 * T * d * dqk + 2.0 * T * T * dqk) +
              exp_flops * T * T + 2.0 * T * T * d + 2.0 * T * d * d + normal_flops * (2.0 * d * dqk + d * d));
}

// M(X) alone: the logits (X P X^T with qk_product), the map, head 0's metrics.
double input_mixer_seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, dqk = m.d_qk, H = m.heads;
  return H * ((m.qk_product ? p.gemm(T, T, d) : 2 * p.gemm(T, dqk, d) + p.gemm(T, T, dqk)) + T * T / p.exp_rate()) +
         p.mixer_metrics(T);
}

double seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, dqk = m.d_qk, H = m.heads;
  double s = H * ((m.qk_product ? p.gemm(T, d, d) + p.gemm(T, T, d) : 2 * p.gemm(T, dqk, d) + p.gemm(T, T, dqk)) +
                  T * T / p.exp_rate() + p.gemm(T, d, d) + p.gemm(T, d, T));
  s += p.mixer_metrics(T);  // head 0's metrics, per task
  return s;
}

MixerMemory memory(const config::ModelParams&) { return {}; }  // its mixer is the task's (scratch of the planner)

MixerDump dump(const config::ModelParams& m) {  // W_Q, W_K
  const std::uint64_t d = static_cast<std::uint64_t>(m.d), dqk = static_cast<std::uint64_t>(m.d_qk);
  return {{{d, dqk}, {d, dqk}}, {}};
}
// Mind the Gap eq. (1): the logits, then the mixer's map.
Matrix matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
              const ProductCache& products, SsdFactors* factors, Matrix storage) {
  (void)factors;
  Matrix S = attention_logits(model, layer, head, X, random, products, std::move(storage));
  attention_map(model.mixer, S);
  return S;
}

// f(x) for every entry of S, rows in parts over the threads.
template <class F>
void map_entries(Matrix& S, F f) {
  parallel::for_rows(S.rows(), S.cols(), [&](std::size_t first, std::size_t end) {
    for (double& x : std::span<double>(S.data() + first * S.cols(), (end - first) * S.cols())) x = f(x);
  });
}

void relu_map(Matrix& S) {  // ReLU(S) / T (Mind the Gap Fig. 1(c))
  const double inv_t = 1.0 / static_cast<double>(S.rows());
  map_entries(S, [inv_t](double x) { return x > 0.0 ? x * inv_t : 0.0; });
}

void sigmoid_map(Matrix& S) {  // sigmoid(S - ln T) (Mind the Gap Fig. 1(d))
  const double shift = std::log(static_cast<double>(S.rows()));
  map_entries(S, [shift](double x) { return 1.0 / (1.0 + std::exp(shift - x)); });
}

// What the reverse pass needs: the query and key weights and products.
void record(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
            HeadTape& tape) {
  const auto d = static_cast<std::size_t>(model.d), dqk = static_cast<std::size_t>(model.d_qk);
  tape.W_Q = random.normal(layer, rng::Tensor::query, head, d, dqk);
  tape.W_K = random.normal(layer, rng::Tensor::key, head, d, dqk);
  tape.Q = linalg::matmul(X, tape.W_Q);
  tape.K = linalg::matmul(X, tape.W_K);
}

// S = c X W_Q W_K^T X^T, c = sigma_qk^2 / sqrt(d_qk) (Mind the Gap eq. (1)), given G_S:
// dS = c (dX W_Q K^T + Q W_K^T dX^T), so G_X += c (G_S K W_Q^T + G_S^T Q W_K^T).
void logits_vjp(const config::ModelParams& model, const HeadTape& head, const Matrix& G_S, Matrix& G_X) {
  using linalg::Op;
  const double c = model.sigma_qk * model.sigma_qk / std::sqrt(static_cast<double>(model.d_qk));
  linalg::gemm(c, linalg::matmul(G_S, head.K, Op::none, Op::none), Op::none, head.W_Q, Op::trans, 1.0, G_X);
  linalg::gemm(c, linalg::matmul(G_S, head.Q, Op::trans, Op::none), Op::none, head.W_K, Op::trans, 1.0, G_X);
}

// P = softmax(S): G_S = P * (G_P - rowsum(G_P * P)).
void softmax_vjp(const config::ModelParams& model, const HeadTape& head, const Matrix& X, const Matrix& P, Matrix& G_M,
                 Matrix& G_X) {
  const std::size_t T = X.rows();
  Matrix G_S(T, T);
  for (std::size_t i = 0; i < T; ++i) {
    double dot = 0.0;
    for (std::size_t j = 0; j < T; ++j) dot += G_M(i, j) * P(i, j);
    for (std::size_t j = 0; j < T; ++j) G_S(i, j) = P(i, j) * (G_M(i, j) - dot);
  }
  logits_vjp(model, head, G_S, G_X);
}

// P = ReLU(S) / T.
void relu_vjp(const config::ModelParams& model, const HeadTape& head, const Matrix& X, const Matrix& P, Matrix& G_M,
              Matrix& G_X) {
  const std::size_t T = X.rows();
  Matrix G_S(T, T);
  for (std::size_t i = 0; i < P.size(); ++i)
    G_S.data()[i] = P.data()[i] > 0.0 ? G_M.data()[i] / static_cast<double>(T) : 0.0;
  logits_vjp(model, head, G_S, G_X);
}

// P = sigmoid(S - ln T).
void sigmoid_vjp(const config::ModelParams& model, const HeadTape& head, const Matrix& X, const Matrix& P, Matrix& G_M,
                 Matrix& G_X) {
  const std::size_t T = X.rows();
  Matrix G_S(T, T);
  for (std::size_t i = 0; i < P.size(); ++i) G_S.data()[i] = G_M.data()[i] * P.data()[i] * (1.0 - P.data()[i]);
  logits_vjp(model, head, G_S, G_X);
}

// The three attention maps share everything but the map and its reverse.
constexpr MixerKind attention_kind(config::Mixer mixer, std::string_view name, decltype(MixerKind::map) map,
                                   decltype(MixerKind::vjp) vjp) {
  return {.mixer = mixer,
          .name = name,
          .layer_flops = flops,
          .task_seconds = seconds,
          .memory = memory,
          .input_mixer_seconds = input_mixer_seconds,
          .dump = dump,
          .matrix = matrix,
          .map = map,
          .record = record,
          .vjp = vjp};
}
}  // namespace

extern constinit const MixerKind softmax_kind = attention_kind(config::Mixer::softmax, "softmax", softmax_rows,
                                                               softmax_vjp);
extern constinit const MixerKind relu_kind = attention_kind(config::Mixer::relu, "relu", relu_map, relu_vjp);
extern constinit const MixerKind sigmoid_kind = attention_kind(config::Mixer::sigmoid, "sigmoid", sigmoid_map,
                                                               sigmoid_vjp);

}  // namespace rcsweep::models
