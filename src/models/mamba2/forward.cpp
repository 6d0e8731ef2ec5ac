// The forward numerics of the Mamba-2 block (mamba2.hpp): in_proj, the causal convolution and
// SiLU, the softplus of Delta, the SSD in its three forms, the gated RMSNorm, out_proj and the
// skip connection.
//
// This file is compiled with -fno-trapping-math (src/models/CMakeLists.txt), which lets the
// compiler vectorise the loops of SiLU and of the decay's exponentials; it changes no value. Every
// product is a linalg::gemm: in_proj and out_proj in a few wide parts (weights_split_parts), the SSD's
// products per head (the heads on the rank's threads, each head's products serially inside its
// part); every other pass works on rows independently. Each partition is a function of the shapes
// alone: the bits do not depend on the number of threads.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/exp.hpp"
#include "base/parallel.hpp"
#include "linalg/linalg.hpp"
#include "models/mamba2/mamba2.hpp"

namespace rcsweep::models::mamba2 {
using linalg::Op;

namespace {

std::string size_text(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

void check_matrix(const char* what, const Matrix& M, std::size_t rows, std::size_t cols) {
  if (M.rows() != rows || M.cols() != cols)
    throw Error(std::string("mamba2: ") + what + " is " + size_text(M.rows(), M.cols()) + ", the shape needs " +
                size_text(rows, cols));
}

void check_vector(const char* what, std::size_t size, std::size_t n) {
  if (size != n)
    throw Error(std::string("mamba2: ") + what + " has " + std::to_string(size) + " entries, the shape needs " +
                std::to_string(n));
}

// A vector the shape makes present (n entries) or absent (empty).
void check_optional(const char* what, const std::vector<double>& v, bool present, std::size_t n) {
  if (present)
    check_vector(what, v.size(), n);
  else if (!v.empty())
    throw Error(std::string("mamba2: ") + what + " has " + std::to_string(v.size()) +
                " entries, the shape says it is absent");
}

void check_shape(const Mamba2Shape& s) {
  const auto bad = [](const std::string& what) { throw Error("mamba2: the shape's " + what); };
  if (s.d_model < 1) bad("d_model " + std::to_string(s.d_model) + " is not positive");
  if (s.expand < 1) bad("expand " + std::to_string(s.expand) + " is not positive");
  if (s.d_state < 1) bad("d_state " + std::to_string(s.d_state) + " is not positive");
  if (s.d_conv < 1) bad("d_conv " + std::to_string(s.d_conv) + " is not positive");
  if (s.chunk_size < 1) bad("chunk_size " + std::to_string(s.chunk_size) + " is not positive");
  if (s.headdim < 1 || s.d_inner() % s.headdim != 0)
    bad("headdim " + std::to_string(s.headdim) + " does not divide d_inner " + std::to_string(s.d_inner()));
  if (s.ngroups < 1 || s.heads() % s.ngroups != 0)
    bad("ngroups " + std::to_string(s.ngroups) + " does not divide the " + std::to_string(s.heads()) + " heads");
}

void check_inputs(const Mamba2Shape& s, const SsdInputs& in) {
  check_shape(s);
  const std::size_t T = in.x.rows(), E = static_cast<std::size_t>(s.d_inner());
  const std::size_t GN = static_cast<std::size_t>(s.ngroups) * static_cast<std::size_t>(s.d_state);
  const auto H = static_cast<std::size_t>(s.heads());
  check_matrix("the SSD's x", in.x, T, E);
  check_matrix("the SSD's B", in.B, T, GN);
  check_matrix("the SSD's C", in.C, T, GN);
  check_matrix("the SSD's Delta", in.delta, T, H);
  check_vector("the SSD's A", in.A.size(), H);
}

void check_D(const Mamba2Shape& s, std::span<const double> D) {
  check_vector(s.D_has_hdim ? "D (per channel)" : "D (per head)", D.size(),
               static_cast<std::size_t>(s.D_has_hdim ? s.d_inner() : s.heads()));
}

// SiLU(v) = v sigma(v) = v / (1 + e^(-v)), the form of the reference (large negative v: -0).
[[gnu::always_inline]] inline double silu(double v) { return v / (1.0 + exp_vectorisable(-v)); }

// The AVX2 and the baseline clones do the same IEEE operations (no FMA): the same bits on any
// x86-64 CPU.
__attribute__((target_clones("avx2", "default"))) void silu_loop(double* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = silu(x[i]);
}

__attribute__((target_clones("avx2", "default"))) void gate_loop(double* y, const double* z, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = y[i] * silu(z[i]);
}

// w[s] = exp(seg[s]) cb[s] dl[s], s < n: a row of the mixer matrix, L ⊙ (C B^T) ⊙ Delta (w may be cb).
__attribute__((target_clones("avx2", "default"))) void decay_row(const double* seg, const double* cb, const double* dl,
                                                                 double* w, std::size_t n) {
  for (std::size_t s = 0; s < n; ++s) w[s] = exp_vectorisable(seg[s]) * cb[s] * dl[s];
}

double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }  // torch's threshold 20

double squares(const double* x, std::size_t n) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (std::size_t l = 0; l < 4; ++l) s[l] += x[i + l] * x[i + l];
  for (; i < n; ++i) s[0] += x[i] * x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// A rows x n matrix whose every row is b[first .. first + n): the C of a GEMM with beta = 1 adds
// the bias as nn.Linear's addmm does.
Matrix bias_rows(std::size_t rows, const std::vector<double>& b, std::size_t first, std::size_t n) {
  Matrix M(rows, n, Matrix::uninitialized);
  for (std::size_t i = 0; i < rows; ++i) std::copy_n(b.data() + first, n, M.row(i).data());
  return M;
}

// The weight products are never cut for OpenBLAS's unpacked kernels (as the encoder's: the
// weights are out of cache; docs/BENCHMARKS.md "Encoder blocks (bert-base) against PyTorch").
constexpr double weights_unpacked_limit = 0.0;
// ... and a large one is cut into at most this many parts (linalg::gemm's split_parts), not into
// gemm_part_size columns: each part packs all of the T x d (T x E) input again, which the many
// narrow parts of in_proj and out_proj paid for several times over. Four parts keep one, two and
// four threads even; fewer would pack less still but leave a rank's third and fourth threads idle
// in the products that are nearly all of a layer's flops (bench/mamba2_layer projections/N/PARTS,
// docs/BENCHMARKS.md "Mamba-2").
constexpr std::size_t weights_split_parts = 4;

// C = A W[:, first .. first + n) (+ b[first .. first + n)).
Matrix biased_product(const Matrix& A, const Matrix& W, const std::vector<double>& b, std::size_t first,
                      std::size_t n) {
  Matrix C = b.empty() ? Matrix(A.rows(), n, Matrix::uninitialized) : bias_rows(A.rows(), b, first, n);
  linalg::gemm(1.0, A, Op::none, ConstMatrixView(W.data() + first, W.rows(), n, W.cols()), Op::none,
               b.empty() ? 0.0 : 1.0, C, weights_unpacked_limit, weights_split_parts);
  return C;
}

struct Dims {
  std::size_t T, E, P, H, G, N, GN;
};

Dims dims_of(const Mamba2Shape& s, std::size_t T) {
  const auto G = static_cast<std::size_t>(s.ngroups), N = static_cast<std::size_t>(s.d_state);
  return {T,
          static_cast<std::size_t>(s.d_inner()),
          static_cast<std::size_t>(s.headdim),
          static_cast<std::size_t>(s.heads()),
          G,
          N,
          G * N};
}

// D of channel c (head c / P, or the channel's own).
double skip_of(const Mamba2Shape& s, std::span<const double> D, std::size_t c) {
  return s.D_has_hdim ? D[c] : D[c / static_cast<std::size_t>(s.headdim)];
}

// y[first + t, hP .. hP + P) = Y[t] + D x[first + t, hP .. hP + P), t < Y.rows().
void write_head(const Mamba2Shape& s, const SsdInputs& in, std::span<const double> D, std::size_t h, std::size_t first,
                const Matrix& Y, Matrix& y) {
  const std::size_t P = Y.cols(), c0 = h * P;
  for (std::size_t t = 0; t < Y.rows(); ++t) {
    const double* x = in.x.row(first + t).data() + c0;
    const double* v = Y.row(t).data();
    double* out = y.row(first + t).data() + c0;
    for (std::size_t p = 0; p < P; ++p) out[p] = v[p] + skip_of(s, D, c0 + p) * x[p];
  }
}

// M (T x T) <- head h's mixer matrix without D: L ⊙ (C B^T) ⊙ Delta, 0 above the diagonal.
// L's exponents are the segment sums themselves (seg[s] = sum_(r=s+1..t) Delta[r] A, grown a term
// per row), never differences of cumulative sums, which lose the small exponents next to large ones.
void build_mixer(const Mamba2Shape& s, const SsdInputs& in, std::size_t h, Matrix& M) {
  const Dims d = dims_of(s, in.x.rows());
  const std::size_t g = static_cast<std::size_t>(s.group_of_head(static_cast<int>(h)));
  M.resize(d.T, d.T);
  if (d.T == 0) return;
  const ConstMatrixView Cg(in.C.data() + g * d.N, d.T, d.N, d.GN), Bg(in.B.data() + g * d.N, d.T, d.N, d.GN);
  linalg::gemm(1.0, Cg, Op::none, Bg, Op::trans, 0.0, M);
  std::vector<double> seg(d.T, 0.0), dl(d.T);
  for (std::size_t t = 0; t < d.T; ++t) dl[t] = in.delta(t, h);
  const double A = in.A[h];
  for (std::size_t t = 0; t < d.T; ++t) {
    const double a = dl[t] * A;
    for (std::size_t r = 0; r < t; ++r) seg[r] += a;
    seg[t] = 0.0;
    double* row = M.row(t).data();
    decay_row(seg.data(), row, dl.data(), row, t + 1);
    std::fill(row + t + 1, row + d.T, 0.0);
  }
}

// The recurrence of mamba2.hpp, token by token: S_t = exp(Delta_t A) S_(t-1) + (Delta_t x_t) B_t^T,
// y_t = S_t C_t + D x_t.
void ssd_scan_head(const Mamba2Shape& s, const SsdInputs& in, std::span<const double> D, std::size_t h, Matrix& y) {
  const Dims d = dims_of(s, in.x.rows());
  const std::size_t g = static_cast<std::size_t>(s.group_of_head(static_cast<int>(h)));
  Matrix S(d.P, d.N, 0.0), Y(1, d.P, Matrix::uninitialized);
  for (std::size_t t = 0; t < d.T; ++t) {
    const double dt = in.delta(t, h), decay = std::exp(dt * in.A[h]);
    const double* x = in.x.row(t).data() + h * d.P;
    const double* B = in.B.row(t).data() + g * d.N;
    const double* C = in.C.row(t).data() + g * d.N;
    for (std::size_t p = 0; p < d.P; ++p) {
      double* Sp = S.row(p).data();
      const double xd = dt * x[p];
      double acc = 0.0;
      for (std::size_t n = 0; n < d.N; ++n) {
        Sp[n] = decay * Sp[n] + xd * B[n];
        acc += Sp[n] * C[n];
      }
      Y(0, p) = acc;
    }
    write_head(s, in, D, h, t, Y, y);
  }
}

void ssd_quadratic_head(const Mamba2Shape& s, const SsdInputs& in, std::span<const double> D, std::size_t h,
                        Matrix& y) {
  const Dims d = dims_of(s, in.x.rows());
  Matrix M, Y(d.T, d.P, Matrix::uninitialized);
  build_mixer(s, in, h, M);
  linalg::gemm(1.0, M, Op::none, ConstMatrixView(in.x.data() + h * d.P, d.T, d.P, d.E), Op::none, 0.0, Y);
  write_head(s, in, D, h, 0, Y, y);
}

// The chunked form of head h (SSD paper §6; the reference's ssd_chunked), chunks of Q tokens
// [a, a + q): within the chunk y = W x, W = L ⊙ (C B^T) ⊙ Delta (q x q, C B^T the group's, CB);
// the state carried in is read as diag(exp(cum)) C S^T, cum[t] = sum_(r=a..t) Delta[r] A; the
// state carried out is exp(cum[q-1]) S + x^T diag(L[q-1, s] Delta[s]) B. Memory: O(Q^2 + Q P + P N).
void ssd_chunked_head(const Mamba2Shape& s, const SsdInputs& in, std::span<const double> D, std::size_t h,
                      std::size_t Q, const std::vector<Matrix>& CB, Matrix& y) {
  const Dims d = dims_of(s, in.x.rows());
  const std::size_t g = static_cast<std::size_t>(s.group_of_head(static_cast<int>(h)));
  const std::size_t chunks = (d.T + Q - 1) / Q;
  const double A = in.A[h];
  Matrix S(d.P, d.N, 0.0), W, Y, Xw;
  std::vector<double> seg(Q), dl(Q), cum(Q);
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t a = c * Q, q = std::min(Q, d.T - a);
    double run = 0.0;
    for (std::size_t t = 0; t < q; ++t) {
      dl[t] = in.delta(a + t, h);
      run += dl[t] * A;
      cum[t] = run;
    }
    const Matrix& cb = CB[g * chunks + c];
    W.resize(q, q);
    for (std::size_t t = 0; t < q; ++t) {
      const double at = dl[t] * A;
      for (std::size_t r = 0; r < t; ++r) seg[r] += at;
      seg[t] = 0.0;
      double* row = W.row(t).data();
      decay_row(seg.data(), cb.row(t).data(), dl.data(), row, t + 1);
      std::fill(row + t + 1, row + q, 0.0);
    }
    const ConstMatrixView Xc(in.x.data() + a * d.E + h * d.P, q, d.P, d.E);
    const ConstMatrixView Bc(in.B.data() + a * d.GN + g * d.N, q, d.N, d.GN);
    const ConstMatrixView Cc(in.C.data() + a * d.GN + g * d.N, q, d.N, d.GN);
    Y.resize(q, d.P);
    double beta = 0.0;
    if (c > 0) {  // the state of the chunks before, decayed to each token
      linalg::gemm(1.0, Cc, Op::none, S, Op::trans, 0.0, Y);
      for (std::size_t t = 0; t < q; ++t) {
        const double e = std::exp(cum[t]);
        for (double& v : Y.row(t)) v *= e;
      }
      beta = 1.0;
    }
    linalg::gemm(1.0, W, Op::none, Xc, Op::none, beta, Y);
    write_head(s, in, D, h, a, Y, y);
    if (c + 1 == chunks) break;
    // seg holds the last row's exponents: seg[s] = sum_(r=s+1..q-1) Delta[r] A.
    Xw.resize(q, d.P);
    for (std::size_t t = 0; t < q; ++t) {
      const double w = std::exp(seg[t]) * dl[t];
      const double* x = Xc.row(t).data();
      double* out = Xw.row(t).data();
      for (std::size_t p = 0; p < d.P; ++p) out[p] = w * x[p];
    }
    linalg::gemm(1.0, Xw, Op::trans, Bc, Op::none, std::exp(cum[q - 1]), S);
  }
}

// X <- RMSNorm_G(X) * w in rows [first, end) (groups of X.cols() / groups columns).
void rms_norm_rows(const double* w, double eps, Matrix& X, std::size_t groups, std::size_t first, std::size_t end) {
  const std::size_t width = X.cols() / groups;
  for (std::size_t i = first; i < end; ++i)
    for (std::size_t k = 0; k < groups; ++k) {
      double* x = X.row(i).data() + k * width;
      const double inv = 1.0 / std::sqrt(squares(x, width) / static_cast<double>(width) + eps);
      const double* wk = w + k * width;
      for (std::size_t j = 0; j < width; ++j) x[j] = x[j] * inv * wk[j];
    }
}

}  // namespace

// Flops, T tokens: in_proj 2 T d (2E + 2GN + H), the convolution 2 T K (E + 2GN); the chunked
// SSD per chunk of q tokens: C B^T 2 q^2 N per group, per head W x 2 q^2 P, the state read
// 2 q N P and carried 2 q P N; out_proj 2 T E d. At T = 512 and mamba2-2.7b's shapes in_proj and
// out_proj are nearly all of it.
SsdInputs ssm_inputs(const Mamba2Shape& shape, const LayerWeights& weights, const Matrix& u) {
  check_shape(shape);
  const Dims dm = dims_of(shape, u.rows());
  const auto d = static_cast<std::size_t>(shape.d_model), K = static_cast<std::size_t>(shape.d_conv);
  const auto conv_dim = static_cast<std::size_t>(shape.conv_dim()), dip = static_cast<std::size_t>(shape.d_in_proj());
  if (u.cols() != d)
    throw Error("mamba2: the input has " + std::to_string(u.cols()) + " columns, d_model is " + std::to_string(d));
  check_matrix("in_proj (W_in)", weights.W_in, d, dip);
  check_optional("in_proj's bias (b_in)", weights.b_in, shape.bias, dip);
  check_matrix("conv1d's weight", weights.conv, K, conv_dim);
  check_optional("conv1d's bias", weights.conv_bias, shape.conv_bias, conv_dim);
  check_vector("dt_bias", weights.dt_bias.size(), dm.H);
  check_vector("A_log", weights.A_log.size(), dm.H);

  const std::size_t T = dm.T, E = dm.E, GN = dm.GN, H = dm.H;
  SsdInputs in;
  in.A.resize(H);
  for (std::size_t h = 0; h < H; ++h) in.A[h] = -std::exp(weights.A_log[h]);
  in.x = Matrix(T, E, Matrix::uninitialized);
  in.B = Matrix(T, GN, Matrix::uninitialized);
  in.C = Matrix(T, GN, Matrix::uninitialized);
  in.delta = Matrix(T, H, Matrix::uninitialized);
  if (T == 0) {
    in.z = Matrix(0, E);
    return in;
  }
  // [z | xBC | dt] = u W_in (+ b_in), as two products: z lands in its own matrix.
  in.z = biased_product(u, weights.W_in, weights.b_in, 0, E);
  const Matrix rest = biased_product(u, weights.W_in, weights.b_in, E, conv_dim + H);

  const double* bias = weights.conv_bias.empty() ? nullptr : weights.conv_bias.data();
  const double lo = shape.dt_limit_low, hi = shape.dt_limit_high;
  parallel::for_rows(T, conv_dim, [&](std::size_t first, std::size_t end) {
    for (std::size_t t = first; t < end; ++t) {
      // xBC[t, c] = b[c] + sum_k w[k, c] xBC[t - (K-1) + k, c] (k ascending, taps before t = 0 skipped),
      // then SiLU, written to x, B or C.
      const auto conv = [&](std::size_t c0, std::size_t n, double* out) {
        for (std::size_t j = 0; j < n; ++j) out[j] = bias ? bias[c0 + j] : 0.0;
        for (std::size_t k = 0; k < K; ++k) {
          if (t + k + 1 < K) continue;
          const double* src = rest.row(t + k + 1 - K).data() + c0;
          const double* w = weights.conv.row(k).data() + c0;
          for (std::size_t j = 0; j < n; ++j) out[j] += w[j] * src[j];
        }
        silu_loop(out, n);
      };
      conv(0, E, in.x.row(t).data());
      conv(E, GN, in.B.row(t).data());
      conv(E + GN, GN, in.C.row(t).data());
      const double* dt = rest.row(t).data() + conv_dim;
      for (std::size_t h = 0; h < H; ++h)
        in.delta(t, h) = std::min(std::max(softplus(dt[h] + weights.dt_bias[h]), lo), hi);
    }
  });
  return in;
}

Matrix ssd(const Mamba2Shape& shape, const SsdInputs& inputs, std::span<const double> D, SsdForm form, int chunk) {
  check_inputs(shape, inputs);
  check_D(shape, D);
  if (chunk < 0) throw Error("mamba2: chunk length " + std::to_string(chunk) + " is negative");
  const Dims d = dims_of(shape, inputs.x.rows());
  Matrix y(d.T, d.E, Matrix::uninitialized);
  if (d.T == 0) return y;
  switch (form) {
    case SsdForm::scan: parallel::for_each(d.H, [&](std::size_t h) { ssd_scan_head(shape, inputs, D, h, y); }); break;
    case SsdForm::quadratic:
      parallel::for_each(d.H, [&](std::size_t h) { ssd_quadratic_head(shape, inputs, D, h, y); });
      break;
    case SsdForm::chunked: {
      // A chunk longer than T is T: one chunk, no scratch beyond it.
      const std::size_t Q = std::min(static_cast<std::size_t>(chunk > 0 ? chunk : shape.chunk_size), d.T);
      const std::size_t chunks = (d.T + Q - 1) / Q;
      // C B^T of each group and chunk (q x q), shared by the group's heads.
      std::vector<Matrix> CB(d.G * chunks);
      parallel::for_each(CB.size(), [&](std::size_t i) {
        const std::size_t g = i / chunks, a = (i % chunks) * Q, q = std::min(Q, d.T - a);
        CB[i].resize(q, q);
        linalg::gemm(1.0, ConstMatrixView(inputs.C.data() + a * d.GN + g * d.N, q, d.N, d.GN), Op::none,
                     ConstMatrixView(inputs.B.data() + a * d.GN + g * d.N, q, d.N, d.GN), Op::trans, 0.0, CB[i]);
      });
      parallel::for_each(d.H, [&](std::size_t h) { ssd_chunked_head(shape, inputs, D, h, Q, CB, y); });
      break;
    }
  }
  return y;
}

Matrix mixer_matrix(const Mamba2Shape& shape, const SsdInputs& inputs, std::span<const double> D, int head) {
  check_inputs(shape, inputs);
  check_D(shape, D);
  if (head < 0 || head >= shape.heads())
    throw Error("mamba2: head " + std::to_string(head) + " is not one of the " + std::to_string(shape.heads()));
  Matrix M;
  build_mixer(shape, inputs, static_cast<std::size_t>(head), M);
  if (!shape.D_has_hdim)
    for (std::size_t t = 0; t < M.rows(); ++t) M(t, t) += D[static_cast<std::size_t>(head)];
  return M;
}

void rms_norm(std::span<const double> w, double eps, Matrix& X, int groups) {
  if (groups < 1 || X.cols() % static_cast<std::size_t>(groups) != 0)
    throw Error("mamba2 RMSNorm: " + std::to_string(groups) + " groups do not divide " + std::to_string(X.cols()) +
                " columns");
  check_vector("an RMSNorm's weight", w.size(), X.cols());
  parallel::for_rows(X.rows(), X.cols(), [&](std::size_t first, std::size_t end) {
    rms_norm_rows(w.data(), eps, X, static_cast<std::size_t>(groups), first, end);
  });
}

void apply_block(const Mamba2Shape& shape, const LayerWeights& weights, const Ablation& ablation, Matrix& X,
                 BlockOutputs* outputs, SsdForm form) {
  check_shape(shape);
  const auto d = static_cast<std::size_t>(shape.d_model), E = static_cast<std::size_t>(shape.d_inner());
  if (X.cols() != d)
    throw Error("mamba2 block: X has " + std::to_string(X.cols()) + " columns, d_model is " + std::to_string(d));
  if (ablation.norm) check_vector("the block's norm", weights.norm.size(), d);
  check_optional("the gated norm's weight", weights.gated_norm, shape.rmsnorm, E);
  check_matrix("out_proj (W_out)", weights.W_out, E, d);
  check_optional("out_proj's bias (b_out)", weights.b_out, shape.bias, d);
  check_D(shape, weights.D);
  const std::size_t T = X.rows();

  Matrix normed;
  if (ablation.norm) {
    normed = X;
    rms_norm(weights.norm, shape.norm_eps, normed);
  }
  const SsdInputs in = ssm_inputs(shape, weights, ablation.norm ? normed : X);
  normed = Matrix();
  Matrix y = ssd(shape, in, weights.D, form);
  if (outputs && outputs->keep_head0) outputs->head0 = mixer_matrix(shape, in, weights.D, 0);

  // The gated norm (mamba2.hpp; RMSNormGated): the gate before or after the norm, or no norm.
  const bool norm = shape.rmsnorm && ablation.gated_norm, gate = ablation.gate;
  const std::size_t groups = static_cast<std::size_t>(shape.ngroups);
  parallel::for_rows(T, E, [&](std::size_t first, std::size_t end) {
    if (gate && !(norm && shape.norm_before_gate))
      for (std::size_t t = first; t < end; ++t) gate_loop(y.row(t).data(), in.z.row(t).data(), E);
    if (norm) rms_norm_rows(weights.gated_norm.data(), shape.norm_eps, y, groups, first, end);
    if (gate && norm && shape.norm_before_gate)
      for (std::size_t t = first; t < end; ++t) gate_loop(y.row(t).data(), in.z.row(t).data(), E);
  });

  Matrix branch = T == 0 ? Matrix(0, d) : biased_product(y, weights.W_out, weights.b_out, 0, d);
  y = Matrix();
  parallel::for_rows(T, d, [&](std::size_t first, std::size_t end) {
    for (std::size_t t = first; t < end; ++t) {
      double* x = X.row(t).data();
      const double* b = branch.row(t).data();
      for (std::size_t j = 0; j < d; ++j) x[j] = ablation.lambda * x[j] + b[j];
    }
  });
  if (outputs) outputs->mixer = std::move(branch);
}

void apply_final_norm(const Mamba2Shape& shape, std::span<const double> norm_f, const Ablation& ablation, Matrix& X) {
  if (!ablation.norm) return;
  if (X.cols() != static_cast<std::size_t>(shape.d_model))
    throw Error("mamba2 final norm: X has " + std::to_string(X.cols()) + " columns, d_model is " +
                std::to_string(shape.d_model));
  rms_norm(norm_f, shape.norm_eps, X);
}

}  // namespace rcsweep::models::mamba2
