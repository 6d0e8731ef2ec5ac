#include "models/theory.hpp"

#include <algorithm>
#include <cmath>

namespace rcsweep::models {

bool theorem_covers(const config::ModelParams& model) noexcept {
  return model.norm == config::Norm::rms && model.gate == config::Gate::none && model.mlp == config::Mlp::none &&
         model.heads == 1 && !config::mixer_choice(model.mixer).per_channel;
}

double row_norm_deviation(const Matrix& X, long log2_scale) {
  double worst = 0.0;
  for (std::size_t i = 0; i < X.rows(); ++i) {
    // ||x_i|| by a scaled sum of squares: no overflow or underflow for any finite row.
    const auto row = X.row(i);
    double big = 0.0;
    for (double x : row)
      if (!(std::abs(x) <= big)) big = std::abs(x);  // a NaN is taken too, and ends the row below
    if (!std::isfinite(big)) return std::numeric_limits<double>::infinity();
    double norm = 0.0;
    if (big > 0.0) {
      double ss = 0.0;
      for (double x : row) ss += (x / big) * (x / big);
      // ||x_i||_true = big * sqrt(ss) * 2^log2_scale, formed in logs so that it cannot overflow
      const double log2_norm = std::log2(big) + 0.5 * std::log2(ss) + static_cast<double>(log2_scale);
      norm = log2_norm > 1000.0 ? std::numeric_limits<double>::infinity() : std::exp2(log2_norm);
    }
    worst = std::max(worst, std::abs(norm - 1.0));
  }
  return worst;
}

TheoryRow nan_theory() {
  TheoryRow r;
  r.fill(std::numeric_limits<double>::quiet_NaN());
  return r;
}

TheoryRow theory_row(const TheoryInputs& in) {
  const double a = in.a, lam = std::abs(in.lambda), sc = in.S * in.C_M;
  TheoryRow r = nan_theory();
  r[0] = in.C_M;
  r[1] = in.S;
  // lambda-skip Theorem 4.1, condition (7): lambda^2 - a (S C_M + |lambda|)^2 > 0, i.e.
  // |lambda| > sqrt(a) S C_M / (1 - sqrt(a)) = (a + sqrt(a)) S C_M / (1 - a).
  r[2] = (a + std::sqrt(a)) * sc / (1.0 - a);
  r[3] = lam * lam / ((sc + lam) * (sc + lam));  // the largest a the condition admits
  const double margin = lam * lam - a * (sc + lam) * (sc + lam);
  const bool condition = margin > 0.0;
  // b = 2 |lambda| N d S C_M / (lambda^2 - a (S C_M + |lambda|)^2) / a^L (MODELS.md: |lambda|, S
  // as stated there), in logs so that a^L cannot underflow.
  const double log_b = condition ? std::log(2.0 * lam * in.N * in.d * sc) - std::log(margin) - in.L * std::log(a)
                                 : std::numeric_limits<double>::quiet_NaN();
  r[4] = condition ? std::exp(log_b) : std::numeric_limits<double>::quiet_NaN();
  const bool have_mu = !std::isnan(in.log_mu0) && !std::isnan(in.log_muL);
  // The hypotheses in BoundReason's order; the proof takes every row of X_0..X_{L-1} as a unit
  // vector (its step (i) and the bound on max_i ||Y~_i||), so a NaN deviation is not unit.
  BoundReason reason = BoundReason::applies;
  if (!in.covered)
    reason = BoundReason::not_covered;
  else if (!(in.row_deviation <= unit_row_tolerance))
    reason = BoundReason::rows_not_unit;
  else if (!condition)
    reason = BoundReason::condition_fails;
  else if (!have_mu)
    return r;  // only mu(X_0)^2 >= b is left to decide, and mu was not computed
  else if (!(2.0 * in.log_mu0 >= log_b))
    reason = BoundReason::mu0_below_b;
  r[5] = reason == BoundReason::applies ? 1.0 : 0.0;
  r[7] = static_cast<double>(static_cast<int>(reason));
  // The comparison with mu: NaN when mu was not computed ([output] metrics without mu_rel).
  if (!have_mu) return r;
  // observed: mu(X_L)^2 >= a^L mu(X_0)^2
  r[6] = 2.0 * in.log_muL >= in.L * std::log(a) + 2.0 * in.log_mu0 ? 1.0 : 0.0;
  return r;
}

}  // namespace rcsweep::models
