// The routes to the per-layer spectral metrics, on the matrices a layer
// really has: the T x T softmax mixer (with and without perp) and a T x d signal.
//   ./build/bench/bench_metrics --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Each route gives s_1 and s_2 (and, for the signal, sum s^4 through the Gram matrix):
//   gram_top   dsyrk of the k x k Gram matrix + dsyevx for its two largest eigenvalues
//   lanczos    Golub–Kahan–Lanczos on the matrix itself (linalg::top_singular_values)
//   dgesdd     all singular values
// and res_best (metrics::best_residual, opt-in) against dgesdd of the same X:
//   ./build/bench/bench_metrics --benchmark_filter='best_residual|dgesdd_signal' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>

#include "bench_common.hpp"
#include "linalg/lanczos.hpp"
#include "linalg/linalg.hpp"
#include "metrics/best_residual.hpp"
#include "metrics/metrics.hpp"

namespace {
using rcsweep::Matrix;
using rcsweep::bench::random_matrix;

// kind 0: softmax mixer T x T (logits N(0, 1)); 1: the same minus 1/T (perp); 2: Gaussian T x d signal.
Matrix input(int kind, std::size_t T, std::size_t d) {
  if (kind == 2) return random_matrix(T, d, 5);
  Matrix a = random_matrix(T, T, 6);
  for (std::size_t i = 0; i < T; ++i) {
    double mx = a(i, 0), sum = 0.0;
    for (std::size_t j = 0; j < T; ++j) mx = std::max(mx, a(i, j));
    for (std::size_t j = 0; j < T; ++j) sum += a(i, j) = std::exp(a(i, j) - mx);
    for (std::size_t j = 0; j < T; ++j) a(i, j) = a(i, j) / sum - (kind == 1 ? 1.0 / static_cast<double>(T) : 0.0);
  }
  return a;
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int kind : {0, 1})
    for (int T : {64, 150, 256, 512, 1024}) b->Args({kind, T, T});
  for (auto [T, d] : {std::pair{20, 100}, std::pair{60, 300}, std::pair{150, 150}, std::pair{150, 750},
                      std::pair{512, 512}, std::pair{1024, 512}, std::pair{1024, 1024}})
    b->Args({2, T, d});
}

Matrix arg_input(const benchmark::State& state) {
  return input(static_cast<int>(state.range(0)), static_cast<std::size_t>(state.range(1)),
               static_cast<std::size_t>(state.range(2)));
}

void BM_route_gram_top(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix A = arg_input(state);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::gram_top(A));
}
BENCHMARK(BM_route_gram_top)->Apply(shapes)->Unit(benchmark::kMicrosecond);

void BM_route_lanczos(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix A = arg_input(state);
  int steps = 0;
  for (auto _ : state) steps = rcsweep::linalg::top_singular_values(A, 1e-13, 400).steps;
  state.counters["steps"] = steps;
}
BENCHMARK(BM_route_lanczos)->Apply(shapes)->Unit(benchmark::kMicrosecond);

void BM_route_dgesdd(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix A = arg_input(state);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::singular_values(A));
}
BENCHMARK(BM_route_dgesdd)->Apply(shapes)->Unit(benchmark::kMicrosecond);

// res_best of a Gaussian T x d signal (bert-base: 128 x 768), with its L-BFGS iterations and
// evaluations, against all singular values of the same X (dgesdd_signal).
void signal_shapes(benchmark::internal::Benchmark* b) {
  for (auto [T, d] : {std::pair{60, 300}, std::pair{128, 768}, std::pair{150, 750}, std::pair{512, 768}})
    b->Args({2, T, d});
}
void BM_best_residual(benchmark::State& state) {
  const Matrix A = arg_input(state);
  rcsweep::metrics::BestResidual r;
  for (auto _ : state) benchmark::DoNotOptimize(r = rcsweep::metrics::best_residual(A));
  state.counters["iterations"] = r.iterations;
  state.counters["evaluations"] = r.evaluations;
  state.counters["gap"] = r.value / r.lower - 1.0;
}
BENCHMARK(BM_best_residual)->Apply(signal_shapes)->Unit(benchmark::kMillisecond);
void BM_dgesdd_signal(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix A = arg_input(state);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::singular_values(A));
}
BENCHMARK(BM_dgesdd_signal)->Apply(signal_shapes)->Unit(benchmark::kMillisecond);

// The eigensolve of the Gram route alone, on G = A A^T (A a Gaussian k x d signal; k = 150 and
// 300 are below gram_lanczos_min_order, where the tridiagonalisation is used): Golub–Kahan–
// Lanczos on G (two products with G per step) against symmetric Lanczos (one), against the
// Householder tridiagonalisation + multisection.
Matrix signal_gram(const benchmark::State& state) {
  const Matrix A = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 5);
  return rcsweep::linalg::matmul(A, A, rcsweep::linalg::Op::none, rcsweep::linalg::Op::trans);
}
void gram_orders(benchmark::internal::Benchmark* b) {
  for (auto [k, d] : {std::pair{150, 750}, std::pair{200, 400}, std::pair{256, 512}, std::pair{300, 600},
                      std::pair{384, 768}, std::pair{512, 512}, std::pair{512, 1024}, std::pair{1024, 1024}})
    b->Args({k, d});
}
void BM_gram_eig_gkl(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix G = signal_gram(state);
  int steps = 0;
  for (auto _ : state) steps = rcsweep::linalg::top_singular_values(G, 1e-13, 400).steps;
  state.counters["products"] = 2 * steps;
}
BENCHMARK(BM_gram_eig_gkl)->Apply(gram_orders)->Unit(benchmark::kMicrosecond);
void BM_gram_eig_symmetric(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix G = signal_gram(state);
  int steps = 0;
  for (auto _ : state) steps = rcsweep::linalg::top_eigenvalues(G, 1e-13, 400).steps;
  state.counters["products"] = steps;
}
BENCHMARK(BM_gram_eig_symmetric)->Apply(gram_orders)->Unit(benchmark::kMicrosecond);
void BM_gram_eig_tridiagonal(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix G = signal_gram(state);
  const std::size_t k = G.rows();
  std::vector<double> d(k), e(k - 1);
  for (auto _ : state) {
    Matrix A = G;
    rcsweep::linalg::householder_tridiagonal(A, d, e);
    benchmark::DoNotOptimize(rcsweep::linalg::top_two_tridiagonal(d, e));
  }
}
BENCHMARK(BM_gram_eig_tridiagonal)->Apply(gram_orders)->Unit(benchmark::kMicrosecond);

// The metrics as the layer computes them (whatever route they choose).
void BM_mixer_metrics(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix A = arg_input(state);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::metrics::mixer_metrics(A));
}
BENCHMARK(BM_mixer_metrics)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int kind : {0, 1})
        for (int T : {64, 150, 256, 512, 1024}) b->Args({kind, T, T});
    })
    ->Unit(benchmark::kMicrosecond);

void BM_signal_metrics(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix A = arg_input(state);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::metrics::signal_metrics(A, 0.0));
}
BENCHMARK(BM_signal_metrics)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (auto [T, d] : {std::pair{20, 100}, std::pair{60, 300}, std::pair{150, 150}, std::pair{150, 750},
                          std::pair{512, 512}, std::pair{1024, 512}, std::pair{1024, 1024}})
        b->Args({2, T, d});
    })
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
