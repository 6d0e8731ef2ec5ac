// sum4 (src/base/sum.hpp): the documented order of additions, bitwise, for every length mod 4.
#include <bit>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "base/sum.hpp"

namespace rcsweep {
namespace {

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

/// ((s_0 + s_1) + (s_2 + s_3)) written out: s_l sums v_i, i = l mod 4, of the leading multiple of 4
/// entries, and the tail goes into s_0.
double reference(const std::vector<double>& v) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  const std::size_t head = v.size() / 4 * 4;
  for (std::size_t i = 0; i < head; ++i) s[i % 4] += v[i];
  for (std::size_t i = head; i < v.size(); ++i) s[0] += v[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

TEST(Sum4, EmptyIsZero) { EXPECT_TRUE(same_bits(sum4({}), 0.0)); }

TEST(Sum4, FollowsItsOrderOfAdditionsBitwise) {
  // Values of very different magnitudes: every other order of additions rounds differently.
  std::vector<double> v;
  for (int i = 0; i < 23; ++i) v.push_back((i % 3 == 0 ? 1e16 : 1.0) * (i % 2 ? -1.0 : 1.0) + 0.1 * i);
  for (std::size_t n = 0; n <= v.size(); ++n) {
    const std::vector<double> head(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_TRUE(same_bits(sum4(head), reference(head)))
        << "n = " << n << ": " << sum4(head) << " vs " << reference(head);
  }
}

TEST(Sum4, IsNotTheLeftToRightSum) {
  // 1e16 + 1 + 1 + ... left to right loses every 1; in four partial sums the ones of lanes 1-3
  // add up to 2 before meeting 1e16 (the test shows the order is the documented one, not a plain loop).
  const std::vector<double> v = {1e16, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0};
  double left_to_right = 0.0;
  for (double x : v) left_to_right += x;
  EXPECT_EQ(left_to_right, 1e16);
  EXPECT_EQ(sum4(v), 1e16 + 6.0);
  EXPECT_TRUE(same_bits(sum4(v), reference(v)));
}

TEST(Sum4, TailGoesIntoTheFirstPartialSum) {
  // 7 entries: 4 in the lanes, the last 3 added to s_0 after them.
  const std::vector<double> v = {1e16, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0};
  EXPECT_EQ(sum4(v), ((((1e16 + 1.0) + 1.0) + 1.0) + 0.0) + (0.0 + 0.0));
}

}  // namespace
}  // namespace rcsweep
