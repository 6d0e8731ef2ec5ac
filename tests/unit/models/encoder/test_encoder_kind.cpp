// The encoder block's descriptor (models/block_kind.hpp, encoder_kind.cpp): its flops, seconds,
// weights and memory are the formulas of docs/ENCODERS.md "In a sweep" for the config's
// intermediate size, with and without the MLP; the checkpoint's mapped bytes are its file's size;
// the stack's descriptor has no hook (the planner's own functions price it).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "config/params.hpp"
#include "linalg/linalg.hpp"
#include "models/block_kind.hpp"
#include "models/mixers/mixer_kind.hpp"
#include "encoder_test_folder.hpp"

namespace rcsweep::models {
namespace {

using encoder::test::TempDir;

constexpr int T = 10, d = 8, heads = 2, n = 12;  // n: the config's intermediate_size

config::ModelParams encoder_model(const std::filesystem::path& folder) {
  config::ModelParams m;
  m.block = config::Block::encoder;
  m.model_folder = folder.string();
  m.T = T;
  m.d = m.d_qk = d;
  m.heads = heads;
  m.mlp = config::Mlp::model;
  m.norm = config::Norm::layernorm;
  m.lambda = m.lambda_mlp = 1.0;
  return m;
}

// Prices that make each kind of work countable: a product m x n x k costs m n k + 1e6 (so the
// number of products shows), an exp 1e-3, a pass 1e-5, the mixer metrics of a T x T mixer T + 1e9.
struct CountingPrices final : LayerPrices {
  double gemm(double a, double b, double c) const override { return a * b * c + 1e6; }
  double mixer_metrics(double t) const override { return t + 1e9; }
  double exp_rate() const override { return 1e3; }
  double pass_rate() const override { return 1e5; }
  double conv_rate() const override { return 1.0; }
};

TEST(EncoderKind, StackHasNoHooks) {
  const BlockKind& stack = block_kind(config::Block::stack);
  EXPECT_EQ(stack.name, "stack");
  EXPECT_EQ(stack.layer_flops, nullptr);
  EXPECT_EQ(stack.task_seconds, nullptr);
  EXPECT_EQ(stack.weights, nullptr);
  EXPECT_EQ(stack.memory, nullptr);
  EXPECT_EQ(stack.mapped_bytes, nullptr);
  const BlockKind& encoder = block_kind(config::Block::encoder);
  EXPECT_EQ(encoder.block, config::Block::encoder);
  EXPECT_EQ(encoder.name, "encoder");
}

TEST(EncoderKind, FlopsAreTheBlocksProductsAndPasses) {
  TempDir dir;
  encoder::test::write_config(dir.path(), encoder::test::tiny_bert(d, heads, 3, n));
  config::ModelParams m = encoder_model(dir.path());
  const BlockKind& k = block_kind(config::Block::encoder);
  const double attention = 6.0 * T * d * d + 4.0 * T * T * d + exp_flops * heads * T * T + 2.0 * T * d * d +
                           10.0 * T * d;
  const double mlp = 4.0 * T * d * n + exp_flops * T * n + 10.0 * T * d;
  EXPECT_DOUBLE_EQ(k.layer_flops(m), attention + mlp);
  m.mlp = config::Mlp::none;
  EXPECT_DOUBLE_EQ(k.layer_flops(m), attention);
}

TEST(EncoderKind, SecondsPriceEachProductOnce) {
  TempDir dir;
  encoder::test::write_config(dir.path(), encoder::test::tiny_bert(d, heads, 3, n));
  config::ModelParams m = encoder_model(dir.path());
  const CountingPrices p;
  const double dh = d / heads;
  // Q, K, V, W_O; per head the logits and A V; the softmax; 5 passes per sub-block; head 0's metrics
  const double attention = 4 * (T * d * d + 1e6) + heads * (T * T * dh + 1e6 + T * dh * T + 1e6) + heads * T * T / 1e3 +
                           5.0 * T * d / 1e5 + (T + 1e9);
  const double mlp = 2 * (T * n * d + 1e6) + T * n / 1e3 + 5.0 * T * d / 1e5;
  EXPECT_DOUBLE_EQ(block_kind(config::Block::encoder).task_seconds(m, p), attention + mlp);
  m.mlp = config::Mlp::none;
  EXPECT_DOUBLE_EQ(block_kind(config::Block::encoder).task_seconds(m, p), attention);
}

TEST(EncoderKind, WeightsAndMemory) {
  TempDir dir;
  encoder::test::write_config(dir.path(), encoder::test::tiny_bert(d, heads, 3, n));
  config::ModelParams m = encoder_model(dir.path());
  const BlockKind& k = block_kind(config::Block::encoder);
  const double values = 4.0 * d * d + 2.0 * d * n + 7.0 * d + n;  // W_Q, W_K, W_V, W_O, W_1, W_2, biases, norms
  EXPECT_EQ(k.weights(m).drawn, values);
  EXPECT_EQ(k.weights(m).converted, 0.0);
  m.init = config::Init::checkpoint;
  EXPECT_EQ(k.weights(m).drawn, 0.0);
  EXPECT_EQ(k.weights(m).converted, values);
  const BlockMemory mem = k.memory(m);
  EXPECT_EQ(mem.weights, static_cast<std::size_t>(values));
  EXPECT_EQ(mem.input, static_cast<std::size_t>(T * d));
  EXPECT_EQ(mem.state, static_cast<std::size_t>(T * d));
  const std::size_t metrics = T * T + std::max<std::size_t>(T * T, linalg::singular_values_scratch(T, d));
  EXPECT_EQ(mem.scratch, static_cast<std::size_t>(8 * T * d + 2 * T * T + T * (d / heads) + T * n) + metrics);
  m.mlp = config::Mlp::none;
  EXPECT_EQ(k.memory(m).scratch, mem.scratch - static_cast<std::size_t>(T * n));
}

TEST(EncoderKind, MappedBytesAreTheCheckpointsFiles) {
  TempDir dir;
  encoder::test::write_checkpoint(dir.path(), encoder::RandomWeights(encoder::test::tiny_bert(d, heads, 3, n), 5, 0));
  config::ModelParams m = encoder_model(dir.path());
  const BlockKind& k = block_kind(config::Block::encoder);
  EXPECT_EQ(k.mapped_bytes(m), 0u);  // random init maps nothing
  m.init = config::Init::checkpoint;
  EXPECT_EQ(k.mapped_bytes(m), std::filesystem::file_size(dir / "model.safetensors"));
}

}  // namespace
}  // namespace rcsweep::models
