// Per-task quantities of lambda-skip Theorem 4.1 (MODELS.md "Per-task theory").
#pragma once
#include <array>
#include <cstddef>
#include <limits>
#include <string_view>
#include <vector>

namespace rcsweep::models {

/// Names of /theory/<name> (float64 [n_tasks]) in storage order.
inline constexpr std::array<std::string_view, 7> theory_names = {
    "C_M", "S", "lambda_min", "a_star", "b", "bound_applies", "bound_holds"};
inline constexpr std::size_t n_theory = theory_names.size();
using TheoryRow = std::array<double, n_theory>;

/// Inputs of the theorem for one task.
struct TheoryInputs {
  double C_M = 0.0;      ///< max over layers and heads of ||M_l||_F
  double S = 0.0;        ///< max over layers of ||C_V,l||_F (W_V for attention, I_d for SSMs)
  double lambda = 0.0;   ///< skip strength
  double a = 0.9;        ///< collapse rate (config `collapse_rate`)
  int N = 0;             ///< tokens T
  int d = 0;             ///< width
  int L = 0;             ///< depth
  double log_mu0 = 0.0;  ///< ln mu(X_0) (logs: mu of a deep unnormalised stack overflows)
  double log_muL = 0.0;  ///< ln mu(X_L)
};

/// NaN row (a task that did not finish).
TheoryRow nan_theory();

/// lambda_min = (a + sqrt a) S C_M / (1 - a); a_star = lambda^2 / (S C_M + |lambda|)^2;
/// b = 2 |lambda| N d S C_M / (lambda^2 - a (S C_M + |lambda|)^2) / a^L (NaN when the condition
/// fails); bound_applies = condition and mu0^2 >= b (1/0); bound_holds = muL^2 >= a^L mu0^2 (1/0).
TheoryRow theory_row(const TheoryInputs& in);

}  // namespace rcsweep::models
