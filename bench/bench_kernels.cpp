// Kernel benchmarks: the machine's own limits (dgemm, dgesdd) and rcsweep's kernels at the shapes
// of the Mind the Gap grid (T x d with gamma = T/d in {1, 0.5, 0.2}).
//   ./build/bench/bench_kernels --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "base/allocator.hpp"
#include "base/exp.hpp"
#include "base/parallel.hpp"
#include "bench_common.hpp"

#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "rng/normal_kernels.hpp"  // the ISA variants of fill_normal
#include "rng/philox.hpp"

namespace {
using rcsweep::Matrix;

using rcsweep::bench::random_matrix;

void shapes(benchmark::internal::Benchmark* b) {
  for (auto [T, d] : {std::pair{20, 100}, std::pair{60, 300}, std::pair{150, 150}, std::pair{150, 750}})
    b->Args({T, d});
}

// dgemm X (T x d) * W (d x d): the value product, the bulk of a layer.
void BM_dgemm_value_product(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const auto T = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const Matrix X = random_matrix(T, d, 1), W = random_matrix(d, d, 2);
  Matrix V(T, d);
  for (auto _ : state) rcsweep::linalg::gemm(1.0, X, rcsweep::linalg::Op::none, W, rcsweep::linalg::Op::none, 0.0, V);
  const double flops = 2.0 * static_cast<double>(T * d * d);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_dgemm_value_product)->Apply(shapes);

// linalg::gemm of the grid's products without transposes, X W (T x d x d) and M V (T x d x T),
// whole (one call) against in pieces for the unpacked kernels (linalg::gemm_parts with an m n k
// limit of 100^3, forced on any CPU; on a BLAS without such kernels the pieces are packed calls).
// Args: T, d, k (d for X W, T for M V), 0 whole / 1 pieces.
void BM_gemm_pieces(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const auto T = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const auto k = static_cast<std::size_t>(state.range(2));
  const double previous = rcsweep::linalg::set_unpacked_gemm_limit(
      state.range(3) != 0 ? rcsweep::linalg::openblas_unpacked_limit : 0.0);
  const Matrix A = random_matrix(T, k, 1), B = random_matrix(k, d, 2);
  Matrix C(T, d);
  for (auto _ : state) rcsweep::linalg::gemm(1.0, A, rcsweep::linalg::Op::none, B, rcsweep::linalg::Op::none, 0.0, C);
  state.counters["pieces"] = static_cast<double>(rcsweep::linalg::gemm_parts(T, d, k).parts.count());
  rcsweep::linalg::set_unpacked_gemm_limit(previous);
  const double flops = 2.0 * static_cast<double>(T * d * k);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_gemm_pieces)->Apply([](benchmark::internal::Benchmark* b) {
  // The grid's (T, d) whose X W or M V exceeds 100^3 (the others are one call either way).
  for (auto [T, d] :
       {std::pair{150, 150}, std::pair{80, 160}, std::pair{100, 200}, std::pair{150, 300}, std::pair{40, 200},
        std::pair{60, 300}, std::pair{80, 400}, std::pair{100, 500}, std::pair{150, 750}})
    for (int k : {d, T})
      if ((k == d || T != d) && static_cast<double>(T) * d * k > rcsweep::linalg::openblas_unpacked_limit)
        for (int pieces : {0, 1}) b->Args({T, d, k, pieces});
});

// All singular values of X (linalg::singular_values: dgesdd, at (150, 750) after a QR): the SVD
// route of the metrics.
void BM_dgesdd_values(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix X = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 3);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::singular_values(X));
}
BENCHMARK(BM_dgesdd_values)->Apply(shapes);

// All singular values of a long X (T x d, threads): linalg::singular_values (R of a blocked QR
// first) against LAPACK's dgesdd on the same row-major X (to LAPACK a wide matrix, reduced by LQ).
void long_shapes(benchmark::internal::Benchmark* b, std::initializer_list<int> threads) {
  for (auto [T, d] : {std::pair{2048, 512}, std::pair{512, 2048}, std::pair{8192, 1024}, std::pair{32768, 256}})
    for (int t : threads) b->Args({T, d, t});
  b->Unit(benchmark::kMillisecond);
}
void BM_singular_values(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  rcsweep::parallel::set_threads(static_cast<int>(state.range(2)));
  const Matrix X = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 3);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::singular_values(X));
  rcsweep::parallel::set_threads(1);
}
void BM_singular_values_dgesdd(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix X = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 3);
  const auto m = static_cast<lapack_int>(X.rows()), n = static_cast<lapack_int>(X.cols());
  std::vector<double> s(static_cast<std::size_t>(std::min(m, n)));
  for (auto _ : state) {
    Matrix a = X;
    benchmark::DoNotOptimize(
        LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', n, m, a.data(), n, s.data(), nullptr, 1, nullptr, 1));
  }
}
BENCHMARK(BM_singular_values)->Apply([](auto* b) { long_shapes(b, {1, 2}); });
BENCHMARK(BM_singular_values_dgesdd)->Apply([](auto* b) { long_shapes(b, {1}); });

// The Gram route: dsyrk + top eigenvalues.
void BM_gram_top(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix X = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 3);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::gram_top(X));
}
BENCHMARK(BM_gram_top)->Apply(shapes);

// The tridiagonalisation of the Gram route (k x k Gram matrix of a k x 5k Gaussian X), the own
// fused Householder reduction (linalg::householder_tridiagonal, used for k < 384) against LAPACK's
// dsytrd on the same matrix; the copy of G each iteration is in both.
Matrix gram_of(std::size_t k) {
  const Matrix X = random_matrix(k, 5 * k, 7);
  return rcsweep::linalg::matmul(X, X, rcsweep::linalg::Op::none, rcsweep::linalg::Op::trans);
}
void BM_tridiagonal_own(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const auto k = static_cast<std::size_t>(state.range(0));
  const Matrix G = gram_of(k);
  std::vector<double> d(k), e(k - 1);
  for (auto _ : state) {
    Matrix A = G;
    rcsweep::linalg::householder_tridiagonal(A, d, e);
    benchmark::DoNotOptimize(d.data());
  }
}
void BM_tridiagonal_dsytrd(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const auto k = static_cast<std::size_t>(state.range(0));
  const Matrix G = gram_of(k);
  std::vector<double> d(k), e(k), tau(k);
  const auto n = static_cast<lapack_int>(k);
  for (auto _ : state) {
    Matrix A = G;
    LAPACKE_dsytrd(LAPACK_COL_MAJOR, 'U', n, A.data(), n, d.data(), e.data(), tau.data());
    benchmark::DoNotOptimize(d.data());
  }
}
BENCHMARK(BM_tridiagonal_own)->Arg(60)->Arg(100)->Arg(150)->Arg(300)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_tridiagonal_dsytrd)->Arg(60)->Arg(100)->Arg(150)->Arg(300)->Unit(benchmark::kMicrosecond);

// The two largest eigenvalues of that tridiagonal (linalg::top_two_tridiagonal: multisection
// with Sturm counts, the last step of the Gram route for k < 384).
void BM_top_two_tridiagonal(benchmark::State& state) {
  const auto k = static_cast<std::size_t>(state.range(0));
  Matrix A = gram_of(k);
  std::vector<double> d(k), e(k - 1);
  rcsweep::linalg::householder_tridiagonal(A, d, e);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::top_two_tridiagonal(d, e));
}
BENCHMARK(BM_top_two_tridiagonal)->Arg(20)->Arg(60)->Arg(150)->Arg(300)->Unit(benchmark::kMicrosecond);

// The exponentials of a softmax row of length n: rcsweep::exp_affine_sum (vectorised
// exp_vectorisable, used by the layers) against a plain loop over libm's exp and its sum.
void BM_exp_row_vectorised(benchmark::State& state) {
  const Matrix x0 = random_matrix(1, static_cast<std::size_t>(state.range(0)), 8);
  Matrix x = x0;
  for (auto _ : state) {
    x = x0;
    benchmark::DoNotOptimize(rcsweep::exp_affine_sum(x.data(), x.size(), 1.0, 1.0));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
void BM_exp_row_libm(benchmark::State& state) {
  const Matrix x0 = random_matrix(1, static_cast<std::size_t>(state.range(0)), 8);
  Matrix x = x0;
  for (auto _ : state) {
    x = x0;
    double sum = 0.0;
    for (double& v : x.values()) sum += v = std::exp(v - 1.0);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_exp_row_vectorised)->Arg(150)->Arg(1024);
BENCHMARK(BM_exp_row_libm)->Arg(150)->Arg(1024);

// All per-layer signal metrics (Gram route for a non-collapsed X).
void BM_signal_metrics(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix X = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 4);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::metrics::signal_metrics(X, 0.0));
}
BENCHMARK(BM_signal_metrics)->Apply(shapes);

// Keyed normals (Philox4x64-10 + Box–Muller), at the sizes the models draw: T x T Markov
// matrices and d x d weights of the grid (20², 60², 100², 150², 300², 750²) and 2^20.
// BM_fill_normal is what the models call (the AVX2 variant on an AVX2 CPU); the _portable one is
// the baseline x86-64 build of the same code (the generator without the AVX2 build), in the same run.
template <void (*Fill)(const rcsweep::rng::StreamKey&, std::span<double>)>
void fill_normal_bench(benchmark::State& state) {
  std::vector<double> out(static_cast<std::size_t>(state.range(0)));
  rcsweep::rng::StreamKey key;
  for (auto _ : state) {
    Fill(key, out);
    benchmark::DoNotOptimize(out.data());
    ++key.layer;
  }
  state.counters["normals/s"] = benchmark::Counter(static_cast<double>(out.size()),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}
void fill_sizes(benchmark::internal::Benchmark* b) {
  for (int n : {20 * 20, 60 * 60, 100 * 100, 150 * 150, 300 * 300, 750 * 750, 1 << 20}) b->Arg(n);
}
void BM_fill_normal(benchmark::State& state) { fill_normal_bench<rcsweep::rng::fill_normal>(state); }
void BM_fill_normal_portable(benchmark::State& state) {
  fill_normal_bench<rcsweep::rng::detail::fill_normal_portable>(state);
}
BENCHMARK(BM_fill_normal)->Apply(fill_sizes);
BENCHMARK(BM_fill_normal_portable)->Apply(fill_sizes);

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[argc - 1]) == "--default-malloc") {
    --argc;  // measure without the allocator setting of the rcsweep program
  } else {
    rcsweep::keep_freed_memory();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
