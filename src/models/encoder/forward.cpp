// The forward pass of the BERT-family encoders (encoder.hpp): the embedding, the post-LN block as
// Hugging Face's BertLayer computes it (RobertaLayer and AlbertLayer are the same block), its
// LayerNorm and its activations.
//
// This file is compiled with -fno-trapping-math (src/models/CMakeLists.txt), which lets the
// compiler turn the selects of the activations into blends and vectorise their loops; it changes
// no value. Every product is a linalg::gemm; the block's projections run in fixed blocks of their
// columns and its heads side by side, on the rank's threads (partitions of the shapes alone:
// bitwise the same on any number of threads); every other pass works on rows independently.
#include "models/encoder/encoder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/exp.hpp"
#include "base/parallel.hpp"
#include "base/sum.hpp"
#include "linalg/linalg.hpp"

namespace rcsweep::models::encoder {
using linalg::Op;

int EncoderShape::group_of(int layer) const noexcept {
  if (family != Family::albert) return layer - 1;
  // Hugging Face's AlbertTransformer: group int(i / (num_hidden_layers / num_hidden_groups)) for the
  // 0-based layer i, the division in double as Python's.
  return static_cast<int>(static_cast<double>(layer - 1) /
                          (static_cast<double>(layers) / static_cast<double>(hidden_groups)));
}

int EncoderShape::groups() const noexcept { return family == Family::albert ? hidden_groups : layers; }

int EncoderShape::position_offset() const noexcept { return family == Family::roberta ? pad_token_id + 1 : 0; }

namespace {

std::string size_text(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

void check_matrix(const char* what, const Matrix& M, std::size_t rows, std::size_t cols) {
  if (M.rows() != rows || M.cols() != cols)
    throw Error(std::string("encoder: ") + what + " is " + size_text(M.rows(), M.cols()) + ", the shape needs " +
                size_text(rows, cols));
}

void check_vector(const char* what, const std::vector<double>& v, std::size_t n) {
  if (v.size() != n)
    throw Error(std::string("encoder: ") + what + " has " + std::to_string(v.size()) + " entries, the shape needs " +
                std::to_string(n));
}

// A rows x b.size() matrix whose every row is b: the C of a GEMM with beta = 1 adds the bias as
// nn.Linear's addmm does (b + X W).
Matrix bias_rows(std::size_t rows, const std::vector<double>& b) {
  Matrix M(rows, b.size(), Matrix::uninitialized);
  for (std::size_t i = 0; i < rows; ++i) std::copy(b.begin(), b.end(), M.row(i).begin());
  return M;
}

// C = A B + 1 b^T (nn.Linear's addmm, the bias as C with beta = 1) for a few independent products
// of the block, each in blocks of C's columns (Blocks), on the rank's threads: the fewest of 2, 4
// or 8 blocks (each a multiple of `unit` columns) that linalg::gemm computes in one call each, all
// blocks of all products in one parallel loop (Q, K and V at T = 128, d = 768: six blocks). Each
// block packs its columns of B and all of A once, so fewer blocks pack less; linalg::gemm's own
// partition of a product above gemm_split_min_flops (parts of 256 columns) would pack A up to
// n / 256 times. A product that no such cut brings into one call (T from 2 gemm_part_size on, where
// linalg::gemm cuts C's rows) is one block, one linalg::gemm with that partition. Either way the
// partition depends on the shapes only. The blocks are what the block's next steps read (Q, K, V
// by head, the skip connections by column), so C is never copied whole.
struct ColumnBlock {
  std::size_t first = 0;  ///< C's first column in this block
  Matrix C;               ///< T x (its columns)
};
using Blocks = std::vector<ColumnBlock>;

struct BiasedProduct {
  ConstMatrixView A;
  const Matrix* B;
  const std::vector<double>* b;
  std::size_t unit;          ///< block widths are multiples of it (Q, K, V: d_head, whole heads)
  Blocks* out;               ///< receives the blocks, in column order
  const Activation* finish;  ///< nullable: the activation, applied to each block as soon as it is computed
};

// The weight products are never cut for OpenBLAS's unpacked kernels (linalg::gemm's
// unpacked_limit 0): those read B as it lies, and the block's weights (56 MB per bert-base layer)
// are out of cache, which the BLAS's packing streams faster (docs/BENCHMARKS.md "Encoder blocks
// (bert-base) against PyTorch").
constexpr double weights_unpacked_limit = 0.0;

// The block width of an m x n x k product, or 0 for one whole linalg::gemm (biased_products).
std::size_t block_width(std::size_t m, std::size_t n, std::size_t k, std::size_t unit) {
  for (const std::size_t blocks : {std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
    const std::size_t units = (n + unit - 1) / unit;
    const std::size_t width = (units + blocks - 1) / blocks * unit;
    if (width < n && linalg::gemm_parts(m, width, k, false, weights_unpacked_limit).parts.count() == 1) return width;
  }
  return 0;
}

void biased_products(std::initializer_list<BiasedProduct> list) {
  struct Part {
    const BiasedProduct* product;
    ColumnBlock* block;
  };
  std::vector<Part> parts;
  for (const BiasedProduct& p : list) {
    const std::size_t T = p.A.rows, k = p.A.cols, n = p.B->cols();
    const std::size_t width = block_width(T, n, k, p.unit);
    p.out->clear();
    if (width == 0) {  // one block: linalg::gemm's own partition, on the threads
      p.out->push_back({0, bias_rows(T, *p.b)});
      linalg::gemm(1.0, p.A, Op::none, *p.B, Op::none, 1.0, p.out->back().C, weights_unpacked_limit);
      if (p.finish) activate(*p.finish, p.out->back().C.values());
      continue;
    }
    for (std::size_t first = 0; first < n; first += width)
      p.out->push_back({first, Matrix(T, std::min(width, n - first), Matrix::uninitialized)});
  }
  for (const BiasedProduct& p : list)
    if (p.out->size() > 1)
      for (ColumnBlock& block : *p.out) parts.push_back({&p, &block});
  parallel::for_each(parts.size(), [&](std::size_t i) {
    const BiasedProduct& p = *parts[i].product;
    ColumnBlock& block = *parts[i].block;
    const std::size_t T = p.A.rows, k = p.A.cols, n = p.B->cols(), cols = block.C.cols();
    for (std::size_t r = 0; r < T; ++r) std::copy_n(p.b->data() + block.first, cols, block.C.row(r).data());
    linalg::gemm(1.0, p.A, Op::none, ConstMatrixView(p.B->data() + block.first, k, cols, n), Op::none, 1.0, block.C,
                 weights_unpacked_limit);
    if (p.finish) activate(*p.finish, block.C.values());  // inside a part: serially, the same bits
  });
}

// Y <- lambda Y + C, entrywise, C in column blocks (the skip connection added to a sub-block's
// branch).
void add_skip(double lambda, const Blocks& C, Matrix& Y) {
  parallel::for_rows(Y.rows(), Y.cols(), [&](std::size_t first, std::size_t end) {
    for (std::size_t r = first; r < end; ++r)
      for (const ColumnBlock& block : C) {
        double* y = Y.row(r).data() + block.first;
        const double* c = block.C.row(r).data();
        for (std::size_t j = 0; j < block.C.cols(); ++j) y[j] = lambda * y[j] + c[j];
      }
  });
}

// The blocks side by side as one T x n matrix.
Matrix joined(const Blocks& blocks, std::size_t n) {
  if (blocks.size() == 1) return blocks.front().C;
  Matrix M(blocks.front().C.rows(), n, Matrix::uninitialized);
  parallel::for_rows(M.rows(), n, [&](std::size_t first, std::size_t end) {
    for (std::size_t r = first; r < end; ++r)
      for (const ColumnBlock& block : blocks)
        std::copy_n(block.C.row(r).data(), block.C.cols(), M.row(r).data() + block.first);
  });
  return M;
}

// Columns c .. c + width - 1 of the matrix in blocks, all inside one block (a head of Q, K, V).
ConstMatrixView columns_of(const Blocks& blocks, std::size_t c, std::size_t width) {
  for (const ColumnBlock& block : blocks)
    if (c >= block.first && c + width <= block.first + block.C.cols())
      return {block.C.data() + (c - block.first), block.C.rows(), width, block.C.cols()};
  throw Error("encoder block: columns " + std::to_string(c) + " .. " + std::to_string(c + width - 1) +
              " straddle two blocks");
}

// The heads of a block run side by side on the rank's threads, each with its own T x T scores,
// while the H scores matrices hold at most this many entries (32 MiB; at larger T one scores
// matrix at a time, each product split by linalg::gemm).
constexpr double heads_apart_max_entries = 4194304.0;

double squares4(std::span<const double> v, double shift) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (std::size_t l = 0; l < 4; ++l) s[l] += (v[i + l] - shift) * (v[i + l] - shift);
  for (; i < v.size(); ++i) s[0] += (v[i] - shift) * (v[i] - shift);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// The upper tail Q(u) = P(Z > u) = erfc(u / sqrt 2) / 2 of the standard normal, u >= 0, to a few
// ulp relative (test_forward measures it against erfcl), with IEEE basic operations and
// exp_vectorisable only, without branches, so that a loop of it vectorises:
//   Q(u) = t exp(-u^2 / 2 + f(t)),  t = k / (k + u) in (0, 1],  k = 3.5,
// f(t) = ln(Q(u) / t) + u^2 / 2 a smooth function of t (-> -ln(k sqrt(2 pi)) as u -> infinity),
// given by its Chebyshev series in s = 2t - 1: the coefficients below are the Chebyshev
// interpolant of f at 64 nodes computed in 50-digit arithmetic (mpmath), cut where they fall
// below 1e-17. u^2 / 2 is carried exactly (Dekker's product, then a two-sum with f) into the
// exponential's argument: the relative error of Q does not grow with u.
constexpr double tail_k = 3.5;
constexpr double tail_chebyshev[] = {
    -1.487933278354978,      0.7444254251236767,      0.05764721678477678,    -0.005143027391297979,
    -0.002233023790506968,   -1.1850082785791418e-05, 9.941167653504388e-05,  7.190192630405285e-06,
    -4.9170992958743e-06,    -6.177593392772016e-07,  2.6394764617972405e-07, 4.306384508742912e-08,
    -1.5155590829990292e-08, -2.7277151487509576e-09, 9.146649327891536e-10,  1.5902260804556544e-10,
    -5.6500787891882564e-11, -8.350707564645365e-12,  3.4443718086498434e-12, 3.74240775813439e-13,
    -1.9766779007701876e-13, -1.2710254904098166e-14, 9.98435288501514e-15,   2.4051925740962144e-16,
    -3.8977705112451065e-16, -5.473608593352486e-18};
constexpr int tail_terms = static_cast<int>(std::size(tail_chebyshev));
// Q(40) is below the smallest double: the clamp keeps u^2 finite (and NaN out of the split).
constexpr double tail_u_max = 40.0;

// upper_tail in three stages (gelu_of_block runs each over a block of entries): t and 2 s of u,
// one step of Clenshaw's recurrence (b1, b2 start at 0), and Q from the recurrence's last b1, b2.
[[gnu::always_inline]] inline double tail_clamp(double u) { return u < tail_u_max ? u : tail_u_max; }
[[gnu::always_inline]] inline double tail_t(double u) { return tail_k / (tail_k + u); }
[[gnu::always_inline]] inline void clenshaw_step(int k, double s2, double& b1, double& b2) {
  const double b = tail_chebyshev[k] + s2 * b1 - b2;
  b2 = b1;
  b1 = b;
}
[[gnu::always_inline]] inline double tail_finish(double u, double t, double s2, double b1, double b2) {
  const double f = tail_chebyshev[0] + 0.5 * s2 * b1 - b2;
  // u^2 = h + l exactly (Dekker: u split into 26-bit halves; no FMA contraction on these targets).
  const double split = 134217729.0 * u;  // 2^27 + 1
  const double hi = split - (split - u), lo = u - hi;
  const double h = u * u;
  const double l = ((hi * hi - h) + 2.0 * hi * lo) + lo * lo;
  // -h/2 + f = a + e exactly (two-sum), then e^(a + e - l/2) = e^a (1 + e - l/2).
  const double x = -0.5 * h;
  const double a = x + f;
  const double fb = a - x;
  const double e = (x - (a - fb)) + (f - fb);
  return t * exp_vectorisable(a) * (1.0 + (e - 0.5 * l));
}

[[gnu::always_inline]] inline double upper_tail(double u) {
  u = tail_clamp(u);
  const double t = tail_t(u);
  const double s2 = 4.0 * t - 2.0;  // 2 s
  double b1 = 0.0, b2 = 0.0;        // Clenshaw's recurrence
#pragma GCC unroll 32
  for (int k = tail_terms - 1; k >= 1; --k) clenshaw_step(k, s2, b1, b2);
  return tail_finish(u, t, s2, b1, b2);
}

// GELU(x) = x Phi(x) = x erfc(-x / sqrt 2) / 2 (Hendrycks & Gimpel, arXiv:1606.08415): Phi(x) =
// Q(-x) for x < 0, 1 - Q(x) otherwise.
[[gnu::always_inline]] inline double gelu(double x) {
  const double q = upper_tail(std::fabs(x));
  return x * (x < 0.0 ? q : 1.0 - q);
}

// 0.5 x (1 + tanh(v)), v = sqrt(2/pi) (x + 0.044715 x^3), written as x / (1 + e^(-2v)) (the same
// function: 1 + tanh(v) = 2 / (1 + e^(-2v))), which vectorises and has no cancellation for x < 0.
[[gnu::always_inline]] inline double gelu_tanh(double x) {
  constexpr double c = 0.79788456080286535588;  // sqrt(2 / pi)
  const double v = c * (x + 0.044715 * (x * x * x));
  return x / (1.0 + exp_vectorisable(-2.0 * v));
}

// gelu on gelu_block entries at once, stage by stage: each entry's Clenshaw recurrence and
// exponential are long chains of dependent operations, which one entry (or one vector of them) at
// a time leaves the floating-point units waiting on; each stage applied to a block of independent
// entries keeps them busy. Every entry goes through gelu's operations in gelu's order: its bits.
constexpr std::size_t gelu_block = 64;

[[gnu::always_inline]] inline void gelu_of_block(double* x) {
  double u[gelu_block], t[gelu_block], s2[gelu_block], b1[gelu_block], b2[gelu_block];
  for (std::size_t i = 0; i < gelu_block; ++i) {
    u[i] = tail_clamp(std::fabs(x[i]));
    t[i] = tail_t(u[i]);
    s2[i] = 4.0 * t[i] - 2.0;
    b1[i] = 0.0;
    b2[i] = 0.0;
  }
  for (int k = tail_terms - 1; k >= 1; --k)
    for (std::size_t i = 0; i < gelu_block; ++i) clenshaw_step(k, s2[i], b1[i], b2[i]);
  for (std::size_t i = 0; i < gelu_block; ++i) {
    const double q = tail_finish(u[i], t[i], s2[i], b1[i], b2[i]);
    x[i] = x[i] * (x[i] < 0.0 ? q : 1.0 - q);
  }
}

// The AVX2 and the baseline clone do the same IEEE operations (no FMA): the same bits on any
// x86-64 CPU.
__attribute__((target_clones("avx2", "default"))) void activate_loop(Activation activation, double* x, std::size_t n) {
  switch (activation) {
    case Activation::gelu: {
      std::size_t i = 0;
      for (; i + gelu_block <= n; i += gelu_block) gelu_of_block(x + i);
      for (; i < n; ++i) x[i] = gelu(x[i]);
      return;
    }
    case Activation::gelu_tanh:
      for (std::size_t i = 0; i < n; ++i) x[i] = gelu_tanh(x[i]);
      return;
    case Activation::relu:  // NaN stays NaN
      for (std::size_t i = 0; i < n; ++i) x[i] = x[i] < 0.0 ? 0.0 : x[i];
      return;
  }
}

// The largest of x[0 .. n), n >= 1, in 4 running maxima (vectorised; a maximum is exact in any
// order). As std::max_element: NaN when x[0] is NaN, later NaN entries passed over.
double row_max(const double* x, std::size_t n) {
  double m[4] = {x[0], x[0], x[0], x[0]};
  std::size_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (std::size_t l = 0; l < 4; ++l) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
  for (; j < n; ++j) m[0] = x[j] > m[0] ? x[j] : m[0];
  const double a = m[0] > m[1] ? m[0] : m[1], b = m[2] > m[3] ? m[2] : m[3];
  return a > b ? a : b;
}

// Softmax of each row of S over its keys j with real[j] (empty: all) and, when causal, j <= i;
// the other keys get probability exactly 0. They are set to -inf before the row's maximum is
// taken, so they never are the maximum, and exp_vectorisable(-inf) is exactly 0, so they add
// nothing to the row's sum: the row is the softmax of its unmasked keys alone. Under causal
// masking the keys after i are not exponentiated at all.
void masked_softmax(Matrix& S, const std::vector<unsigned char>& real, bool causal) {
  const std::size_t T = S.rows();
  constexpr double masked = -std::numeric_limits<double>::infinity();
  parallel::for_rows(T, S.cols(), [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i) {
      double* row = S.row(i).data();
      const std::size_t keys = causal ? i + 1 : T;
      if (!real.empty())
        for (std::size_t j = 0; j < keys; ++j) row[j] = real[j] ? row[j] : masked;
      const double mx = row_max(row, keys);
      if (mx == masked)
        throw Error("encoder attention: query " + std::to_string(i) + " has every key masked (" +
                    (causal ? "no real token at or before it" : "no real token in the excerpt") + ")");
      const double inv = 1.0 / exp_affine_sum(row, keys, 1.0, mx);
      for (std::size_t j = 0; j < keys; ++j) row[j] *= inv;
      std::fill(row + keys, row + T, 0.0);
    }
  });
}

}  // namespace

void layer_norm(const LayerNormWeights& weights, double eps, Matrix& X) {
  const std::size_t d = X.cols();
  check_vector("LayerNorm gamma", weights.gamma, d);
  check_vector("LayerNorm beta", weights.beta, d);
  const double* gamma = weights.gamma.data();
  const double* beta = weights.beta.data();
  parallel::for_rows(X.rows(), d, [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i) {
      auto row = X.row(i);
      const double mean = sum4(row) / static_cast<double>(d);
      const double var = squares4(row, mean) / static_cast<double>(d);  // biased, as PyTorch's
      const double inv = 1.0 / std::sqrt(var + eps);
      for (std::size_t j = 0; j < d; ++j) row[j] = (row[j] - mean) * inv * gamma[j] + beta[j];
    }
  });
}

void activate(Activation activation, std::span<double> values) {
  // Entrywise: any partition into parts gives the same bits.
  const std::size_t n = values.size();
  parallel::for_rows(
      n, 1, [&](std::size_t first, std::size_t end) { activate_loop(activation, values.data() + first, end - first); });
}

Matrix embed(const EncoderShape& shape, const EmbeddingWeights& weights, const EmbeddingRequest& request,
             const Excerpt& excerpt) {
  const std::size_t T = excerpt.ids.size();
  const auto E = static_cast<std::size_t>(shape.embedding_size);
  const auto d = static_cast<std::size_t>(shape.d);
  const bool albert = shape.family == Family::albert;
  if (!albert && E != d)
    throw Error("encoder embed: embedding_size " + std::to_string(E) + " differs from hidden_size " +
                std::to_string(d) + " (only ALBERT projects its embedding)");
  if (!excerpt.types.empty() && excerpt.types.size() != T)
    throw Error("encoder embed: " + std::to_string(excerpt.types.size()) + " token types for " + std::to_string(T) +
                " tokens");
  if (!excerpt.real.empty() && excerpt.real.size() != T)
    throw Error("encoder embed: " + std::to_string(excerpt.real.size()) + " real-token flags for " + std::to_string(T) +
                " tokens");
  check_matrix("the word embedding", weights.word, request.ids.size(), E);
  check_matrix("the position embedding", weights.position, static_cast<std::size_t>(request.max_position) + 1, E);
  check_matrix("the token-type embedding", weights.token_type, static_cast<std::size_t>(shape.type_vocab), E);
  if (albert) {
    check_matrix("the embedding projection", weights.projection, E, d);
    check_vector("the embedding projection's bias", weights.projection_bias, d);
  }

  // Position ids: offset + i; RoBERTa's (create_position_ids_from_input_ids): pad_token_id + the
  // number of real tokens up to and including i, pad_token_id itself for a padded token.
  std::vector<std::int64_t> position(T);
  std::int64_t real_so_far = 0;
  for (std::size_t i = 0; i < T; ++i) {
    const bool real = excerpt.real.empty() || excerpt.real[i];
    if (shape.family == Family::roberta) {
      real_so_far += real ? 1 : 0;
      position[i] = real ? shape.pad_token_id + real_so_far : shape.pad_token_id;
    } else {
      position[i] = shape.position_offset() + static_cast<std::int64_t>(i);
    }
    if (position[i] >= shape.max_positions)
      throw Error("encoder embed: token " + std::to_string(i) + " has position id " + std::to_string(position[i]) +
                  ", beyond max_position_embeddings = " + std::to_string(shape.max_positions));
    if (position[i] > request.max_position)
      throw Error("encoder embed: token " + std::to_string(i) + " has position id " + std::to_string(position[i]) +
                  ", beyond the request's max_position " + std::to_string(request.max_position));
  }

  Matrix X(T, E, Matrix::uninitialized);
  for (std::size_t i = 0; i < T; ++i) {
    const std::int64_t id = excerpt.ids[i];
    if (id < 0 || id >= shape.vocab)
      throw Error("encoder embed: token " + std::to_string(i) + " has id " + std::to_string(id) +
                  ", outside the vocabulary (vocab_size = " + std::to_string(shape.vocab) + ")");
    const auto found = std::lower_bound(request.ids.begin(), request.ids.end(), id);
    if (found == request.ids.end() || *found != id)
      throw Error("encoder embed: token id " + std::to_string(id) + " is not among the request's ids");
    const std::int64_t type = excerpt.types.empty() ? 0 : excerpt.types[i];
    if (type < 0 || type >= shape.type_vocab)
      throw Error("encoder embed: token " + std::to_string(i) + " has token type " + std::to_string(type) +
                  ", outside type_vocab_size = " + std::to_string(shape.type_vocab));
    const double* word = weights.word.row(static_cast<std::size_t>(found - request.ids.begin())).data();
    const double* token_type = weights.token_type.row(static_cast<std::size_t>(type)).data();
    const double* pos = weights.position.row(static_cast<std::size_t>(position[i])).data();
    double* x = X.row(i).data();
    // Hugging Face's order: (inputs_embeds + token_type_embeddings) + position_embeddings.
    for (std::size_t j = 0; j < E; ++j) x[j] = (word[j] + token_type[j]) + pos[j];
  }
  layer_norm(weights.norm, shape.layer_norm_eps, X);
  if (!albert) return X;
  // ALBERT's embedding_hidden_mapping_in: X W + b, E -> d.
  Matrix Y = bias_rows(T, weights.projection_bias);
  linalg::gemm(1.0, X, Op::none, weights.projection, Op::none, 1.0, Y);
  return Y;
}

// Flops, with T tokens, width d, heads H (d_head = d / H) and MLP width m: the projections
// Q, K, V and W_O 4 x 2 T d^2, the scores and the context 2 x 2 T^2 d (over all heads), the MLP
// 2 x 2 T d m; in all 8 T d^2 + 4 T^2 d + 4 T d m, every one of them in a GEMM. Besides: T^2 H
// exponentials, T m activations, and O(T d) for biases, skips and LayerNorms.
void apply_block(const EncoderShape& shape, const BlockWeights& weights, const Ablation& ablation,
                 const std::vector<bool>& real, Matrix& X, BlockOutputs* outputs) {
  const std::size_t T = X.rows(), d = X.cols();
  if (shape.heads <= 0 || shape.d % shape.heads != 0)
    throw Error("encoder block: hidden_size " + std::to_string(shape.d) + " is not a multiple of " +
                std::to_string(shape.heads) + " heads");
  if (d != static_cast<std::size_t>(shape.d))
    throw Error("encoder block: X has " + std::to_string(d) + " columns, hidden_size is " + std::to_string(shape.d));
  if (!real.empty() && real.size() != T)
    throw Error("encoder block: " + std::to_string(real.size()) + " real-token flags for " + std::to_string(T) +
                " tokens");
  const auto H = static_cast<std::size_t>(shape.heads), dh = d / H;
  const auto m = static_cast<std::size_t>(shape.intermediate);
  check_matrix("W_Q", weights.W_Q, d, d);
  check_matrix("W_K", weights.W_K, d, d);
  check_matrix("W_V", weights.W_V, d, d);
  check_matrix("W_O", weights.W_O, d, d);
  check_vector("b_Q", weights.b_Q, d);
  check_vector("b_K", weights.b_K, d);
  check_vector("b_V", weights.b_V, d);
  check_vector("b_O", weights.b_O, d);
  if (ablation.mlp) {
    check_matrix("W_1", weights.W_1, d, m);
    check_vector("b_1", weights.b_1, m);
    check_matrix("W_2", weights.W_2, m, d);
    check_vector("b_2", weights.b_2, d);
  }
  if (T == 0) return;

  // Q = X W_Q + b_Q, K and V likewise: three products in one parallel loop, in blocks of whole
  // heads (biased_products). One fused T x 3d product would need W_Q, W_K, W_V side by side: a copy
  // of 3 d^2 weights per call.
  Blocks Q, K, V;
  biased_products({{X, &weights.W_Q, &weights.b_Q, dh, &Q, nullptr},
                   {X, &weights.W_K, &weights.b_K, dh, &K, nullptr},
                   {X, &weights.W_V, &weights.b_V, dh, &V, nullptr}});

  // Head h: the columns h d_head .. (h + 1) d_head of Q, K, V (strided views, no copies).
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<unsigned char> keep;  // real as bytes, read by every row of every head
  if (!real.empty()) keep.assign(real.begin(), real.end());
  Matrix context(T, d, Matrix::uninitialized);
  const auto attend = [&](std::size_t h, Matrix& S, Matrix& head) {
    const ConstMatrixView Qh = columns_of(Q, h * dh, dh), Kh = columns_of(K, h * dh, dh),
                          Vh = columns_of(V, h * dh, dh);
    linalg::gemm(scale, Qh, Op::none, Kh, Op::trans, 0.0, S);  // Q_h K_h^T / sqrt(d_head)
    masked_softmax(S, keep, ablation.causal);
    if (h == 0 && outputs && outputs->keep_head0) outputs->head0 = S;
    linalg::gemm(1.0, S, Op::none, Vh, Op::none, 0.0, head);  // A_h V_h
    for (std::size_t i = 0; i < T; ++i) std::copy_n(head.row(i).data(), dh, context.row(i).data() + h * dh);
  };
  if (static_cast<double>(H) * static_cast<double>(T) * static_cast<double>(T) <= heads_apart_max_entries) {
    // The heads on the rank's threads, each with its own scores (a head's products and softmax run
    // serially inside its part, with the partitions they have on their own: the same bits).
    parallel::for_each(H, [&](std::size_t h) {
      Matrix S(T, T, Matrix::uninitialized), head(T, dh, Matrix::uninitialized);
      attend(h, S, head);
    });
  } else {  // one T x T scores matrix at a time, each product and softmax on the threads
    Matrix S(T, T, Matrix::uninitialized), head(T, dh, Matrix::uninitialized);
    for (std::size_t h = 0; h < H; ++h) attend(h, S, head);
  }
  Blocks branch;  // concat_h(A_h V_h) W_O + b_O
  biased_products({{context, &weights.W_O, &weights.b_O, 8, &branch, nullptr}});
  if (outputs) outputs->attention = joined(branch, d);
  add_skip(ablation.lambda_attention, branch, X);  // BertSelfOutput: LayerNorm(branch + X)
  if (ablation.norm) layer_norm(weights.norm_attention, shape.layer_norm_eps, X);
  if (outputs) outputs->after_attention = X;
  if (!ablation.mlp) return;

  Blocks hidden;  // BertIntermediate: act(A W_1 + b_1)
  biased_products({{X, &weights.W_1, &weights.b_1, 8, &hidden, &shape.activation}});
  const Matrix activated = joined(hidden, m);
  hidden.clear();
  Blocks out;  // BertOutput: LayerNorm(hidden W_2 + b_2 + A)
  biased_products({{activated, &weights.W_2, &weights.b_2, 8, &out, nullptr}});
  add_skip(ablation.lambda_mlp, out, X);
  if (ablation.norm) layer_norm(weights.norm_mlp, shape.layer_norm_eps, X);
}

}  // namespace rcsweep::models::encoder
