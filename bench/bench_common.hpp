// Helpers shared by the Google Benchmark executables.
#pragma once
#include <cstddef>
#include <random>

#include "base/matrix.hpp"

namespace rcsweep::bench {

/// An m x n matrix of N(0, 1) entries (std::mt19937_64: benchmark inputs, not model weights).
inline Matrix random_matrix(std::size_t m, std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd;
  Matrix a(m, n);
  for (double& x : a.values()) x = nd(gen);
  return a;
}

}  // namespace rcsweep::bench
