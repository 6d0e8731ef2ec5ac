#include "models/s4d.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "models/layer.hpp"
#include "rng/philox.hpp"

// The kernels are written once on GCC vector types of 4 doubles and compiled twice: for AVX2 (one
// ymm register per vector) and for the x86-64 baseline (two xmm registers per vector), chosen at
// run time. Only element-wise IEEE multiplies and adds are used and nothing is contracted into an
// FMA (no "fma" in the target, and -std=c++20 implies -ffp-contract=off), so both variants give
// the bits of the scalar loops. The vector types never cross a non-inlined call, so the ABI note
// below (about passing them by value without AVX) does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// Every lambda of the kernels is inlined (they index the register arrays with compile-time
// constants; a call would put the arrays in memory).
#define S4D_INLINE __attribute__((always_inline))

namespace rcsweep::models {
using rng::Tensor;

namespace {
// (The explicit alignment matters: without AVX enabled, GCC gives a 32-byte vector type only
// 16-byte alignment, so buffers of it would not suit the AVX2 variant's aligned loads.)
using v4d = double __attribute__((vector_size(32), aligned(32)));
constexpr std::size_t lanes = 4;

// A zeroed buffer of n vectors, aligned for v4d (a struct keeps the alignment that a template
// argument of vector type would drop).
class VecBuffer {
 public:
  explicit VecBuffer(std::size_t n) : slots_(std::max<std::size_t>(n, 1)) {}
  v4d* get() noexcept { return &slots_.front().v; }

 private:
  struct Slot {
    v4d v;
  };
  std::vector<Slot> slots_;
};

// f(integral_constant<int, 0>), ..., f(integral_constant<int, N - 1>), in this order: compile-time
// indices, so the small arrays of vectors below stay in registers.
template <int N, class F>
[[gnu::always_inline]] inline void unroll(F&& f) {
  [&]<int... s>(std::integer_sequence<int, s...>) S4D_INLINE { (f(std::integral_constant<int, s>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}

[[gnu::always_inline]] inline v4d load4(const double* p) {
  v4d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store4(double* p, const v4d& v) { std::memcpy(p, &v, sizeof v); }

// Column blocks are packed a group at a time: the channels [c0, c0 + 4 nb) of the first T rows of
// a matrix become nb blocks of T contiguous vectors (block g at P + g T; lanes past the last
// channel are 0), in one pass that reads 4 nb contiguous doubles of each row. (A row of a T x d
// matrix with d >= 512 is a page or more: packing one block at a time touched a new page per row.)
// 8 blocks measured best of 1, 2, 4, 8, 16 (docs/BENCHMARKS.md "Figures behind choices in the
// source"); with 16 the group's three buffers (K, input, output: 3 x 16 x T x 32 bytes) overflow L2.
constexpr std::size_t group_blocks = 8;

[[gnu::always_inline]] inline std::size_t block_width(std::size_t d, std::size_t c) { return std::min(lanes, d - c); }

// Rows in reverse order when `reverse` (row t at T - 1 - t).
[[gnu::always_inline]] inline void pack_group(const Matrix& A, std::size_t T, std::size_t c0, std::size_t nb, v4d* P,
                                              bool reverse) {
  const std::size_t d = A.cols();
  for (std::size_t t = 0; t < T; ++t) {
    const double* a = A.data() + t * d + c0;
    const std::size_t row = reverse ? T - 1 - t : t;
    for (std::size_t g = 0; g < nb; ++g) {
      const std::size_t w = block_width(d, c0 + g * lanes);
      if (w == lanes) {
        P[g * T + row] = load4(a + g * lanes);
      } else {
        double v[lanes] = {};
        for (std::size_t l = 0; l < w; ++l) v[l] = a[g * lanes + l];
        std::memcpy(&P[g * T + row], v, sizeof v);
      }
    }
  }
}

// out[0, w) <- beta out + alpha o (axpby) or o, lane by lane as the scalar loop does it.
[[gnu::always_inline]] inline void write_lanes(double* out, const v4d& o, std::size_t w, bool axpby, double alpha,
                                               double beta) {
  if (w == lanes) {
    store4(out, axpby ? beta * load4(out) + alpha * o : o);
    return;
  }
  double v[lanes];
  std::memcpy(v, &o, sizeof v);
  for (std::size_t l = 0; l < w; ++l) out[l] = axpby ? beta * out[l] + alpha * v[l] : v[l];
}

// The inverse of pack_group (rows in order), into the channels [c0, c0 + 4 nb) of out.
[[gnu::always_inline]] inline void unpack_group(const v4d* P, std::size_t T, std::size_t c0, std::size_t nb,
                                                Matrix& out, bool axpby, double alpha, double beta) {
  const std::size_t d = out.cols();
  for (std::size_t t = 0; t < T; ++t) {
    double* o = out.data() + t * d + c0;
    for (std::size_t g = 0; g < nb; ++g)
      write_lanes(o + g * lanes, P[g * T + t], block_width(d, c0 + g * lanes), axpby, alpha, beta);
  }
}

// Keep the accumulators in registers at this point (AVX2 only, where a 4-double vector is one ymm
// register). Without it g++ interleaves the unrolled steps, needs more than the 16 registers and
// spills accumulators inside the inner loop (docs/BENCHMARKS.md "Figures behind choices in the source").
template <bool Pin, int R>
[[gnu::always_inline]] inline void pin(v4d (&acc)[R]) {
#if defined(__clang__)  // clang checks the 256-bit "x" operand outside the AVX2 target: no pinning
  (void)acc;
#else
  if constexpr (Pin) unroll<R>([&](auto r) S4D_INLINE { __asm__ volatile("" : "+x"(acc[r])); });
#endif
}

// Tile shapes: R output rows (accumulators), the inner loop unrolled U steps, accumulators pinned.
template <int R_, int U_, bool Pin_>
struct Tile {
  static constexpr int R = R_, U = U_;
  static constexpr bool Pin = Pin_;
};
// AVX2: 12 accumulators + 1 input + 1 product of the 16 ymm registers; each step loads 1 input and
// 12 kernel vectors (memory operands of the multiplies) for 12 multiplies and 12 adds, and the 12
// independent add chains cover the 2 add pipes x 3 cycles of latency. R from 8 to 14 measure
// alike; fewer than 6 chains leave the adders idle.
using TileAvx2 = Tile<12, 12, true>;
// The baseline: a vector is 2 of the 16 xmm registers (R = 4 measured best of 3..8).
using TilePortable = Tile<4, 1, false>;

// ---------------------------------------------------------------------------------------------
// Causal convolution of one packed block (4 channels): O[j] = sum_{i <= j} K[j - i] X[i], each
// sum in ascending i from +0. A tile is R consecutive output rows j0 + r; step i adds
// K[j0 + r - i] X[i] to row r. K is packed in reverse (Kr[m] = K[T - 1 - m]), so that the kernel
// rows a tile reads ascend with i like the input rows (the hardware prefetchers follow ascending
// streams better).
template <class Sh>
[[gnu::always_inline]] inline void causal_tile(const v4d* Kr, const v4d* Xp, std::size_t T, std::size_t j0,
                                               v4d (&acc)[Sh::R]) {
  constexpr int R = Sh::R;
  unroll<R>([&](auto r) S4D_INLINE { acc[r] = v4d{}; });
  // Steps 0 <= i <= j0: every row takes a term; K[j0 + r - i] = Kr[T - 1 - j0 + i - r].
  const auto step = [&](std::size_t i) S4D_INLINE {
    const v4d x = Xp[i];
    const v4d* k = Kr + (T - 1 - j0 + i);
    unroll<R>([&](auto r) S4D_INLINE { acc[r] += *(k - decltype(r)::value) * x; });
    pin<Sh::Pin>(acc);
  };
  const std::size_t steps = j0 + 1;
  std::size_t i = 0;
  for (; i + Sh::U <= steps; i += Sh::U) unroll<Sh::U>([&](auto s) S4D_INLINE { step(i + s); });
  if constexpr (Sh::U > 1)
    for (; i < steps; ++i) step(i);
  // Steps j0 < i = j0 + t < j0 + R: rows r >= t only, with K[r - t].
  unroll<R>([&](auto t) S4D_INLINE {
    constexpr int Ut = decltype(t)::value;
    if constexpr (Ut > 0) {
      const v4d x = Xp[j0 + Ut];
      unroll<R>([&](auto r) S4D_INLINE {
        constexpr int Ur = decltype(r)::value;
        if constexpr (Ur >= Ut) acc[r] += Kr[T - 1 - Ur + Ut] * x;
      });
    }
  });
}

template <class Sh>
[[gnu::always_inline]] inline void causal_block(const v4d* Kr, const v4d* Xp, std::size_t T, v4d* Op) {
  constexpr int R = Sh::R;
  const std::size_t first = T % R;  // rows [0, first) one at a time, then tiles of R
  for (std::size_t j = 0; j < first; ++j) {
    v4d o{};
    for (std::size_t i = 0; i <= j; ++i) o += Kr[T - 1 - j + i] * Xp[i];
    Op[j] = o;
  }
  for (std::size_t j0 = first; j0 < T; j0 += R) {
    v4d o[R];
    causal_tile<Sh>(Kr, Xp, T, j0, o);
    unroll<R>([&](auto r) S4D_INLINE { Op[j0 + r] = o[r]; });
  }
}

// ---------------------------------------------------------------------------------------------
// The transpose, one packed block: O[i] = sum_{j >= i} K[j - i] G[j], each sum in ascending j
// from +0. A tile is R output rows i0 + r; step j adds K[j - i0 - r] G[j] to row r (j >= i0 + r).
template <class Sh>
[[gnu::always_inline]] inline void transpose_tile(const v4d* Kp, const v4d* Gp, std::size_t T, std::size_t i0,
                                                  v4d (&acc)[Sh::R]) {
  constexpr int R = Sh::R;
  unroll<R>([&](auto r) S4D_INLINE { acc[r] = v4d{}; });
  // Steps j = i0 + u, u < R - 1: rows r <= u only, with K[u - r].
  unroll<R>([&](auto t) S4D_INLINE {
    constexpr int Ut = decltype(t)::value;
    if constexpr (Ut < R - 1) {
      const v4d g = Gp[i0 + Ut];
      unroll<R>([&](auto r) S4D_INLINE {
        constexpr int Ur = decltype(r)::value;
        if constexpr (Ur <= Ut) acc[r] += Kp[Ut - Ur] * g;
      });
    }
  });
  // Steps j = i0 + u, R - 1 <= u < T - i0: every row takes a term, K[u - r].
  const auto step = [&](std::size_t u) S4D_INLINE {
    const v4d g = Gp[i0 + u];
    const v4d* k = Kp + u;
    unroll<R>([&](auto r) S4D_INLINE { acc[r] += *(k - decltype(r)::value) * g; });
    pin<Sh::Pin>(acc);
  };
  const std::size_t end = T - i0;
  std::size_t u = R - 1;
  for (; u + Sh::U <= end; u += Sh::U) unroll<Sh::U>([&](auto s) S4D_INLINE { step(u + s); });
  if constexpr (Sh::U > 1)
    for (; u < end; ++u) step(u);
}

template <class Sh>
[[gnu::always_inline]] inline void transpose_block(const v4d* Kp, const v4d* Gp, std::size_t T, v4d* Op) {
  constexpr int R = Sh::R;
  const std::size_t tiled = T - T % R;  // tiles of R rows, then rows [tiled, T) one at a time
  for (std::size_t i0 = 0; i0 < tiled; i0 += R) {
    v4d o[R];
    transpose_tile<Sh>(Kp, Gp, T, i0, o);
    unroll<R>([&](auto r) S4D_INLINE { Op[i0 + r] = o[r]; });
  }
  for (std::size_t i = tiled; i < T; ++i) {
    v4d o{};
    for (std::size_t j = i; j < T; ++j) o += Kp[j - i] * Gp[j];
    Op[i] = o;
  }
}

// Either direction over all channels: pack a group of blocks of K and of the input, convolve each
// block into a packed output, write the group back (out <- beta out + alpha O, or O).
template <bool Transpose, class Sh>
[[gnu::always_inline]] inline void convolve(const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& out,
                                            bool axpby) {
  const std::size_t T = X.rows(), d = X.cols();
  VecBuffer Kp(group_blocks * T), Xp(group_blocks * T), Op(group_blocks * T);
  for (std::size_t c0 = 0; c0 < d; c0 += group_blocks * lanes) {
    const std::size_t nb = std::min(group_blocks, (d - c0 + lanes - 1) / lanes);
    pack_group(K, T, c0, nb, Kp.get(), !Transpose);
    pack_group(X, T, c0, nb, Xp.get(), false);
    for (std::size_t g = 0; g < nb; ++g) {
      if constexpr (Transpose)
        transpose_block<Sh>(Kp.get() + g * T, Xp.get() + g * T, T, Op.get() + g * T);
      else
        causal_block<Sh>(Kp.get() + g * T, Xp.get() + g * T, T, Op.get() + g * T);
    }
    unpack_group(Op.get(), T, c0, nb, out, axpby, alpha, beta);
  }
}

// The random draws of a layer's S4D kernels (lambda-skip App. A.13.1): B, C (d x N, variance
// N^-1/2) and the step Delta_c, log-uniform in [1e-3, 1e-1], of each channel.
struct S4dDraws {
  Matrix B, C;
  std::vector<double> delta;
};
S4dDraws s4d_draws(const config::ModelParams& model, int layer, RandomSource& random) {
  const auto d = static_cast<std::size_t>(model.d), N = static_cast<std::size_t>(model.state_dim);
  S4dDraws r{ssm_weight(layer, Tensor::ssm_b, 0, d, N, model.state_dim, random),
             ssm_weight(layer, Tensor::ssm_c, 0, d, N, model.state_dim, random), std::vector<double>(d)};
  rng::fill_uniform(random.key(layer, Tensor::s4d_step, 0), r.delta);
  for (double& u : r.delta) u = std::exp(std::log(1e-3) + u * (std::log(1e-1) - std::log(1e-3)));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Kernels: 4 channels at a time, each lane doing exactly the scalar recurrence of its channel
// (K_c[k] = sum over ascending n of p_n, p_n <- p_n a_n after each k), 4 values of n interleaved
// so that the multiply chains overlap; written back a group of blocks at a time.
[[gnu::always_inline]] inline void build_kernels(const config::ModelParams& model, int layer, RandomSource& random,
                                                 Matrix& K) {
  const auto T = static_cast<std::size_t>(model.T), d = static_cast<std::size_t>(model.d);
  const auto N = static_cast<std::size_t>(model.state_dim);
  const auto [B, C, delta] = s4d_draws(model, layer, random);
  K.resize(T, d);
  VecBuffer Kp(group_blocks * T);
  std::vector<double> a(lanes * N), p(lanes * N);  // [n][lane]
  for (std::size_t c0 = 0; c0 < d; c0 += group_blocks * lanes) {
    const std::size_t nb = std::min(group_blocks, (d - c0 + lanes - 1) / lanes);
    for (std::size_t g = 0; g < nb; ++g) {
      const std::size_t cb = c0 + g * lanes, w = block_width(d, cb);
      std::fill(a.begin(), a.end(), 0.0);
      std::fill(p.begin(), p.end(), 0.0);
      for (std::size_t l = 0; l < w; ++l) {
        const std::size_t c = cb + l;
        for (std::size_t n = 0; n < N; ++n) {
          a[n * lanes + l] = std::exp(-delta[c] * static_cast<double>(n + 1));
          p[n * lanes + l] = C(c, n) * B(c, n);
        }
      }
      v4d* kb = Kp.get() + g * T;
      for (std::size_t k = 0; k < T; ++k) kb[k] = v4d{};
      std::size_t n = 0;
      for (; n + 4 <= N; n += 4) {
        v4d an[4], pn[4];
        unroll<4>([&](auto q) S4D_INLINE {
          an[q] = load4(&a[(n + q) * lanes]);
          pn[q] = load4(&p[(n + q) * lanes]);
        });
        for (std::size_t k = 0; k < T; ++k) {
          v4d s = kb[k];
          unroll<4>([&](auto q) S4D_INLINE {
            s += pn[q];
            pn[q] *= an[q];
          });
          kb[k] = s;
        }
      }
      for (; n < N; ++n) {
        const v4d an = load4(&a[n * lanes]);
        v4d pn = load4(&p[n * lanes]);
        for (std::size_t k = 0; k < T; ++k) {
          kb[k] += pn;
          pn *= an;
        }
      }
    }
    unpack_group(Kp.get(), T, c0, nb, K, false, 0.0, 0.0);
  }
}

void check_shapes(const char* what, const Matrix& K, const Matrix& X, const Matrix& out) {
  if (K.cols() != X.cols() || K.rows() < X.rows() || out.rows() != X.rows() || out.cols() != X.cols())
    throw Error(std::string(what) + ": shape mismatch: K " + std::to_string(K.rows()) + " x " +
                std::to_string(K.cols()) + ", input " + std::to_string(X.rows()) + " x " + std::to_string(X.cols()) +
                ", output " + std::to_string(out.rows()) + " x " + std::to_string(out.cols()));
}

[[gnu::target("avx2")]] void causal_avx2(const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc) {
  convolve<false, TileAvx2>(K, X, alpha, beta, acc, true);
}
void causal_portable(const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc) {
  convolve<false, TilePortable>(K, X, alpha, beta, acc, true);
}
[[gnu::target("avx2")]] void transpose_avx2(const Matrix& K, const Matrix& G, Matrix& out) {
  convolve<true, TileAvx2>(K, G, 0.0, 0.0, out, false);
}
void transpose_portable(const Matrix& K, const Matrix& G, Matrix& out) {
  convolve<true, TilePortable>(K, G, 0.0, 0.0, out, false);
}
[[gnu::target("avx2")]] void kernels_avx2(const config::ModelParams& model, int layer, RandomSource& random,
                                          Matrix& K) {
  build_kernels(model, layer, random, K);
}
void kernels_portable(const config::ModelParams& model, int layer, RandomSource& random, Matrix& K) {
  build_kernels(model, layer, random, K);
}

detail::S4dIsa select_isa() {
  const char* isa = std::getenv("RCSWEEP_S4D_ISA");
  if (isa != nullptr && std::string_view(isa) == "portable") return detail::S4dIsa::portable;
  return detail::s4d_isa_available(detail::S4dIsa::avx2) ? detail::S4dIsa::avx2 : detail::S4dIsa::portable;
}

}  // namespace

namespace detail {

bool s4d_isa_available(S4dIsa isa) {
  if (isa == S4dIsa::portable) return true;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}

S4dIsa s4d_isa() {
  static const S4dIsa isa = select_isa();  // once per process, thread-safe
  return isa;
}

void s4d_mix_direct(S4dIsa isa, const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc) {
  check_shapes("s4d_mix", K, X, acc);
  if (isa == S4dIsa::avx2)
    causal_avx2(K, X, alpha, beta, acc);
  else
    causal_portable(K, X, alpha, beta, acc);
}

void s4d_mix_transpose_direct(S4dIsa isa, const Matrix& K, const Matrix& G, Matrix& out) {
  check_shapes("s4d_mix_transpose", K, G, out);
  if (isa == S4dIsa::avx2)
    transpose_avx2(K, G, out);
  else
    transpose_portable(K, G, out);
}

void s4d_kernels_build(S4dIsa isa, const config::ModelParams& model, int layer, RandomSource& random, Matrix& K) {
  if (isa == S4dIsa::avx2)
    kernels_avx2(model, layer, random, K);
  else
    kernels_portable(model, layer, random, K);
}

void s4d_mix_reference(const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc) {
  const std::size_t T = X.rows(), d = X.cols();
  std::vector<double> o(d);
  for (std::size_t j = 0; j < T; ++j) {
    std::fill(o.begin(), o.end(), 0.0);
    for (std::size_t i = 0; i <= j; ++i) {
      const double* k = K.row(j - i).data();
      const double* x = X.row(i).data();
      for (std::size_t c = 0; c < d; ++c) o[c] += k[c] * x[c];
    }
    for (std::size_t c = 0; c < d; ++c) acc(j, c) = beta * acc(j, c) + alpha * o[c];
  }
}

Matrix s4d_mix_transpose_reference(const Matrix& K, const Matrix& G) {
  const std::size_t T = G.rows(), d = G.cols();
  Matrix out(T, d, 0.0);
  for (std::size_t i = 0; i < T; ++i) {
    double* o = out.row(i).data();
    for (std::size_t j = i; j < T; ++j) {
      const double* k = K.row(j - i).data();
      const double* g = G.row(j).data();
      for (std::size_t c = 0; c < d; ++c) o[c] += k[c] * g[c];
    }
  }
  return out;
}

Matrix s4d_kernels_reference(const config::ModelParams& model, int layer, RandomSource& random) {
  const auto T = static_cast<std::size_t>(model.T), d = static_cast<std::size_t>(model.d);
  const auto N = static_cast<std::size_t>(model.state_dim);
  const auto [B, C, delta] = s4d_draws(model, layer, random);
  Matrix Kt(d, T, 0.0);
  for (std::size_t c = 0; c < d; ++c) {
    double* kc = Kt.row(c).data();
    for (std::size_t n = 0; n < N; ++n) {
      const double a = std::exp(-delta[c] * static_cast<double>(n + 1));
      double p = C(c, n) * B(c, n);
      for (std::size_t k = 0; k < T; ++k, p *= a) kc[k] += p;
    }
  }
  Matrix K(T, d);
  for (std::size_t c = 0; c < d; ++c)
    for (std::size_t k = 0; k < T; ++k) K(k, c) = Kt(c, k);
  return K;
}

double s4d_max_fro_reference(const Matrix& K) {
  double best = 0.0;
  for (std::size_t c = 0; c < K.cols(); ++c) {
    double ss = 0.0;
    for (std::size_t k = 0; k < K.rows(); ++k) ss += static_cast<double>(K.rows() - k) * K(k, c) * K(k, c);
    best = std::max(best, std::sqrt(ss));
  }
  return best;
}

}  // namespace detail

Matrix s4d_kernels(const config::ModelParams& model, int layer, RandomSource& random) {
  Matrix K;
  detail::s4d_kernels_build(detail::s4d_isa(), model, layer, random, K);
  return K;
}

void s4d_mix(const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc) {
  detail::s4d_mix_direct(detail::s4d_isa(), K, X, alpha, beta, acc);
}

Matrix s4d_mix_transpose(const Matrix& K, const Matrix& G) {
  Matrix out(G.rows(), G.cols(), Matrix::uninitialized);  // every entry is written
  detail::s4d_mix_transpose_direct(detail::s4d_isa(), K, G, out);
  return out;
}

// Row by row (the rows of K are contiguous): ss_c accumulates the same products in the same
// ascending k as a walk down column c would.
double s4d_max_fro(const Matrix& K) {
  const std::size_t T = K.rows(), d = K.cols();
  std::vector<double> ss(d, 0.0);
  for (std::size_t k = 0; k < T; ++k) {
    const double w = static_cast<double>(T - k);
    const double* row = K.row(k).data();
    for (std::size_t c = 0; c < d; ++c) ss[c] += w * row[c] * row[c];
  }
  double best = 0.0;
  for (std::size_t c = 0; c < d; ++c) best = std::max(best, std::sqrt(ss[c]));
  return best;
}

}  // namespace rcsweep::models
