// rng: Philox4x64-10 streams (MODELS.md "Randomness") and the ISA variants of fill_normal.
#include <Random123/philox.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numbers>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rng/normal_kernels.hpp"
#include "base/parallel.hpp"
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
      {"tensor<->head",
       [](StreamKey& k) {
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

// A fill from element `first` on is the slice of one fill from 0: every start within a Philox
// block of 4, short and long lengths, and fills long enough to be cut into parts on the threads.
TEST(RngPhilox, FillFromAnElementIsTheSliceOfTheWholeFill) {
  const StreamKey k = base_key();
  const std::size_t part = std::size_t{1} << 16;
  const auto whole = normals(k, 2 * part + 64 + 3 * part);
  for (std::uint64_t first : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 61, 1000, 1003}) {
    for (const std::size_t n : std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 7, 9, 31, 1024, 2 * part + 3, 3 * part + 1}) {
      std::vector<double> got(n, -1.0);
      fill_normal(k, first, got);
      const auto begin = whole.begin() + static_cast<long>(first);
      EXPECT_TRUE(bitwise_equal(got, std::vector<double>(begin, begin + static_cast<long>(n)))) << first << " " << n;
    }
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

// Independent reference of the documented stream layout, straight from Random123, with the
// textbook Box–Muller in libm: u = ((x >> 11) + 0.5) 2^-53 clamped below 1,
// (r cos(2 pi u2), r sin(2 pi u2)) with r = sqrt(-2 ln u1) for the pairs (x0, x1), (x2, x3).
philox4x64_ctr_t reference_block(const StreamKey& k, std::uint64_t i, std::uint64_t domain) {
  const philox4x64_key_t key = {{k.seed, (std::uint64_t{k.replicate} << 32) | k.T}};
  const philox4x64_ctr_t c = {{i, (std::uint64_t{k.d} << 32) | k.layer,
                               (std::uint64_t{static_cast<std::uint32_t>(k.tensor)} << 32) | k.head, domain}};
  return philox4x64_R(10, c, key);
}
double reference_unit(std::uint64_t x) {
  return std::min((static_cast<double>(x >> 11) + 0.5) * 0x1p-53, 0x1.fffffffffffffp-1);
}
void reference_box_muller(std::uint64_t x1, std::uint64_t x2, double& z0, double& z1) {
  const double r = std::sqrt(-2.0 * std::log(reference_unit(x1)));
  const double th = 2.0 * std::numbers::pi * reference_unit(x2);
  z0 = r * std::cos(th);
  z1 = r * std::sin(th);
}

TEST(RngPhilox, MatchesReferenceLayout) {
  const StreamKey k = base_key();
  const auto z = normals(k, 12);
  const auto u = uniforms(k, 12);
  for (std::uint64_t i = 0; i < 3; ++i) {
    const auto xn = reference_block(k, i, 0);
    const auto xu = reference_block(k, i, 1);
    for (std::size_t p = 0; p < 2; ++p) {
      double z0 = 0.0, z1 = 0.0;
      reference_box_muller(xn.v[2 * p], xn.v[2 * p + 1], z0, z1);
      EXPECT_NEAR(z[4 * i + 2 * p], z0, 1e-13);
      EXPECT_NEAR(z[4 * i + 2 * p + 1], z1, 1e-13);
    }
    for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(u[4 * i + j], reference_unit(xu.v[j]));
  }
}

using FillFn = void (*)(const StreamKey&, std::span<double>);

// The ISA variants of fill_normal this CPU can run (the AVX2 one only where it is supported).
std::vector<std::pair<const char*, FillFn>> variants() {
  std::vector<std::pair<const char*, FillFn>> v = {{"fill_normal", fill_normal},
                                                   {"portable", detail::fill_normal_portable}};
  if (detail::avx2_available()) v.emplace_back("avx2", detail::fill_normal_avx2);
  if (detail::avx512_available()) v.emplace_back("avx512", detail::fill_normal_avx512);
  return v;
}

std::vector<double> normals_with(FillFn fill, const StreamKey& k, std::size_t n) {
  std::vector<double> v(n);
  fill(k, v);
  return v;
}

// The fast transform (own log/sin/cos, chunked Philox) is the same math as the reference:
// 400'000 normals of several keys within 8 x 2^-52 max(r, 1) of it, in every ISA variant.
TEST(RngPhilox, FastNormalsMatchLibmReference) {
  double worst = 0.0;
  for (const auto& [name, fill] : variants()) {
    for (std::uint32_t layer : {0u, 1u, 7u}) {
      StreamKey k = base_key();
      k.layer = layer;
      k.seed += layer;
      constexpr std::size_t n = 400'000 / 3 + 1;  // not a multiple of 4: the tail block too
      const auto z = normals_with(fill, k, n);
      for (std::size_t i = 0; 4 * i < n; ++i) {
        const auto x = reference_block(k, i, 0);
        double ref[4];
        reference_box_muller(x.v[0], x.v[1], ref[0], ref[1]);
        reference_box_muller(x.v[2], x.v[3], ref[2], ref[3]);
        for (std::size_t j = 0; j < 4 && 4 * i + j < n; ++j) {
          // In units of 2^-52 max(r, 1) with r the pair's radius: the tolerance of
          // BoxMullerVariantsMatchLibmOnExtremeWords below.
          const double r = std::hypot(ref[j & 2], ref[(j & 2) + 1]);
          const double err = std::abs(z[4 * i + j] - ref[j]) / (0x1p-52 * std::max(1.0, r));
          worst = std::max(worst, err);
          ASSERT_LE(err, 8.0) << name << " element " << 4 * i + j << " layer " << layer;
        }
      }
    }
  }
  RecordProperty("max_error", std::to_string(worst));
  std::printf("fill_normal: max error %.2f x 2^-52 max(r, 1) against libm Box-Muller\n", worst);
}

// Random123's own known-answer vectors for philox4x64_R(10, ctr, key) (kat_vectors of the
// Random123 distribution): the installed library is the generator the stream layout documents.
TEST(RngPhilox, Random123KnownAnswerVectors) {
  struct Kat {
    philox4x64_ctr_t ctr;
    philox4x64_key_t key;
    std::uint64_t out[4];
  };
  const std::uint64_t ones = ~std::uint64_t{0};
  const Kat kats[3] = {
      {{{0, 0, 0, 0}},
       {{0, 0}},
       {0x16554d9eca36314cULL, 0xdb20fe9d672d0fdcULL, 0xd7e772cee186176bULL, 0x7e68b68aec7ba23bULL}},
      {{{ones, ones, ones, ones}},
       {{ones, ones}},
       {0x87b092c3013fe90bULL, 0x438c3c67be8d0224ULL, 0x9cc7d7c69cd777b6ULL, 0xa09caebf594f0ba0ULL}},
      {{{0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL, 0xa4093822299f31d0ULL, 0x082efa98ec4e6c89ULL}},
       {{0x452821e638d01377ULL, 0xbe5466cf34e90c6cULL}},
       {0xa528f45403e61d95ULL, 0x38c72dbd566e9788ULL, 0xa5a1610e72fd18b5ULL, 0x57bd43b5e52b7fe6ULL}},
  };
  for (const Kat& kat : kats) {
    const philox4x64_ctr_t x = philox4x64_R(10, kat.ctr, kat.key);
    for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(x.v[j], kat.out[j]) << std::hex << kat.ctr.v[0] << " word " << j;
  }
}

// The all-zero StreamKey has Philox key {0, 0} and block 0 counter {0, 0, 0, 0}: its first four
// normals are the Box–Muller transform of the first known-answer vector, in every variant (this
// ties fill_normal's own hoisted Philox to the published numbers, not only to Random123's code).
TEST(RngPhilox, ZeroKeyStreamIsTheKnownAnswerVector) {
  const std::uint64_t a[2] = {0x16554d9eca36314cULL, 0xd7e772cee186176bULL};  // x0, x2
  const std::uint64_t b[2] = {0xdb20fe9d672d0fdcULL, 0x7e68b68aec7ba23bULL};  // x1, x3
  double kernel[4];
  detail::box_muller_portable(a, b, kernel, 2);
  for (const auto& [name, fill] : variants()) {
    const auto z = normals_with(fill, StreamKey{}, 4);
    for (std::size_t p = 0; p < 2; ++p) {
      double z0 = 0.0, z1 = 0.0;
      reference_box_muller(a[p], b[p], z0, z1);
      EXPECT_EQ(z[2 * p], kernel[2 * p]) << name << " pair " << p;
      EXPECT_EQ(z[2 * p + 1], kernel[2 * p + 1]) << name << " pair " << p;
      EXPECT_NEAR(z[2 * p], z0, 1e-14) << name << " pair " << p;
      EXPECT_NEAR(z[2 * p + 1], z1, 1e-14) << name << " pair " << p;
    }
  }
}

// The ISA variants are bitwise equal: every length around the chunk (64 blocks = 256 normals) and
// block (4 normals) boundaries, several keys, and a long fill.
TEST(RngDispatch, VariantsAreBitwiseEqual) {
  if (!detail::avx2_available()) GTEST_SKIP() << "no AVX2 on this CPU: only the portable variant runs";
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 40; ++n) lengths.push_back(n);
  for (std::size_t c : {1, 2, 3, 7}) {
    for (std::size_t dn = 0; dn <= 5; ++dn) {
      lengths.push_back(256 * c + dn);
      lengths.push_back(256 * c - dn);
    }
  }
  lengths.push_back(100'003);
  lengths.push_back(562'500);  // a 750 x 750 weight
  for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{42}, ~std::uint64_t{0}}) {
    StreamKey k = base_key();
    k.seed = seed;
    for (std::size_t n : lengths) {
      k.layer = static_cast<std::uint32_t>(n);
      const auto p = normals_with(detail::fill_normal_portable, k, n);
      ASSERT_TRUE(bitwise_equal(p, normals_with(detail::fill_normal_avx2, k, n))) << "seed " << seed << " n " << n;
      if (detail::avx512_available()) {
        ASSERT_TRUE(bitwise_equal(p, normals_with(detail::fill_normal_avx512, k, n)))
            << "avx512, seed " << seed << " n " << n;
      }
      ASSERT_TRUE(bitwise_equal(p, normals(k, n))) << "fill_normal, seed " << seed << " n " << n;
    }
  }
}

// Philox words whose uniforms reach the ends of the grid: u1 = 2^-54 (the largest normal,
// sqrt(108 ln 2) = 8.65), u1 -> 1 (r -> 0), and angles on every 1/4096 of a turn (quadrant edges,
// the sincos table's nodes and the ties between them), plus pseudo-random words.
void extreme_words(std::vector<std::uint64_t>& a, std::vector<std::uint64_t>& b) {
  const std::uint64_t ones = ~std::uint64_t{0};
  const std::vector<std::uint64_t> radial = {0,
                                             1,
                                             0x7ff,
                                             0x800,
                                             0x1000,
                                             std::uint64_t{1} << 32,
                                             std::uint64_t{1} << 63,
                                             (std::uint64_t{1} << 63) - 1,
                                             ones - 0x800,
                                             ones - 0x7ff,
                                             ones};
  std::vector<std::uint64_t> angular = {0, 0x7ff, 0x800, ones, ones - 0x800, ones - 0x7ff};
  for (std::uint64_t j = 1; j < 4096; ++j) {
    angular.push_back(j << 52);            // u2 = j / 4096 (+ half a grid step)
    angular.push_back((j << 52) - 0x800);  // the grid point below
  }
  std::uint64_t s = 0x9E3779B97F4A7C15ULL;
  for (std::uint64_t w : angular) {
    for (std::uint64_t r : radial) {
      a.push_back(r);
      b.push_back(w);
    }
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    a.push_back(s >> (s % 53));  // radial words at every exponent: u1 down to 2^-54
    b.push_back(w);
  }
}

// The Box–Muller step of each variant on those words: bitwise equal across variants, and within
// a stated tolerance of the libm formula: |z - z_libm| <= 8 * 2^-52 * max(r, 1), where r is the
// radius (up to 8.65). The error budget: log 1 ulp, sqrt and products 1.5 ulp, sincos 1.2e-16
// absolute, and the libm formula's own rounding of theta = 2 pi u2 (up to 4.4e-16 absolute).
TEST(RngKernels, BoxMullerVariantsMatchLibmOnExtremeWords) {
  std::vector<std::uint64_t> a, b;
  extreme_words(a, b);
  const std::size_t pairs = a.size();
  std::vector<double> z(2 * pairs), z_avx2(2 * pairs), z_avx512(2 * pairs);
  detail::box_muller_portable(a.data(), b.data(), z.data(), pairs);
  if (detail::avx2_available()) {
    detail::box_muller_avx2(a.data(), b.data(), z_avx2.data(), pairs);
    ASSERT_TRUE(bitwise_equal(z, z_avx2));
  }
  if (detail::avx512_available()) {
    detail::box_muller_avx512(a.data(), b.data(), z_avx512.data(), pairs);
    ASSERT_TRUE(bitwise_equal(z, z_avx512));
  }
  double worst = 0.0, largest = 0.0;
  for (std::size_t p = 0; p < pairs; ++p) {
    double z0 = 0.0, z1 = 0.0;
    reference_box_muller(a[p], b[p], z0, z1);
    const double r = std::sqrt(z0 * z0 + z1 * z1);
    const double scale = 0x1p-52 * std::max(r, 1.0);
    const double err = std::max(std::abs(z[2 * p] - z0), std::abs(z[2 * p + 1] - z1)) / scale;
    worst = std::max(worst, err);
    largest = std::max({largest, std::abs(z[2 * p]), std::abs(z[2 * p + 1])});
    ASSERT_LE(err, 8.0) << std::hex << a[p] << " " << b[p];
  }
  EXPECT_GT(largest, 8.6);  // the extreme u1 = 2^-54 was reached
  EXPECT_LT(largest, 8.7);
  std::printf("Box-Muller: max error %.2f x 2^-52 max(r, 1) against libm over %zu pairs\n", worst, pairs);
}

// Threads drawing different streams at the same time (and racing to the first-call dispatch)
// get the numbers of a sequential run.
TEST(RngDispatch, ConcurrentFillsEqualSequentialOnes) {
  constexpr int threads = 4, per_thread = 6;
  constexpr std::size_t n = 5'000;
  std::vector<std::vector<double>> par(threads * per_thread, std::vector<double>(n));
  auto key_of = [](int t, int j) {
    StreamKey k = base_key();
    k.head = static_cast<std::uint32_t>(t);
    k.layer = static_cast<std::uint32_t>(j);
    return k;
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int j = 0; j < per_thread; ++j) fill_normal(key_of(t, j), par[static_cast<std::size_t>(t * per_thread + j)]);
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t)
    for (int j = 0; j < per_thread; ++j)
      EXPECT_TRUE(bitwise_equal(par[static_cast<std::size_t>(t * per_thread + j)],
                                normals_with(detail::fill_normal_portable, key_of(t, j), n)))
          << t << " " << j;
}

// A large fill is cut into parts on the rank's threads: on 1, 2 and 3 threads it is bitwise the
// one-piece fill of each ISA variant, at lengths that end inside a part and inside a Philox block.
TEST(RngDispatch, ThreadedFillsEqualOnePieceFills) {
  for (const std::size_t n : {std::size_t{1} << 17, (std::size_t{1} << 18) + 4099}) {
    const auto whole = normals_with(detail::fill_normal_portable, base_key(), n);
    for (int threads : {1, 2, 3}) {
      rcsweep::parallel::set_threads(threads);
      std::vector<double> v(n);
      fill_normal(base_key(), v);
      EXPECT_TRUE(bitwise_equal(v, whole)) << n << " on " << threads << " threads";
    }
    rcsweep::parallel::set_threads(1);
  }
}

// Uniform map of the kernels == the documented one, on random words and the edges of the grid.
TEST(RngKernels, OpenUnitIsTheDocumentedMap) {
  std::vector<std::uint64_t> words = {0,
                                      1,
                                      0x7ff,
                                      0x800,
                                      0xfff,
                                      ~std::uint64_t{0},
                                      ~std::uint64_t{0} - 0x800,
                                      std::uint64_t{1} << 63,
                                      (std::uint64_t{1} << 63) - 1,
                                      std::uint64_t{1} << 52};
  const auto x = uniforms(base_key(), 200'000);
  for (double v : x) words.push_back(std::bit_cast<std::uint64_t>(v) * 0x9E3779B97F4A7C15ULL);
  for (std::uint64_t w : words) ASSERT_EQ(detail::open_unit(w), reference_unit(w)) << w;
  EXPECT_EQ(detail::open_unit(~std::uint64_t{0}), 0x1.fffffffffffffp-1);
  EXPECT_EQ(detail::open_unit(0), 0x1p-54);
}

// Points of the 53-bit grid that fill_normal feeds to log and sincos: random mantissas at every
// exponent 2^-54 .. 2^-1 (so also the tiny u near 2^-53), plus the extreme grid points.
std::vector<double> grid_points() {
  std::vector<double> u;
  std::uint64_t s = 0x243F6A8885A308D3ULL;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (int e = 0; e <= 53; ++e) {
    for (int j = 0; j < 40'000; ++j) {
      // m in [2^(52-e), 2^(53-e)) except e = 53 (m = 0): u = (m + 0.5) 2^-53 in [2^-e-1, 2^-e).
      const std::uint64_t m = e == 53 ? 0 : (std::uint64_t{1} << (52 - e)) | ((next() >> 12) >> e);
      u.push_back(reference_unit(m << 11));
    }
  }
  for (std::uint64_t m : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, (std::uint64_t{1} << 53) - 1,
                          (std::uint64_t{1} << 53) - 2, std::uint64_t{1} << 52, (std::uint64_t{1} << 52) - 1,
                          std::uint64_t{1} << 51, (std::uint64_t{3} << 51), (std::uint64_t{1} << 50)})
    u.push_back(reference_unit(m << 11));
  return u;
}

TEST(RngKernels, LogRelativeErrorBelow1em14) {
  double worst = 0.0;
  for (double u : grid_points()) {
    const double ref = std::log(u);
    const double err = std::abs(detail::log_open_unit(u) - ref) / std::abs(ref);
    worst = std::max(worst, err);
    ASSERT_LT(err, 1e-14) << std::hexfloat << u;
  }
  EXPECT_LT(worst, 0x1p-52);  // measured: about 1 ulp (2.2e-16)
  RecordProperty("max_rel_error", std::to_string(worst));
  std::printf("log_open_unit: max relative error %.3g over the grid\n", worst);
}

TEST(RngKernels, SinCosAbsoluteErrorBelow1em15) {
  double worst_s = 0.0, worst_c = 0.0;
  std::vector<double> u = grid_points();
  for (int j = 0; j <= 4096; ++j) u.push_back(j / 4096.0);  // quadrant edges and ties of 4u
  for (double v : u) {
    if (v <= 0.0 || v >= 1.0) continue;
    // Reference: sin(2 pi v) with 2 pi v in long double, so the test measures the kernel's own
    // error and not the rounding of theta that the old libm formula had.
    const long double th = 2.0L * std::numbers::pi_v<long double> * static_cast<long double>(v);
    double s = 0.0, c = 0.0;
    detail::sincos_turns(v, s, c);
    const double es = std::abs(static_cast<double>(static_cast<long double>(s) - std::sin(th)));
    const double ec = std::abs(static_cast<double>(static_cast<long double>(c) - std::cos(th)));
    worst_s = std::max(worst_s, es);
    worst_c = std::max(worst_c, ec);
    ASSERT_LT(es, 1e-15) << std::hexfloat << v;
    ASSERT_LT(ec, 1e-15) << std::hexfloat << v;
    // Against the double libm formula too (its theta rounding adds up to 4.4e-16).
    const double thd = 2.0 * std::numbers::pi * v;
    ASSERT_LT(std::abs(s - std::sin(thd)), 1e-15) << std::hexfloat << v;
    ASSERT_LT(std::abs(c - std::cos(thd)), 1e-15) << std::hexfloat << v;
  }
  std::printf("sincos_turns: max absolute error sin %.3g cos %.3g\n", worst_s, worst_c);
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
  EXPECT_NEAR(m2 / dn, 1.0, 5.0 * std::sqrt(2.0 / dn));   // Var(Z^2) = 2
  EXPECT_NEAR(m4 / dn, 3.0, 5.0 * std::sqrt(96.0 / dn));  // Var(Z^4) = 105 - 9
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

// Tails: P(|Z| > q) for q up to 4.5 within 5 binomial standard errors over 4 M normals, and no
// normal beyond the largest the 53-bit grid allows (u1 = 2^-54: sqrt(108 ln 2) = 8.654).
TEST(RngPhilox, NormalTailsMatchTheGaussian) {
  constexpr std::size_t n = 4'000'000;
  StreamKey k = base_key();
  k.tensor = Tensor::markov;
  const auto z = normals(k, n);
  const double dn = static_cast<double>(n);
  double largest = 0.0;
  for (double x : z) largest = std::max(largest, std::abs(x));
  EXPECT_LE(largest, std::sqrt(108.0 * std::numbers::ln2));
  for (double q : {2.0, 3.0, 3.5, 4.0, 4.5}) {
    const double p = std::erfc(q / std::numbers::sqrt2);  // P(|Z| > q)
    const auto beyond = std::count_if(z.begin(), z.end(), [q](double x) { return std::abs(x) > q; });
    EXPECT_NEAR(static_cast<double>(beyond) / dn, p, 5.0 * std::sqrt(p * (1 - p) / dn)) << "q = " << q;
  }
}

TEST(RngPhilox, PinnedRegressionValues) {
  // Pins the stream: stored sweep results must stay reproducible across versions, so any change
  // of key layout, counter layout, uniform map or normal transform (including the bits of the
  // own log/sin/cos kernels, normal_kernels.hpp) must fail here.
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
  // Normals of the own-kernel transform (normal_kernels.hpp); they differ from the earlier libm
  // Box–Muller in the last few bits only (FastNormalsMatchLibmReference).
  const double z_pinned[6] = {0x1.d08a496b99131p-3,  0x1.ceb26d52c3d9bp-1,  0x1.2eaaa805b0b2ep+1,
                              -0x1.f8b705147635fp-4, -0x1.f6d759ad98cc9p-1, 0x1.3766e52941ee6p-1};
  const double u_pinned[2] = {0x1.82eea7cb4a13bp-2, 0x1.284b2e10556efp-2};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(z[i], z_pinned[i]) << i;
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(u[i], u_pinned[i]) << i;
}

}  // namespace
}  // namespace rcsweep::rng
