// The lambda-skip paper's analytic counterexamples run through the engine (sweep text ->
// parse_sweep -> make_plan -> run_task) and checked against an independent iteration with plain
// loops: [Sys-1] (App. A.10, LTI SSM, M = [[1, 0], [2, 1]], X_0 = I) and [Sys-2] (§4.2.2 / App.
// A.11, selective SSM, M = L(1) ⊙ (Y Y^T), X_0 = [[1, 0], [a0, b0] / r]). docs/ANALYTIC.md reports
// what the numbers say about the paper's claims; the expectations below pin those findings.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"
#include "model_fixtures.hpp"
#include "models/task_runner.hpp"
#include "plan/bundle_job.hpp"

namespace rcsweep::models {
namespace {

using Mat2 = std::array<std::array<double, 2>, 2>;  // rows are tokens
constexpr int depth = 50;
constexpr double tol = 1e-12;

enum class Sys { one, two };
enum class Nrm { rms, layernorm };

double dot(const std::array<double, 2>& a, const std::array<double, 2>& b) { return a[0] * b[0] + a[1] * b[1]; }

// D: per row, divide by the Euclidean norm (lambda-skip eq. (4)), or LayerNorm (subtract the
// mean, divide by sqrt(biased variance + 1e-5)).
void normalise(Nrm n, Mat2& Y) {
  for (auto& row : Y) {
    if (n == Nrm::rms) {
      const double r = std::sqrt(dot(row, row));
      row[0] /= r;
      row[1] /= r;
    } else {
      const double mean = (row[0] + row[1]) / 2;
      const double var = ((row[0] - mean) * (row[0] - mean) + (row[1] - mean) * (row[1] - mean)) / 2;
      const double s = std::sqrt(var + 1e-5);
      row[0] = (row[0] - mean) / s;
      row[1] = (row[1] - mean) / s;
    }
  }
}

// One layer Y <- D(M Y + lambda Y); [Sys-1]: M = [[1, 0], [2, 1]]; [Sys-2]: M = L(1) ⊙ (Y Y^T).
Mat2 step(Sys sys, Nrm n, double lambda, const Mat2& Y) {
  Mat2 M{};
  if (sys == Sys::one) {
    M = {{{1.0, 0.0}, {2.0, 1.0}}};
  } else {
    M = {{{dot(Y[0], Y[0]), 0.0}, {dot(Y[1], Y[0]), dot(Y[1], Y[1])}}};
  }
  Mat2 out{};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) out[i][j] = M[i][0] * Y[0][j] + M[i][1] * Y[1][j] + lambda * Y[i][j];
  normalise(n, out);
  return out;
}

// mu = ||Y - 1 ybar^T||_F (lambda-skip eq. (5)); for two tokens ||y_1 - y_2|| / sqrt(2).
double mu_of(const Mat2& Y) {
  const double a = Y[0][0] - Y[1][0], b = Y[0][1] - Y[1][1];
  return std::sqrt((a * a + b * b) / 2);
}

// s2/s1 of a 2 x 2 matrix [[a, b], [c, d]]: s1, s2 = (p +- q) / 2 with p = ||(a + d, c - b)||,
// q = ||(a - d, b + c)|| (no cancellation when s1 ~ s2, unlike the eigenvalues of Y Y^T).
double rank_ratio(const Mat2& Y) {
  const double p = std::hypot(Y[0][0] + Y[1][1], Y[1][0] - Y[0][1]);
  const double q = std::hypot(Y[0][0] - Y[1][1], Y[0][1] + Y[1][0]);
  return std::abs(p - q) / (p + q);
}

struct Trace {
  std::vector<double> mu, ratio;
  std::vector<Mat2> Y;
};

Trace iterate(Sys sys, Nrm n, double lambda, const Mat2& Y0) {
  Trace t;
  Mat2 Y = Y0;
  for (int k = 0; k <= depth; ++k) {
    if (k > 0) Y = step(sys, n, lambda, Y);
    t.Y.push_back(Y);
    t.mu.push_back(mu_of(Y));
    t.ratio.push_back(rank_ratio(Y));
  }
  return t;
}

const Mat2 sys1_input = {{{1.0, 0.0}, {0.0, 1.0}}};
const double a0 = 0.5, b0 = 0.5, r0 = std::sqrt(a0 * a0 + b0 * b0);
const Mat2 sys2_input = {{{1.0, 0.0}, {a0 / r0, b0 / r0}}};

std::string matrix_text(const Mat2& A) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "[[%.17g, %.17g], [%.17g, %.17g]]", A[0][0], A[0][1], A[1][0], A[1][1]);
  return buf;
}

std::string model_text(Sys sys, Nrm n) {
  const std::string norm = n == Nrm::rms ? "rms" : "layernorm";
  if (sys == Sys::one)
    return "mixer = \"lti\"\nbc_init = \"identity\"\nalpha = 2.0\nT = 2\nd = 2\ndepth = 50\nnorm = \"" + norm +
           "\"\ninput = \"matrix\"\ninput_matrix = " + matrix_text(sys1_input);
  return "mixer = \"ssd\"\nbc_init = \"identity\"\nalpha = 1.0\nT = 2\nd = 2\ndepth = 50\nnorm = \"" + norm +
         "\"\ninput = \"matrix\"\ninput_matrix = " + matrix_text(sys2_input);
}

// lambdas on both sides of every threshold the paper names (-2 and -1 for [Sys-1]; -3/2, -1, -2
// for [Sys-2]); -1 itself makes the first row zero.
const std::vector<double> lambdas = {-4.0, -3.0, -2.5, -2.0, -1.75, -1.5, -1.25, -0.75, -0.5, 0.0, 1.0, 3.0};

std::string axis_text() {
  std::string s = "lambda = [";
  for (std::size_t i = 0; i < lambdas.size(); ++i) s += (i ? ", " : "") + std::to_string(lambdas[i]);
  return s + "]";
}

// Engine results, one per lambda (task i is lambda i: one axis, one replicate).
std::vector<TaskOutput> run_engine(Sys sys, Nrm n) {
  const auto plan = test::plan_from(model_text(sys, n), axis_text());
  std::vector<TaskOutput> out;
  for (std::size_t i = 0; i < lambdas.size(); ++i) out.push_back(run_task(plan::bundle_job(plan, {i})));
  return out;
}

constexpr auto mu_i = metrics::metric_index("mu");
constexpr auto s1_i = metrics::metric_index("s1");
constexpr auto s2_i = metrics::metric_index("s2");

void expect_engine_matches_iteration(Sys sys, Nrm n) {
  const auto outs = run_engine(sys, n);
  for (std::size_t i = 0; i < lambdas.size(); ++i) {
    const double lambda = lambdas[i];
    const auto ref = iterate(sys, n, lambda, sys == Sys::one ? sys1_input : sys2_input);
    ASSERT_EQ(outs[i].outcome, Outcome::done) << lambda << ": " << outs[i].message;
    for (int k = 0; k <= depth; ++k) {
      const auto& row = outs[i].layers[static_cast<std::size_t>(k)];
      EXPECT_NEAR(row[mu_i], ref.mu[static_cast<std::size_t>(k)], tol) << "lambda " << lambda << " layer " << k;
      EXPECT_NEAR(row[s2_i] / row[s1_i], ref.ratio[static_cast<std::size_t>(k)], tol)
          << "lambda " << lambda << " layer " << k;
    }
  }
}

TEST(Analytic, Sys1RmsEngineMatchesIteration) { expect_engine_matches_iteration(Sys::one, Nrm::rms); }
TEST(Analytic, Sys1LayerNormEngineMatchesIteration) { expect_engine_matches_iteration(Sys::one, Nrm::layernorm); }
TEST(Analytic, Sys2RmsEngineMatchesIteration) { expect_engine_matches_iteration(Sys::two, Nrm::rms); }

// [Sys-1] with the paper's own (rms) norm: the rank collapses for EVERY lambda != -1 (the paper
// says it does not for lambda < -2), and mu -> 0 only for lambda > -1; for lambda < -1 the first
// row flips sign each layer (sign(1 + lambda)) and the rows become antiparallel: mu -> sqrt(2).
TEST(Analytic, Sys1RmsCollapsesInRankForEveryLambda) {
  const auto outs = run_engine(Sys::one, Nrm::rms);
  for (std::size_t i = 0; i < lambdas.size(); ++i) {
    const auto& last = outs[i].layers[depth];
    EXPECT_LT(last[s2_i] / last[s1_i], 1e-8) << lambdas[i];  // slowest: (1+lambda)/(3+lambda) per layer
    if (lambdas[i] > -1)
      EXPECT_LT(last[mu_i], 1e-7) << lambdas[i];
    else
      EXPECT_NEAR(last[mu_i], std::sqrt(2.0), 1e-9) << lambdas[i];
  }
}

// A 2-vector normalised by LayerNorm is +-(1, -1) (times |z|/sqrt(z^2 + eps)): after one layer
// both rows are multiples of (1, -1), the rank is 1 whatever lambda is. mu is then 0 up to the
// eps effect (rows of one sign: -1 < lambda <= 1) or 2 (rows of opposite signs: lambda < -1 or
// lambda > 1, where 2 + (1 + lambda) q with q = -1 keeps the second row's sign opposite).
TEST(Analytic, Sys1LayerNormIsRankOneAfterOneLayer) {
  const auto outs = run_engine(Sys::one, Nrm::layernorm);
  for (std::size_t i = 0; i < lambdas.size(); ++i) {
    for (int k = 1; k <= depth; ++k) {
      const auto& row = outs[i].layers[static_cast<std::size_t>(k)];
      EXPECT_LT(row[s2_i] / row[s1_i], 1e-12) << lambdas[i] << " layer " << k;
    }
    const auto& last = outs[i].layers[depth];
    if (lambdas[i] > -1 && lambdas[i] <= 1)  // lambda = 1: the second row (2, 2) is 0 after LayerNorm
      EXPECT_LT(last[mu_i], 1e-4) << lambdas[i];
    else
      EXPECT_NEAR(last[mu_i], 2.0, 1e-4) << lambdas[i];
  }
}

// [Sys-2]: lambda > -1: mu -> 0 (as claimed). -3/2 < lambda < -1: the rank collapses, but mu
// alternates between ~0 (even layers) and ~sqrt(2) (odd layers): mu does NOT go to 0.
// lambda <= -3/2: no collapse (as claimed; at -3/2 exactly the angle is frozen).
TEST(Analytic, Sys2RmsThresholds) {
  const auto outs = run_engine(Sys::two, Nrm::rms);
  for (std::size_t i = 0; i < lambdas.size(); ++i) {
    const double lambda = lambdas[i];
    const auto& l49 = outs[i].layers[depth - 1];
    const auto& l50 = outs[i].layers[depth];
    if (lambda > -1) {  // mu decays like |(1 + lambda)/(2 + lambda)|^k
      EXPECT_NEAR(l50[mu_i] / l49[mu_i], std::abs((1 + lambda) / (2 + lambda)), 1e-6) << lambda;
      EXPECT_LT(l50[s2_i] / l50[s1_i], 1e-4) << lambda;
    } else if (lambda > -1.5) {
      EXPECT_LT(l50[s2_i] / l50[s1_i], 1e-6) << lambda;
      EXPECT_LT(l50[mu_i], 1e-6) << lambda;
      EXPECT_NEAR(l49[mu_i], std::sqrt(2.0), 1e-6) << lambda;
    } else {
      EXPECT_GT(l50[s2_i] / l50[s1_i], 0.4) << lambda;
      EXPECT_GT(l50[mu_i], 0.5) << lambda;
    }
  }
}

// App. A.12 states mu(Y_k) = 1 / (1 + ((2 + lambda)/(1 + lambda))^(2k)) for [Sys-2] with
// a0 = b0 = 1/2. It is exact, but it is not mu (nor mu^2): it is 1 - (y_1 . y_2)^2 = mu^2 (2 - mu^2)
// = det(Y)^2 = (s1 s2)^2, i.e. the squared sine of the angle between the two tokens. Under
// collapse it is ~ 2 mu^2 (mu itself decays like |(1+lambda)/(2+lambda)|^k, not its square).
TEST(Analytic, Sys2ClosedFormOfA12IsTheSquaredSineNotMu) {
  for (const double lambda : lambdas) {
    const auto ref = iterate(Sys::two, Nrm::rms, lambda, sys2_input);
    const double q = (2 + lambda) / (1 + lambda);
    for (int k = 0; k <= depth; ++k) {
      const double paper = 1.0 / (1.0 + std::pow(q, 2 * k));
      const double mu = ref.mu[static_cast<std::size_t>(k)];
      const auto& Y = ref.Y[static_cast<std::size_t>(k)];
      const double det = Y[0][0] * Y[1][1] - Y[0][1] * Y[1][0];
      const double c = dot(Y[0], Y[1]);
      EXPECT_NEAR(paper, 1 - c * c, 1e-12) << lambda << " " << k;
      EXPECT_NEAR(paper, mu * mu * (2 - mu * mu), 1e-12) << lambda << " " << k;
      EXPECT_NEAR(paper, det * det, 1e-12) << lambda << " " << k;
    }
  }
  // Not mu, not mu^2: at lambda = 0, layer 5, paper = 1/(1 + 2^10) while mu^2 is about half of it.
  const auto ref = iterate(Sys::two, Nrm::rms, 0.0, sys2_input);
  const double paper5 = 1.0 / (1.0 + std::pow(2.0, 10));
  EXPECT_GT(std::abs(ref.mu[5] - paper5), 0.01);
  EXPECT_NEAR(paper5 / (ref.mu[5] * ref.mu[5]), 2.0, 1e-3);
}

// lambda = -1 zeroes the first row: the rms norm divides 0 by 0; the task is reported vanished
// (a row exactly zero, not an overflow).
TEST(Analytic, LambdaMinusOneVanishes) {
  for (const Sys sys : {Sys::one, Sys::two}) {
    const auto plan = test::plan_from(model_text(sys, Nrm::rms), "lambda = [-1.0]");
    const auto out = run_task(plan::bundle_job(plan, {0}));
    EXPECT_EQ(out.outcome, Outcome::vanished);
    EXPECT_TRUE(out.message.starts_with("vanished at layer 1: 1 row of X was exactly zero before the rms norm"))
        << out.message;
    EXPECT_TRUE(std::isnan(out.layers[1][mu_i]));
  }
}

// mixer = "matrix" with M = [[1, 0], [2, 1]] and V = X (value_init identity) is [Sys-1] again.
TEST(Analytic, MatrixMixerReproducesSys1) {
  const std::string model = "mixer = \"matrix\"\nmixer_matrix = [[1.0, 0.0], [2.0, 1.0]]\nvalue_init = \"identity\"\n"
                            "T = 2\nd = 2\ndepth = 50\nnorm = \"rms\"\ninput = \"matrix\"\ninput_matrix = " +
                            matrix_text(sys1_input);
  const auto plan = test::plan_from(model, axis_text());
  const auto lti = run_engine(Sys::one, Nrm::rms);
  for (std::size_t i = 0; i < lambdas.size(); ++i) {
    const auto out = run_task(plan::bundle_job(plan, {i}));
    for (int k = 0; k <= depth; ++k)
      for (const auto m : {mu_i, s1_i, s2_i})
        EXPECT_NEAR(out.layers[static_cast<std::size_t>(k)][m], lti[i].layers[static_cast<std::size_t>(k)][m], 1e-14)
            << lambdas[i] << " " << k;
  }
}

}  // namespace
}  // namespace rcsweep::models
