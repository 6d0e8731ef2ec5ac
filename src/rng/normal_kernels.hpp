// Private to rcsweep_rng (and its unit test): the branch-free elementary functions of the
// Box–Muller transform in fill_normal.
//
// Why not libm: std::log/std::cos/std::sin are scalar calls (most of fill_normal's time) and
// their last bit may differ between libm versions. These kernels use only IEEE-754 basic
// operations (+ - * / sqrt, min, integer bit manipulation of the representation), each
// correctly rounded, so the result is bitwise the same on every x86-64 machine and with any
// instruction set the compiler picks (SSE2 packed, AVX, scalar) as long as a*b+c is not contracted
// into an FMA: rcsweep_rng is compiled with -ffp-contract=off (src/rng/CMakeLists.txt). Written
// as plain scalar code on doubles and uint64 bit patterns so that g++ -O3 auto-vectorises the
// loop that calls them: with baseline SSE2 (2 doubles per instruction) in fill_normal_portable,
// with AVX2 (4 doubles) in fill_normal_avx2 and AVX-512 (8) in fill_normal_avx512, of which
// fill_normal picks the widest the CPU runs.
//
// Accuracy (tests/unit/rng/test_philox.cpp measures it against libm over millions of points):
//   log_open_unit(u):   relative error < 2^-52 on the whole 53-bit grid of (0, 1) (fdlibm's
//                       log kernel: reduction to [sqrt(2)/2, sqrt(2)), s = f/(2+f), minimax
//                       polynomial of degree 14 in s, |error| < 2^-58.45 before rounding).
//   sincos_turns(u):    sin(2 pi u), cos(2 pi u) with absolute error < 2^-52 (measured 1.2e-16):
//                       the reduction is done in turns (k = round(256 u), t = u - k/256 exact,
//                       |t| <= 1/512), then a 257-entry table of sin/cos(2 pi k/256), correctly
//                       rounded, and short Taylor polynomials in t (truncation < 1e-17). g++
//                       vectorises the table reads as two 16-byte loads per pair of lanes.
//   log_open_unit measured: 2.2e-16 relative (test_philox.cpp, 2.2 M points incl. u = 2^-54).
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rng/philox.hpp"

// Every function of fill_normal's inner loops is forced inline, so that each ISA variant of the
// fill (philox.cpp) compiles its own copy of them for its instruction set: the out-of-line
// copies that other callers (the unit test) may use stay baseline x86-64.
#define RCSWEEP_RNG_KERNEL [[gnu::always_inline]] inline

namespace rcsweep::rng::detail {

// The ISA variants of fill_normal (philox.cpp). They give bitwise the same values (tested):
// the same IEEE basic operations in the same order, never contracted into FMAs. fill_normal
// calls fill_normal_avx512 when avx512_available() says that the CPU and the OS support AVX-512
// F, DQ and VL, else fill_normal_avx2 when avx2_available() says so for AVX2, else
// fill_normal_portable (baseline x86-64: SSE2). Exposed for the unit test and the benchmark.
void fill_normal_portable(const StreamKey& key, std::span<double> out);
void fill_normal_avx2(const StreamKey& key, std::span<double> out);  ///< only if avx2_available()
/// The same from stream element 4 first_block on (a part of a larger fill).
void fill_normal_part_portable(const StreamKey& key, std::size_t first_block, std::span<double> out);
void fill_normal_part_avx2(const StreamKey& key, std::size_t first_block, std::span<double> out);
bool avx2_available();
/// The AVX-512 (F, DQ, VL) variant, picked first where avx512_available() says so.
void fill_normal_avx512(const StreamKey& key, std::span<double> out);
void fill_normal_part_avx512(const StreamKey& key, std::size_t first_block, std::span<double> out);
void box_muller_avx512(const std::uint64_t* a, const std::uint64_t* b, double* out, std::size_t pairs);
bool avx512_available();
// The Box–Muller step of each variant alone: out[2p], out[2p + 1] = the normals of the words
// (a[p], b[p]), p < pairs (the unit test feeds it the extreme words).
void box_muller_portable(const std::uint64_t* a, const std::uint64_t* b, double* out, std::size_t pairs);
void box_muller_avx2(const std::uint64_t* a, const std::uint64_t* b, double* out, std::size_t pairs);

inline constexpr double two_pow_m53 = 0x1p-53;
// Largest double below 1. ((2^53 - 1) + 0.5) * 2^-53 rounds (ties-to-even) to exactly 1.0, so
// the single top value of the 53-bit grid is clamped here to keep u in the open interval (0, 1).
inline constexpr double below_one = 0x1.fffffffffffffp-1;

// Exact double of an integer 0 <= v < 2^52: place it in the mantissa of 2^52 and subtract 2^52.
// (A conversion instruction from 64-bit integers to packed doubles needs AVX-512.)
RCSWEEP_RNG_KERNEL double small_uint_to_double(std::uint64_t v) {
  return std::bit_cast<double>(v | 0x4330000000000000ULL) - 0x1p52;
}

// u = ((x >> 11) + 0.5) * 2^-53: the centre of one of 2^53 equal bins of (0, 1), clamped below 1.
// Bitwise identical to `std::min((static_cast<double>(x >> 11) + 0.5) * 2^-53, below_one)`
// (tested): with x >> 11 = hi 2^21 + lo, the mantissa fields give H = 2^20 + hi 2^-32 and
// L = 1/2 + lo 2^-53 exactly; H - 2^20 and L - (1/2 - 2^-54) = (lo + 1/2) 2^-53 are exact, and
// their sum is the one rounding of the original formula (scaled by a power of two).
RCSWEEP_RNG_KERNEL double open_unit(std::uint64_t x) {
  const double h = std::bit_cast<double>((x >> 32) | 0x4130000000000000ULL) - 0x1p20;
  const double l = std::bit_cast<double>(((x >> 11) & 0x1fffffULL) | 0x3fe0000000000000ULL) - (0.5 - 0x1p-54);
  const double u = h + l;  // in (0, 1]
  // min(u, below_one) without a compare, which g++ would turn into a branch: the pattern of
  // below_one is that of 1.0 minus 1, and only u = 1 carries into bit 62 when 2^52 is added.
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(u);
  return std::bit_cast<double>(bits - ((bits + 0x0010000000000000ULL) >> 62));
}

// Natural log of a positive normal double u < 2 (here u in [2^-54, 1)); fdlibm __ieee754_log
// without the special cases (musl's reduction on the 64-bit pattern).
RCSWEEP_RNG_KERNEL double log_open_unit(double u) {
  constexpr double ln2_hi = 0x1.62e42fee00000p-1;   // 6.93147180369123816490e-01
  constexpr double ln2_lo = 0x1.a39ef35793c76p-33;  // 1.90821492927058770002e-10
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

struct SinCos {
  double s, c;
};
// sin(2 pi j/256), cos(2 pi j/256), j = 0..256, correctly rounded (mpmath, 200 bits).
alignas(16) inline constexpr SinCos sincos_table[257] = {
    {0x0.0p+0, 0x1.0000000000000p+0},
    {0x1.92155f7a3667ep-6, 0x1.ffd886084cd0dp-1},
    {0x1.91f65f10dd814p-5, 0x1.ff621e3796d7ep-1},
    {0x1.2d52092ce19f6p-4, 0x1.fe9cdad01883ap-1},
    {0x1.917a6bc29b42cp-4, 0x1.fd88da3d12526p-1},
    {0x1.f564e56a9730ep-4, 0x1.fc26470e19fd3p-1},
    {0x1.2c8106e8e613ap-3, 0x1.fa7557f08a517p-1},
    {0x1.5e214448b3fc6p-3, 0x1.f8764fa714ba9p-1},
    {0x1.8f8b83c69a60bp-3, 0x1.f6297cff75cb0p-1},
    {0x1.c0b826a7e4f63p-3, 0x1.f38f3ac64e589p-1},
    {0x1.f19f97b215f1bp-3, 0x1.f0a7efb9230d7p-1},
    {0x1.111d262b1f677p-2, 0x1.ed740e7684963p-1},
    {0x1.294062ed59f06p-2, 0x1.e9f4156c62ddap-1},
    {0x1.4135c94176601p-2, 0x1.e6288ec48e112p-1},
    {0x1.58f9a75ab1fddp-2, 0x1.e212104f686e5p-1},
    {0x1.7088530fa459fp-2, 0x1.ddb13b6ccc23cp-1},
    {0x1.87de2a6aea963p-2, 0x1.d906bcf328d46p-1},
    {0x1.9ef7943a8ed8ap-2, 0x1.d4134d14dc93ap-1},
    {0x1.b5d1009e15cc0p-2, 0x1.ced7af43cc773p-1},
    {0x1.cc66e9931c45ep-2, 0x1.c954b213411f5p-1},
    {0x1.e2b5d3806f63bp-2, 0x1.c38b2f180bdb1p-1},
    {0x1.f8ba4dbf89abap-2, 0x1.bd7c0ac6f952ap-1},
    {0x1.073879922ffeep-1, 0x1.b728345196e3ep-1},
    {0x1.11eb3541b4b23p-1, 0x1.b090a58150200p-1},
    {0x1.1c73b39ae68c8p-1, 0x1.a9b66290ea1a3p-1},
    {0x1.26d054cdd12dfp-1, 0x1.a29a7a0462782p-1},
    {0x1.30ff7fce17035p-1, 0x1.9b3e047f38741p-1},
    {0x1.3affa292050b9p-1, 0x1.93a22499263fbp-1},
    {0x1.44cf325091dd6p-1, 0x1.8bc806b151741p-1},
    {0x1.4e6cabbe3e5e9p-1, 0x1.83b0e0bff976ep-1},
    {0x1.57d69348ceca0p-1, 0x1.7b5df226aafafp-1},
    {0x1.610b7551d2cdfp-1, 0x1.72d0837efff96p-1},
    {0x1.6a09e667f3bcdp-1, 0x1.6a09e667f3bcdp-1},
    {0x1.72d0837efff96p-1, 0x1.610b7551d2cdfp-1},
    {0x1.7b5df226aafafp-1, 0x1.57d69348ceca0p-1},
    {0x1.83b0e0bff976ep-1, 0x1.4e6cabbe3e5e9p-1},
    {0x1.8bc806b151741p-1, 0x1.44cf325091dd6p-1},
    {0x1.93a22499263fbp-1, 0x1.3affa292050b9p-1},
    {0x1.9b3e047f38741p-1, 0x1.30ff7fce17035p-1},
    {0x1.a29a7a0462782p-1, 0x1.26d054cdd12dfp-1},
    {0x1.a9b66290ea1a3p-1, 0x1.1c73b39ae68c8p-1},
    {0x1.b090a58150200p-1, 0x1.11eb3541b4b23p-1},
    {0x1.b728345196e3ep-1, 0x1.073879922ffeep-1},
    {0x1.bd7c0ac6f952ap-1, 0x1.f8ba4dbf89abap-2},
    {0x1.c38b2f180bdb1p-1, 0x1.e2b5d3806f63bp-2},
    {0x1.c954b213411f5p-1, 0x1.cc66e9931c45ep-2},
    {0x1.ced7af43cc773p-1, 0x1.b5d1009e15cc0p-2},
    {0x1.d4134d14dc93ap-1, 0x1.9ef7943a8ed8ap-2},
    {0x1.d906bcf328d46p-1, 0x1.87de2a6aea963p-2},
    {0x1.ddb13b6ccc23cp-1, 0x1.7088530fa459fp-2},
    {0x1.e212104f686e5p-1, 0x1.58f9a75ab1fddp-2},
    {0x1.e6288ec48e112p-1, 0x1.4135c94176601p-2},
    {0x1.e9f4156c62ddap-1, 0x1.294062ed59f06p-2},
    {0x1.ed740e7684963p-1, 0x1.111d262b1f677p-2},
    {0x1.f0a7efb9230d7p-1, 0x1.f19f97b215f1bp-3},
    {0x1.f38f3ac64e589p-1, 0x1.c0b826a7e4f63p-3},
    {0x1.f6297cff75cb0p-1, 0x1.8f8b83c69a60bp-3},
    {0x1.f8764fa714ba9p-1, 0x1.5e214448b3fc6p-3},
    {0x1.fa7557f08a517p-1, 0x1.2c8106e8e613ap-3},
    {0x1.fc26470e19fd3p-1, 0x1.f564e56a9730ep-4},
    {0x1.fd88da3d12526p-1, 0x1.917a6bc29b42cp-4},
    {0x1.fe9cdad01883ap-1, 0x1.2d52092ce19f6p-4},
    {0x1.ff621e3796d7ep-1, 0x1.91f65f10dd814p-5},
    {0x1.ffd886084cd0dp-1, 0x1.92155f7a3667ep-6},
    {0x1.0000000000000p+0, 0x1.77d4c76273645p-204},
    {0x1.ffd886084cd0dp-1, -0x1.92155f7a3667ep-6},
    {0x1.ff621e3796d7ep-1, -0x1.91f65f10dd814p-5},
    {0x1.fe9cdad01883ap-1, -0x1.2d52092ce19f6p-4},
    {0x1.fd88da3d12526p-1, -0x1.917a6bc29b42cp-4},
    {0x1.fc26470e19fd3p-1, -0x1.f564e56a9730ep-4},
    {0x1.fa7557f08a517p-1, -0x1.2c8106e8e613ap-3},
    {0x1.f8764fa714ba9p-1, -0x1.5e214448b3fc6p-3},
    {0x1.f6297cff75cb0p-1, -0x1.8f8b83c69a60bp-3},
    {0x1.f38f3ac64e589p-1, -0x1.c0b826a7e4f63p-3},
    {0x1.f0a7efb9230d7p-1, -0x1.f19f97b215f1bp-3},
    {0x1.ed740e7684963p-1, -0x1.111d262b1f677p-2},
    {0x1.e9f4156c62ddap-1, -0x1.294062ed59f06p-2},
    {0x1.e6288ec48e112p-1, -0x1.4135c94176601p-2},
    {0x1.e212104f686e5p-1, -0x1.58f9a75ab1fddp-2},
    {0x1.ddb13b6ccc23cp-1, -0x1.7088530fa459fp-2},
    {0x1.d906bcf328d46p-1, -0x1.87de2a6aea963p-2},
    {0x1.d4134d14dc93ap-1, -0x1.9ef7943a8ed8ap-2},
    {0x1.ced7af43cc773p-1, -0x1.b5d1009e15cc0p-2},
    {0x1.c954b213411f5p-1, -0x1.cc66e9931c45ep-2},
    {0x1.c38b2f180bdb1p-1, -0x1.e2b5d3806f63bp-2},
    {0x1.bd7c0ac6f952ap-1, -0x1.f8ba4dbf89abap-2},
    {0x1.b728345196e3ep-1, -0x1.073879922ffeep-1},
    {0x1.b090a58150200p-1, -0x1.11eb3541b4b23p-1},
    {0x1.a9b66290ea1a3p-1, -0x1.1c73b39ae68c8p-1},
    {0x1.a29a7a0462782p-1, -0x1.26d054cdd12dfp-1},
    {0x1.9b3e047f38741p-1, -0x1.30ff7fce17035p-1},
    {0x1.93a22499263fbp-1, -0x1.3affa292050b9p-1},
    {0x1.8bc806b151741p-1, -0x1.44cf325091dd6p-1},
    {0x1.83b0e0bff976ep-1, -0x1.4e6cabbe3e5e9p-1},
    {0x1.7b5df226aafafp-1, -0x1.57d69348ceca0p-1},
    {0x1.72d0837efff96p-1, -0x1.610b7551d2cdfp-1},
    {0x1.6a09e667f3bcdp-1, -0x1.6a09e667f3bcdp-1},
    {0x1.610b7551d2cdfp-1, -0x1.72d0837efff96p-1},
    {0x1.57d69348ceca0p-1, -0x1.7b5df226aafafp-1},
    {0x1.4e6cabbe3e5e9p-1, -0x1.83b0e0bff976ep-1},
    {0x1.44cf325091dd6p-1, -0x1.8bc806b151741p-1},
    {0x1.3affa292050b9p-1, -0x1.93a22499263fbp-1},
    {0x1.30ff7fce17035p-1, -0x1.9b3e047f38741p-1},
    {0x1.26d054cdd12dfp-1, -0x1.a29a7a0462782p-1},
    {0x1.1c73b39ae68c8p-1, -0x1.a9b66290ea1a3p-1},
    {0x1.11eb3541b4b23p-1, -0x1.b090a58150200p-1},
    {0x1.073879922ffeep-1, -0x1.b728345196e3ep-1},
    {0x1.f8ba4dbf89abap-2, -0x1.bd7c0ac6f952ap-1},
    {0x1.e2b5d3806f63bp-2, -0x1.c38b2f180bdb1p-1},
    {0x1.cc66e9931c45ep-2, -0x1.c954b213411f5p-1},
    {0x1.b5d1009e15cc0p-2, -0x1.ced7af43cc773p-1},
    {0x1.9ef7943a8ed8ap-2, -0x1.d4134d14dc93ap-1},
    {0x1.87de2a6aea963p-2, -0x1.d906bcf328d46p-1},
    {0x1.7088530fa459fp-2, -0x1.ddb13b6ccc23cp-1},
    {0x1.58f9a75ab1fddp-2, -0x1.e212104f686e5p-1},
    {0x1.4135c94176601p-2, -0x1.e6288ec48e112p-1},
    {0x1.294062ed59f06p-2, -0x1.e9f4156c62ddap-1},
    {0x1.111d262b1f677p-2, -0x1.ed740e7684963p-1},
    {0x1.f19f97b215f1bp-3, -0x1.f0a7efb9230d7p-1},
    {0x1.c0b826a7e4f63p-3, -0x1.f38f3ac64e589p-1},
    {0x1.8f8b83c69a60bp-3, -0x1.f6297cff75cb0p-1},
    {0x1.5e214448b3fc6p-3, -0x1.f8764fa714ba9p-1},
    {0x1.2c8106e8e613ap-3, -0x1.fa7557f08a517p-1},
    {0x1.f564e56a9730ep-4, -0x1.fc26470e19fd3p-1},
    {0x1.917a6bc29b42cp-4, -0x1.fd88da3d12526p-1},
    {0x1.2d52092ce19f6p-4, -0x1.fe9cdad01883ap-1},
    {0x1.91f65f10dd814p-5, -0x1.ff621e3796d7ep-1},
    {0x1.92155f7a3667ep-6, -0x1.ffd886084cd0dp-1},
    {0x1.77d4c76273645p-203, -0x1.0000000000000p+0},
    {-0x1.92155f7a3667ep-6, -0x1.ffd886084cd0dp-1},
    {-0x1.91f65f10dd814p-5, -0x1.ff621e3796d7ep-1},
    {-0x1.2d52092ce19f6p-4, -0x1.fe9cdad01883ap-1},
    {-0x1.917a6bc29b42cp-4, -0x1.fd88da3d12526p-1},
    {-0x1.f564e56a9730ep-4, -0x1.fc26470e19fd3p-1},
    {-0x1.2c8106e8e613ap-3, -0x1.fa7557f08a517p-1},
    {-0x1.5e214448b3fc6p-3, -0x1.f8764fa714ba9p-1},
    {-0x1.8f8b83c69a60bp-3, -0x1.f6297cff75cb0p-1},
    {-0x1.c0b826a7e4f63p-3, -0x1.f38f3ac64e589p-1},
    {-0x1.f19f97b215f1bp-3, -0x1.f0a7efb9230d7p-1},
    {-0x1.111d262b1f677p-2, -0x1.ed740e7684963p-1},
    {-0x1.294062ed59f06p-2, -0x1.e9f4156c62ddap-1},
    {-0x1.4135c94176601p-2, -0x1.e6288ec48e112p-1},
    {-0x1.58f9a75ab1fddp-2, -0x1.e212104f686e5p-1},
    {-0x1.7088530fa459fp-2, -0x1.ddb13b6ccc23cp-1},
    {-0x1.87de2a6aea963p-2, -0x1.d906bcf328d46p-1},
    {-0x1.9ef7943a8ed8ap-2, -0x1.d4134d14dc93ap-1},
    {-0x1.b5d1009e15cc0p-2, -0x1.ced7af43cc773p-1},
    {-0x1.cc66e9931c45ep-2, -0x1.c954b213411f5p-1},
    {-0x1.e2b5d3806f63bp-2, -0x1.c38b2f180bdb1p-1},
    {-0x1.f8ba4dbf89abap-2, -0x1.bd7c0ac6f952ap-1},
    {-0x1.073879922ffeep-1, -0x1.b728345196e3ep-1},
    {-0x1.11eb3541b4b23p-1, -0x1.b090a58150200p-1},
    {-0x1.1c73b39ae68c8p-1, -0x1.a9b66290ea1a3p-1},
    {-0x1.26d054cdd12dfp-1, -0x1.a29a7a0462782p-1},
    {-0x1.30ff7fce17035p-1, -0x1.9b3e047f38741p-1},
    {-0x1.3affa292050b9p-1, -0x1.93a22499263fbp-1},
    {-0x1.44cf325091dd6p-1, -0x1.8bc806b151741p-1},
    {-0x1.4e6cabbe3e5e9p-1, -0x1.83b0e0bff976ep-1},
    {-0x1.57d69348ceca0p-1, -0x1.7b5df226aafafp-1},
    {-0x1.610b7551d2cdfp-1, -0x1.72d0837efff96p-1},
    {-0x1.6a09e667f3bcdp-1, -0x1.6a09e667f3bcdp-1},
    {-0x1.72d0837efff96p-1, -0x1.610b7551d2cdfp-1},
    {-0x1.7b5df226aafafp-1, -0x1.57d69348ceca0p-1},
    {-0x1.83b0e0bff976ep-1, -0x1.4e6cabbe3e5e9p-1},
    {-0x1.8bc806b151741p-1, -0x1.44cf325091dd6p-1},
    {-0x1.93a22499263fbp-1, -0x1.3affa292050b9p-1},
    {-0x1.9b3e047f38741p-1, -0x1.30ff7fce17035p-1},
    {-0x1.a29a7a0462782p-1, -0x1.26d054cdd12dfp-1},
    {-0x1.a9b66290ea1a3p-1, -0x1.1c73b39ae68c8p-1},
    {-0x1.b090a58150200p-1, -0x1.11eb3541b4b23p-1},
    {-0x1.b728345196e3ep-1, -0x1.073879922ffeep-1},
    {-0x1.bd7c0ac6f952ap-1, -0x1.f8ba4dbf89abap-2},
    {-0x1.c38b2f180bdb1p-1, -0x1.e2b5d3806f63bp-2},
    {-0x1.c954b213411f5p-1, -0x1.cc66e9931c45ep-2},
    {-0x1.ced7af43cc773p-1, -0x1.b5d1009e15cc0p-2},
    {-0x1.d4134d14dc93ap-1, -0x1.9ef7943a8ed8ap-2},
    {-0x1.d906bcf328d46p-1, -0x1.87de2a6aea963p-2},
    {-0x1.ddb13b6ccc23cp-1, -0x1.7088530fa459fp-2},
    {-0x1.e212104f686e5p-1, -0x1.58f9a75ab1fddp-2},
    {-0x1.e6288ec48e112p-1, -0x1.4135c94176601p-2},
    {-0x1.e9f4156c62ddap-1, -0x1.294062ed59f06p-2},
    {-0x1.ed740e7684963p-1, -0x1.111d262b1f677p-2},
    {-0x1.f0a7efb9230d7p-1, -0x1.f19f97b215f1bp-3},
    {-0x1.f38f3ac64e589p-1, -0x1.c0b826a7e4f63p-3},
    {-0x1.f6297cff75cb0p-1, -0x1.8f8b83c69a60bp-3},
    {-0x1.f8764fa714ba9p-1, -0x1.5e214448b3fc6p-3},
    {-0x1.fa7557f08a517p-1, -0x1.2c8106e8e613ap-3},
    {-0x1.fc26470e19fd3p-1, -0x1.f564e56a9730ep-4},
    {-0x1.fd88da3d12526p-1, -0x1.917a6bc29b42cp-4},
    {-0x1.fe9cdad01883ap-1, -0x1.2d52092ce19f6p-4},
    {-0x1.ff621e3796d7ep-1, -0x1.91f65f10dd814p-5},
    {-0x1.ffd886084cd0dp-1, -0x1.92155f7a3667ep-6},
    {-0x1.0000000000000p+0, 0x1.dcc40d4ec52eap-199},
    {-0x1.ffd886084cd0dp-1, 0x1.92155f7a3667ep-6},
    {-0x1.ff621e3796d7ep-1, 0x1.91f65f10dd814p-5},
    {-0x1.fe9cdad01883ap-1, 0x1.2d52092ce19f6p-4},
    {-0x1.fd88da3d12526p-1, 0x1.917a6bc29b42cp-4},
    {-0x1.fc26470e19fd3p-1, 0x1.f564e56a9730ep-4},
    {-0x1.fa7557f08a517p-1, 0x1.2c8106e8e613ap-3},
    {-0x1.f8764fa714ba9p-1, 0x1.5e214448b3fc6p-3},
    {-0x1.f6297cff75cb0p-1, 0x1.8f8b83c69a60bp-3},
    {-0x1.f38f3ac64e589p-1, 0x1.c0b826a7e4f63p-3},
    {-0x1.f0a7efb9230d7p-1, 0x1.f19f97b215f1bp-3},
    {-0x1.ed740e7684963p-1, 0x1.111d262b1f677p-2},
    {-0x1.e9f4156c62ddap-1, 0x1.294062ed59f06p-2},
    {-0x1.e6288ec48e112p-1, 0x1.4135c94176601p-2},
    {-0x1.e212104f686e5p-1, 0x1.58f9a75ab1fddp-2},
    {-0x1.ddb13b6ccc23cp-1, 0x1.7088530fa459fp-2},
    {-0x1.d906bcf328d46p-1, 0x1.87de2a6aea963p-2},
    {-0x1.d4134d14dc93ap-1, 0x1.9ef7943a8ed8ap-2},
    {-0x1.ced7af43cc773p-1, 0x1.b5d1009e15cc0p-2},
    {-0x1.c954b213411f5p-1, 0x1.cc66e9931c45ep-2},
    {-0x1.c38b2f180bdb1p-1, 0x1.e2b5d3806f63bp-2},
    {-0x1.bd7c0ac6f952ap-1, 0x1.f8ba4dbf89abap-2},
    {-0x1.b728345196e3ep-1, 0x1.073879922ffeep-1},
    {-0x1.b090a58150200p-1, 0x1.11eb3541b4b23p-1},
    {-0x1.a9b66290ea1a3p-1, 0x1.1c73b39ae68c8p-1},
    {-0x1.a29a7a0462782p-1, 0x1.26d054cdd12dfp-1},
    {-0x1.9b3e047f38741p-1, 0x1.30ff7fce17035p-1},
    {-0x1.93a22499263fbp-1, 0x1.3affa292050b9p-1},
    {-0x1.8bc806b151741p-1, 0x1.44cf325091dd6p-1},
    {-0x1.83b0e0bff976ep-1, 0x1.4e6cabbe3e5e9p-1},
    {-0x1.7b5df226aafafp-1, 0x1.57d69348ceca0p-1},
    {-0x1.72d0837efff96p-1, 0x1.610b7551d2cdfp-1},
    {-0x1.6a09e667f3bcdp-1, 0x1.6a09e667f3bcdp-1},
    {-0x1.610b7551d2cdfp-1, 0x1.72d0837efff96p-1},
    {-0x1.57d69348ceca0p-1, 0x1.7b5df226aafafp-1},
    {-0x1.4e6cabbe3e5e9p-1, 0x1.83b0e0bff976ep-1},
    {-0x1.44cf325091dd6p-1, 0x1.8bc806b151741p-1},
    {-0x1.3affa292050b9p-1, 0x1.93a22499263fbp-1},
    {-0x1.30ff7fce17035p-1, 0x1.9b3e047f38741p-1},
    {-0x1.26d054cdd12dfp-1, 0x1.a29a7a0462782p-1},
    {-0x1.1c73b39ae68c8p-1, 0x1.a9b66290ea1a3p-1},
    {-0x1.11eb3541b4b23p-1, 0x1.b090a58150200p-1},
    {-0x1.073879922ffeep-1, 0x1.b728345196e3ep-1},
    {-0x1.f8ba4dbf89abap-2, 0x1.bd7c0ac6f952ap-1},
    {-0x1.e2b5d3806f63bp-2, 0x1.c38b2f180bdb1p-1},
    {-0x1.cc66e9931c45ep-2, 0x1.c954b213411f5p-1},
    {-0x1.b5d1009e15cc0p-2, 0x1.ced7af43cc773p-1},
    {-0x1.9ef7943a8ed8ap-2, 0x1.d4134d14dc93ap-1},
    {-0x1.87de2a6aea963p-2, 0x1.d906bcf328d46p-1},
    {-0x1.7088530fa459fp-2, 0x1.ddb13b6ccc23cp-1},
    {-0x1.58f9a75ab1fddp-2, 0x1.e212104f686e5p-1},
    {-0x1.4135c94176601p-2, 0x1.e6288ec48e112p-1},
    {-0x1.294062ed59f06p-2, 0x1.e9f4156c62ddap-1},
    {-0x1.111d262b1f677p-2, 0x1.ed740e7684963p-1},
    {-0x1.f19f97b215f1bp-3, 0x1.f0a7efb9230d7p-1},
    {-0x1.c0b826a7e4f63p-3, 0x1.f38f3ac64e589p-1},
    {-0x1.8f8b83c69a60bp-3, 0x1.f6297cff75cb0p-1},
    {-0x1.5e214448b3fc6p-3, 0x1.f8764fa714ba9p-1},
    {-0x1.2c8106e8e613ap-3, 0x1.fa7557f08a517p-1},
    {-0x1.f564e56a9730ep-4, 0x1.fc26470e19fd3p-1},
    {-0x1.917a6bc29b42cp-4, 0x1.fd88da3d12526p-1},
    {-0x1.2d52092ce19f6p-4, 0x1.fe9cdad01883ap-1},
    {-0x1.91f65f10dd814p-5, 0x1.ff621e3796d7ep-1},
    {-0x1.92155f7a3667ep-6, 0x1.ffd886084cd0dp-1},
    {-0x1.77d4c76273645p-202, 0x1.0000000000000p+0},
};

// sin(2 pi u) and cos(2 pi u) for u in [0, 1] on the 2^-54 grid (fill_normal's uniforms).
// u = k/256 + t with k = round(256 u) and t exact, |t| <= 1/512 (|2 pi t| <= 0.0123); then
// sin(2 pi u) = S_k C(t) + C_k S(t), cos(2 pi u) = C_k C(t) - S_k S(t) with the table (S_k, C_k)
// and Taylor polynomials S(t) (to t^5) and C(t) (to t^6), truncation error < 1e-17.
RCSWEEP_RNG_KERNEL void sincos_turns(double u, double& sin_out, double& cos_out) {
  constexpr double s1 = 0x1.921fb54442d18p+2;   // 2 pi
  constexpr double s3 = -0x1.4abbce625be53p+5;  // -(2 pi)^3 / 3!
  constexpr double s5 = 0x1.466bc6775aae2p+6;   // (2 pi)^5 / 5!
  constexpr double c2 = -0x1.3bd3cc9be45dep+4;  // -(2 pi)^2 / 2!
  constexpr double c4 = 0x1.03c1f081b5ac4p+6;   // (2 pi)^4 / 4!
  constexpr double c6 = -0x1.55d3c7e3cbffap+6;  // -(2 pi)^6 / 6!
  constexpr double round_magic = 0x1.8p52;      // adding it rounds |v| < 2^51 to an integer
  const double shifted = 256.0 * u + round_magic;
  const std::uint64_t j = std::bit_cast<std::uint64_t>(shifted) & 0x1ffU;  // k in [0, 256]
  const double k = shifted - round_magic;
  const double t = u - 0x1p-8 * k;  // exact: a multiple of u's ulp with |t| <= 1/512
  const double z = t * t;
  const double sp = t * s1 + (t * z) * (s3 + z * s5);
  const double cp = z * (c2 + z * (c4 + z * c6));  // C(t) - 1
  const double sk = sincos_table[j].s;
  const double ck = sincos_table[j].c;
  sin_out = sk + (sk * cp + ck * sp);
  cos_out = ck + (ck * cp - sk * sp);
}

}  // namespace rcsweep::rng::detail
