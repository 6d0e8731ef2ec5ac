// The Mamba-2 block's descriptor (models/block_kind.hpp): what the planner prices of a layer of the
// block (mamba2.hpp's apply_block, the chunked SSD) run by mamba2_task.cpp. Per layer and task, with
// E = expand d, H = E / P heads of P channels, G groups of N state entries, K taps, conv width
// E + 2 G N, d_in_proj = 2 E + 2 G N + H and chunks of Q tokens (the last one shorter):
//   u = RMSNorm(X)                     entrywise passes over T x d
//   [z | xBC | dt] = u W_in            a product T x d x d_in_proj
//   conv1d + SiLU on xBC               2 K multiply-adds and a SiLU per entry of T x conv width
//   Delta = softplus(dt + dt_bias)     T H exps
//   the SSD, per chunk of q tokens     C B^T per group (2 q^2 N), the decays exp(segsum) per head
//                                      (q (q + 1) / 2 exps), the masked products per head
//                                      (2 q^2 P), the state updates per head (4 q P N: the
//                                      chunk's state B^T x and its read C S)
//   + D x, y * SiLU(z), gated RMSNorm  entrywise passes over T x E, T E exps
//   y W_out                            a product T x E x d
//   skip                               a pass over T x d
//   head 0's mixer matrix              C B^T of its group (2 T^2 N) and T (T + 1) / 2 decays
// and the weights, d d_in_proj + E d + K conv width + 3 H + E + d values (+ biases), drawn or
// converted once per layer for the bundle.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "models/block_kind.hpp"
#include "models/mamba2/model_cache.hpp"

namespace rcsweep::models {
namespace {

using config::ModelParams;
using mamba2::Mamba2Shape;

// Entrywise passes: the pre-norm's square, sum and scaling (3 over T x d), the skip (1 over T x d);
// over T x E: D x, the gate's product, the gated norm's square, sum and scaling (5).
constexpr double passes_per_d = 4.0, passes_per_E = 5.0;

// The block's shape: the folder's config.json; for a sweep read back from a store without its model
// folder (merge, validation), Mamba2's defaults at the sweep's d (whose prices order nothing that
// runs).
Mamba2Shape shape_of(const ModelParams& m) {
  if (!m.model_folder.empty()) return mamba2::open_model(m.model_folder, false)->shape;
  Mamba2Shape s;
  s.d_model = std::max(m.d, 1);
  s.layers = std::max(m.depth, 1);
  if (s.heads() < 1) s.headdim = s.d_inner();
  return s;
}

// The chunks of the chunked SSD: `full` of Q tokens and one of `rest` (0: none).
struct Chunks {
  double Q, full, rest;
};
Chunks chunks_of(const ModelParams& m, const Mamba2Shape& s) {
  const int Q = std::max(1, std::min(s.chunk_size, m.T));
  return {static_cast<double>(Q), static_cast<double>(m.T / Q), static_cast<double>(m.T % Q)};
}

double ssd_chunk_flops(const Mamba2Shape& s, double q) {
  const double H = s.heads(), G = s.ngroups, P = s.headdim, N = s.d_state;
  return G * 2.0 * q * q * N + H * exp_flops * q * (q + 1.0) / 2.0 + H * 2.0 * q * q * P + H * 4.0 * q * P * N;
}

double flops(const ModelParams& m) {
  const Mamba2Shape s = shape_of(m);
  const double T = m.T, d = m.d, E = s.d_inner(), H = s.heads(), N = s.d_state, K = s.d_conv;
  const double conv = s.conv_dim(), in = s.d_in_proj();
  const Chunks c = chunks_of(m, s);
  double f = 2.0 * T * d * in                             // in_proj
             + 2.0 * K * T * conv + exp_flops * T * conv  // conv1d, SiLU
             + exp_flops * T * H                          // softplus
             + c.full * ssd_chunk_flops(s, c.Q) + (c.rest > 0 ? ssd_chunk_flops(s, c.rest) : 0.0) +
             exp_flops * T * E                                     // SiLU(z)
             + passes_per_E * T * E + passes_per_d * T * d         // D x, gate, gated norm; pre-norm, skip
             + 2.0 * T * E * d                                     // out_proj
             + 2.0 * T * T * N + exp_flops * T * (T + 1.0) / 2.0;  // head 0's mixer matrix
  return f;
}

// A product of the T x k signal with a k x n weight matrix: at least the read of its k n weights
// (out of cache) at the encoder's weight_read_passes (encoder_kind.cpp, docs/BENCHMARKS.md).
constexpr double weight_read_passes = 1.15;

double weight_product(const LayerPrices& p, double T, double n, double k) {
  return std::max(p.gemm(T, n, k), weight_read_passes * k * n / p.pass_rate());
}

double ssd_chunk_seconds(const Mamba2Shape& s, const LayerPrices& p, double q) {
  const double H = s.heads(), G = s.ngroups, P = s.headdim, N = s.d_state;
  return G * p.gemm(q, q, N) + H * (q * (q + 1.0) / 2.0 / p.exp_rate() + p.gemm(q, P, q) + 2.0 * p.gemm(P, N, q));
}

double seconds(const ModelParams& m, const LayerPrices& p) {
  const Mamba2Shape s = shape_of(m);
  const double T = m.T, d = m.d, E = s.d_inner(), H = s.heads(), N = s.d_state, K = s.d_conv;
  const double conv = s.conv_dim(), in = s.d_in_proj();
  const Chunks c = chunks_of(m, s);
  return weight_product(p, T, in, d) + weight_product(p, T, d, E)  // in_proj, out_proj
         + (K * T * conv + passes_per_E * T * E + passes_per_d * T * d) / p.pass_rate() +
         (T * conv + T * H + T * E) / p.exp_rate()  // SiLU on xBC, softplus, SiLU(z)
         + c.full * ssd_chunk_seconds(s, p, c.Q) + (c.rest > 0 ? ssd_chunk_seconds(s, p, c.rest) : 0.0) +
         p.gemm(T, T, N) + T * (T + 1.0) / 2.0 / p.exp_rate()  // head 0's mixer matrix
         + p.mixer_metrics(T);
}

// One block's weights: the pre-norm, in_proj, conv1d, dt_bias, A_log, D, the gated norm, out_proj
// and the biases the shape has.
double weight_values(const Mamba2Shape& s) {
  const double d = s.d_model, E = s.d_inner(), H = s.heads(), conv = s.conv_dim(), in = s.d_in_proj();
  double v = d + d * in + s.d_conv * conv + 2.0 * H + (s.D_has_hdim ? E : H) + E * d;
  if (s.rmsnorm) v += E;
  if (s.bias) v += in + d;
  if (s.conv_bias) v += conv;
  return v;
}

BlockWeightValues weights(const ModelParams& m) {
  const double values = weight_values(shape_of(m));
  if (m.init == config::Init::checkpoint) return {.converted = values};
  return {.drawn = values};
}

BlockMemory memory(const ModelParams& m) {
  const Mamba2Shape s = shape_of(m);
  const std::size_t T = m.T, d = m.d, E = s.d_inner(), H = s.heads(), GN = s.ngroups * s.d_state;
  const std::size_t conv = s.conv_dim(), in = s.d_in_proj();
  const auto Q = static_cast<std::size_t>(chunks_of(m, s).Q);
  BlockMemory b;
  b.weights = static_cast<std::size_t>(weight_values(s));
  b.input = T * d;
  b.state = T * d;
  // u, the branch and its copy (BlockOutputs); in_proj's output, the convolved xBC; z, x, B, C,
  // Delta (SsdInputs); y and the gated y; per chunk a head's decays, C B^T and the state; head 0's
  // T x T mixer matrix; the mixer metrics' Lanczos bases or Gram matrix, the signal metrics' Gram
  // matrix or what linalg::singular_values holds.
  std::size_t sc = 3 * T * d + T * in + T * conv + 2 * T * E + 2 * T * GN + T * H + 2 * T * E;
  sc += 2 * Q * Q + H * s.headdim * s.d_state + T * T;
  sc += T >= metrics::mixer_lanczos_min_order ? 200 * T : T * T;
  sc += std::max(std::min(T, d) * std::min(T, d), linalg::singular_values_scratch(T, d));
  b.scratch = sc;
  return b;
}

std::size_t mapped_bytes(const ModelParams& m) {
  if (m.init != config::Init::checkpoint || m.model_folder.empty()) return 0;
  return mamba2::open_model(m.model_folder, true)->folder->stored_bytes();
}

}  // namespace

extern const BlockKind mamba2_block_kind{.block = config::Block::mamba2,
                                         .name = "mamba2",
                                         .layer_flops = flops,
                                         .task_seconds = seconds,
                                         .weights = weights,
                                         .memory = memory,
                                         .mapped_bytes = mapped_bytes};

}  // namespace rcsweep::models
