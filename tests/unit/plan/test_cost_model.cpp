// The calibrated cost model: its file format, interpolation, and how it prices bundles.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "plan/cost_model.hpp"

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
