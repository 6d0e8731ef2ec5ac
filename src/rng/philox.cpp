#include "rng/philox.hpp"

#include <Random123/philox.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string_view>

#include "base/parallel.hpp"
#include "rng/normal_kernels.hpp"

namespace rcsweep::rng {
namespace {

// Counter word 3 separates the uniform and normal ranges of one key.
constexpr std::uint64_t domain_normal = 0;
constexpr std::uint64_t domain_uniform = 1;

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

// Philox4x64-10 (Random123's philox4x64_R(10, ctr, key), bit for bit; test_rng checks it) for
// the counters {i, c1, c2, c3} of a range of i, with the per-stream work hoisted: the ten round
// keys, and the first two rounds' multiplications of the constant words (round 0 multiplies c2,
// round 1 the constant word 0 that round 0 made), so 18 instead of 20 64x64->128-bit multiplies
// per block. Two blocks are interleaved so that the multiply latency chains overlap.
class PhiloxBlocks {
 public:
  RCSWEEP_RNG_KERNEL PhiloxBlocks(const philox4x64_key_t& key, const philox4x64_ctr_t& ctr) : c3_(ctr.v[3]) {
    std::uint64_t k0 = key.v[0], k1 = key.v[1];
    for (int r = 0; r < rounds; ++r) {
      k0_[r] = k0;
      k1_[r] = k1;
      k0 += PHILOX_W64_0;
      k1 += PHILOX_W64_1;
    }
    std::uint64_t hi = 0;
    const std::uint64_t lo = mulhilo(PHILOX_M4x64_1, ctr.v[2], hi);
    a_ = hi ^ ctr.v[1] ^ k0_[0];  // round 0 output word 0
    b_ = lo;                      // round 0 output word 1
    p_lo_ = mulhilo(PHILOX_M4x64_0, a_, p_hi_);
  }

  // The same blocks as generate, 16 at a time in two AVX-512 vectors of 8 counters (the rest by
  // generate): integer operations only, so bitwise the same words. Only where avx512_available().
  void generate_avx512(std::uint64_t first, std::size_t nb, std::uint64_t* __restrict a,
                       std::uint64_t* __restrict b) const;

  // Writes blocks first .. first + nb - 1 as a[2j] = x0, b[2j] = x1, a[2j+1] = x2, b[2j+1] = x3.
  RCSWEEP_RNG_KERNEL void generate(std::uint64_t first, std::size_t nb, std::uint64_t* __restrict a,
                                   std::uint64_t* __restrict b) const {
    std::size_t j = 0;
    for (; j + 2 <= nb; j += 2) {
      std::uint64_t x[2][4];
      start(first + j, x[0]);
      start(first + j + 1, x[1]);
      for (int r = 2; r < rounds; ++r) {
        round(x[0], r);
        round(x[1], r);
      }
      store(x[0], j, a, b);
      store(x[1], j + 1, a, b);
    }
    for (; j < nb; ++j) {
      std::uint64_t x[4];
      start(first + j, x);
      for (int r = 2; r < rounds; ++r) round(x, r);
      store(x, j, a, b);
    }
  }

 private:
  static constexpr int rounds = 10;

  __extension__ typedef unsigned __int128 u128;  // as Random123's mulhilo64 on g++

  RCSWEEP_RNG_KERNEL static std::uint64_t mulhilo(std::uint64_t m, std::uint64_t v, std::uint64_t& hi) {
    const u128 p = static_cast<u128>(m) * v;
    hi = static_cast<std::uint64_t>(p >> 64);
    return static_cast<std::uint64_t>(p);
  }

  // Rounds 0 and 1 of block i.
  RCSWEEP_RNG_KERNEL void start(std::uint64_t i, std::uint64_t* x) const {
    std::uint64_t hi0 = 0;
    const std::uint64_t lo0 = mulhilo(PHILOX_M4x64_0, i, hi0);
    const std::uint64_t y2 = hi0 ^ c3_ ^ k1_[0];
    std::uint64_t hi1 = 0;
    const std::uint64_t lo1 = mulhilo(PHILOX_M4x64_1, y2, hi1);
    x[0] = hi1 ^ b_ ^ k0_[1];
    x[1] = lo1;
    x[2] = p_hi_ ^ lo0 ^ k1_[1];
    x[3] = p_lo_;
  }

  RCSWEEP_RNG_KERNEL void round(std::uint64_t* x, int r) const {
    std::uint64_t hi0 = 0, hi1 = 0;
    const std::uint64_t lo0 = mulhilo(PHILOX_M4x64_0, x[0], hi0);
    const std::uint64_t lo1 = mulhilo(PHILOX_M4x64_1, x[2], hi1);
    x[0] = hi1 ^ x[1] ^ k0_[r];
    x[1] = lo1;
    x[2] = hi0 ^ x[3] ^ k1_[r];
    x[3] = lo0;
  }

  RCSWEEP_RNG_KERNEL static void store(const std::uint64_t* x, std::size_t j, std::uint64_t* a, std::uint64_t* b) {
    a[2 * j] = x[0];
    b[2 * j] = x[1];
    a[2 * j + 1] = x[2];
    b[2 * j + 1] = x[3];
  }

  std::uint64_t k0_[rounds], k1_[rounds];
  std::uint64_t c3_, a_, b_, p_hi_ = 0, p_lo_;
};

// g++ 12 warns that the intrinsics' own _mm512_undefined_epi32() pass-through operand "may be used
// uninitialized" once they are inlined here (a false positive: the unmasked forms never read it).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// hi:lo = x * m for 8 lanes of 64-bit x and a constant m = mh 2^32 + ml (AVX-512 has no 64 x 64 ->
// 128-bit multiply): the four 32 x 32 -> 64-bit products, their middle sum (< 2^34) carrying
// into the high word.
[[gnu::target("avx512f,avx512dq,avx512vl"), gnu::always_inline]] inline void mul_wide(__m512i x, __m512i ml, __m512i mh,
                                                                                      __m512i& lo, __m512i& hi) {
  const __m512i low32 = _mm512_set1_epi64(0xffffffffLL);
  const __m512i xh = _mm512_srli_epi64(x, 32);
  const __m512i ll = _mm512_mul_epu32(x, ml);
  const __m512i lh = _mm512_mul_epu32(x, mh);
  const __m512i hl = _mm512_mul_epu32(xh, ml);
  const __m512i hh = _mm512_mul_epu32(xh, mh);
  const __m512i mid = _mm512_add_epi64(_mm512_add_epi64(_mm512_srli_epi64(ll, 32), _mm512_and_si512(lh, low32)),
                                       _mm512_and_si512(hl, low32));
  hi = _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_srli_epi64(lh, 32)),
                        _mm512_add_epi64(_mm512_srli_epi64(hl, 32), _mm512_srli_epi64(mid, 32)));
  lo = _mm512_ternarylogic_epi64(_mm512_slli_epi64(mid, 32), ll, low32, 0xf8);  // (mid << 32) | (ll & low32)
}

[[gnu::target("avx512f,avx512dq,avx512vl"), gnu::always_inline]] inline __m512i word(std::uint64_t v) {
  return _mm512_set1_epi64(static_cast<long long>(v));
}

[[gnu::target("avx512f,avx512dq,avx512vl")]] void PhiloxBlocks::generate_avx512(std::uint64_t first, std::size_t nb,
                                                                                std::uint64_t* __restrict a,
                                                                                std::uint64_t* __restrict b) const {
  // Two independent chains hide the multiplies' latency (docs/BENCHMARKS.md "Figures behind
  // choices in the source").
  constexpr int vectors = 2;
  constexpr std::size_t step = 8 * vectors;
  const __m512i m0l = word(PHILOX_M4x64_0 & 0xffffffffULL), m0h = word(PHILOX_M4x64_0 >> 32);
  const __m512i m1l = word(PHILOX_M4x64_1 & 0xffffffffULL), m1h = word(PHILOX_M4x64_1 >> 32);
  const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i even = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);   // lanes 0..3 of x, y interleaved
  const __m512i odd = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);  // lanes 4..7
  std::size_t j = 0;
  for (; j + step <= nb; j += step) {
    __m512i x0[vectors], x1[vectors], x2[vectors], x3[vectors];
    for (int v = 0; v < vectors; ++v) {  // rounds 0 and 1 (start)
      const __m512i i = _mm512_add_epi64(word(first + j + 8 * static_cast<std::size_t>(v)), lanes);
      __m512i lo0, hi0, lo1, hi1;
      mul_wide(i, m0l, m0h, lo0, hi0);
      mul_wide(_mm512_xor_si512(hi0, word(c3_ ^ k1_[0])), m1l, m1h, lo1, hi1);
      x0[v] = _mm512_xor_si512(hi1, word(b_ ^ k0_[1]));
      x1[v] = lo1;
      x2[v] = _mm512_xor_si512(lo0, word(p_hi_ ^ k1_[1]));
      x3[v] = word(p_lo_);
    }
    for (int r = 2; r < rounds; ++r)
      for (int v = 0; v < vectors; ++v) {
        __m512i lo0, hi0, lo1, hi1;
        mul_wide(x0[v], m0l, m0h, lo0, hi0);
        mul_wide(x2[v], m1l, m1h, lo1, hi1);
        x0[v] = _mm512_ternarylogic_epi64(hi1, x1[v], word(k0_[r]), 0x96);  // three-way xor
        x2[v] = _mm512_ternarylogic_epi64(hi0, x3[v], word(k1_[r]), 0x96);
        x1[v] = lo1;
        x3[v] = lo0;
      }
    for (int v = 0; v < vectors; ++v) {  // store's layout: a[2j] = x0, a[2j + 1] = x2, b likewise
      const std::size_t o = 2 * (j + 8 * static_cast<std::size_t>(v));
      _mm512_storeu_si512(a + o, _mm512_permutex2var_epi64(x0[v], even, x2[v]));
      _mm512_storeu_si512(a + o + 8, _mm512_permutex2var_epi64(x0[v], odd, x2[v]));
      _mm512_storeu_si512(b + o, _mm512_permutex2var_epi64(x1[v], even, x3[v]));
      _mm512_storeu_si512(b + o + 8, _mm512_permutex2var_epi64(x1[v], odd, x3[v]));
    }
  }
  generate(first + j, nb - j, a + 2 * j, b + 2 * j);
}
#pragma GCC diagnostic pop

// fill_normal works in chunks: first the Philox blocks of the chunk (scalar: 64x64->128-bit
// multiplies do not vectorise with SSE2) into two buffers of raw words, pair p = (a[p], b[p]),
// then the Box–Muller transform of all pairs in one loop that g++ vectorises.
constexpr std::size_t chunk_blocks = 64;
constexpr std::size_t chunk_pairs = 2 * chunk_blocks;

// Box–Muller on pairs: (u1, u2) -> r cos(2 pi u2), r sin(2 pi u2) with r = sqrt(-2 ln u1),
// u = open_unit(word). out[2p] is the cosine of pair p, out[2p + 1] the sine.
RCSWEEP_RNG_KERNEL void box_muller_pairs(const std::uint64_t* __restrict a, const std::uint64_t* __restrict b,
                                         double* __restrict out, std::size_t pairs) {
  for (std::size_t p = 0; p < pairs; ++p) {
    const double r = std::sqrt(-2.0 * detail::log_open_unit(detail::open_unit(a[p])));
    double s, c;
    detail::sincos_turns(detail::open_unit(b[p]), s, c);
    out[2 * p] = r * c;
    out[2 * p + 1] = r * s;
  }
}

// The fill of stream elements 4 first_block .. 4 first_block + out.size() - 1, inlined into each
// ISA variant below (one body, so the variants cannot drift).
template <bool VectorPhilox>
RCSWEEP_RNG_KERNEL void fill_normal_kernel(const StreamKey& key, std::size_t first_block, std::span<double> out) {
  const PhiloxBlocks philox(make_key(key), make_ctr(key, domain_normal));
  const std::size_t n = out.size();
  const std::size_t blocks = (n + 3) / 4;
  double* p = out.data();
  alignas(64) std::uint64_t a[chunk_pairs];
  alignas(64) std::uint64_t b[chunk_pairs];
  alignas(64) double tail[4 * chunk_blocks];
  // Block i yields normals 4i..4i+3 (pairs (x0, x1) and (x2, x3)), so element i depends only on
  // (key, i); the transform is elementwise, so chunking does not change any value.
  for (std::size_t first = 0; first < blocks; first += chunk_blocks) {
    const std::size_t nb = std::min(chunk_blocks, blocks - first);
    if constexpr (VectorPhilox)
      philox.generate_avx512(first_block + first, nb, a, b);
    else
      philox.generate(first_block + first, nb, a, b);
    const std::size_t begin = 4 * first;
    if (begin + 4 * nb <= n) {
      box_muller_pairs(a, b, p + begin, 2 * nb);
    } else {
      box_muller_pairs(a, b, tail, 2 * nb);
      std::copy_n(tail, n - begin, p + begin);
    }
  }
}

using FillNormal = void (*)(const StreamKey&, std::size_t, std::span<double>);

// RCSWEEP_RNG_ISA=portable forces the baseline variant, =avx2 at most the AVX2 one (for timing
// them against each other in whole sweeps; the numbers are the same either way).
FillNormal select_fill_normal() {
  const char* env = std::getenv("RCSWEEP_RNG_ISA");
  const std::string_view isa = env ? env : "";
  if (isa == "portable") return detail::fill_normal_part_portable;
  if (isa != "avx2" && detail::avx512_available()) return detail::fill_normal_part_avx512;
  return detail::avx2_available() ? detail::fill_normal_part_avx2 : detail::fill_normal_part_portable;
}

}  // namespace

namespace detail {

void fill_normal_part_portable(const StreamKey& key, std::size_t first_block, std::span<double> out) {
  fill_normal_kernel<false>(key, first_block, out);
}
void fill_normal_portable(const StreamKey& key, std::span<double> out) { fill_normal_kernel<false>(key, 0, out); }
void box_muller_portable(const std::uint64_t* a, const std::uint64_t* b, double* out, std::size_t pairs) {
  box_muller_pairs(a, b, out, pairs);
}

// The same code compiled for AVX2: g++ vectorises the Box–Muller loop 4 doubles wide instead of 2
// (faster than the portable fill: docs/BENCHMARKS.md "Random numbers"). No "fma" in the target: the bits must equal the portable
// variant's (and -ffp-contract=off would forbid contraction anyway). The scalar Philox part
// compiles to the same instructions in both variants.
[[gnu::target("avx2")]] void fill_normal_part_avx2(const StreamKey& key, std::size_t first_block,
                                                   std::span<double> out) {
  fill_normal_kernel<false>(key, first_block, out);
}
[[gnu::target("avx2")]] void fill_normal_avx2(const StreamKey& key, std::span<double> out) {
  fill_normal_kernel<false>(key, 0, out);
}
[[gnu::target("avx2")]] void box_muller_avx2(const std::uint64_t* a, const std::uint64_t* b, double* out,
                                             std::size_t pairs) {
  box_muller_pairs(a, b, out, pairs);
}

// The same for AVX-512 (F, DQ, VL): the Box–Muller loop 8 doubles per instruction and Philox 8
// counters per vector (PhiloxBlocks::generate_avx512), faster than the AVX2 fill
// (docs/BENCHMARKS.md "Random numbers"). Still no "fma".
[[gnu::target("avx512f,avx512dq,avx512vl")]] void fill_normal_part_avx512(const StreamKey& key, std::size_t first_block,
                                                                          std::span<double> out) {
  fill_normal_kernel<true>(key, first_block, out);
}
[[gnu::target("avx512f,avx512dq,avx512vl")]] void fill_normal_avx512(const StreamKey& key, std::span<double> out) {
  fill_normal_kernel<true>(key, 0, out);
}
[[gnu::target("avx512f,avx512dq,avx512vl")]] void box_muller_avx512(const std::uint64_t* a, const std::uint64_t* b,
                                                                    double* out, std::size_t pairs) {
  box_muller_pairs(a, b, out, pairs);
}

// libgcc's check: CPUID says AVX2, and XGETBV says the OS saves the YMM registers. (The explicit
// init makes it safe even when the first fill runs in a static constructor.)
bool avx2_available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}
// The same for AVX-512 F, DQ and VL (and the ZMM and mask state saved by the OS).
bool avx512_available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512dq") != 0 &&
         __builtin_cpu_supports("avx512vl") != 0;
}

}  // namespace detail

void fill_normal(const StreamKey& key, std::span<double> out) { fill_normal(key, 0, out); }

void fill_normal(const StreamKey& key, std::uint64_t first, std::span<double> out) {
  static const FillNormal fill = select_fill_normal();  // once per process, thread-safe
  // Block b yields elements 4b .. 4b + 3: a start inside a block takes that block's tail first.
  std::uint64_t block = first / 4;
  if (const std::size_t skip = first % 4; skip != 0 && !out.empty()) {
    double head[4];
    fill(key, block, std::span<double>(head));
    const std::size_t n = std::min<std::size_t>(4 - skip, out.size());
    std::copy_n(head + skip, n, out.data());
    out = out.subspan(n);
    ++block;
  }
  // Element i depends only on (key, i): large fills are cut into parts (whole Philox blocks of 4)
  // on the rank's threads, with the same numbers as one fill.
  constexpr std::size_t part = std::size_t{1} << 16;
  if (out.size() < 2 * part) {
    fill(key, block, out);
    return;
  }
  const parallel::Parts parts{out.size(), part};
  parallel::for_each(parts.count(), [&](std::size_t p) {
    fill(key, block + parts.begin(p) / 4, out.subspan(parts.begin(p), parts.length(p)));
  });
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
    for (std::size_t j = 0; j < m; ++j) p[4 * i + j] = detail::open_unit(x.v[j]);
  }
}

}  // namespace rcsweep::rng
