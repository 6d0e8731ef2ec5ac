// rng: Philox4x64-10 streams (MODELS.md "Randomness").
#include <Random123/philox.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

#include "rng/philox.hpp"

namespace rcsweep::rng {
namespace {

StreamKey base_key() {
  StreamKey k;
  k.seed = 20240601;
  k.replicate = 3;
  k.T = 32;
  k.d = 64;
  k.layer = 5;
  k.tensor = Tensor::value;
  k.head = 2;
  return k;
}

std::vector<double> normals(const StreamKey& k, std::size_t n) {
  std::vector<double> v(n);
  fill_normal(k, v);
  return v;
}
std::vector<double> uniforms(const StreamKey& k, std::size_t n) {
  std::vector<double> v(n);
  fill_uniform(k, v);
  return v;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) return false;
  return true;
}

double phi(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

TEST(RngPhilox, SameKeyIsBitwiseDeterministic) {
  const StreamKey k = base_key();
  EXPECT_TRUE(bitwise_equal(normals(k, 1003), normals(k, 1003)));
  EXPECT_TRUE(bitwise_equal(uniforms(k, 1003), uniforms(k, 1003)));
}

TEST(RngPhilox, EveryKeyFieldChangesTheStream) {
  const std::vector<std::pair<const char*, std::function<void(StreamKey&)>>> changes = {
      {"seed", [](StreamKey& k) { k.seed += 1; }},
      {"seed high bits", [](StreamKey& k) { k.seed ^= std::uint64_t{1} << 63; }},
      {"replicate", [](StreamKey& k) { k.replicate += 1; }},
      {"T", [](StreamKey& k) { k.T += 1; }},
      {"d", [](StreamKey& k) { k.d += 1; }},
      {"layer", [](StreamKey& k) { k.layer += 1; }},
      {"tensor", [](StreamKey& k) { k.tensor = Tensor::query; }},
      {"head", [](StreamKey& k) { k.head += 1; }},
      // Fields packed into one word must not alias: (replicate, T) = (3, 32) vs (32, 3), ...
      {"replicate<->T", [](StreamKey& k) { std::swap(k.replicate, k.T); }},
      {"d<->layer", [](StreamKey& k) { std::swap(k.d, k.layer); }},
      {"tensor<->head", [](StreamKey& k) {
         const auto t = static_cast<std::uint32_t>(k.tensor);
         k.tensor = static_cast<Tensor>(k.head);
         k.head = t;
       }},
  };
  const StreamKey k0 = base_key();
  const auto n0 = normals(k0, 16);
  const auto u0 = uniforms(k0, 16);
  for (const auto& [name, change] : changes) {
    StreamKey k = k0;
    change(k);
    const auto n1 = normals(k, 16);
    const auto u1 = uniforms(k, 16);
    for (std::size_t i = 0; i < 16; ++i) {
      EXPECT_NE(n0[i], n1[i]) << name << " normal " << i;
      EXPECT_NE(u0[i], u1[i]) << name << " uniform " << i;
    }
  }
}

TEST(RngPhilox, PrefixOfLongerFillForAllLengths) {
  const StreamKey k = base_key();
  const auto nl = normals(k, 1024);
  const auto ul = uniforms(k, 1024);
  for (std::size_t n : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 15, 17, 255, 1001, 1023, 1024}) {
    const auto ns = normals(k, n);
    const auto us = uniforms(k, n);
    EXPECT_TRUE(bitwise_equal(ns, std::vector<double>(nl.begin(), nl.begin() + static_cast<long>(n)))) << n;
    EXPECT_TRUE(bitwise_equal(us, std::vector<double>(ul.begin(), ul.begin() + static_cast<long>(n)))) << n;
  }
}

TEST(RngPhilox, UniformAndNormalUseDifferentCounterRanges) {
  // The normal pair (z0, z1) came from u1 = exp(-(z0^2 + z1^2) / 2); it must not be the uniform
  // stream's first value.
  const StreamKey k = base_key();
  const auto z = normals(k, 8);
  const auto u = uniforms(k, 8);
  for (std::size_t p = 0; p < 4; ++p) {
    const double u1 = std::exp(-0.5 * (z[2 * p] * z[2 * p] + z[2 * p + 1] * z[2 * p + 1]));
    EXPECT_GT(std::abs(u1 - u[2 * p]), 1e-9) << p;
  }
}

// Independent reference of the documented stream layout, straight from Random123.
TEST(RngPhilox, MatchesReferenceLayout) {
  const StreamKey k = base_key();
  const philox4x64_key_t key = {{k.seed, (std::uint64_t{k.replicate} << 32) | k.T}};
  auto block = [&](std::uint64_t i, std::uint64_t domain) {
    const philox4x64_ctr_t c = {{i, (std::uint64_t{k.d} << 32) | k.layer,
                                 (std::uint64_t{static_cast<std::uint32_t>(k.tensor)} << 32) | k.head, domain}};
    return philox4x64_R(10, c, key);
  };
  auto unit = [](std::uint64_t x) { return (static_cast<double>(x >> 11) + 0.5) * 0x1p-53; };
  const auto z = normals(k, 12);
  const auto u = uniforms(k, 12);
  for (std::uint64_t i = 0; i < 3; ++i) {
    const auto xn = block(i, 0);
    const auto xu = block(i, 1);
    for (std::size_t p = 0; p < 2; ++p) {
      const double r = std::sqrt(-2.0 * std::log(unit(xn.v[2 * p])));
      const double th = 2.0 * std::numbers::pi * unit(xn.v[2 * p + 1]);
      EXPECT_EQ(z[4 * i + 2 * p], r * std::cos(th));
      EXPECT_EQ(z[4 * i + 2 * p + 1], r * std::sin(th));
    }
    for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(u[4 * i + j], unit(xu.v[j]));
  }
}

TEST(RngPhilox, UniformsInOpenIntervalWithRightMoments) {
  constexpr std::size_t n = 1'000'000;
  const auto u = uniforms(base_key(), n);
  double s = 0.0, s2 = 0.0;
  for (double x : u) {
    ASSERT_GT(x, 0.0);
    ASSERT_LT(x, 1.0);
    s += x;
    s2 += (x - 0.5) * (x - 0.5);
  }
  const double dn = static_cast<double>(n);
  EXPECT_NEAR(s / dn, 0.5, 5.0 * std::sqrt(1.0 / 12.0 / dn));
  // Var((U - 1/2)^2) = 1/80 - 1/144.
  EXPECT_NEAR(s2 / dn, 1.0 / 12.0, 5.0 * std::sqrt((1.0 / 80.0 - 1.0 / 144.0) / dn));
}

TEST(RngPhilox, NormalMomentsWithinFiveStandardErrors) {
  constexpr std::size_t n = 1'000'000;
  const auto z = normals(base_key(), n);
  double m1 = 0.0, m2 = 0.0, m4 = 0.0, cross = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = z[i];
    m1 += x;
    m2 += x * x;
    m4 += x * x * x * x;
    if (i % 2 == 0) cross += z[i] * z[i + 1];  // the two outputs of one Box–Muller pair
  }
  const double dn = static_cast<double>(n);
  EXPECT_NEAR(m1 / dn, 0.0, 5.0 / std::sqrt(dn));
  EXPECT_NEAR(m2 / dn, 1.0, 5.0 * std::sqrt(2.0 / dn));    // Var(Z^2) = 2
  EXPECT_NEAR(m4 / dn, 3.0, 5.0 * std::sqrt(96.0 / dn));   // Var(Z^4) = 105 - 9
  EXPECT_NEAR(cross / (dn / 2), 0.0, 5.0 / std::sqrt(dn / 2));
}

TEST(RngPhilox, NormalCdfKolmogorovSmirnov) {
  constexpr std::size_t n = 1'000'000;
  auto z = normals(base_key(), n);
  std::sort(z.begin(), z.end());
  const double dn = static_cast<double>(n);
  // Pointwise: the empirical CDF at fixed quantiles, within 5 binomial standard errors.
  for (double q : {-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0}) {
    const double p = phi(q);
    const auto below = std::lower_bound(z.begin(), z.end(), q) - z.begin();
    EXPECT_NEAR(static_cast<double>(below) / dn, p, 5.0 * std::sqrt(p * (1 - p) / dn)) << "q = " << q;
  }
  // Global: sqrt(n) * sup |F_n - Phi| below 1.95 (KS critical value at p = 0.001).
  double dmax = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double p = phi(z[i]);
    dmax = std::max({dmax, static_cast<double>(i + 1) / dn - p, p - static_cast<double>(i) / dn});
  }
  EXPECT_LT(std::sqrt(dn) * dmax, 1.95);
}

TEST(RngPhilox, PinnedRegressionValues) {
  // Pins the stream: stored sweep results must stay reproducible across versions, so any change
  // of key layout, counter layout, uniform map or normal transform must fail here.
  StreamKey k;
  k.seed = 42;
  k.replicate = 1;
  k.T = 8;
  k.d = 16;
  k.layer = 2;
  k.tensor = Tensor::value;
  k.head = 0;
  const auto z = normals(k, 6);
  const auto u = uniforms(k, 2);
  const double z_pinned[6] = {0x1.d08a496b99134p-3,  0x1.ceb26d52c3d9bp-1, 0x1.2eaaa805b0b2ep+1,
                               -0x1.f8b705147636dp-4, -0x1.f6d759ad98cc7p-1, 0x1.3766e52941ee9p-1};
  const double u_pinned[2] = {0x1.82eea7cb4a13bp-2, 0x1.284b2e10556efp-2};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(z[i], z_pinned[i]) << i;
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(u[i], u_pinned[i]) << i;
}

}  // namespace
}  // namespace rcsweep::rng
