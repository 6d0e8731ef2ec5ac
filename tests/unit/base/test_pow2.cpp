// Exact scaling by powers of two (src/base/pow2.hpp): scale_pow2 equals std::ldexp bitwise, also
// where 2^k is not a normal double and where results become subnormal, infinite or zero, and in
// place; renormalise_pow2 brings the largest |entry| into [1/2, 1) and returns the exponent.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "base/pow2.hpp"

namespace rcsweep {
namespace {

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

const double inf = std::numeric_limits<double>::infinity();
const double tiny = std::numeric_limits<double>::denorm_min();

const std::vector<double> values = {0.0,
                                    -0.0,
                                    1.0,
                                    -1.0,
                                    1.0 / 3.0,
                                    -2.5e-300,
                                    1.7e308,
                                    tiny,
                                    std::numeric_limits<double>::min(),  // smallest normal
                                    0x1.fffffffffffffp-1,
                                    3.0 * tiny,  // rounds when halved
                                    inf,
                                    -inf};

void expect_ldexp(int k) {
  std::vector<double> out(values.size());
  scale_pow2(values, out, k);
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_TRUE(same_bits(out[i], std::ldexp(values[i], k)))
        << "k = " << k << ", x = " << values[i] << ": " << out[i] << " vs " << std::ldexp(values[i], k);
}

// The exponents the metrics use (-e of a finite double's frexp: |k| <= 1074) and beyond, as far as
// the two factors 2^(k/2), 2^(k - k/2) are finite and nonzero (-2148 <= k <= 2046).
TEST(Pow2, ScaleIsLdexpBitwiseForEveryExponent) {
  for (const int k :
       {0, 1, -1, 52, -52, 1023, -1022, 1024, -1023, -1074, -1075, 1100, -1100, 2000, -2000, 2046, -2046, -2098, -2148})
    expect_ldexp(k);
}

// Beyond the two factors' reach a factor would overflow to +inf (k >= 2047: 0 * 2^k NaN instead of
// 0, 2^-1074 * 2^2047 inf instead of 2^973) or underflow to 0 (k <= -2149: inf * 2^k NaN instead of
// inf); there scale_pow2 must still give ldexp's result. Not reached by the metrics (|k| <= 1074).
TEST(Pow2, ScaleIsLdexpBitwiseForExponentsOutsideTwoFactors) {
  for (const int k : {2047, 2098, 5000, -2149, -5000}) expect_ldexp(k);
}

TEST(Pow2, ScaleInPlaceAndOfNaN) {
  std::vector<double> x = {1.5, -3.0, std::numeric_limits<double>::quiet_NaN()};
  scale_pow2(x, x, 3);
  EXPECT_EQ(x[0], 12.0);
  EXPECT_EQ(x[1], -24.0);
  EXPECT_TRUE(std::isnan(x[2]));
  scale_pow2(x, x, -1500);  // 2^-1500 is no double: applied as two factors
  EXPECT_EQ(x[0], std::ldexp(12.0, -1500));
  EXPECT_EQ(x[0], 0.0);
  std::vector<double> empty;
  scale_pow2(empty, empty, 5);  // nothing to do
}

TEST(Pow2, RenormaliseBringsTheLargestEntryIntoHalfToOne) {
  std::vector<double> x = {3.0, -40.0, 0.5, 0.0};
  const std::vector<double> before = x;
  const int k = renormalise_pow2(x);
  EXPECT_EQ(k, 6);  // 40 = 0.625 * 2^6
  EXPECT_EQ(x, (std::vector<double>{3.0 / 64, -0.625, 0.5 / 64, 0.0}));
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(std::ldexp(x[i], k), before[i]);  // exact

  std::vector<double> small = {1e-310, -3e-309};  // subnormal
  const std::vector<double> small_before = small;
  const int ks = renormalise_pow2(small);
  EXPECT_LT(ks, -1022);
  EXPECT_GE(std::abs(small[1]), 0.5);
  EXPECT_LT(std::abs(small[1]), 1.0);
  for (std::size_t i = 0; i < small.size(); ++i) EXPECT_EQ(std::ldexp(small[i], ks), small_before[i]);

  std::vector<double> half = {0.5, -0.25};
  EXPECT_EQ(renormalise_pow2(half), 0);
  EXPECT_EQ(half, (std::vector<double>{0.5, -0.25}));
  std::vector<double> one = {1.0};
  EXPECT_EQ(renormalise_pow2(one), 1);
  EXPECT_EQ(one[0], 0.5);
}

TEST(Pow2, RenormaliseLeavesZeroNonFiniteAndEmptyAlone) {
  std::vector<double> zeros = {0.0, -0.0};
  EXPECT_EQ(renormalise_pow2(zeros), 0);
  EXPECT_TRUE(same_bits(zeros[1], -0.0));
  std::vector<double> with_inf = {2.0, inf};
  EXPECT_EQ(renormalise_pow2(with_inf), 0);
  EXPECT_EQ(with_inf[0], 2.0);
  std::vector<double> inf_first = {-inf, 2.0};
  EXPECT_EQ(renormalise_pow2(inf_first), 0);
  EXPECT_EQ(inf_first[1], 2.0);
  std::vector<double> empty;
  EXPECT_EQ(renormalise_pow2(empty), 0);
}

}  // namespace
}  // namespace rcsweep
