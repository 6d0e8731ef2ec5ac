// lambda-skip Theorem 4.1's hypotheses (MODELS.md "Per-task theory"): which stacks the proof
// covers, the unit rows it takes at every layer including the input, and /theory/bound_reason.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model_fixtures.hpp"
#include "models/task_runner.hpp"
#include "models/theory.hpp"
#include "plan/bundle_job.hpp"

namespace rcsweep {
namespace {

using models::BoundReason;
constexpr std::size_t applies_col = 5, holds_col = 6, reason_col = 7;

double code(BoundReason r) { return static_cast<double>(static_cast<int>(r)); }

TEST(Theorem41, TheoryNamesEndWithTheReason) {
  EXPECT_EQ(models::theory_names[applies_col], "bound_applies");
  EXPECT_EQ(models::theory_names[holds_col], "bound_holds");
  EXPECT_EQ(models::theory_names[reason_col], "bound_reason");
}

// Eq. (6): X' = D (M X C_V + lambda X), D the row normalisation; nothing else in the layer.
TEST(Theorem41, CoversOnlyTheStackOfEquation6) {
  config::ModelParams m = test::small_model(config::Mixer::softmax);
  m.norm = config::Norm::rms;
  EXPECT_TRUE(models::theorem_covers(m));
  for (auto mixer : {config::Mixer::markov, config::Mixer::ssd, config::Mixer::lti, config::Mixer::relu}) {
    auto other = m;
    other.mixer = mixer;
    EXPECT_TRUE(models::theorem_covers(other));  // any M: the proof uses ||M||_F <= C_M only
  }
  auto perp = m;
  perp.gap_fix = config::GapFix::perp;
  EXPECT_TRUE(models::theorem_covers(perp));
  auto ln = m;
  ln.norm = config::Norm::layernorm;
  auto none = m;
  none.norm = config::Norm::none;
  auto gate = m;
  gate.gate = config::Gate::silu;
  auto mlp = m;
  mlp.mlp = config::Mlp::relu;
  auto heads = m;
  heads.heads = 2;
  auto s4d = m;
  s4d.mixer = config::Mixer::s4d;
  for (const auto& out : {ln, none, gate, mlp, heads, s4d}) EXPECT_FALSE(models::theorem_covers(out));
}

TEST(Theorem41, RowNormDeviation) {
  Matrix X(3, 4);
  X(0, 0) = 1.0;
  X(1, 1) = -0.6;
  X(1, 2) = 0.8;
  X(2, 3) = 1.0;
  EXPECT_LT(models::row_norm_deviation(X), 1e-15);
  X(2, 3) = 100.0;
  EXPECT_DOUBLE_EQ(models::row_norm_deviation(X), 99.0);
  X(2, 3) = 0.25;  // 0.25 * 2^2 = 1 at the true scale, but then the other rows are 4
  EXPECT_DOUBLE_EQ(models::row_norm_deviation(X, 2), 3.0);
  X(2, 3) = 0.0;  // a zero row: norm 0
  EXPECT_DOUBLE_EQ(models::row_norm_deviation(X), 1.0);
  X(2, 3) = 1e300;  // no overflow in the norm itself, but far from 1
  EXPECT_GT(models::row_norm_deviation(X), 1e299);
  X(2, 3) = 1.0;
  EXPECT_TRUE(std::isinf(models::row_norm_deviation(X, 2000)));  // true scale 2^2000
  X(2, 3) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isinf(models::row_norm_deviation(X)));
}

// The first failing hypothesis, in the order covered, unit rows, condition (7), mu0^2 >= b.
TEST(Theorem41, ReasonIsTheFirstFailingHypothesis) {
  // S C_M = 1, a = 0.5, lambda = 10: the condition holds; b = 2 * 10 * 4 * 4 / (100 - 0.5 * 121) / 0.5^3
  models::TheoryInputs in{1.0, 1.0, 10.0, 0.5, 4, 4, 3, 0.0, 0.0, true, 0.0};
  const double b = 2 * 10.0 * 16 / (100.0 - 0.5 * 121.0) / 0.125;
  in.log_mu0 = 0.5 * std::log(b) + 1e-9;
  in.log_muL = in.log_mu0;
  auto r = models::theory_row(in);
  EXPECT_NEAR(r[4], b, 1e-12 * b);
  EXPECT_EQ(r[applies_col], 1.0);
  EXPECT_EQ(r[reason_col], code(BoundReason::applies));
  EXPECT_EQ(r[holds_col], 1.0);

  in.log_mu0 = 0.5 * std::log(b) - 1e-9;
  r = models::theory_row(in);
  EXPECT_EQ(r[applies_col], 0.0);
  EXPECT_EQ(r[reason_col], code(BoundReason::mu0_below_b));

  in.log_mu0 = 0.5 * std::log(b) + 1.0;
  in.lambda = 1.0;  // condition fails
  r = models::theory_row(in);
  EXPECT_EQ(r[applies_col], 0.0);
  EXPECT_EQ(r[reason_col], code(BoundReason::condition_fails));

  in.row_deviation = 2 * models::unit_row_tolerance;  // rows not unit, condition failing too
  r = models::theory_row(in);
  EXPECT_EQ(r[reason_col], code(BoundReason::rows_not_unit));
  in.lambda = 10.0;
  r = models::theory_row(in);
  EXPECT_EQ(r[applies_col], 0.0);
  EXPECT_EQ(r[reason_col], code(BoundReason::rows_not_unit));
  EXPECT_FALSE(std::isnan(r[4]));                               // the quantities themselves are still computed
  in.row_deviation = std::numeric_limits<double>::quiet_NaN();  // not measured: not unit
  EXPECT_EQ(models::theory_row(in)[reason_col], code(BoundReason::rows_not_unit));

  in.covered = false;
  r = models::theory_row(in);
  EXPECT_EQ(r[applies_col], 0.0);
  EXPECT_EQ(r[reason_col], code(BoundReason::not_covered));
  EXPECT_EQ(r[holds_col], 1.0);  // bound_holds is the observation, whatever the hypotheses
}

// Without mu the flag is still decided where a hypothesis that does not need mu fails.
TEST(Theorem41, WithoutMuOnlyTheLastHypothesisIsUndecided) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  models::TheoryInputs in{1.0, 1.0, 10.0, 0.5, 4, 4, 3, nan, nan, false, nan};
  auto r = models::theory_row(in);
  EXPECT_EQ(r[applies_col], 0.0);
  EXPECT_EQ(r[reason_col], code(BoundReason::not_covered));
  EXPECT_TRUE(std::isnan(r[holds_col]));
  in.covered = true;
  in.row_deviation = 0.0;
  r = models::theory_row(in);
  EXPECT_TRUE(std::isnan(r[applies_col]));
  EXPECT_TRUE(std::isnan(r[reason_col]));
  in.lambda = 1.0;
  r = models::theory_row(in);
  EXPECT_EQ(r[applies_col], 0.0);
  EXPECT_EQ(r[reason_col], code(BoundReason::condition_fails));
}

// Through the engine: the input's rows decide (input_scale), and every later layer of the rms
// stack has unit rows, so an orthonormal input with large |lambda| applies and holds.
TEST(Theorem41, EngineChecksTheRowsOfEveryLayerIncludingTheInput) {
  const auto plan = test::plan_from(
      "mixer = \"softmax\"\nT = 6\nd = 8\ndepth = 4\nnorm = \"rms\"\nvalue_scale = \"inv_sqrt_d\"\nlambda = 100000.0",
      "input_scale = [1.0, 1.000001, 100.0]");
  ASSERT_EQ(plan.tasks.size(), 3u);
  for (const auto& t : plan.tasks) {
    const auto out = models::run_task(plan::bundle_job(plan, {t.id}));
    ASSERT_EQ(out.outcome, models::Outcome::done);
    const double scale = plan.models.at(t.point).input_scale;
    const BoundReason want = scale == 1.0 ? BoundReason::applies : BoundReason::rows_not_unit;
    EXPECT_EQ(out.theory[reason_col], code(want)) << "input_scale " << scale;
    EXPECT_EQ(out.theory[applies_col], scale == 1.0 ? 1.0 : 0.0) << "input_scale " << scale;
    EXPECT_EQ(out.theory[holds_col], scale == 100.0 ? 0.0 : 1.0) << "input_scale " << scale;
  }
}

TEST(Theorem41, EngineFlagsAComponentOutsideTheTheorem) {
  const std::string base =
      "mixer = \"softmax\"\nT = 6\nd = 8\ndepth = 3\nvalue_scale = \"inv_sqrt_d\"\nlambda = 100000.0\n";
  for (const char* extra : {"norm = \"layernorm\"", "norm = \"rms\"\nmlp = \"relu\"", "norm = \"rms\"\ngate = \"silu\"",
                            "norm = \"rms\"\nheads = 2"}) {
    const auto plan = test::plan_from(base + extra);
    const auto out = models::run_task(plan::bundle_job(plan, {0}));
    ASSERT_EQ(out.outcome, models::Outcome::done) << extra;
    EXPECT_EQ(out.theory[applies_col], 0.0) << extra;
    EXPECT_EQ(out.theory[reason_col], code(BoundReason::not_covered)) << extra;
  }
}

}  // namespace
}  // namespace rcsweep
