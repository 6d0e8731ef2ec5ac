#include "rng/philox.hpp"

#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>

namespace rcsweep::rng {
namespace {

// Counter word 3 separates the uniform and normal ranges of one key.
constexpr std::uint64_t domain_normal = 0;
constexpr std::uint64_t domain_uniform = 1;

constexpr double two_pow_m53 = 0x1p-53;
// Largest double below 1. ((2^53 - 1) + 0.5) * 2^-53 rounds (ties-to-even) to exactly 1.0, so
// the single top value of the 53-bit grid is clamped here to keep u in the open interval (0, 1).
constexpr double below_one = 0x1.fffffffffffffp-1;

philox4x64_key_t make_key(const StreamKey& k) {
  philox4x64_key_t key = {{k.seed, (std::uint64_t{k.replicate} << 32) | std::uint64_t{k.T}}};
  return key;
}

philox4x64_ctr_t make_ctr(const StreamKey& k, std::uint64_t domain) {
  philox4x64_ctr_t ctr = {{0, (std::uint64_t{k.d} << 32) | std::uint64_t{k.layer},
                           (std::uint64_t{static_cast<std::uint32_t>(k.tensor)} << 32) | std::uint64_t{k.head},
                           domain}};
  return ctr;
}

// u = ((x >> 11) + 0.5) * 2^-53: the centre of one of 2^53 equal bins of (0, 1).
inline double to_open_unit(std::uint64_t x) {
  const double u = (static_cast<double>(x >> 11) + 0.5) * two_pow_m53;
  return std::min(u, below_one);
}

// Box–Muller: (u1, u2) -> r cos(2 pi u2), r sin(2 pi u2) with r = sqrt(-2 ln u1).
inline void box_muller(std::uint64_t x1, std::uint64_t x2, double& z0, double& z1) {
  const double r = std::sqrt(-2.0 * std::log(to_open_unit(x1)));
  const double theta = (2.0 * std::numbers::pi) * to_open_unit(x2);
  z0 = r * std::cos(theta);
  z1 = r * std::sin(theta);
}

}  // namespace

void fill_normal(const StreamKey& key, std::span<double> out) {
  const philox4x64_key_t k = make_key(key);
  philox4x64_ctr_t ctr = make_ctr(key, domain_normal);
  const std::size_t n = out.size();
  const std::size_t full = n / 4;
  double* p = out.data();
  // Block i yields normals 4i..4i+3, so element i depends only on (key, i).
  for (std::size_t i = 0; i < full; ++i) {
    ctr.v[0] = i;
    const philox4x64_ctr_t x = philox4x64_R(10, ctr, k);
    box_muller(x.v[0], x.v[1], p[4 * i], p[4 * i + 1]);
    box_muller(x.v[2], x.v[3], p[4 * i + 2], p[4 * i + 3]);
  }
  if (const std::size_t rest = n - 4 * full; rest > 0) {
    ctr.v[0] = full;
    const philox4x64_ctr_t x = philox4x64_R(10, ctr, k);
    double z[4];
    box_muller(x.v[0], x.v[1], z[0], z[1]);
    box_muller(x.v[2], x.v[3], z[2], z[3]);
    std::copy_n(z, rest, p + 4 * full);
  }
}

void fill_uniform(const StreamKey& key, std::span<double> out) {
  const philox4x64_key_t k = make_key(key);
  philox4x64_ctr_t ctr = make_ctr(key, domain_uniform);
  const std::size_t n = out.size();
  double* p = out.data();
  for (std::size_t i = 0; 4 * i < n; ++i) {
    ctr.v[0] = i;
    const philox4x64_ctr_t x = philox4x64_R(10, ctr, k);
    const std::size_t m = std::min<std::size_t>(4, n - 4 * i);
    for (std::size_t j = 0; j < m; ++j) p[4 * i + j] = to_open_unit(x.v[j]);
  }
}

}  // namespace rcsweep::rng
