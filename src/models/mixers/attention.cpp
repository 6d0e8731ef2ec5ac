// Attention mixers: M = map(X W_Q (X W_K)^T / sqrt(d_qk)) per head, the map softmax (Mind the Gap
// eq. (1)), ReLU(S) / T or sigmoid(S - ln T) (Mind the Gap Fig. 1(c), (d)); models/layer.cpp.
#include "models/mixers/mixer_kind.hpp"

#include <utility>

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
}  // namespace

extern const MixerKind softmax_kind{
    config::Mixer::softmax, "softmax", false, flops, seconds, no_draws, memory, no_seconds,
    input_mixer_seconds,    dump,      matrix};
extern const MixerKind relu_kind{config::Mixer::relu, "relu", false, flops, seconds, no_draws, memory, no_seconds,
                                 input_mixer_seconds, dump,   matrix};
extern const MixerKind sigmoid_kind{
    config::Mixer::sigmoid, "sigmoid", false, flops, seconds, no_draws, memory, no_seconds,
    input_mixer_seconds,    dump,      matrix};

}  // namespace rcsweep::models
