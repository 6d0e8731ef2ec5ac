// Helpers shared by the model tests: plans from sweep-file text, naive reference kernels.
#pragma once
#include <cmath>
#include <string>

#include "base/matrix.hpp"
#include "config/sweep_spec.hpp"
#include "plan/plan.hpp"

namespace rcsweep::test {

inline plan::Plan plan_from(const std::string& model_lines, const std::string& axes_lines = "", int replicates = 1,
                            const std::string& output = "none") {
  const std::string text = "[sweep]\nname = \"t\"\nseed = 7\nreplicates = " + std::to_string(replicates) +
                           "\n[model]\n" + model_lines + "\n[axes]\n" + axes_lines + "\n[output]\nspectra = \"" +
                           output + "\"\n";
  return plan::make_plan(config::parse_sweep(text, "test"));
}

/// A resolved model with the given mixer and sizes (d_qk = d, depth 3), defaults elsewhere.
inline config::ModelParams small_model(config::Mixer mixer, int T = 6, int d = 9) {
  config::ModelParams m;
  m.mixer = mixer;
  m.T = T;
  m.d = m.d_qk = d;
  m.depth = 3;
  return m;
}

inline Matrix naive_matmul(const Matrix& A, const Matrix& B) {
  Matrix C(A.rows(), B.cols());
  for (std::size_t i = 0; i < A.rows(); ++i)
    for (std::size_t j = 0; j < B.cols(); ++j) {
      long double s = 0;
      for (std::size_t k = 0; k < A.cols(); ++k) s += static_cast<long double>(A(i, k)) * B(k, j);
      C(i, j) = static_cast<double>(s);
    }
  return C;
}

inline Matrix naive_transpose(const Matrix& A) {
  Matrix B(A.cols(), A.rows());
  for (std::size_t i = 0; i < A.rows(); ++i)
    for (std::size_t j = 0; j < A.cols(); ++j) B(j, i) = A(i, j);
  return B;
}

inline double max_abs_diff(const Matrix& A, const Matrix& B) {
  double m = 0;
  for (std::size_t i = 0; i < A.size(); ++i) m = std::max(m, std::abs(A.data()[i] - B.data()[i]));
  return m;
}

}  // namespace rcsweep::test
