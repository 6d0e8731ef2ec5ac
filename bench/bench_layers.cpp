// Layer efficiency: in one run, the machine's own limits (single-thread dgemm
// at the layer's shapes, dgesdd of T x d) and the time of one models::apply_layer call plus the
// metrics the task runner computes for it (metrics::signal_metrics, as task_runner.cpp `record`
// does; the mixer metrics are computed inside apply_layer), against the bound
//   bound = sum over the layer's GEMMs of the measured time of that GEMM shape
//           (+ the measured dgesdd time of T x d when the spectrum of X is stored).
// Then a breakdown (random numbers, products, elementwise, metrics) of every layer.
// OMP_NUM_THREADS=N runs it all on N threads (one BLAS thread each), as `rcsweep run --threads N`
// runs a big task: each part's time at 1 and 2 threads gives its serial share (docs/SCALING.md).
//   bash bench/run_layer_bench.sh BUILD_DIR        (prints the Markdown table)
//   BUILD_DIR/bench/bench_layers --benchmark_filter=layer/softmax
//   BUILD_DIR/bench/bench_layers --benchmark_filter='^s4d/'   (the S4D convolution kernels alone)
//
// GEMM flops of one layer (heads = 1, d_qk = d, N = state_dim = 16, no gate/MLP; from layer.cpp):
//   softmax, relu, sigmoid: Q = X W_Q, K = X W_K     2 * 2 T d d_qk
//                           S = Q K^T                2 T T d_qk
//                           V = X W_V                2 T d d
//                           M V                      2 T T d
//                           total (T = d = n)        10 n^3
//   markov:                 V = X W_V, M V           2 T d d + 2 T T d          (4 n^3)
//   ssd (bc_init gaussian): B = X W_B, C = X W_C     2 * 2 T d N
//                           C B^T                    2 T T N
//                           M X (C_V = I)            2 T T d                    (2 n^3 + 6 n^2 N)
//   lti:                    M X                      2 T T d                    (2 n^3)
//   s4d:                    no GEMM: a causal convolution per channel, T(T+1)/2 d multiply-adds;
//                           its bound counts these T(T+1) d flops at the square dgemm rate (a
//                           "GEMM-speed" reference, not a true lower bound: an FFT needs fewer).
// Not in the bound (the definition): the metrics' dsyrk + eigensolve (or dgesdd
// fallback) of M (T x T) and of X (T x d), random numbers, softmax/elementwise, norm, copies.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/allocator.hpp"
#include "base/parallel.hpp"
#include "bench_common.hpp"
#include "config/params.hpp"
#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "models/layer.hpp"
#include "models/random_source.hpp"
#include "models/s4d.hpp"
#include "rng/philox.hpp"

namespace {
using rcsweep::Matrix;
using rcsweep::config::Mixer;
using rcsweep::linalg::Op;
namespace linalg = rcsweep::linalg;
namespace models = rcsweep::models;
namespace metrics = rcsweep::metrics;
namespace rng = rcsweep::rng;
using clock_type = std::chrono::steady_clock;

constexpr int state_dim = 16;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using rcsweep::bench::random_matrix;

// One GEMM of a layer: C (m x n) = A (m x k) * op(B), op(B) = B or B^T.
struct Product {
  std::size_t m, n, k;
  bool trans_b;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

// Median time of one linalg::gemm of this shape (1 BLAS thread), measured once per shape and
// cached: the machine limit the bound uses, taken in the same run as the layers.
double gemm_seconds(const Product& p) {
  static std::map<std::tuple<std::size_t, std::size_t, std::size_t, bool>, double> cache;
  const auto key = std::make_tuple(p.m, p.n, p.k, p.trans_b);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  linalg::set_blas_threads(1);
  const Matrix A = random_matrix(p.m, p.k, 11);
  const Matrix B = p.trans_b ? random_matrix(p.n, p.k, 12) : random_matrix(p.k, p.n, 12);
  Matrix C(p.m, p.n);
  const auto once = [&] {
    const auto t0 = clock_type::now();
    linalg::gemm(1.0, A, Op::none, B, p.trans_b ? Op::trans : Op::none, 0.0, C);
    return seconds_since(t0);
  };
  once();  // warm-up (packing buffers, page faults)
  std::vector<double> t;
  double total = 0.0;
  while (t.size() < 5 || (total < 0.3 && t.size() < 200)) {
    t.push_back(once());
    total += t.back();
  }
  return cache[key] = median(t);
}

// Median time of linalg::singular_values (dgesdd, values only) of a unit-norm T x d matrix.
double gesdd_seconds(std::size_t T, std::size_t d) {
  static std::map<std::pair<std::size_t, std::size_t>, double> cache;
  if (auto it = cache.find({T, d}); it != cache.end()) return it->second;
  linalg::set_blas_threads(1);
  Matrix X = random_matrix(T, d, 13);
  double ss = 0.0;
  for (double x : X.values()) ss += x * x;
  for (double& x : X.values()) x /= std::sqrt(ss);
  std::vector<double> t;
  benchmark::DoNotOptimize(linalg::singular_values(X));
  double total = 0.0;
  while (t.size() < 3 || (total < 0.3 && t.size() < 50)) {
    const auto t0 = clock_type::now();
    benchmark::DoNotOptimize(linalg::singular_values(X));
    t.push_back(seconds_since(t0));
    total += t.back();
  }
  return cache[{T, d}] = median(t);
}

bool attention(Mixer m) { return m == Mixer::softmax || m == Mixer::relu || m == Mixer::sigmoid; }

// The GEMMs of one layer (see the table at the top; from apply_layer / mixer_matrix).
std::vector<Product> layer_products(Mixer mixer, std::size_t T, std::size_t d) {
  const std::size_t dqk = d, N = state_dim;
  switch (mixer) {
    case Mixer::softmax:
    case Mixer::relu:
    case Mixer::sigmoid:
      return {{T, dqk, d, false}, {T, dqk, d, false}, {T, T, dqk, true}, {T, d, d, false}, {T, d, T, false}};
    case Mixer::markov: return {{T, d, d, false}, {T, d, T, false}};
    case Mixer::ssd: return {{T, N, d, false}, {T, N, d, false}, {T, T, N, true}, {T, d, T, false}};
    case Mixer::lti: return {{T, d, T, false}};
    default: return {};
  }
}

struct Bound {
  double gemm_flops = 0.0;  // flops of the layer's GEMMs (s4d: its convolution flops)
  double seconds = 0.0;     // at the measured dgemm time of each shape
};

Bound layer_bound(Mixer mixer, std::size_t T, std::size_t d) {
  Bound b;
  if (mixer == Mixer::s4d) {  // T(T+1)/2 d multiply-adds at the square n x n x n dgemm rate
    const std::size_t n = std::max(T, d);
    const Product sq{n, n, n, false};
    b.gemm_flops = static_cast<double>(T) * static_cast<double>(T + 1) * static_cast<double>(d);
    b.seconds = b.gemm_flops / (sq.flops() / gemm_seconds(sq));
    return b;
  }
  for (const Product& p : layer_products(mixer, T, d)) {
    b.gemm_flops += p.flops();
    b.seconds += gemm_seconds(p);
  }
  return b;
}

rcsweep::config::ModelParams layer_model(Mixer mixer, int T, int d) {
  rcsweep::config::ModelParams m;
  m.mixer = mixer;
  m.input = rcsweep::config::InputKind::sphere;
  m.T = T;
  m.d = d;
  m.depth = 1;
  m.d_qk = d;
  m.lambda = 1.0;
  m.lambda_mlp = 1.0;
  m.norm = rcsweep::config::Norm::rms;
  m.state_dim = state_dim;
  m.alpha = 1.0;
  return m;
}

const char* mixer_name(Mixer m) {
  switch (m) {
    case Mixer::softmax: return "softmax";
    case Mixer::relu: return "relu";
    case Mixer::sigmoid: return "sigmoid";
    case Mixer::markov: return "markov";
    case Mixer::ssd: return "ssd";
    case Mixer::lti: return "lti";
    case Mixer::s4d: return "s4d";
    default: return "?";
  }
}

constexpr Mixer all_mixers[] = {Mixer::softmax, Mixer::relu, Mixer::sigmoid, Mixer::markov,
                                Mixer::ssd,     Mixer::lti,  Mixer::s4d};
constexpr std::pair<int, int> sizes[] = {{512, 512}, {1024, 1024}, {1024, 512}};

// ---------------------------------------------------------------------------------------------
// (1) Machine limits.

void BM_dgemm(benchmark::State& state, Product p) {
  linalg::set_blas_threads(1);
  const Matrix A = random_matrix(p.m, p.k, 1);
  const Matrix B = p.trans_b ? random_matrix(p.n, p.k, 2) : random_matrix(p.k, p.n, 2);
  Matrix C(p.m, p.n);
  for (auto _ : state) linalg::gemm(1.0, A, Op::none, B, p.trans_b ? Op::trans : Op::none, 0.0, C);
  state.counters["GFLOP/s"] = benchmark::Counter(p.flops() * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void BM_dgesdd(benchmark::State& state, std::size_t T, std::size_t d) {
  linalg::set_blas_threads(1);
  const Matrix X = random_matrix(T, d, 3);
  for (auto _ : state) benchmark::DoNotOptimize(linalg::singular_values(X));
}

// ---------------------------------------------------------------------------------------------
// (2) One layer as a task pays it: fresh weights (a new layer index per iteration, so the
// RandomSource cache never serves a previous iteration's draws), apply_layer with LayerStats
// (mixer metrics inside), then signal_metrics of the output (with the spectrum when `spectra`).

void BM_layer(benchmark::State& state, Mixer mixer, int T, int d, bool spectra) {
  linalg::set_blas_threads(1);
  const auto model = layer_model(mixer, T, d);
  models::RandomSource random(1, 0, T, d);
  const Matrix X0 = models::make_input(model, random);
  const Bound b = layer_bound(mixer, static_cast<std::size_t>(T), static_cast<std::size_t>(d));
  const double svd = spectra ? gesdd_seconds(static_cast<std::size_t>(T), static_cast<std::size_t>(d)) : 0.0;
  int layer = 0;
  double total = 0.0;
  std::vector<double> spectrum;
  for (auto _ : state) {
    Matrix X = X0;  // outside the timer
    ++layer;
    const auto t0 = clock_type::now();
    models::LayerStats stats;
    models::apply_layer(model, layer, random, X, &stats);
    const auto sm = metrics::signal_metrics(X, 0.0, spectra ? &spectrum : nullptr);
    benchmark::DoNotOptimize(sm);
    benchmark::DoNotOptimize(stats.head0);
    const double t = seconds_since(t0);
    state.SetIterationTime(t);
    total += t;
  }
  const double per_layer = total / static_cast<double>(state.iterations());
  const double bound = b.seconds + svd;
  state.counters["gemm_flops"] = b.gemm_flops;
  state.counters["dgemm_GFLOPs"] = b.gemm_flops / b.seconds / 1e9;  // the rate the bound uses
  state.counters["gesdd_s"] = svd;
  state.counters["bound_s"] = bound;
  state.counters["layer_s"] = per_layer;
  state.counters["ratio"] = per_layer / bound;
  // The same with the Gram product of the signal metrics (a dsyrk: half a k x n times n x k GEMM,
  // k = min(T, d)) counted as a GEMM of the layer too: the metrics cannot do with less.
  const std::size_t k = static_cast<std::size_t>(std::min(T, d)), n = static_cast<std::size_t>(std::max(T, d));
  const double gram = spectra ? 0.0 : 0.5 * gemm_seconds({k, k, n, true});
  state.counters["ratio_with_gram"] = per_layer / (bound + gram);
}

// ---------------------------------------------------------------------------------------------
// (3) Breakdown of one layer into parts, each timed on its own (manual timers, per iteration):
//   rng          the layer's normals, drawn through the RandomSource exactly as apply_layer draws
//                them (pre-drawn here, so the apply_layer call below finds them cached);
//   products     the layer's GEMMs, done here with linalg::gemm on the actual weights;
//   elementwise  the mixer's nonlinearity (softmax_rows; ReLU / sigmoid / Markov exp loops as in
//                layer.cpp; apply_decay_mask) and apply_norm (rms);
//   mixer_metr   metrics::mixer_metrics of the actual M (its Gram / SVD route depends on M);
//   signal_metr  metrics::signal_metrics of the layer output;
//   layer        apply_layer (weights cached: rng excluded) + signal_metrics, the same call as (2);
//   other        layer - (products + elementwise + mixer_metr + signal_metr): copies, allocation;
//   mixer_route, signal_route: the route of the metrics' spectrum (1 Gram + eigensolve, 2 dgesdd
//                fallback for a collapsed spectrum, s_2^2 / s_1^2 < 1e-3).
// s4d has no products: `elementwise` is its kernel build + causal convolution + norm (from two
// apply_layer calls: the second finds the kernels cached; kernels = first - second).

void BM_breakdown(benchmark::State& state, Mixer mixer, int T, int d) {
  linalg::set_blas_threads(1);
  const auto model = layer_model(mixer, T, d);
  const auto uT = static_cast<std::size_t>(T), ud = static_cast<std::size_t>(d), N = std::size_t{state_dim};
  models::RandomSource random(1, 0, T, d);
  const Matrix X0 = models::make_input(model, random);
  using rcsweep::rng::Tensor;
  double t_rng = 0, t_prod = 0, t_elem = 0, t_mm = 0, t_sm = 0, t_layer = 0, t_kernels = 0;
  double mixer_route = 0.0, signal_route = 0.0;  // SpectralSummary::Route: 1 Gram, 2 SVD fallback
  int layer = 0;
  for (auto _ : state) {
    ++layer;
    auto t0 = clock_type::now();
    const Matrix* WQ = nullptr;
    const Matrix* WK = nullptr;
    const Matrix* WV = nullptr;
    const Matrix* G = nullptr;
    Matrix WB, WC;
    if (attention(mixer)) {
      WQ = &random.normal(layer, Tensor::query, 0, ud, ud);
      WK = &random.normal(layer, Tensor::key, 0, ud, ud);
    }
    if (attention(mixer) || mixer == Mixer::markov) WV = &random.normal(layer, Tensor::value, 0, ud, ud);
    if (mixer == Mixer::markov) G = &random.normal(layer, Tensor::markov, 0, uT, uT);
    if (mixer == Mixer::ssd || mixer == Mixer::s4d) {
      WB = models::ssm_weight(layer, Tensor::ssm_b, 0, ud, N, state_dim, random);
      WC = models::ssm_weight(layer, Tensor::ssm_c, 0, ud, N, state_dim, random);
    }
    if (mixer == Mixer::lti) {
      WB = models::ssm_weight(layer, Tensor::ssm_b, 0, 1, N, state_dim, random);
      WC = models::ssm_weight(layer, Tensor::ssm_c, 0, 1, N, state_dim, random);
    }
    t_rng += seconds_since(t0);

    // The layer itself (weights now cached), as in BM_layer.
    {
      Matrix X = X0;
      t0 = clock_type::now();
      models::LayerStats stats;
      models::apply_layer(model, layer, random, X, &stats);
      benchmark::DoNotOptimize(metrics::signal_metrics(X, 0.0));
      const double t = seconds_since(t0);
      t_layer += t;
      state.SetIterationTime(t);
    }

    // The parts, on the same weights.
    Matrix M(uT, uT), Y = X0;
    if (mixer == Mixer::s4d) {
      Matrix X = X0;
      t0 = clock_type::now();
      models::apply_layer(model, layer, random, X, nullptr);  // kernels cached by the call above
      const double mix = seconds_since(t0);
      t_elem += mix;
      Y = X;
    } else {
      if (attention(mixer)) {
        Matrix Q(uT, ud), K(uT, ud);
        t0 = clock_type::now();
        linalg::gemm(1.0, X0, Op::none, *WQ, Op::none, 0.0, Q);
        linalg::gemm(1.0, X0, Op::none, *WK, Op::none, 0.0, K);
        linalg::gemm(1.0 / std::sqrt(static_cast<double>(d)), Q, Op::none, K, Op::trans, 0.0, M);
        t_prod += seconds_since(t0);
        t0 = clock_type::now();
        models::attention_map(mixer, M);
        t_elem += seconds_since(t0);
      } else if (mixer == Mixer::markov) {
        t0 = clock_type::now();
        M = *G;
        models::markov_rows(model.sigma_A, M);
        t_elem += seconds_since(t0);
      } else if (mixer == Mixer::ssd) {
        Matrix B(uT, N), C(uT, N);
        t0 = clock_type::now();
        linalg::gemm(1.0, X0, Op::none, WB, Op::none, 0.0, B);
        linalg::gemm(1.0, X0, Op::none, WC, Op::none, 0.0, C);
        linalg::gemm(1.0, C, Op::none, B, Op::trans, 0.0, M);
        t_prod += seconds_since(t0);
        t0 = clock_type::now();
        models::apply_decay_mask(model.alpha, 1.0, M);
        t_elem += seconds_since(t0);
      } else if (mixer == Mixer::lti) {
        double g = 0.0;
        for (std::size_t n = 0; n < N; ++n) g += WB(0, n) * WC(0, n);
        t0 = clock_type::now();
        M = Matrix(uT, uT, 1.0);
        models::apply_decay_mask(model.alpha, g, M);
        t_elem += seconds_since(t0);
      }
      t0 = clock_type::now();
      benchmark::DoNotOptimize(metrics::mixer_metrics(M));
      t_mm += seconds_since(t0);
      mixer_route = static_cast<double>(metrics::spectral_summary(M, false).route);
      t0 = clock_type::now();
      const Matrix* values = &X0;
      Matrix V(uT, ud);
      if (WV) {
        linalg::gemm(1.0, X0, Op::none, *WV, Op::none, 0.0, V);
        values = &V;
      }
      linalg::gemm(1.0, M, Op::none, *values, Op::none, model.lambda, Y);
      t_prod += seconds_since(t0);
      t0 = clock_type::now();
      models::apply_norm(model.norm, Y);
      t_elem += seconds_since(t0);
    }
    t0 = clock_type::now();
    benchmark::DoNotOptimize(metrics::signal_metrics(Y, 0.0));
    t_sm += seconds_since(t0);
    signal_route = static_cast<double>(metrics::spectral_summary(Y, false).route);

    if (mixer == Mixer::s4d) {  // kernel build = (layer with kernels built) - (layer with them cached)
      const double with_kernels = t_layer, cached = t_elem + t_sm;
      t_kernels = with_kernels - cached;  // cumulative over iterations, like the others
    }
  }
  const double n = static_cast<double>(state.iterations());
  const double parts = t_prod + t_elem + t_mm + t_sm + t_kernels;
  state.counters["rng_s"] = t_rng / n;
  state.counters["products_s"] = t_prod / n;
  state.counters["elementwise_s"] = t_elem / n;
  state.counters["s4d_kernels_s"] = t_kernels / n;
  state.counters["mixer_metrics_s"] = t_mm / n;
  state.counters["signal_metrics_s"] = t_sm / n;
  state.counters["layer_s"] = (t_layer + t_rng) / n;  // what BM_layer measures (fresh weights)
  state.counters["other_s"] = (t_layer - parts) / n;
  state.counters["mixer_route"] = mixer_route;
  state.counters["signal_route"] = signal_route;
}

// ---------------------------------------------------------------------------------------------
// (4) The S4D causal convolution alone (docs/BENCHMARKS.md "S4D causal convolution"):
// the scalar loop it replaced, the register-blocked kernel for each instruction set, and the
// transpose (gradients.cpp's reverse pass), against the s4d bound of (2) (T(T+1) d flops at the
// square dgemm rate). `ratio` = time / bound; all variants of one shape in the same run. Also the
// kernel build (state_dim 16; B, C and the steps are drawn once, then cached by the RandomSource).
enum class S4dVariant {
  reference,
  portable,
  avx2,
  transpose_reference,
  transpose_portable,
  transpose_avx2,
  kernels_reference,
  kernels_portable,
  kernels_avx2
};

const char* s4d_variant_name(S4dVariant v) {
  switch (v) {
    case S4dVariant::reference: return "mix/reference";
    case S4dVariant::portable: return "mix/portable";
    case S4dVariant::avx2: return "mix/avx2";
    case S4dVariant::transpose_reference: return "transpose/reference";
    case S4dVariant::transpose_portable: return "transpose/portable";
    case S4dVariant::transpose_avx2: return "transpose/avx2";
    case S4dVariant::kernels_reference: return "kernels/reference";
    case S4dVariant::kernels_portable: return "kernels/portable";
    case S4dVariant::kernels_avx2: return "kernels/avx2";
  }
  return "?";
}

void BM_s4d_conv(benchmark::State& state, S4dVariant v, int T, int d) {
  using models::detail::S4dIsa;
  const auto uT = static_cast<std::size_t>(T), ud = static_cast<std::size_t>(d);
  const Bound b = layer_bound(Mixer::s4d, uT, ud);
  Matrix K = random_matrix(uT, ud, 21);
  for (std::size_t k = 0; k < uT; ++k)  // decaying, like S4D's kernels (the speed does not depend on it)
    for (double& x : K.row(k)) x *= std::exp(-static_cast<double>(k) / 100.0);
  const Matrix X = random_matrix(uT, ud, 22);
  Matrix acc(uT, ud, 0.0);
  const auto model = layer_model(Mixer::s4d, T, d);
  models::RandomSource random(1, 0, T, d);
  double total = 0.0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    switch (v) {
      case S4dVariant::reference: models::detail::s4d_mix_reference(K, X, 1.0, 0.5, acc); break;
      case S4dVariant::portable: models::detail::s4d_mix_direct(S4dIsa::portable, K, X, 1.0, 0.5, acc); break;
      case S4dVariant::avx2: models::detail::s4d_mix_direct(S4dIsa::avx2, K, X, 1.0, 0.5, acc); break;
      case S4dVariant::transpose_reference: acc = models::detail::s4d_mix_transpose_reference(K, X); break;
      case S4dVariant::transpose_portable: models::detail::s4d_mix_transpose_direct(S4dIsa::portable, K, X, acc); break;
      case S4dVariant::transpose_avx2: models::detail::s4d_mix_transpose_direct(S4dIsa::avx2, K, X, acc); break;
      case S4dVariant::kernels_reference: acc = models::detail::s4d_kernels_reference(model, 1, random); break;
      case S4dVariant::kernels_portable:
        models::detail::s4d_kernels_build(S4dIsa::portable, model, 1, random, acc);
        break;
      case S4dVariant::kernels_avx2: models::detail::s4d_kernels_build(S4dIsa::avx2, model, 1, random, acc); break;
    }
    benchmark::DoNotOptimize(acc.data());
    benchmark::ClobberMemory();
    const double t = seconds_since(t0);
    state.SetIterationTime(t);
    total += t;
  }
  const double per_call = total / static_cast<double>(state.iterations());
  if (v == S4dVariant::kernels_reference || v == S4dVariant::kernels_portable || v == S4dVariant::kernels_avx2) {
    state.counters["kernels_s"] = per_call;  // no convolution: the bound does not apply
    return;
  }
  state.counters["GFLOP/s"] = b.gemm_flops / per_call / 1e9;
  state.counters["dgemm_GFLOPs"] = b.gemm_flops / b.seconds / 1e9;
  state.counters["bound_s"] = b.seconds;
  state.counters["conv_s"] = per_call;
  state.counters["ratio"] = per_call / b.seconds;
}

// ---------------------------------------------------------------------------------------------
// (5) The same layer as a task of a bundle pays it, which is how a sweep runs it (task_runner.cpp
// run_bundle): B = 8 tasks of one (T, d) with different signals (with or without the spectrum of X
// stored: the bound then adds the measured dgesdd of T x d, as in (2)) share the
// layer's weights, the input-independent mixers (Markov, lti) with their metrics, and W_Q W_K^T
// (qk_product, what the plan picks for 8 attention tasks: choose_qk_product); each forms its own
// products X W_V and X P. Per task: the bundle's layer time / B. The
// bound per task is the GEMMs it runs (attention: X P, (X P) X^T, X W_V, M V) plus 1/B of the
// shared ones (P = W_Q W_K^T), each at the measured dgemm time of its shape.
constexpr int bundle_tasks = 8;

Bound bundle_layer_bound(Mixer mixer, std::size_t T, std::size_t d) {
  if (!attention(mixer)) return layer_bound(mixer, T, d);
  Bound b;
  for (const Product& p :
       {Product{T, d, d, false}, Product{T, T, d, true}, Product{T, d, d, false}, Product{T, d, T, false}}) {
    b.gemm_flops += p.flops();
    b.seconds += gemm_seconds(p);
  }
  const Product P{d, d, d, true};
  b.gemm_flops += P.flops() / bundle_tasks;
  b.seconds += gemm_seconds(P) / bundle_tasks;
  return b;
}

void BM_bundle_layer(benchmark::State& state, Mixer mixer, int T, int d, bool spectra) {
  linalg::set_blas_threads(1);
  auto model = layer_model(mixer, T, d);
  model.qk_product = attention(mixer);
  const auto uT = static_cast<std::size_t>(T), ud = static_cast<std::size_t>(d);
  models::RandomSource random(1, 0, T, d);
  std::vector<Matrix> X0;
  for (int b = 0; b < bundle_tasks; ++b) {
    X0.push_back(random_matrix(uT, ud, 100 + static_cast<unsigned>(b)));
    models::apply_norm(rcsweep::config::Norm::rms, X0.back());
  }
  const Bound bound = bundle_layer_bound(mixer, uT, ud);
  const double svd = spectra ? gesdd_seconds(uT, ud) : 0.0;
  int layer = 0;
  double total = 0.0;
  std::vector<double> spectrum;
  for (auto _ : state) {
    std::vector<Matrix> X = X0;  // outside the timer
    ++layer;
    const auto t0 = clock_type::now();
    for (int b = 0; b < bundle_tasks; ++b) {
      models::LayerStats stats;
      models::apply_layer(model, layer, random, X[b], &stats);
      benchmark::DoNotOptimize(metrics::signal_metrics(X[b], 0.0, spectra ? &spectrum : nullptr));
      benchmark::DoNotOptimize(stats.head0);
    }
    random.release();
    const double t = seconds_since(t0) / bundle_tasks;
    state.SetIterationTime(t);
    total += t;
  }
  const double per_layer = total / static_cast<double>(state.iterations());
  const std::size_t k = std::min(uT, ud), n = std::max(uT, ud);
  const double gram = spectra ? 0.0 : 0.5 * gemm_seconds({k, k, n, true});
  state.counters["gemm_flops"] = bound.gemm_flops;
  state.counters["gesdd_s"] = svd;
  state.counters["bound_s"] = bound.seconds + svd;
  state.counters["layer_s"] = per_layer;
  state.counters["ratio"] = per_layer / (bound.seconds + svd);
  state.counters["ratio_with_gram"] = per_layer / (bound.seconds + svd + gram);
}

void register_all() {
  // (1) limits: square dgemm and every GEMM shape of the layers; dgesdd of every T x d.
  std::vector<Product> shapes = {{512, 512, 512, false}, {1024, 1024, 1024, false}};
  for (auto [T, d] : sizes)
    for (Mixer m : all_mixers)
      for (const Product& p : layer_products(m, static_cast<std::size_t>(T), static_cast<std::size_t>(d)))
        if (std::none_of(shapes.begin(), shapes.end(), [&](const Product& q) {
              return q.m == p.m && q.n == p.n && q.k == p.k && q.trans_b == p.trans_b;
            }))
          shapes.push_back(p);
  for (const Product& p : shapes) {
    const std::string name = "limits/dgemm/m=" + std::to_string(p.m) + "/n=" + std::to_string(p.n) +
                             "/k=" + std::to_string(p.k) + (p.trans_b ? "/B^T" : "");
    benchmark::RegisterBenchmark(name.c_str(), BM_dgemm, p)->Unit(benchmark::kMillisecond);
  }
  for (auto [T, d] : sizes) {
    const std::string name = "limits/dgesdd/" + std::to_string(T) + "x" + std::to_string(d);
    benchmark::RegisterBenchmark(name.c_str(), BM_dgesdd, static_cast<std::size_t>(T), static_cast<std::size_t>(d))
        ->Unit(benchmark::kMillisecond);
  }
  // (2) layers.
  for (bool spectra : {false, true})
    for (auto [T, d] : sizes)
      for (Mixer m : all_mixers) {
        const std::string name = std::string("layer/") + mixer_name(m) + "/T=" + std::to_string(T) +
                                 "/d=" + std::to_string(d) + "/spectra=" + (spectra ? "1" : "0");
        benchmark::RegisterBenchmark(name.c_str(), BM_layer, m, T, d, spectra)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
  // The big softmax task of docs/SCALING.md (T = 2048, d = 512): layer and breakdown only.
  benchmark::RegisterBenchmark("layer/softmax/T=2048/d=512/spectra=0", BM_layer, Mixer::softmax, 2048, 512, false)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("breakdown/softmax/T=2048/d=512", BM_breakdown, Mixer::softmax, 2048, 512)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  // (3) breakdown.
  for (auto [T, d] : sizes)
    for (Mixer m : all_mixers) {
      const std::string name = std::string("breakdown/") + mixer_name(m) + "/T=" + std::to_string(T) +
                               "/d=" + std::to_string(d);
      benchmark::RegisterBenchmark(name.c_str(), BM_breakdown, m, T, d)->UseManualTime()->Unit(benchmark::kMillisecond);
    }
  // (5) layers in a bundle.
  for (bool spectra : {false, true})
    for (auto [T, d] : sizes)
      for (Mixer m : all_mixers) {
        const std::string name = std::string("bundle/") + mixer_name(m) + "/T=" + std::to_string(T) +
                                 "/d=" + std::to_string(d) + "/spectra=" + (spectra ? "1" : "0");
        benchmark::RegisterBenchmark(name.c_str(), BM_bundle_layer, m, T, d, spectra)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
  // (4) the S4D convolution kernels.
  const bool avx2 = models::detail::s4d_isa_available(models::detail::S4dIsa::avx2);
  for (auto [T, d] : sizes)
    for (S4dVariant v : {S4dVariant::reference, S4dVariant::portable, S4dVariant::avx2, S4dVariant::transpose_reference,
                         S4dVariant::transpose_portable, S4dVariant::transpose_avx2, S4dVariant::kernels_reference,
                         S4dVariant::kernels_portable, S4dVariant::kernels_avx2}) {
      if (!avx2 && (v == S4dVariant::avx2 || v == S4dVariant::transpose_avx2 || v == S4dVariant::kernels_avx2))
        continue;
      const std::string name = std::string("s4d/") + s4d_variant_name(v) + "/T=" + std::to_string(T) +
                               "/d=" + std::to_string(d);
      benchmark::RegisterBenchmark(name.c_str(), BM_s4d_conv, v, T, d)->UseManualTime()->Unit(benchmark::kMillisecond);
    }
}

}  // namespace

int main(int argc, char** argv) {
  rcsweep::keep_freed_memory();  // as the rcsweep program does
  rcsweep::parallel::set_threads(rcsweep::parallel::threads_from_environment());
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("blas", linalg::blas_info());
  benchmark::AddCustomContext("threads", std::to_string(rcsweep::parallel::threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
