// The published initialisation of the Mamba-2 block (mamba2.hpp, RandomWeights): MambaLMHeadModel's
// _init_weights with Mamba2.__init__'s own draws (mamba_ssm.modules.mamba2).
//
// Streams. Every tensor is one Philox stream (rng/philox.hpp) with the key
//   {seed, replicate = draw, T = 0, d = d_model, layer, tensor, head = 0},
// layer = the layer (0-based) for a block's tensors and 0 for the embedding (its Tensor tag differs
// from every block tensor's, so no two tensors share a stream), tensor = its rng::Tensor tag
// (mamba2_embedding .. mamba2_out_proj). The stream is laid out on rcsweep's layout, row-major,
// with Linear weights stored in x out (nn.Linear's [out, in] transposed) and the convolution K x
// conv_dim: entry (i, j) of a rows x cols tensor is stream element i * cols + j. The embedding is a
// normal stream times 0.02, so a row (a token id's embedding) is drawn without the rows before it;
// every other drawn tensor is a uniform stream u in (0, 1), mapped to U(-b, b) as b (2u - 1), to
// [low, high) as low + u (high - low). No draw depends on T, the tokens, the ablations, the depth run
// or the other tensors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "models/mamba2/mamba2.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models::mamba2 {
namespace {

using rng::Tensor;

constexpr double embedding_std = 0.02;        // _init_weights' initializer_range
constexpr std::uint32_t embedding_layer = 0;  // the key's layer for the embedding

void check_shape(const Mamba2Shape& s) {
  const auto positive = [](const char* key, int v) {
    if (v <= 0) throw Error(std::string("RandomWeights: ") + key + " = " + std::to_string(v) + " must be positive");
  };
  positive("d_model", s.d_model);
  positive("n_layer", s.layers);
  positive("vocab_size", s.vocab);
  positive("d_state", s.d_state);
  positive("d_conv", s.d_conv);
  positive("expand", s.expand);
  positive("headdim", s.headdim);
  positive("ngroups", s.ngroups);
  if (s.vocab_rows < s.vocab)
    throw Error("RandomWeights: the embedding's " + std::to_string(s.vocab_rows) + " rows are fewer than vocab_size " +
                std::to_string(s.vocab));
  // Every width an int (the shape's accessors compute in int).
  const std::int64_t E = std::int64_t{s.expand} * s.d_model;
  const std::int64_t in_proj = 2 * E + 2 * std::int64_t{s.ngroups} * s.d_state + E / s.headdim;
  if (in_proj > std::numeric_limits<int>::max())
    throw Error("RandomWeights: in_proj's " + std::to_string(in_proj) + " outputs do not fit an int");
  if (E % s.headdim != 0)
    throw Error("RandomWeights: headdim " + std::to_string(s.headdim) + " does not divide d_inner " +
                std::to_string(E));
  if (s.heads() % s.ngroups != 0)
    throw Error("RandomWeights: ngroups " + std::to_string(s.ngroups) + " does not divide the " +
                std::to_string(s.heads()) + " heads");
  const auto finite = [](double v) { return std::isfinite(v); };
  if (!(finite(s.A_init_low) && finite(s.A_init_high) && 0 < s.A_init_low && s.A_init_low <= s.A_init_high))
    throw Error("RandomWeights: A_init_range [" + std::to_string(s.A_init_low) + ", " + std::to_string(s.A_init_high) +
                "] needs 0 < low <= high");
  if (!(finite(s.dt_min) && finite(s.dt_max) && 0 < s.dt_min && s.dt_min <= s.dt_max))
    throw Error("RandomWeights: dt_min " + std::to_string(s.dt_min) + ", dt_max " + std::to_string(s.dt_max) +
                " need 0 < dt_min <= dt_max");
  if (!(finite(s.dt_init_floor) && s.dt_init_floor >= 0))
    throw Error("RandomWeights: dt_init_floor " + std::to_string(s.dt_init_floor) + " must be finite and >= 0");
  if (!(finite(s.conv_init) && s.conv_init >= 0))
    throw Error("RandomWeights: conv_init " + std::to_string(s.conv_init) + " must be finite and >= 0 (0: unset)");
}

// `rows` x `cols` uniforms of `key` mapped to U(-bound, bound).
Matrix uniform_matrix(const rng::StreamKey& key, std::size_t rows, std::size_t cols, double bound) {
  Matrix M(rows, cols, Matrix::uninitialized);
  rng::fill_uniform(key, M.values());
  for (double& x : M.values()) x = bound * (2.0 * x - 1.0);
  return M;
}

std::vector<double> uniforms(const rng::StreamKey& key, std::size_t n) {
  std::vector<double> v(n);
  rng::fill_uniform(key, v);
  return v;
}

}  // namespace

RandomWeights::RandomWeights(Mamba2Shape shape, std::uint64_t seed, std::uint32_t draw)
    : shape_(std::move(shape)), seed_(seed), draw_(draw) {
  check_shape(shape_);
}

Matrix RandomWeights::embedding(std::span<const std::int64_t> ids) const {
  const auto d = static_cast<std::size_t>(shape_.d_model);
  const rng::StreamKey key{.seed = seed_,
                           .replicate = draw_,
                           .T = 0,
                           .d = static_cast<std::uint32_t>(shape_.d_model),
                           .layer = embedding_layer,
                           .tensor = Tensor::mamba2_embedding,
                           .head = 0};
  Matrix X(ids.size(), d, Matrix::uninitialized);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int64_t id = ids[k];
    if (id < 0 || id >= shape_.vocab_rows)
      throw Error("RandomWeights: token id " + std::to_string(id) + " is outside the embedding's " +
                  std::to_string(shape_.vocab_rows) + " rows");
    const auto row = X.row(k);
    rng::fill_normal(key, static_cast<std::uint64_t>(id) * d, row);
    for (double& x : row) x *= embedding_std;
  }
  return X;
}

std::vector<double> RandomWeights::final_norm() const {
  return std::vector<double>(static_cast<std::size_t>(shape_.d_model), 1.0);
}

LayerWeights RandomWeights::layer(int layer) const {
  if (layer < 0) throw Error("RandomWeights: layer " + std::to_string(layer) + " is negative");
  const Mamba2Shape& s = shape_;
  const auto d = static_cast<std::size_t>(s.d_model);
  const auto E = static_cast<std::size_t>(s.d_inner());
  const auto H = static_cast<std::size_t>(s.heads());
  const auto K = static_cast<std::size_t>(s.d_conv);
  const auto C = static_cast<std::size_t>(s.conv_dim());
  const auto key = [&](Tensor tensor) {
    return rng::StreamKey{.seed = seed_,
                          .replicate = draw_,
                          .T = 0,
                          .d = static_cast<std::uint32_t>(s.d_model),
                          .layer = static_cast<std::uint32_t>(layer),
                          .tensor = tensor,
                          .head = 0};
  };
  const double conv_bound = 1.0 / std::sqrt(static_cast<double>(K));  // nn.Conv1d's default, fan_in = K

  LayerWeights w;
  w.norm.assign(d, 1.0);
  // nn.Linear's default kaiming_uniform(a = sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  w.W_in = uniform_matrix(key(Tensor::mamba2_in_proj), d, static_cast<std::size_t>(s.d_in_proj()),
                          1.0 / std::sqrt(static_cast<double>(d)));
  if (s.bias) w.b_in.assign(static_cast<std::size_t>(s.d_in_proj()), 0.0);
  w.conv = uniform_matrix(key(Tensor::mamba2_conv), K, C, s.conv_init > 0 ? s.conv_init : conv_bound);
  if (s.conv_bias) {
    w.conv_bias = uniforms(key(Tensor::mamba2_conv_bias), C);
    for (double& x : w.conv_bias) x = conv_bound * (2.0 * x - 1.0);
  }
  // dt = max(exp(U(log dt_min, log dt_max)), dt_init_floor); dt_bias its inverse softplus.
  w.dt_bias = uniforms(key(Tensor::mamba2_dt), H);
  const double log_min = std::log(s.dt_min), log_max = std::log(s.dt_max);
  for (double& x : w.dt_bias) {
    const double dt = std::max(std::exp(x * (log_max - log_min) + log_min), s.dt_init_floor);
    x = dt + std::log(-std::expm1(-dt));
  }
  // A_log = log U(A_init_range).
  w.A_log = uniforms(key(Tensor::mamba2_A), H);
  for (double& x : w.A_log) x = std::log(s.A_init_low + x * (s.A_init_high - s.A_init_low));
  w.D.assign(s.D_has_hdim ? E : H, 1.0);
  if (s.rmsnorm) w.gated_norm.assign(E, 1.0);
  // rescale_prenorm_residual: out_proj divided by sqrt(n_layer) (one residual per layer).
  w.W_out = uniform_matrix(key(Tensor::mamba2_out_proj), E, d,
                           1.0 / std::sqrt(static_cast<double>(E)) / std::sqrt(static_cast<double>(s.layers)));
  if (s.bias) w.b_out.assign(d, 0.0);
  return w;
}

}  // namespace rcsweep::models::mamba2
