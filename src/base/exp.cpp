#include "base/exp.hpp"

#include "base/sum.hpp"

namespace rcsweep {

// This file is compiled with -fno-trapping-math (src/base/CMakeLists.txt), which lets the
// compiler turn exp_vectorisable's selects into blends and vectorise the loop; it changes no value
// (IEEE results do not depend on it, only whether the compiler may assume that no exception flag
// is read). The AVX2 and the baseline clone do the same operations (no FMA contraction): the same
// results on any x86-64 CPU.
__attribute__((target_clones("avx2", "default"))) double exp_affine_sum(double* x, std::size_t n, double a, double b) {
  for (std::size_t i = 0; i < n; ++i) x[i] = exp_vectorisable(a * x[i] - b);
  return sum4({x, n});
}

}  // namespace rcsweep
