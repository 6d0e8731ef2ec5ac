// The Mamba-2 block's descriptor (models/block_kind.hpp, mamba2_kind.cpp): its flops are the hand
// count of mamba2_kind.cpp's comment (docs/MAMBA2.md "In a sweep") for a tiny shape, with a full and
// a shorter chunk and with whole chunks; its weights are a layer's values, drawn at random init and
// converted from a checkpoint; nothing is mapped at random init.
#include <string>

#include <gtest/gtest.h>

#include "config/params.hpp"
#include "models/block_kind.hpp"
#include "models/mixers/mixer_kind.hpp"
#include "mamba2_test_folder.hpp"

namespace rcsweep::models {
namespace {

constexpr int T = 7, d = mamba2::test::d;

config::ModelParams mamba2_model(const std::string& folder) {
  config::ModelParams m;
  m.block = config::Block::mamba2;
  m.model_folder = folder;
  m.T = T;
  m.d = m.d_qk = d;
  m.depth = 4;
  m.lambda = 1.0;
  m.norm = config::Norm::rms;
  m.gate = config::Gate::silu;
  return m;
}

// The descriptor (block_kind.hpp): the hand count of mamba2_kind.cpp's comment for this shape.
TEST(Mamba2Kind, CountsTheBlocksWork) {
  mamba2::test::TempDir dir;
  mamba2::test::write_config(dir.path());
  const BlockKind& k = block_kind(config::Block::mamba2);
  EXPECT_EQ(k.block, config::Block::mamba2);
  EXPECT_EQ(k.name, "mamba2");
  config::ModelParams m = mamba2_model(dir.path().string());
  const double E = 16, H = 4, P = 4, G = 2, N = 3, K = 4, conv = E + 2 * G * N, in = 2 * E + 2 * G * N + H;
  const auto chunk_flops = [&](double q) {
    return G * 2 * q * q * N + H * exp_flops * q * (q + 1) / 2 + H * 2 * q * q * P + H * 4 * q * P * N;
  };
  const double flops = 2.0 * T * d * in + 2 * K * T * conv + exp_flops * T * conv + exp_flops * T * H + chunk_flops(4) +
                       chunk_flops(3) + exp_flops * T * E + 5 * T * E + 4 * T * d + 2.0 * T * E * d + 2.0 * T * T * N +
                       exp_flops * T * (T + 1) / 2;
  EXPECT_DOUBLE_EQ(k.layer_flops(m), flops);
  // The weights of a layer: pre-norm, in_proj, conv1d and its bias, dt_bias, A_log, D, gated norm,
  // out_proj; drawn at random init, converted from a checkpoint.
  const double values = d + d * in + K * conv + conv + 3 * H + E + E * d;
  EXPECT_DOUBLE_EQ(k.weights(m).drawn, values);
  EXPECT_DOUBLE_EQ(k.weights(m).converted, 0.0);
  EXPECT_EQ(k.memory(m).weights, static_cast<std::size_t>(values));
  EXPECT_EQ(k.memory(m).state, static_cast<std::size_t>(T * d));
  EXPECT_EQ(k.mapped_bytes(m), 0u);  // nothing mapped at random init
  m.init = config::Init::checkpoint;
  EXPECT_DOUBLE_EQ(k.weights(m).converted, values);
  // A longer context: whole chunks of 4 and quadratic terms within them only.
  m.T = 16;
  const double T16 = 16;
  const double f16 = 2.0 * T16 * d * in + 2 * K * T16 * conv + exp_flops * T16 * conv + exp_flops * T16 * H +
                     4 * chunk_flops(4) + exp_flops * T16 * E + 5 * T16 * E + 4 * T16 * d + 2.0 * T16 * E * d +
                     2.0 * T16 * T16 * N + exp_flops * T16 * (T16 + 1) / 2;
  EXPECT_DOUBLE_EQ(k.layer_flops(m), f16);
}

}  // namespace
}  // namespace rcsweep::models
