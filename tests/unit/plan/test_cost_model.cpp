// The calibrated cost model: its file format, interpolation, and how it prices bundles.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "plan/cost_model.hpp"
#include "../checkpoint/checkpoint_test_support.hpp"

namespace rcsweep {
namespace {

plan::Plan make(const std::string& axes) {
  const std::string text = R"(
[sweep]
name = "c"
seed = 1
replicates = 1
[model]
depth = 3
T = 64
d = 64
[axes]
)" + axes;
  return plan::make_plan(config::parse_sweep(text, "test"));
}

TEST(CostModel, CalibrationRoundTripsThroughToml) {
  const plan::Calibration c = plan::default_calibration();
  const plan::Calibration back = plan::parse_calibration(plan::to_toml(c));
  EXPECT_EQ(back.machine, c.machine);
  EXPECT_EQ(back.gemm_rate, c.gemm_rate);
  EXPECT_EQ(back.signal_s, c.signal_s);
  EXPECT_EQ(back.mixer_s, c.mixer_s);
  EXPECT_EQ(back.svd_s, c.svd_s);
  EXPECT_EQ(back.normal_rate, c.normal_rate);
  EXPECT_EQ(back.exp_rate, c.exp_rate);
  EXPECT_EQ(back.pass_rate, c.pass_rate);
  EXPECT_EQ(back.conv_rate, c.conv_rate);
}

TEST(CostModel, BlisRangesRoundTripAndAreOptional) {
  plan::Calibration c = plan::default_calibration();
  EXPECT_EQ(plan::to_toml(c).find("blis_"), std::string::npos);  // none: not written
  c.blis_plain = {110592.0, 1e300};
  plan::Calibration back = plan::parse_calibration(plan::to_toml(c));
  EXPECT_EQ(back.blis_plain, c.blis_plain);
  EXPECT_EQ(back.blis_transposed, (std::pair{0.0, 0.0}));
  c.blis_transposed = {0.0, 3375000.0};
  c.blis_plain_ratio = {{16.0, 1.5}, {512.0, 0.9}};
  c.blis_transposed_ratio = {{16.0, 2.0}, {512.0, 1.1}};
  back = plan::parse_calibration(plan::to_toml(c));
  EXPECT_EQ(back.blis_transposed, c.blis_transposed);
  EXPECT_EQ(back.blis_plain_ratio, c.blis_plain_ratio);
  EXPECT_EQ(back.blis_transposed_ratio, c.blis_transposed_ratio);
  const std::string good = plan::to_toml(plan::default_calibration());
  for (const char* bad : {"blis_plain = [5.0]\n", "blis_plain = [8.0, 8.0]\n", "blis_transposed = [-1.0, 8.0]\n",
                          "blis_transposed = ['a', 8.0]\n"})
    EXPECT_THROW(plan::parse_calibration(good + bad), Error) << bad;
}

TEST(CostModel, MalformedCalibrationIsRefused) {
  const std::string good = plan::to_toml(plan::default_calibration());
  EXPECT_THROW(plan::parse_calibration("not = [toml"), Error);
  EXPECT_THROW(plan::parse_calibration("machine = 'x'\n"), Error);  // tables missing
  std::string bad = good;
  bad.replace(bad.find("normal_rate = "), 14, "normal_rate = -");
  EXPECT_THROW(plan::parse_calibration(bad), Error);
  std::string unordered = good;
  unordered.replace(unordered.find("gemm_rate = [[16"), 16, "gemm_rate = [[99999");
  EXPECT_THROW(plan::parse_calibration(unordered), Error);
}

TEST(CostModel, InterpolationIsLogLogAndExtrapolatesThePowerLaw) {
  const std::vector<std::pair<double, double>> cubic = {{10, 1.0}, {20, 8.0}, {40, 64.0}};
  EXPECT_DOUBLE_EQ(plan::interpolate(cubic, 20), 8.0);
  EXPECT_NEAR(plan::interpolate(cubic, 30), 27.0, 1e-12);  // x^3 / 1000 between nodes
  EXPECT_NEAR(plan::interpolate(cubic, 80), 512.0, 1e-9);  // and beyond the last
  EXPECT_NEAR(plan::interpolate(cubic, 5), 0.125, 1e-12);  // and before the first
}

// Shared work is priced once per bundle: two Markov variants with one Markov matrix and one W_V
// per layer cost less than twice one of them; a deeper or larger sweep costs more.
TEST(CostModel, BundlesShareWhatTheirTasksShare) {
  const plan::Calibration c = plan::default_calibration();
  const auto one = make("mixer = [\"markov\"]\n");
  const auto two = make("mixer = [\"markov\"]\nlambda = [0.0, 1.0]\n");
  ASSERT_EQ(one.bundles.size(), 1u);
  ASSERT_EQ(two.bundles.size(), 1u);
  const double s1 = plan::plan_seconds(one, c), s2 = plan::plan_seconds(two, c);
  EXPECT_GT(s2, s1);
  EXPECT_LT(s2, 2.0 * s1);
  const auto big = plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "c"
seed = 1
replicates = 1
[model]
depth = 3
T = 128
d = 128
mixer = "markov"
)",
                                                       "test"));
  // (T, d) doubled: 8x the flops at a higher rate, metrics of a larger k
  EXPECT_GT(plan::plan_seconds(big, c), 2.5 * s1);
  // halving every rate doubles every time
  plan::Calibration slow = c;
  for (auto& [n, r] : slow.gemm_rate) r /= 2;
  for (auto* t : {&slow.signal_s, &slow.mixer_s, &slow.svd_s})
    for (auto& [n, s] : *t) s *= 2;
  slow.normal_rate /= 2;
  slow.exp_rate /= 2;
  slow.pass_rate /= 2;
  slow.conv_rate /= 2;
  EXPECT_NEAR(plan::plan_seconds(two, slow), 2.0 * s2, 1e-12 * s2);
}

// [output] metrics without m_s1, m_s2, m_gap: the mixer's spectrum is not computed and not priced
// (the difference is exactly what a calibration without mixer timings leaves out).
TEST(CostModel, AMetricSelectionWithoutTheMixerSpectrumDoesNotPriceIt) {
  const plan::Calibration c = plan::default_calibration();
  plan::Calibration no_mixer = c;
  no_mixer.mixer_s.clear();
  const std::string sweep =
      "[sweep]\nname = \"c\"\nseed = 1\n[model]\ndepth = 3\nT = 64\nd = 64\nmixer = \"softmax\"\n";
  const auto all = plan::make_plan(config::parse_sweep(sweep, "test"));
  const auto sr = plan::make_plan(config::parse_sweep(sweep + "[output]\nmetrics = [\"sr_cov\", \"m_fro\"]\n", "test"));
  const auto gap = plan::make_plan(config::parse_sweep(sweep + "[output]\nmetrics = [\"m_gap\"]\n", "test"));
  EXPECT_LT(plan::plan_seconds(sr, c), plan::plan_seconds(all, c));
  EXPECT_NEAR(plan::plan_seconds(sr, c), plan::plan_seconds(all, no_mixer), 1e-12);
  EXPECT_EQ(plan::plan_seconds(gap, c), plan::plan_seconds(all, c));
}

// The mixer metrics of a long-context task take Lanczos (a step costs T^2, the steps do not grow with
// T): beyond the calibration's largest mixer they are priced as its time times (T / T_last)^2, not
// by the last segment's power law, which between an in-cache and an out-of-cache size is steeper
// than T^3 (measured 0.015 s at 1024, 0.136 s at 2048 on Zen 4).
TEST(CostModel, LanczosMixerMetricsBeyondTheCalibrationGrowLikeTSquared) {
  plan::Calibration c = plan::default_calibration();
  c.mixer_s = {{512, 1.6e-3}, {1024, 1.5e-2}, {2048, 1.36e-1}};
  const auto one = [&](int T) {
    return plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "c"
seed = 1
replicates = 1
[model]
depth = 1
d = 16
mixer = "softmax"
input = "sphere"
T = )" + std::to_string(T) + "\n",
                                               "test"));
  };
  // one layer's mixer metrics, the difference of a softmax task with and without them
  const auto metrics_s = [&](int T) {
    plan::Calibration none = c;
    none.mixer_s.clear();
    return plan::plan_seconds(one(T), c) - plan::plan_seconds(one(T), none);
  };
  EXPECT_NEAR(metrics_s(2048), 1.36e-1, 1e-9);
  EXPECT_NEAR(metrics_s(8192), 1.36e-1 * 16, 1e-9);
  EXPECT_NEAR(metrics_s(1448), plan::interpolate(c.mixer_s, 1448), 1e-9);  // measured range: as measured
  // and the flops: O(T^2) per layer at fixed d, where the dense route's T^3 was
  config::ModelParams m;
  m.T = 8192;
  m.d = m.d_qk = 256;
  const double f = plan::layer_flops(m);
  m.T = 16384;
  EXPECT_LT(plan::layer_flops(m), 4.2 * f);
  EXPECT_GT(plan::layer_flops(m), 3.5 * f);  // the T d^2 products grow like T
  EXPECT_NEAR(plan::mixer_metrics_flops(16384) / plan::mixer_metrics_flops(8192), 4.0, 0.03);
  EXPECT_GT(plan::mixer_metrics_flops(128), 2.0 * 128 * 128 * 128);  // the dense route below Lanczos
}

// Layer 1's mixer of the shared X_0 is computed once per mixer (models' mixer_key: gap_fix and the
// mixer's parameters included), so it is priced once per mixer: a scan of lambda shares it, tasks
// with and without perp do not (one more mixer, its logits and metrics), while both share X_0 W_V.
TEST(CostModel, LayerOneMixerIsSharedOnlyByTasksOfTheSameMixer) {
  const plan::Calibration c = plan::default_calibration();
  const auto bundle = [](const std::string& axes) {
    return plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "c"
seed = 1
replicates = 1
[model]
depth = 1
T = 512
d = 16
input = "sphere"
mixer = "softmax"
[axes]
)" + axes,
                                               "test"));
  };
  const auto lambdas = bundle("lambda = [0.0, 1.0]\n"), fixes = bundle("gap_fix = [\"none\", \"perp\"]\n");
  ASSERT_EQ(lambdas.bundles.size(), 1u);
  ASSERT_EQ(fixes.bundles.size(), 1u);
  const double extra = plan::plan_seconds(fixes, c) - plan::plan_seconds(lambdas, c);
  const double one_mixer = plan::interpolate(c.mixer_s, 512) + 512.0 * 512.0 / c.exp_rate;
  EXPECT_GT(extra, one_mixer);
  EXPECT_LT(extra, 2.0 * one_mixer + 512.0 * 512.0 / c.pass_rate + 2.0 * 512 * 512 * 16 / 4e9);
}

}  // namespace
}  // namespace rcsweep

namespace rcsweep {
namespace {

// Encoder tasks (their config.json only: width 8, 2 heads, intermediate_size 12) in a plan made by
// hand: one task per model, all of replicate 0, depth 3.
struct EncoderPlan {
  EncoderPlan() {
    checkpoint::test::write_bytes(dir / "config.json",
                                  R"({"model_type": "bert", "vocab_size": 30, "max_position_embeddings": 24,
                                      "type_vocab_size": 2, "hidden_size": 8, "num_attention_heads": 2,
                                      "intermediate_size": 12, "num_hidden_layers": 3})");
  }
  config::ModelParams model() const {
    config::ModelParams m;
    m.block = config::Block::encoder;
    m.model_folder = dir.path().string();
    m.input = config::InputKind::gaussian;
    m.T = 10;
    m.d = m.d_qk = 8;
    m.heads = 2;
    m.depth = 3;
    m.mlp = config::Mlp::model;
    m.norm = config::Norm::layernorm;
    return m;
  }
  plan::Plan plan(const std::vector<config::ModelParams>& models) const {
    plan::Plan p;
    p.max_depth = 3;
    p.models = models;
    for (std::size_t i = 0; i < models.size(); ++i) p.tasks.push_back({i, i, 0, 0.0});
    return p;
  }
  checkpoint::test::TempDir dir;
};

// A bundle of encoder tasks pays each set of block weights once per layer (drawn at the normal
// rate, a checkpoint's converted at the pass rate), and its tasks their own layers: the
// descriptor's seconds plus the signal metrics.
TEST(CostModel, EncoderTasksShareTheirBlocksWeights) {
  const plan::Calibration c = plan::default_calibration();
  const EncoderPlan e;
  const config::ModelParams a = e.model();
  config::ModelParams b = a, other_draw = a, checkpoint = a;
  b.lambda = 0.5;
  other_draw.init_draw = 0;
  checkpoint.init = config::Init::checkpoint;
  const double values = 4.0 * 8 * 8 + 2.0 * 8 * 12 + 7.0 * 8 + 12;
  const auto one = plan::bundle_work(e.plan({a}), {0}, c);
  const auto same = plan::bundle_work(e.plan({a, b}), {0, 1}, c);
  const auto draws = plan::bundle_work(e.plan({a, other_draw}), {0, 1}, c);
  const auto inits = plan::bundle_work(e.plan({a, checkpoint}), {0, 1}, c);
  ASSERT_EQ(one.task_s.size(), 1u);
  EXPECT_DOUBLE_EQ(same.shared_s, one.shared_s);  // the same weights and X_0
  EXPECT_DOUBLE_EQ(same.task_s[1], same.task_s[0]);
  EXPECT_NEAR(draws.shared_s - one.shared_s, 3 * values / c.normal_rate, 1e-15);
  EXPECT_NEAR(inits.shared_s - one.shared_s, 3 * 2 * values / c.pass_rate, 1e-15);  // converted: two passes
  // A task: 3 layers of the descriptor's seconds with the signal metrics and bookkeeping (layer
  // 0's metrics are the bundle's: its X_0 is shared); without the MLP, less.
  config::ModelParams no_mlp = a;
  no_mlp.mlp = config::Mlp::none;
  const auto both = plan::bundle_work(e.plan({a, no_mlp}), {0, 1}, c);
  EXPECT_LT(both.task_s[1], both.task_s[0]);
  EXPECT_DOUBLE_EQ(both.shared_s, one.shared_s);
  EXPECT_GT(one.task_s[0], 0.0);
}

}  // namespace
}  // namespace rcsweep
