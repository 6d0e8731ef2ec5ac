// best_residual: rcsweep's res_best (metrics::best_residual) of matrices read from stdin, for the
// test against an exact linear-programming reference (tests/python/test_best_residual.py).
//
//   best_residual < MATRICES
//
// stdin holds matrices one after another, each as "T d" and then its T d entries row by row
// (whitespace-separated text, as numpy.savetxt or repr writes them). For each, one line on stdout:
// value, lower bound and the d entries of x at which the value is attained, with 17 significant
// digits. Exit 0 on success, 2 on bad input.
#include <cstdio>
#include <iostream>
#include <vector>

#include "base/matrix.hpp"
#include "metrics/best_residual.hpp"

int main() {
  std::size_t T = 0, d = 0;
  while (std::cin >> T >> d) {
    rcsweep::Matrix X(T, d);
    for (double& v : X.values())
      if (!(std::cin >> v)) {
        std::cerr << "best_residual: expected " << T * d << " entries\n";
        return 2;
      }
    std::vector<double> x;
    const rcsweep::metrics::BestResidual r = rcsweep::metrics::best_residual(X, &x);
    std::printf("%.17g %.17g", r.value, r.lower);
    for (double v : x) std::printf(" %.17g", v);
    std::printf("\n");
  }
  if (!std::cin.eof()) {
    std::cerr << "best_residual: expected T d and the entries\n";
    return 2;
  }
  return 0;
}
