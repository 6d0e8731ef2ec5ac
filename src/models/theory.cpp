#include "models/theory.hpp"

#include <cmath>

namespace rcsweep::models {

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
  // The comparisons with mu: NaN when mu was not computed ([output] metrics without mu_rel).
  if (std::isnan(in.log_mu0) || std::isnan(in.log_muL)) return r;
  r[5] = condition && 2.0 * in.log_mu0 >= log_b ? 1.0 : 0.0;
  // observed: mu(X_L)^2 >= a^L mu(X_0)^2
  r[6] = 2.0 * in.log_muL >= in.L * std::log(a) + 2.0 * in.log_mu0 ? 1.0 : 0.0;
  return r;
}

}  // namespace rcsweep::models
