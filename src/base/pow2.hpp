// Exact scaling by powers of two (MODELS.md "Scale": renormalise without rounding error).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace rcsweep {

/// out[i] = in[i] * 2^k, correctly rounded like std::ldexp (exact unless the result is
/// subnormal) but a multiplication per element instead of a libm call. When 2^k is not a normal
/// double it is applied as two factors that both move values away from the subnormal range, so
/// there is no double rounding; beyond what two normal factors reach (|k| > 2044, never in the
/// metrics) by std::ldexp itself. `in` and `out` may alias.
inline void scale_pow2(std::span<const double> in, std::span<double> out, int k) {
  if (k >= -1022 && k <= 1023) {
    const double f = std::ldexp(1.0, k);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i] * f;
  } else if (k >= -2044 && k <= 2044) {
    const double f1 = std::ldexp(1.0, k / 2), f2 = std::ldexp(1.0, k - k / 2);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = (in[i] * f1) * f2;
  } else {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = std::ldexp(in[i], k);
  }
}

/// Scale x, whose largest |entry| is `max_abs`, by the power of two that brings that into
/// [1/2, 1), and return the exponent k with x_before = x_after * 2^k (0, leaving x alone, when
/// max_abs is 0 or not finite).
inline int renormalise_pow2(std::span<double> x, double max_abs) {
  if (max_abs == 0.0 || !std::isfinite(max_abs)) return 0;
  int shift = 0;
  std::frexp(max_abs, &shift);
  scale_pow2(x, x, -shift);
  return shift;
}

/// The same, finding the largest |entry| first.
inline int renormalise_pow2(std::span<double> x) {
  double mx = 0.0;
  for (double v : x) mx = std::max(mx, std::abs(v));
  return renormalise_pow2(x, mx);
}

}  // namespace rcsweep
