// One Mamba-2 layer at mamba2-2.7b's shapes (d_model 2560, expand 2, d_state 128, headdim 64,
// ngroups 1, d_conv 4, chunk_size 256: E = 5120, H = 80 heads) on T = 512 tokens in float64:
// rcsweep's forward (models::mamba2::apply_block, the SSD in its chunked form) against the floor of
// its matrix products (docs/BENCHMARKS.md, where measured figures are kept).
//
//   ./build/bench/mamba2_layer --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// The weights are RandomWeights(the shape, seed 41, draw 0).layer(0), the published
// initialisation; the input X is N(0, 1) (a layer's speed does not depend on its values).
//
// Flops of one layer (T tokens, d = d_model, E = d_inner, G N = ngroups d_state, H heads, P =
// headdim, chunks of Q tokens), counted as GEMM flops:
//   in_proj             2 T d (2 E + 2 G N + H)
//   out_proj            2 T E d
//   the chunked SSD     per chunk of q tokens: C B^T 2 q^2 N per group; per head W x 2 q^2 P,
//                       the state read 2 q N P (every chunk but the first) and carried 2 q P N
//                       (every chunk but the last)
// Not counted: the convolution (2 T K (E + 2 G N)), SiLU, softplus, the q^2 / 2 exponentials of
// the decay per head and chunk, the norms and the skip (O(T E)).
//
// Benchmarks (/N: N of rcsweep's OpenMP threads, one BLAS thread each; dgemm_floor/N: N BLAS
// threads, one rcsweep thread):
//   layer/N        apply_block on X (T x d), the chunked SSD
//   projections/N/PARTS  in_proj (as two products, z and the rest) and out_proj through
//                  linalg::gemm, each cut into at most PARTS parts (its split_parts; 0: the default
//                  parts of gemm_part_size columns); forward.cpp's weights_split_parts is one of them
//   ssd/N          the chunked SSD alone (models::mamba2::ssd of the layer's inputs)
//   dgemm_floor/N  in_proj's and out_proj's shapes as plain cblas_dgemm calls (beta = 0)
// Counters: GFLOP/s (the counted flops of what was timed: layer/N the whole layer's). The layer's
// GEMM floor is its flops at dgemm_floor's rate: layer/N's GFLOP/s over dgemm_floor/N's is the
// fraction of that floor reached.
//
// A whole model, for the comparison with PyTorch (bench/run_mamba2_bench.sh, bench/mamba2_torch.py):
//
//   ./build/bench/mamba2_layer --model DIR --ids IDS [benchmark flags]
//
// adds model/N: every layer of the model folder DIR (a mamba_ssm checkpoint, CheckpointWeights)
// then the final norm on X_0 = the embedding of the sequence in the token file IDS (its excerpts
// joined, as tests/tools/mamba2_forward reads them), the weights converted to float64 once before
// the timing (as PyTorch holds its parameters). Counter s_forward (seconds per forward) and
// checksum (the sum of the cubes of the normed output, as bench/mamba2_torch.py prints it).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/allocator.hpp"
#include "base/matrix.hpp"
#include "base/parallel.hpp"
#include "bench_common.hpp"
#include "checkpoint/token_file.hpp"
#include "linalg/linalg.hpp"
#include "models/mamba2/checkpoint_weights.hpp"
#include "models/mamba2/mamba2.hpp"

namespace {
using rcsweep::Matrix;
using rcsweep::linalg::Op;
namespace m2 = rcsweep::models::mamba2;
namespace linalg = rcsweep::linalg;
namespace parallel = rcsweep::parallel;

constexpr std::size_t tokens = 512;

m2::Mamba2Shape shape_2_7b() {
  m2::Mamba2Shape s;
  s.d_model = 2560;
  s.layers = 64;
  s.vocab = 50277;
  s.vocab_rows = 50280;
  return s;  // d_state 128, d_conv 4, expand 2, headdim 64, ngroups 1, chunk_size 256: Mamba2's defaults
}

struct Setup {
  m2::Mamba2Shape shape = shape_2_7b();
  m2::LayerWeights weights;
  Matrix X;
  Setup() : weights(m2::RandomWeights(shape, 41, 0).layer(0)), X(rcsweep::bench::random_matrix(tokens, 2560, 1)) {}

  double projection_flops() const {
    const double T = tokens, d = shape.d_model, E = shape.d_inner();
    return 2 * T * d * shape.d_in_proj() + 2 * T * E * d;
  }
  double ssd_flops() const {
    const double N = shape.d_state, P = shape.headdim, G = shape.ngroups, H = shape.heads();
    const std::size_t Q = static_cast<std::size_t>(shape.chunk_size), chunks = (tokens + Q - 1) / Q;
    double flops = 0.0;
    for (std::size_t c = 0; c < chunks; ++c) {
      const double q = static_cast<double>(std::min(Q, tokens - c * Q));
      flops += G * 2 * q * q * N + H * 2 * q * q * P;
      if (c > 0) flops += H * 2 * q * N * P;
      if (c + 1 < chunks) flops += H * 2 * q * P * N;
    }
    return flops;
  }
  double layer_flops() const { return projection_flops() + ssd_flops(); }
};

const Setup& setup() {
  static const Setup s;
  return s;
}

void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_layer(benchmark::State& state) {
  const Setup& s = setup();
  linalg::set_blas_threads(1);
  parallel::set_threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    Matrix X = s.X;
    m2::apply_block(s.shape, s.weights, m2::Ablation{}, X);
    benchmark::DoNotOptimize(X.data());
  }
  parallel::set_threads(1);
  set_flops(state, s.layer_flops());
}

// in_proj (as two products: z and the rest) and out_proj through linalg::gemm, cut into at most
// range(1) parts each (linalg::gemm's split_parts; 0: its default parts of gemm_part_size).
void BM_projections(benchmark::State& state) {
  const Setup& s = setup();
  linalg::set_blas_threads(1);
  parallel::set_threads(static_cast<int>(state.range(0)));
  const auto parts = static_cast<std::size_t>(state.range(1));
  const std::size_t d = 2560, E = static_cast<std::size_t>(s.shape.d_inner()),
                    n_in = static_cast<std::size_t>(s.shape.d_in_proj());
  const Matrix y = rcsweep::bench::random_matrix(tokens, E, 2);
  Matrix z(tokens, E), rest(tokens, n_in - E), out(tokens, d);
  for (auto _ : state) {
    linalg::gemm(1.0, s.X, Op::none, rcsweep::ConstMatrixView(s.weights.W_in.data(), d, E, n_in), Op::none, 0.0, z, 0.0,
                 parts);
    linalg::gemm(1.0, s.X, Op::none, rcsweep::ConstMatrixView(s.weights.W_in.data() + E, d, n_in - E, n_in), Op::none,
                 0.0, rest, 0.0, parts);
    linalg::gemm(1.0, y, Op::none, s.weights.W_out, Op::none, 0.0, out, 0.0, parts);
    benchmark::DoNotOptimize(out.data());
  }
  parallel::set_threads(1);
  set_flops(state, s.projection_flops());
}

void BM_ssd(benchmark::State& state) {
  const Setup& s = setup();
  linalg::set_blas_threads(1);
  Matrix u = s.X;
  m2::rms_norm(s.weights.norm, s.shape.norm_eps, u);
  const m2::SsdInputs inputs = m2::ssm_inputs(s.shape, s.weights, u);
  parallel::set_threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    const Matrix y = m2::ssd(s.shape, inputs, s.weights.D, m2::SsdForm::chunked);
    benchmark::DoNotOptimize(y.data());
  }
  parallel::set_threads(1);
  set_flops(state, s.ssd_flops());
}

// C = A B, one plain cblas_dgemm call (row-major, beta = 0).
void dgemm(const Matrix& A, const Matrix& B, Matrix& C) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(A.rows()), static_cast<int>(B.cols()),
              static_cast<int>(A.cols()), 1.0, A.data(), static_cast<int>(A.cols()), B.data(),
              static_cast<int>(B.cols()), 0.0, C.data(), static_cast<int>(C.cols()));
}

void BM_dgemm_floor(benchmark::State& state) {
  const Setup& s = setup();
  const int previous = linalg::set_blas_threads(static_cast<int>(state.range(0)));
  const std::size_t d = 2560, E = static_cast<std::size_t>(s.shape.d_inner()),
                    n_in = static_cast<std::size_t>(s.shape.d_in_proj());
  const Matrix y = rcsweep::bench::random_matrix(tokens, E, 2);
  Matrix zxbcdt(tokens, n_in), out(tokens, d);
  for (auto _ : state) {
    dgemm(s.X, s.weights.W_in, zxbcdt);
    dgemm(y, s.weights.W_out, out);
    benchmark::DoNotOptimize(out.data());
  }
  linalg::set_blas_threads(previous);
  set_flops(state, s.projection_flops());
}

// One iteration is a fraction of a second to seconds: Iterations(2), repetitions from the command line.
BENCHMARK(BM_layer)->Name("layer")->Arg(1)->Arg(2)->Iterations(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_projections)
    ->Name("projections")
    ->ArgsProduct({{1, 2}, {0, 1, 2, 4, 8}})
    ->Iterations(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ssd)->Name("ssd")->Arg(1)->Arg(2)->Iterations(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_dgemm_floor)
    ->Name("dgemm_floor")
    ->Arg(1)
    ->Arg(2)
    ->Iterations(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// A model folder's weights in float64 and its input X_0.
struct Model {
  m2::Mamba2Shape shape;
  std::vector<m2::LayerWeights> layers;
  std::vector<double> norm_f;
  Matrix X0;
};

Model load_model(const std::string& dir, const std::string& ids_path) {
  const auto source = m2::CheckpointWeights::open(dir);
  Model m;
  m.shape = source->shape();
  const rcsweep::checkpoint::TokenFile file = rcsweep::checkpoint::read_token_file(ids_path);
  file.check_vocabulary(m.shape.vocab_rows);
  std::vector<std::int64_t> ids;
  for (const auto& e : file.excerpts) ids.insert(ids.end(), e.begin(), e.end());
  m.X0 = source->embedding(ids);
  for (int l = 0; l < m.shape.layers; ++l) m.layers.push_back(source->layer(l));
  m.norm_f = source->final_norm();
  return m;
}

void BM_model(benchmark::State& state, const Model* m) {
  linalg::set_blas_threads(1);
  parallel::set_threads(static_cast<int>(state.range(0)));
  double checksum = 0.0;
  for (auto _ : state) {
    Matrix X = m->X0;
    for (const m2::LayerWeights& w : m->layers) m2::apply_block(m->shape, w, m2::Ablation{}, X);
    m2::apply_final_norm(m->shape, m->norm_f, m2::Ablation{}, X);
    checksum = 0.0;
    for (const double v : X.values()) checksum += v * v * v;
    benchmark::DoNotOptimize(X.data());
  }
  parallel::set_threads(1);
  state.counters["s_forward"] = benchmark::Counter(
      1.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["checksum"] = checksum;
}

}  // namespace

int main(int argc, char** argv) {
  rcsweep::keep_freed_memory();  // as the rcsweep program does
  std::string model_dir, ids;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if ((std::strcmp(argv[i], "--model") == 0 || std::strcmp(argv[i], "--ids") == 0) && i + 1 < argc) {
      (argv[i][2] == 'm' ? model_dir : ids) = argv[i + 1];
      ++i;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  std::unique_ptr<Model> model;
  if (!model_dir.empty() || !ids.empty()) {
    if (model_dir.empty() || ids.empty()) {
      std::cerr << "mamba2_layer: --model DIR and --ids IDS go together\n";
      return 2;
    }
    try {
      model = std::make_unique<Model>(load_model(model_dir, ids));
    } catch (const std::exception& e) {
      std::cerr << "mamba2_layer: " << e.what() << "\n";
      return 1;
    }
    for (const int threads : {1, 2})
      benchmark::RegisterBenchmark("model", BM_model, model.get())
          ->Arg(threads)
          ->Iterations(1)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
