// The encoder block's descriptor (models/block_kind.hpp): what the planner prices of a layer of
// the BERT-family block (encoder.hpp's apply_block) run by encoder_task.cpp. Per layer and task,
// with H heads, d_head = d / H and m the config's intermediate_size:
//   Q, K, V = X W + b              3 products T x d x d
//   logits Q_h K_h^T, A_h V_h      2 products T x T x d_head per head
//   softmax                        H T^2 exps
//   concat_h(A_h V_h) W_O + b_O    a product T x d x d
//   MLP (mlp = "model")            T x d x m and T x m x d, GELU on T x m
//   biases, skips, LayerNorms      entrywise passes over T x d
// and the weights, 4 d^2 + 2 d m + 7 d + m values, drawn or converted once per layer for the bundle.
#include <algorithm>
#include <cstddef>

#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "models/block_kind.hpp"
#include "models/encoder/model_cache.hpp"

namespace rcsweep::models {
namespace {

using config::ModelParams;

// Entrywise passes over T x d per sub-block: the bias, the skip, the LayerNorm's mean, variance,
// scaling and affine map.
constexpr double passes_per_sub_block = 5.0;

// The MLP's width m: the config's intermediate_size; 4 d (the family's ratio) for a sweep read back
// from a store without its model folder (merge, validation), whose prices order nothing that runs.
double intermediate(const ModelParams& m) {
  if (m.model_folder.empty()) return 4.0 * m.d;
  return encoder::open_model(m.model_folder, false)->shape.intermediate;
}
bool has_mlp(const ModelParams& m) { return m.mlp == config::Mlp::model; }

double flops(const ModelParams& m) {
  const double T = m.T, d = m.d, H = m.heads;
  double f = 6.0 * T * d * d          // Q, K, V
             + 4.0 * T * T * d        // logits and A V, every head
             + exp_flops * H * T * T  // softmax
             + 2.0 * T * d * d        // W_O
             + 2.0 * passes_per_sub_block * T * d;
  if (has_mlp(m)) {
    const double n = intermediate(m);
    f += 4.0 * T * d * n + exp_flops * T * n + 2.0 * passes_per_sub_block * T * d;
  }
  return f;
}

// A product of the T x k signal with a k x n weight matrix. The block's weights (4 d^2 + 2 d m values:
// 56 MB at bert-base) are out of cache, so each product reads its k n weights from memory once at
// least, through the BLAS's packing (a read and a copy into the packed buffer): at
// weight_read_passes passes at the pass rate (the packed products at small T of docs/BENCHMARKS.md
// "Encoder blocks (bert-base) against PyTorch", "Weight products at small T", against the pass
// rate of the same machine). At small T (fewer than about 64 tokens) that read, not the flops at the
// rate of a cube of the product's volume, bounds the product.
constexpr double weight_read_passes = 1.15;

double weight_product(const LayerPrices& p, double T, double n, double k) {
  return std::max(p.gemm(T, n, k), weight_read_passes * k * n / p.pass_rate());
}

double seconds(const ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads, dh = d / H;
  double s = 4.0 * weight_product(p, T, d, d) + H * (p.gemm(T, T, dh) + p.gemm(T, dh, T)) + H * T * T / p.exp_rate() +
             passes_per_sub_block * T * d / p.pass_rate() + p.mixer_metrics(T);
  if (has_mlp(m)) {
    const double n = intermediate(m);
    s += weight_product(p, T, n, d) + weight_product(p, T, d, n) + T * n / p.exp_rate() +
         passes_per_sub_block * T * d / p.pass_rate();
  }
  return s;
}

// One block's weights: W_Q, W_K, W_V, W_O, W_1, W_2, their biases and two LayerNorms.
double weight_values(const ModelParams& m) {
  const double d = m.d, n = intermediate(m);
  return 4.0 * d * d + 2.0 * d * n + 7.0 * d + n;
}

// Per layer: a layer's values; ALBERT's groups are built once for the bundle (encoder_task.cpp) and
// serve all its layers, so their values are spread over the depth.
BlockWeightValues weights(const ModelParams& m) {
  double values = weight_values(m);
  if (!m.model_folder.empty()) {
    const encoder::EncoderShape& shape = encoder::open_model(m.model_folder, false)->shape;
    if (shape.family == encoder::Family::albert && m.depth > 0)
      values *= std::min(1.0, static_cast<double>(shape.groups()) / m.depth);
  }
  if (m.init == config::Init::checkpoint) return {.converted = values};
  return {.drawn = values};
}

BlockMemory memory(const ModelParams& m) {
  const std::size_t T = m.T, d = m.d, H = m.heads, n = static_cast<std::size_t>(intermediate(m));
  BlockMemory b;
  b.weights = static_cast<std::size_t>(weight_values(m));
  b.input = T * d;
  b.state = T * d;
  // Q, K, V, the heads' context, the branch, its copy and A's (BlockOutputs), the MLP's output;
  // one head's T x T probabilities and the copy of head 0's, a head's A_h V_h; the MLP's hidden;
  // the mixer metrics' Lanczos bases or Gram matrix, the signal metrics' Gram matrix or what
  // linalg::singular_values holds.
  std::size_t sc = 8 * T * d + 2 * T * T + T * (d / H);
  if (has_mlp(m)) sc += T * n;
  sc += T >= metrics::mixer_lanczos_min_order ? 200 * T : T * T;
  sc += std::max(std::min(T, d) * std::min(T, d), linalg::singular_values_scratch(T, d));
  b.scratch = sc;
  return b;
}

std::size_t mapped_bytes(const ModelParams& m) {
  if (m.init != config::Init::checkpoint || m.model_folder.empty()) return 0;
  return encoder::open_model(m.model_folder, true)->folder->stored_bytes();
}

}  // namespace

extern const BlockKind encoder_block_kind{.block = config::Block::encoder,
                                          .name = "encoder",
                                          .layer_flops = flops,
                                          .task_seconds = seconds,
                                          .weights = weights,
                                          .memory = memory,
                                          .mapped_bytes = mapped_bytes};

}  // namespace rcsweep::models
