// Kernel benchmarks: the machine's own limits (dgemm, dgesdd) and rcsweep's kernels at the shapes
// of the Mind the Gap grid (T x d with gamma = T/d in {1, 0.5, 0.2}).
//   ./build/bench/bench_kernels --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <span>
#include <string_view>
#include <vector>

#include "base/allocator.hpp"
#include "bench_common.hpp"

#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "rng/normal_kernels.hpp"  // the ISA variants of fill_normal
#include "rng/philox.hpp"

namespace {
using rcsweep::Matrix;

using rcsweep::bench::random_matrix;

void shapes(benchmark::internal::Benchmark* b) {
  for (auto [T, d] : {std::pair{20, 100}, std::pair{60, 300}, std::pair{150, 150}, std::pair{150, 750}}) b->Args({T, d});
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

// All singular values (dgesdd, values only) of X: the SVD route of the metrics.
void BM_dgesdd_values(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix X = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 3);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::singular_values(X));
}
BENCHMARK(BM_dgesdd_values)->Apply(shapes);

// The Gram route: dsyrk + top eigenvalues.
void BM_gram_top(benchmark::State& state) {
  rcsweep::linalg::set_blas_threads(1);
  const Matrix X = random_matrix(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 3);
  for (auto _ : state) benchmark::DoNotOptimize(rcsweep::linalg::gram_top(X));
}
BENCHMARK(BM_gram_top)->Apply(shapes);

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
// the baseline x86-64 build of the same code (the generator before issue 5), in the same run.
template <void (*Fill)(const rcsweep::rng::StreamKey&, std::span<double>)>
void fill_normal_bench(benchmark::State& state) {
  std::vector<double> out(static_cast<std::size_t>(state.range(0)));
  rcsweep::rng::StreamKey key;
  for (auto _ : state) {
    Fill(key, out);
    benchmark::DoNotOptimize(out.data());
    ++key.layer;
  }
  state.counters["normals/s"] = benchmark::Counter(static_cast<double>(out.size()), benchmark::Counter::kIsIterationInvariantRate);
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
