// Encoder blocks at bert-base's shape: rcsweep's forward (models::encoder::apply_block, 12 layers)
// on the 32 excerpts of jobs/examples/tokens/excerpts.txt, each padded to T = 128 tokens with
// [PAD] (its keys masked; the excerpts hold 20 to 118 tokens, none is cut), in float64, against
// the floor of its matrix products (docs/BENCHMARKS.md "Encoder blocks (bert-base) against
// PyTorch"; bench/encoder_torch.py is the PyTorch side, bench/run_encoder_bench.sh runs both).
//
//   ./build/bench/encoder_block --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   ./build/bench/encoder_block --write-hidden OUT.npy   (every layer's hidden states, then exit)
//
// The model is RandomWeights(bert-base-uncased's config.json, seed 37, draw 0), the published
// initialisation: `build/tests/python/encoder_forward jobs/examples/models/bert-base-uncased TOKENS
// OUT.npy --random 37 0 --save-weights DIR` writes the same numbers as a model folder. One benchmark iteration is the
// 32 excerpts, each through the 12 blocks from its embedding X_0 (the embedding is computed once,
// outside the timing: O(T d) of table look-ups and one LayerNorm).
//
// Flops of one block (T tokens, d = 768, m = 3072, every one of them in a GEMM):
//   Q, K, V, W_O        4 x 2 T d^2          the four d x d projections
//   Q_h K_h^T, P_h V_h  2 x 2 T^2 d          all heads together (d_head = d / H)
//   W_1, W_2            2 x 2 T d m          the MLP
//   total               8 T d^2 + 4 T^2 d + 4 T d m
// Not counted: T^2 H exponentials, T m GELUs, biases, skips, LayerNorms (O(T d)), the embedding.
// Masked keys are computed like the others (their probability is then 0), so the count holds.
//
// Benchmarks (/N: N of rcsweep's OpenMP threads, one BLAS thread each):
//   forward/N       the 12 blocks on the 32 excerpts
//   projections/N   the six products of each block (Q, K, V, W_O: T x d x d; W_1: T x d x m;
//                   W_2: T x m x d) through linalg::gemm as forward.cpp calls them (its
//                   biased_products, copied here: bias rows as C, beta = 1, the same parts), each
//                   layer's own weights, 32 excerpts
//   dgemm_floor     the same six shapes as single plain cblas_dgemm calls (beta = 0, 1 thread):
//                   the "dgemm floor" of the projections
//   dgemm_square/n  n^3, 1 thread: the machine's single-core dgemm rate for large squares
//   weight_product/T/n/cut  a T x 768 times 768 x n product with out-of-cache weights, one call
//                   through the BLAS's packing (cut 0, as forward.cpp) or cut for OpenBLAS's
//                   unpacked kernels (cut 1, where the core has them), 1 thread
//   activation      the MLP's GELU on T x m, 1 thread (ns_entry: per entry)
//   layer_norm      one LayerNorm of T x d, 1 thread
// Counters: s_excerpt (seconds per excerpt-forward of 12 layers), GFLOP/s (the counted flops of
// what was timed), checksum (forward: the sum of the cubes of the last layer's hidden states, as
// bench/encoder_torch.py prints it; their plain sum is 0, a LayerNorm's rows summing to 0).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/matrix.hpp"
#include "base/parallel.hpp"
#include "bench_common.hpp"
#include "checkpoint/model_config.hpp"
#include "checkpoint/token_file.hpp"
#include "linalg/linalg.hpp"
#include "models/encoder/checkpoint_weights.hpp"
#include "models/encoder/encoder.hpp"

namespace {
using rcsweep::Matrix;
using rcsweep::linalg::Op;
namespace enc = rcsweep::models::encoder;
namespace linalg = rcsweep::linalg;
namespace parallel = rcsweep::parallel;

constexpr std::size_t tokens_per_excerpt = 128;
constexpr std::uint64_t seed = 37;
const std::filesystem::path source_dir = RCSWEEP_SOURCE_DIR;

// The model, its 12 blocks' weights and the 32 excerpts' embeddings, made once.
struct Setup {
  enc::EncoderShape shape;
  std::vector<enc::BlockWeights> blocks;
  std::vector<Matrix> X0;
  std::vector<std::vector<bool>> real;

  Setup() {
    shape = enc::encoder_shape(
        rcsweep::checkpoint::ModelConfig::load(source_dir / "jobs/examples/models/bert-base-uncased/config.json"));
    const enc::RandomWeights source(shape, seed, 0);
    const auto tokens = rcsweep::checkpoint::read_token_file(source_dir / "jobs/examples/tokens/excerpts.txt");
    tokens.check_vocabulary(shape.vocab);
    std::set<std::int64_t> ids{shape.pad_token_id};
    for (const auto& e : tokens.excerpts) ids.insert(e.begin(), e.end());
    enc::EmbeddingRequest request;
    request.ids.assign(ids.begin(), ids.end());
    request.max_position = static_cast<int>(tokens_per_excerpt) - 1;
    const enc::EmbeddingWeights embedding = source.embeddings(request);
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      std::span<const std::int64_t> ids_k(tokens.excerpts[k]);
      ids_k = ids_k.first(std::min(ids_k.size(), tokens_per_excerpt));  // truncated to T (none is longer)
      const auto padded = rcsweep::checkpoint::pad_tokens(ids_k, tokens_per_excerpt, shape.pad_token_id);
      X0.push_back(enc::embed(shape, embedding, request, enc::Excerpt{padded.ids, {}, padded.real}));
      real.push_back(padded.real);
    }
    for (int layer = 1; layer <= shape.layers; ++layer) blocks.push_back(source.block(shape.group_of(layer)));
  }
  std::size_t excerpts() const { return X0.size(); }
  double block_flops() const {
    const double T = tokens_per_excerpt, d = shape.d, m = shape.intermediate;
    return 8 * T * d * d + 4 * T * T * d + 4 * T * d * m;
  }
  double projection_flops() const {
    const double T = tokens_per_excerpt, d = shape.d, m = shape.intermediate;
    return 8 * T * d * d + 4 * T * d * m;
  }
};

const Setup& setup() {
  static const Setup s;
  return s;
}

// The excerpt through every block, from X_0.
Matrix forward(const Setup& s, std::size_t k) {
  Matrix X = s.X0[k];
  for (const enc::BlockWeights& b : s.blocks) enc::apply_block(s.shape, b, enc::Ablation{}, s.real[k], X);
  return X;
}

void set_counters(benchmark::State& state, double excerpts, double flops) {
  state.counters["s_excerpt"] = benchmark::Counter(
      excerpts, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_forward(benchmark::State& state) {
  const Setup& s = setup();
  linalg::set_blas_threads(1);
  parallel::set_threads(static_cast<int>(state.range(0)));
  double checksum = 0.0;
  for (auto _ : state) {
    checksum = 0.0;
    for (std::size_t k = 0; k < s.excerpts(); ++k) {
      const Matrix X = forward(s, k);
      for (const double x : X.values()) checksum += x * x * x;
    }
  }
  parallel::set_threads(1);
  const double n = static_cast<double>(s.excerpts());
  set_counters(state, n, n * static_cast<double>(s.blocks.size()) * s.block_flops());
  state.counters["checksum"] = checksum;
}

Matrix bias_rows(std::size_t rows, const std::vector<double>& b) {
  Matrix M(rows, b.size(), Matrix::uninitialized);
  for (std::size_t i = 0; i < rows; ++i) std::copy(b.begin(), b.end(), M.row(i).begin());
  return M;
}

// The inputs of the six products (values do not matter to their speed: N(0, 1), no subnormals).
struct ProductInputs {
  Matrix X, context, hidden;
  explicit ProductInputs(const Setup& s)
      : X(rcsweep::bench::random_matrix(tokens_per_excerpt, static_cast<std::size_t>(s.shape.d), 1)),
        context(rcsweep::bench::random_matrix(tokens_per_excerpt, static_cast<std::size_t>(s.shape.d), 2)),
        hidden(rcsweep::bench::random_matrix(tokens_per_excerpt, static_cast<std::size_t>(s.shape.intermediate), 3)) {}
};

// forward.cpp's biased_products without the activation (copied): C = A B + 1 b^T in the fewest
// of 2, 4 or 8 blocks of C's columns (multiples of `unit`: whole heads for Q, K, V) that
// linalg::gemm computes in one call each (else one whole linalg::gemm), all blocks of the products
// given in one parallel loop; each block is a matrix of its own, read as it is by the block's next
// steps.
struct BiasedProduct {
  rcsweep::ConstMatrixView A;
  const Matrix* B;
  const std::vector<double>* b;
  std::size_t unit;
  std::vector<Matrix>* out;
};
constexpr double weights_unpacked_limit = 0.0;  // as forward.cpp's
std::size_t block_width(std::size_t m, std::size_t n, std::size_t k, std::size_t unit) {
  for (const std::size_t blocks : {std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
    const std::size_t width = ((n + unit - 1) / unit + blocks - 1) / blocks * unit;
    if (width < n && linalg::gemm_parts(m, width, k, false, weights_unpacked_limit).parts.count() == 1) return width;
  }
  return 0;
}
void biased_products(std::initializer_list<BiasedProduct> list) {
  struct Part {
    const BiasedProduct* product;
    std::size_t first;
    Matrix* C;
  };
  std::vector<Part> parts;
  for (const BiasedProduct& p : list) {
    const std::size_t T = p.A.rows, n = p.B->cols(), width = block_width(T, n, p.A.cols, p.unit);
    p.out->clear();
    if (width == 0) {
      p.out->push_back(bias_rows(T, *p.b));
      linalg::gemm(1.0, p.A, Op::none, *p.B, Op::none, 1.0, p.out->back(), weights_unpacked_limit);
      continue;
    }
    for (std::size_t first = 0; first < n; first += width)
      p.out->emplace_back(T, std::min(width, n - first), Matrix::uninitialized);
    for (std::size_t i = 0; i < p.out->size(); ++i) parts.push_back({&p, i * width, &(*p.out)[i]});
  }
  parallel::for_each(parts.size(), [&](std::size_t i) {
    const BiasedProduct& p = *parts[i].product;
    Matrix& C = *parts[i].C;
    const std::size_t T = p.A.rows, k = p.A.cols, n = p.B->cols(), first = parts[i].first, cols = C.cols();
    for (std::size_t r = 0; r < T; ++r) std::copy_n(p.b->data() + first, cols, C.row(r).data());
    linalg::gemm(1.0, p.A, Op::none, rcsweep::ConstMatrixView(p.B->data() + first, k, cols, n), Op::none, 1.0, C,
                 weights_unpacked_limit);
  });
}

// The six products of one block as apply_block computes them (forward.cpp).
void block_products(const enc::BlockWeights& w, const ProductInputs& in, std::size_t d_head) {
  std::vector<Matrix> Q, K, V, branch, hidden, out;
  biased_products(
      {{in.X, &w.W_Q, &w.b_Q, d_head, &Q}, {in.X, &w.W_K, &w.b_K, d_head, &K}, {in.X, &w.W_V, &w.b_V, d_head, &V}});
  biased_products({{in.context, &w.W_O, &w.b_O, 8, &branch}});
  biased_products({{in.X, &w.W_1, &w.b_1, 8, &hidden}});
  biased_products({{in.hidden, &w.W_2, &w.b_2, 8, &out}});
  benchmark::DoNotOptimize(out.front().data());
}

void BM_projections(benchmark::State& state) {
  const Setup& s = setup();
  const ProductInputs in(s);
  linalg::set_blas_threads(1);
  parallel::set_threads(static_cast<int>(state.range(0)));
  for (auto _ : state)
    for (std::size_t k = 0; k < s.excerpts(); ++k)
      for (const enc::BlockWeights& b : s.blocks) block_products(b, in, static_cast<std::size_t>(s.shape.d_head()));
  parallel::set_threads(1);
  const double n = static_cast<double>(s.excerpts());
  set_counters(state, n, n * static_cast<double>(s.blocks.size()) * s.projection_flops());
}

// C = A B, one plain cblas_dgemm call (row-major, beta = 0).
void dgemm(const Matrix& A, const Matrix& B, Matrix& C) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(A.rows()), static_cast<int>(B.cols()),
              static_cast<int>(A.cols()), 1.0, A.data(), static_cast<int>(A.cols()), B.data(),
              static_cast<int>(B.cols()), 0.0, C.data(), static_cast<int>(C.cols()));
}

void BM_dgemm_floor(benchmark::State& state) {
  const Setup& s = setup();
  const ProductInputs in(s);
  linalg::set_blas_threads(1);
  const std::size_t T = tokens_per_excerpt, d = static_cast<std::size_t>(s.shape.d),
                    m = static_cast<std::size_t>(s.shape.intermediate);
  Matrix Q(T, d), K(T, d), V(T, d), branch(T, d), hidden(T, m), out(T, d);
  for (auto _ : state)
    for (std::size_t k = 0; k < s.excerpts(); ++k)
      for (const enc::BlockWeights& b : s.blocks) {
        dgemm(in.X, b.W_Q, Q);
        dgemm(in.X, b.W_K, K);
        dgemm(in.X, b.W_V, V);
        dgemm(in.context, b.W_O, branch);
        dgemm(in.X, b.W_1, hidden);
        dgemm(in.hidden, b.W_2, out);
        benchmark::DoNotOptimize(out.data());
      }
  const double n = static_cast<double>(s.excerpts());
  set_counters(state, n, n * static_cast<double>(s.blocks.size()) * s.projection_flops());
}

void BM_dgemm_square(benchmark::State& state) {
  linalg::set_blas_threads(1);
  const auto n = static_cast<std::size_t>(state.range(0));
  const Matrix A = rcsweep::bench::random_matrix(n, n, 4), B = rcsweep::bench::random_matrix(n, n, 5);
  Matrix C(n, n);
  for (auto _ : state) dgemm(A, B, C);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// A T x 768 signal times a 768 x n weight matrix out of cache (8 of them in turn, 8 x 4.7 or 18.9
// MB), one linalg::gemm with unpacked_limit 0 (/0: one call, through the BLAS's packing, as
// forward.cpp) or unpacked_gemm_limit() (/1: OpenBLAS Cooperlake's cut into pieces for its
// unpacked kernels, where the core has them), beta = 1 as the bias rows.
void BM_weight_product(benchmark::State& state) {
  linalg::set_blas_threads(1);
  const auto T = static_cast<std::size_t>(state.range(0)), n = static_cast<std::size_t>(state.range(1));
  const double limit = state.range(2) != 0 ? linalg::unpacked_gemm_limit() : 0.0;
  constexpr std::size_t k = 768, weights = 8;
  const Matrix A = rcsweep::bench::random_matrix(T, k, 8);
  std::vector<Matrix> W;
  for (std::size_t i = 0; i < weights; ++i)
    W.push_back(rcsweep::bench::random_matrix(k, n, static_cast<unsigned>(9 + i)));
  Matrix C(T, n);
  std::size_t i = 0;
  for (auto _ : state) linalg::gemm(1.0, A, Op::none, W[i++ % weights], Op::none, 1.0, C, limit);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(T * n * k) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The block's elementwise passes alone, per block of one excerpt: the MLP's activation on T x m
// and a LayerNorm of T x d (the block has two).
void BM_activation(benchmark::State& state) {
  const Setup& s = setup();
  const Matrix hidden = rcsweep::bench::random_matrix(tokens_per_excerpt,
                                                      static_cast<std::size_t>(s.shape.intermediate), 6);
  Matrix work = hidden;
  for (auto _ : state) {
    state.PauseTiming();
    work = hidden;
    state.ResumeTiming();
    enc::activate(s.shape.activation, work.values());
  }
  state.counters["ns_entry"] = benchmark::Counter(
      static_cast<double>(hidden.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
void BM_layer_norm(benchmark::State& state) {
  const Setup& s = setup();
  const Matrix X = rcsweep::bench::random_matrix(tokens_per_excerpt, static_cast<std::size_t>(s.shape.d), 7);
  Matrix work = X;
  for (auto _ : state) {
    state.PauseTiming();
    work = X;
    state.ResumeTiming();
    enc::layer_norm(s.blocks.front().norm_mlp, s.shape.layer_norm_eps, work);
  }
}

// One iteration is seconds of work: Iterations(1), repetitions from the command line.
BENCHMARK(BM_forward)->Name("forward")->Arg(1)->Arg(2)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_projections)->Name("projections")->Arg(1)->Arg(2)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_dgemm_floor)->Name("dgemm_floor")->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_activation)->Name("activation")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_layer_norm)->Name("layer_norm")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_weight_product)
    ->Name("weight_product")
    ->ArgsProduct({{8, 20, 48, 128}, {768, 3072}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_dgemm_square)->Name("dgemm_square")->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);

// NumPy's .npy format 1.0 of a float64 array.
void write_npy(const std::filesystem::path& path, const std::vector<std::size_t>& shape,
               const std::vector<double>& data) {
  std::string dims;
  for (const std::size_t n : shape) dims += std::to_string(n) + ", ";
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + "), }";
  dict += std::string(64 - (10 + dict.size() + 1) % 64, ' ') + "\n";
  std::string head = "\x93NUMPY";
  head += '\x01';
  head += '\0';
  head += static_cast<char>(dict.size() & 0xff);
  head += static_cast<char>(dict.size() >> 8);
  std::ofstream out(path, std::ios::binary);
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(double)));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Every layer's hidden states (excerpts x 13 x T x d: X_0, then each block's output) on 1 thread,
// checked bitwise against the same on 2 threads; 1 if they differ.
int write_hidden(const std::filesystem::path& path) {
  const Setup& s = setup();
  linalg::set_blas_threads(1);
  const std::size_t depth = s.blocks.size() + 1, size = s.X0.front().size();
  std::vector<double> out(s.excerpts() * depth * size);
  for (std::size_t k = 0; k < s.excerpts(); ++k) {
    Matrix X = s.X0[k];
    std::copy(X.data(), X.data() + size, out.begin() + static_cast<std::ptrdiff_t>(k * depth * size));
    for (std::size_t l = 0; l < s.blocks.size(); ++l) {
      enc::apply_block(s.shape, s.blocks[l], enc::Ablation{}, s.real[k], X);
      std::copy(X.data(), X.data() + size, out.begin() + static_cast<std::ptrdiff_t>((k * depth + l + 1) * size));
    }
    parallel::set_threads(2);
    const Matrix X2 = forward(s, k);
    parallel::set_threads(1);
    if (std::memcmp(X.data(), X2.data(), size * sizeof(double)) != 0) {
      std::cerr << "excerpt " << k << ": 2 threads give other bits than 1\n";
      return 1;
    }
  }
  write_npy(path, {s.excerpts(), depth, tokens_per_excerpt, static_cast<std::size_t>(s.shape.d)}, out);
  std::cout << "wrote " << path.string() << " (" << s.excerpts() << " excerpts, seed " << seed
            << "; 1 and 2 threads bitwise equal)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-hidden") == 0) return write_hidden(argv[2]);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
