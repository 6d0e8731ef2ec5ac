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

}  // namespace
}  // namespace rcsweep
