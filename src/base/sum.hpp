// The sum of a vector in 4 independent partial sums: no loop-carried latency chain, so the loop
// vectorises without -ffast-math, and the same rounding wherever it is used (the metrics' and
// layernorm's sums, the softmax and Markov row sums).
#pragma once
#include <cstddef>
#include <span>

namespace rcsweep {

/// ((s_0 + s_1) + (s_2 + s_3)), s_l the sum of v_i over i = l (mod 4) in the leading multiple of
/// 4 entries, the remaining entries added to s_0.
[[gnu::always_inline]] inline double sum4(std::span<const double> v) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (std::size_t l = 0; l < 4; ++l) s[l] += v[i + l];
  for (; i < v.size(); ++i) s[0] += v[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace rcsweep
