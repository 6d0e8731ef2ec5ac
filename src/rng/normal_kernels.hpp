// Private to rcsweep_rng (and its unit test): the branch-free elementary functions of the
// Box–Muller transform in fill_normal.
//
// Why not libm: std::log/std::cos/std::sin are scalar calls (~60% of fill_normal's time) and
// their last bit may differ between libm versions. These kernels use only IEEE-754 basic
// operations (+ - * / sqrt, min, integer bit manipulation of the representation), each
// correctly rounded, so the result is bitwise the same on every x86-64 machine and with any
// instruction set the compiler picks (SSE2 packed, AVX, scalar) as long as a*b+c is not contracted
// into an FMA: rcsweep_rng is compiled with -ffp-contract=off (src/rng/CMakeLists.txt). Written
// as plain scalar code on doubles and uint64 bit patterns so that g++ -O3 auto-vectorises the
// loop that calls them with baseline SSE2 (2 doubles per instruction).
//
// Accuracy (tests/unit/numerics/test_rng.cpp measures it against libm over millions of points):
//   log_open_unit(u):   relative error < 2^-52 on the whole 53-bit grid of (0, 1) (fdlibm's
//                       log kernel: reduction to [sqrt(2)/2, sqrt(2)), s = f/(2+f), minimax
//                       polynomial of degree 14 in s, |error| < 2^-58.45 before rounding).
//   sincos_turns(u):    sin(2 pi u), cos(2 pi u) with absolute error < 2^-52, the reduction done
//                       in turns (exact: 4u is rounded to the quadrant k, t = u - k/4 is exact,
//                       |t| <= 1/8), then fdlibm's |x| <= pi/4 kernels with x = 2 pi t folded
//                       into the coefficients (c_n * (2 pi)^n, computed in 200-bit arithmetic).
#pragma once
#include <bit>
#include <cstdint>

namespace rcsweep::rng::detail {

inline constexpr double two_pow_m53 = 0x1p-53;
// Largest double below 1. ((2^53 - 1) + 0.5) * 2^-53 rounds (ties-to-even) to exactly 1.0, so
// the single top value of the 53-bit grid is clamped here to keep u in the open interval (0, 1).
inline constexpr double below_one = 0x1.fffffffffffffp-1;

// Exact double of an integer 0 <= v < 2^52: place it in the mantissa of 2^52 and subtract 2^52.
// (A conversion instruction from 64-bit integers to packed doubles needs AVX-512.)
inline double small_uint_to_double(std::uint64_t v) {
  return std::bit_cast<double>(v | 0x4330000000000000ULL) - 0x1p52;
}

// u = ((x >> 11) + 0.5) * 2^-53: the centre of one of 2^53 equal bins of (0, 1), clamped below 1.
// Bitwise identical to `std::min((static_cast<double>(x >> 11) + 0.5) * 2^-53, below_one)`:
// (x >> 11) = hi * 2^21 + lo is converted exactly in two parts and summed exactly (< 2^53).
inline double open_unit(std::uint64_t x) {
  const double hi = small_uint_to_double(x >> 32);
  const double lo = small_uint_to_double((x >> 11) & 0x1fffffULL);
  const double u = ((hi * 0x1p21 + lo) + 0.5) * two_pow_m53;  // in (0, 1]
  // min(u, below_one) without a compare, which g++ would turn into a branch: the pattern of
  // below_one is that of 1.0 minus 1, and only u = 1 carries into bit 62 when 2^52 is added.
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(u);
  return std::bit_cast<double>(bits - ((bits + 0x0010000000000000ULL) >> 62));
}

// Natural log of a positive normal double u < 2 (here u in [2^-54, 1)); fdlibm __ieee754_log
// without the special cases (musl's reduction on the 64-bit pattern).
inline double log_open_unit(double u) {
  constexpr double ln2_hi = 0x1.62e42fee00000p-1;  // 6.93147180369123816490e-01
  constexpr double ln2_lo = 0x1.a39ef35793c76p-33; // 1.90821492927058770002e-10
  constexpr double lg1 = 6.666666666666735130e-01;
  constexpr double lg2 = 3.999999999940941908e-01;
  constexpr double lg3 = 2.857142874366239149e-01;
  constexpr double lg4 = 2.222219843214978396e-01;
  constexpr double lg5 = 1.818357216161805012e-01;
  constexpr double lg6 = 1.531383769920937332e-01;
  constexpr double lg7 = 1.479819860511658591e-01;
  constexpr std::uint64_t sqrt_half_bits = 0x3fe6a09e667f3bcdULL;  // sqrt(2)/2
  // u = 2^k x with x in [sqrt(2)/2, sqrt(2)): shift the pattern so that the exponent field
  // steps at sqrt(2)/2 instead of 1 (all in unsigned arithmetic; u < 2 keeps it positive).
  const std::uint64_t ix = std::bit_cast<std::uint64_t>(u) + (0x3ff0000000000000ULL - sqrt_half_bits);
  const double k = small_uint_to_double(ix >> 52) - 1023.0;
  const double x = std::bit_cast<double>((ix & 0x000fffffffffffffULL) + sqrt_half_bits);
  const double f = x - 1.0;  // exact (Sterbenz)
  const double hfsq = 0.5 * f * f;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double w = z * z;
  const double t1 = w * (lg2 + w * (lg4 + w * lg6));
  const double t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)));
  const double r = t2 + t1;
  return k * ln2_hi - ((hfsq - (s * (hfsq + r) + k * ln2_lo)) - f);
}

// sin(2 pi u) and cos(2 pi u) for u in [0, 1] (any |u| < 2^50 on the grid of its ulp works).
inline void sincos_turns(double u, double& sin_out, double& cos_out) {
  // sin(2 pi t) = t (2 pi + z S(z)), cos(2 pi t) = 1 + z (c2 + z C(z)), z = t^2, |t| <= 1/8.
  constexpr double s1 = 0x1.921fb54442d18p+2;  // 2 pi
  constexpr double s3 = -0x1.4abbce625be47p+5;
  constexpr double s5 = 0x1.466bc67758db1p+6;
  constexpr double s7 = -0x1.32d2cce335e6fp+6;
  constexpr double s9 = 0x1.5078301dcf6b6p+5;
  constexpr double s11 = -0x1.e300a85fc9574p+3;
  constexpr double s13 = 0x1.e404742f3e351p+1;
  constexpr double c2 = -0x1.3bd3cc9be45dep+4;  // -(2 pi)^2 / 2
  constexpr double c4 = 0x1.03c1f081b5abdp+6;
  constexpr double c6 = -0x1.55d3c7e3ca6fbp+6;
  constexpr double c8 = 0x1.e1f5068528e5ep+5;
  constexpr double c10 = -0x1.a6d1edbbb9b9cp+4;
  constexpr double c12 = 0x1.f9cd20b415c65p+2;
  constexpr double c14 = -0x1.b2a21ec94163bp+0;
  constexpr double round_magic = 0x1.8p52;  // adding it rounds |v| < 2^51 to an integer
  // k = round(4u), the quadrant; its low bits are the low mantissa bits of 4u + 1.5 * 2^52.
  const double shifted = 4.0 * u + round_magic;
  const std::uint64_t q = std::bit_cast<std::uint64_t>(shifted);
  const double k = shifted - round_magic;
  const double t = u - 0.25 * k;  // exact: a multiple of u's ulp with |t| <= 1/8
  const double z = t * t;
  const double w = z * z;
  // Estrin-style split (as fdlibm's log) to shorten the dependency chains.
  const double sp = (s3 + z * s5) + w * ((s7 + z * s9) + w * (s11 + z * s13));
  const double cp = (c4 + z * c6) + w * ((c8 + z * c10) + w * (c12 + z * c14));
  const double sn = t * s1 + (t * z) * sp;
  const double cs = 1.0 + (z * c2 + w * cp);
  // angle = k pi/2 + 2 pi t: quadrant 1 -> (cos, -sin), 2 -> (-sin, -cos), 3 -> (-cos, sin).
  const std::uint64_t swap = 0 - (q & 1);
  const std::uint64_t sb = std::bit_cast<std::uint64_t>(sn);
  const std::uint64_t cb = std::bit_cast<std::uint64_t>(cs);
  sin_out = std::bit_cast<double>(((sb & ~swap) | (cb & swap)) ^ ((q & 2) << 62));
  cos_out = std::bit_cast<double>(((cb & ~swap) | (sb & swap)) ^ (((q + 1) & 2) << 62));
}

}  // namespace rcsweep::rng::detail
