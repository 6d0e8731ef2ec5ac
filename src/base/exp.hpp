// exp for loops that the compiler vectorises: IEEE basic operations only, no branch, no libm call.
// The softmax and Markov rows of a layer (T^2 exponentials each) through glibc's scalar exp were a
// visible share of a grid's time (docs/BENCHMARKS.md "Figures behind choices in the source").
#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace rcsweep {

/// e^x to about 1 ulp (tested against std::exp in tests/unit/linalg/test_linalg.cpp). Results below 2^-1021
/// (x < -708) are 0 instead of tiny or subnormal; x > 709.7827 (ln of the largest double) gives
/// +inf; NaN gives NaN.
/// e^x = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 in two parts (Cody–Waite, exact for
/// |k| < 2^11), |r| <= ln 2 / 2, e^r by its Taylor polynomial to r^13 (truncation < 2^-58).
inline double exp_vectorisable(double x) {
  constexpr double log2e = 1.4426950408889634074;
  constexpr double ln2_hi = 6.93147180369123816490e-01;  // 32 significant bits: k ln2_hi is exact
  constexpr double ln2_lo = 1.90821492927058770002e-10;
  constexpr double shifter = 0x1.8p52;  // adding it rounds to an integer in the low mantissa bits
  // Quiet comparisons (no exception flag for NaN): they become blends in vectorised loops.
  double xc = std::isless(x, -708.0) ? -708.0 : x;
  xc = std::isgreater(xc, 709.7827) ? 709.7827 : xc;
  xc = x == x ? xc : 0.0;  // NaN: any finite value here, NaN is returned below
  const double t = xc * log2e + shifter;
  const double k = t - shifter;
  const double r = (xc - k * ln2_hi) - k * ln2_lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^(k-1) from its bits (k sits in the low bits of t, two's complement; -1021 <= k <= 1024 after
  // the clamp, so 2^(k-1) is normal), times 2 p (exact).
  const std::int64_t ki = std::bit_cast<std::int64_t>(t) - std::bit_cast<std::int64_t>(shifter);
  const double scale = std::bit_cast<double>((ki + 1022) << 52);
  const double y = (p + p) * scale;
  double e = std::isless(x, -708.0) ? 0.0 : y;
  e = std::isgreater(x, 709.7827) ? std::numeric_limits<double>::infinity() : e;
  return x == x ? e : x;
}

/// x_i <- e^(a x_i - b) for i < n (exp_vectorisable, vectorised), and returns the sum of the
/// results (in 4 partial sums): the exponentials of a softmax or Markov row. Faster than a loop
/// over libm's exp (bench_kernels BM_exp_row_vectorised against BM_exp_row_libm:
/// docs/BENCHMARKS.md "Metric kernels").
double exp_affine_sum(double* x, std::size_t n, double a, double b);

}  // namespace rcsweep
