// models/mamba2: the Mamba-2 block's forward numerics (mamba2.hpp) against naive long-double
// references written here from the header's formulas: the in_proj, the causal convolution, the
// softplus with its threshold, the recurrence token by token, the mixer matrix entry by entry,
// RMSNorm, the gated norm in both orders, and the block with its skip and ablations; the SSD's
// three forms against each other; closed forms (a constant decay, a cumulative sum); causality;
// bitwise equality on 1, 2 and 3 threads; shape errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "base/matrix.hpp"
#include "base/parallel.hpp"
#include "models/mamba2/mamba2.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models::mamba2 {
namespace {

using Real = long double;
using Table = std::vector<std::vector<Real>>;

Matrix random_matrix(std::size_t rows, std::size_t cols, std::uint32_t stream, double scale = 1.0, double shift = 0.0) {
  Matrix M(rows, cols);
  rng::fill_normal({.seed = 20251129, .replicate = stream}, M.values());
  for (double& x : M.values()) x = shift + scale * x;
  return M;
}

std::vector<double> random_vector(std::size_t n, std::uint32_t stream, double scale, double shift = 0.0) {
  const Matrix M = random_matrix(1, n, stream, scale, shift);
  return {M.values().begin(), M.values().end()};
}

// d = 32, E = 64, P = 16 (H = 4), N = 8, K = 4.
Mamba2Shape small_shape(int ngroups = 1) {
  Mamba2Shape s;
  s.d_model = 32;
  s.layers = 2;
  s.vocab = 10;
  s.vocab_rows = 16;
  s.d_state = 8;
  s.d_conv = 4;
  s.expand = 2;
  s.headdim = 16;
  s.ngroups = ngroups;
  s.chunk_size = 8;
  return s;
}

// Unit-order products, Delta about 0.05 .. 0.5, A in -(1 .. 8): decays that matter within a few
// tokens and that do not vanish over a chunk.
LayerWeights random_layer(const Mamba2Shape& s, std::uint32_t stream) {
  const auto d = static_cast<std::size_t>(s.d_model), E = static_cast<std::size_t>(s.d_inner());
  const auto H = static_cast<std::size_t>(s.heads()), K = static_cast<std::size_t>(s.d_conv);
  const auto C = static_cast<std::size_t>(s.conv_dim()), n_in = static_cast<std::size_t>(s.d_in_proj());
  LayerWeights w;
  w.norm = random_vector(d, stream + 1, 0.2, 1.0);
  w.W_in = random_matrix(d, n_in, stream + 2, 1.0 / std::sqrt(static_cast<double>(d)));
  if (s.bias) w.b_in = random_vector(n_in, stream + 3, 0.1);
  w.conv = random_matrix(K, C, stream + 4, 0.5);
  if (s.conv_bias) w.conv_bias = random_vector(C, stream + 5, 0.1);
  w.dt_bias = random_vector(H, stream + 6, 0.5, -1.5);
  w.A_log = random_vector(H, stream + 7, 0.5, 1.0);
  w.D = random_vector(s.D_has_hdim ? E : H, stream + 8, 0.5, 1.0);
  if (s.rmsnorm) w.gated_norm = random_vector(E, stream + 9, 0.2, 1.0);
  w.W_out = random_matrix(E, d, stream + 10, 1.0 / std::sqrt(static_cast<double>(E)));
  if (s.bias) w.b_out = random_vector(d, stream + 11, 0.1);
  return w;
}

// ---- naive references (long double, plain loops) ----------------------------------------------

Table to_table(const Matrix& M) {
  Table t(M.rows(), std::vector<Real>(M.cols()));
  for (std::size_t i = 0; i < M.rows(); ++i)
    for (std::size_t j = 0; j < M.cols(); ++j) t[i][j] = M(i, j);
  return t;
}

Real silu(Real v) { return v / (1 + std::exp(-v)); }

Real naive_softplus(Real v) { return v > 20 ? v : std::log(1 + std::exp(v)); }

void naive_rms_norm(const std::vector<double>& w, Real eps, Table& X, std::size_t groups) {
  for (auto& row : X) {
    const std::size_t width = row.size() / groups;
    for (std::size_t g = 0; g < groups; ++g) {
      Real ms = 0;
      for (std::size_t j = g * width; j < (g + 1) * width; ++j) ms += row[j] * row[j];
      ms /= static_cast<Real>(width);
      for (std::size_t j = g * width; j < (g + 1) * width; ++j) row[j] = row[j] / std::sqrt(ms + eps) * w[j];
    }
  }
}

struct NaiveInputs {
  Table z, x, B, C, delta;
  std::vector<Real> A;
};

// [z | xBC | dt] = u W_in + b_in; xBC[t, c] = b[c] + sum_k w[k, c] xBC[t - (K-1) + k, c], SiLU;
// Delta = clamp(softplus(dt + dt_bias)).
NaiveInputs naive_inputs(const Mamba2Shape& s, const LayerWeights& w, const Table& u) {
  const std::size_t T = u.size(), d = static_cast<std::size_t>(s.d_model), E = static_cast<std::size_t>(s.d_inner());
  const std::size_t GN = static_cast<std::size_t>(s.ngroups * s.d_state), H = static_cast<std::size_t>(s.heads());
  const std::size_t K = static_cast<std::size_t>(s.d_conv), Cd = static_cast<std::size_t>(s.conv_dim());
  const std::size_t n_in = static_cast<std::size_t>(s.d_in_proj());
  Table in(T, std::vector<Real>(n_in));
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t c = 0; c < n_in; ++c) {
      Real v = w.b_in.empty() ? 0 : w.b_in[c];
      for (std::size_t k = 0; k < d; ++k) v += u[t][k] * static_cast<Real>(w.W_in(k, c));
      in[t][c] = v;
    }
  NaiveInputs out;
  out.z.assign(T, std::vector<Real>(E));
  out.x.assign(T, std::vector<Real>(E));
  out.B.assign(T, std::vector<Real>(GN));
  out.C.assign(T, std::vector<Real>(GN));
  out.delta.assign(T, std::vector<Real>(H));
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t c = 0; c < E; ++c) out.z[t][c] = in[t][c];
    for (std::size_t c = 0; c < Cd; ++c) {
      Real v = w.conv_bias.empty() ? 0 : w.conv_bias[c];
      for (std::size_t k = 0; k < K; ++k) {
        const long src = static_cast<long>(t) - static_cast<long>(K - 1) + static_cast<long>(k);
        if (src >= 0) v += static_cast<Real>(w.conv(k, c)) * in[static_cast<std::size_t>(src)][E + c];
      }
      v = silu(v);
      if (c < E)
        out.x[t][c] = v;
      else if (c < E + GN)
        out.B[t][c - E] = v;
      else
        out.C[t][c - E - GN] = v;
    }
    for (std::size_t h = 0; h < H; ++h) {
      const Real v = naive_softplus(in[t][E + Cd + h] + w.dt_bias[h]);
      out.delta[t][h] = std::min<Real>(std::max<Real>(v, s.dt_limit_low), s.dt_limit_high);
    }
  }
  for (double a : w.A_log) out.A.push_back(-std::exp(static_cast<Real>(a)));
  return out;
}

NaiveInputs naive_of(const SsdInputs& in) {
  NaiveInputs n{to_table(in.z), to_table(in.x), to_table(in.B), to_table(in.C), to_table(in.delta), {}};
  for (double a : in.A) n.A.push_back(a);
  return n;
}

Real D_of(const Mamba2Shape& s, const std::vector<double>& D, std::size_t c) {
  return s.D_has_hdim ? D[c] : D[c / static_cast<std::size_t>(s.headdim)];
}

// The recurrence token by token: S_t = exp(Delta_t A) S_(t-1) + Delta_t x_t B_t^T, y_t = S_t C_t + D x_t.
Table naive_scan(const Mamba2Shape& s, const NaiveInputs& in, const std::vector<double>& D) {
  const std::size_t T = in.x.size(), P = static_cast<std::size_t>(s.headdim), N = static_cast<std::size_t>(s.d_state);
  const std::size_t H = static_cast<std::size_t>(s.heads());
  Table y(T, std::vector<Real>(H * P));
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t g = static_cast<std::size_t>(s.group_of_head(static_cast<int>(h)));
    std::vector<std::vector<Real>> S(P, std::vector<Real>(N, 0));
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t p = 0; p < P; ++p) {
        const std::size_t c = h * P + p;
        Real acc = 0;
        for (std::size_t n = 0; n < N; ++n) {
          S[p][n] = std::exp(in.delta[t][h] * in.A[h]) * S[p][n] + in.delta[t][h] * in.x[t][c] * in.B[t][g * N + n];
          acc += S[p][n] * in.C[t][g * N + n];
        }
        y[t][c] = acc + D_of(s, D, c) * in.x[t][c];
      }
  }
  return y;
}

// M_h[t, s] = exp(sum_(r=s+1..t) Delta[r] A) (C_t . B_s) Delta[s] for s <= t (+ D_h on the diagonal).
Table naive_mixer(const Mamba2Shape& sh, const NaiveInputs& in, std::size_t h, Real D_h) {
  const std::size_t T = in.x.size(), N = static_cast<std::size_t>(sh.d_state);
  const std::size_t g = static_cast<std::size_t>(sh.group_of_head(static_cast<int>(h)));
  Table M(T, std::vector<Real>(T, 0));
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t s = 0; s <= t; ++s) {
      Real exponent = 0, cb = 0;
      for (std::size_t r = s + 1; r <= t; ++r) exponent += in.delta[r][h] * in.A[h];
      for (std::size_t n = 0; n < N; ++n) cb += in.C[t][g * N + n] * in.B[s][g * N + n];
      M[t][s] = std::exp(exponent) * cb * in.delta[s][h] + (s == t ? D_h : 0);
    }
  return M;
}

Table naive_mixer_branch(const Mamba2Shape& s, const LayerWeights& w, const Ablation& ab, const Table& u) {
  const NaiveInputs in = naive_inputs(s, w, u);
  Table y = naive_scan(s, in, w.D);
  const std::size_t T = u.size(), E = static_cast<std::size_t>(s.d_inner()), d = static_cast<std::size_t>(s.d_model);
  const auto gate = [&] {
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t c = 0; c < E; ++c) y[t][c] *= silu(in.z[t][c]);
  };
  const bool norm = s.rmsnorm && ab.gated_norm;
  if (ab.gate && !(norm && s.norm_before_gate)) gate();
  if (norm) naive_rms_norm(w.gated_norm, s.norm_eps, y, static_cast<std::size_t>(s.ngroups));
  if (ab.gate && norm && s.norm_before_gate) gate();
  Table out(T, std::vector<Real>(d));
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < d; ++j) {
      Real v = w.b_out.empty() ? 0 : w.b_out[j];
      for (std::size_t c = 0; c < E; ++c) v += y[t][c] * static_cast<Real>(w.W_out(c, j));
      out[t][j] = v;
    }
  return out;
}

// max |got - want| / max |want|
double relative_error(const Matrix& got, const Table& want) {
  EXPECT_EQ(got.rows(), want.size());
  Real err = 0, scale = 0;
  for (std::size_t i = 0; i < got.rows() && i < want.size(); ++i) {
    EXPECT_EQ(got.cols(), want[i].size());
    for (std::size_t j = 0; j < got.cols() && j < want[i].size(); ++j) {
      err = std::max(err, std::fabs(static_cast<Real>(got(i, j)) - want[i][j]));
      scale = std::max(scale, std::fabs(want[i][j]));
    }
  }
  return static_cast<double>(err / scale);
}

double relative_error(const Matrix& got, const Matrix& want) { return relative_error(got, to_table(want)); }

bool bitwise_equal(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// SSD inputs drawn directly (not through in_proj): x, B, C standard normal, Delta in (0.05, 0.45).
SsdInputs random_inputs(const Mamba2Shape& s, std::size_t T, std::uint32_t stream) {
  const auto E = static_cast<std::size_t>(s.d_inner()), GN = static_cast<std::size_t>(s.ngroups * s.d_state);
  const auto H = static_cast<std::size_t>(s.heads());
  SsdInputs in;
  in.z = random_matrix(T, E, stream + 1);
  in.x = random_matrix(T, E, stream + 2);
  in.B = random_matrix(T, GN, stream + 3);
  in.C = random_matrix(T, GN, stream + 4);
  in.delta = random_matrix(T, H, stream + 5);
  for (double& v : in.delta.values()) v = 0.25 + 0.2 * std::tanh(v);
  in.A = random_vector(H, stream + 6, 0.5, -1.5);
  return in;
}

// ---- ssm_inputs ---------------------------------------------------------------------------------

TEST(Mamba2Inputs, MatchNaiveInProjConvolutionAndSoftplus) {
  for (const bool bias : {false, true})
    for (const bool conv_bias : {true, false}) {
      Mamba2Shape s = small_shape(2);
      s.bias = bias;
      s.conv_bias = conv_bias;
      const LayerWeights w = random_layer(s, 100);
      const Matrix u = random_matrix(13, 32, 7);
      const SsdInputs in = ssm_inputs(s, w, u);
      const NaiveInputs want = naive_inputs(s, w, to_table(u));
      SCOPED_TRACE(::testing::Message() << "bias " << bias << " conv_bias " << conv_bias);
      EXPECT_LT(relative_error(in.z, want.z), 1e-14);
      EXPECT_LT(relative_error(in.x, want.x), 1e-14);
      EXPECT_LT(relative_error(in.B, want.B), 1e-14);
      EXPECT_LT(relative_error(in.C, want.C), 1e-14);
      EXPECT_LT(relative_error(in.delta, want.delta), 1e-14);
      ASSERT_EQ(in.A.size(), 4u);
      for (std::size_t h = 0; h < 4; ++h) EXPECT_DOUBLE_EQ(in.A[h], -std::exp(w.A_log[h]));
    }
}

// Above 20 softplus is the identity (torch's threshold): log(1 + e^v) differs from v by e^-v,
// which at v ~ 21 is far above rounding; the dt limit clamps Delta.
TEST(Mamba2Inputs, SoftplusThresholdAndDtLimit) {
  Mamba2Shape s = small_shape();
  LayerWeights w = random_layer(s, 200);
  w.dt_bias[0] = 21.0;  // dt + 21: above the threshold for most tokens, below for some
  w.dt_bias[1] = 19.5;
  const Matrix u = random_matrix(40, 32, 8);
  const SsdInputs in = ssm_inputs(s, w, u);
  const NaiveInputs want = naive_inputs(s, w, to_table(u));
  EXPECT_LT(relative_error(in.delta, want.delta), 1e-15);
  int above = 0, below = 0;
  for (std::size_t t = 0; t < 40; ++t)
    for (std::size_t h = 0; h < 2; ++h) {
      const Real v = want.delta[t][h];  // the naive value of dt + dt_bias wherever it is above 20
      (v > 20 ? above : below) += 1;
    }
  EXPECT_GT(above, 0);
  EXPECT_GT(below, 0);

  s.dt_limit_low = 0.2;
  s.dt_limit_high = 0.3;
  w = random_layer(s, 200);
  const SsdInputs clamped = ssm_inputs(s, w, u);
  const NaiveInputs want_clamped = naive_inputs(s, w, to_table(u));
  EXPECT_LT(relative_error(clamped.delta, want_clamped.delta), 1e-15);
  int at_low = 0, at_high = 0;
  for (const double v : clamped.delta.values()) {
    EXPECT_GE(v, 0.2);
    EXPECT_LE(v, 0.3);
    at_low += v == 0.2;
    at_high += v == 0.3;
  }
  EXPECT_GT(at_low, 0);
  EXPECT_GT(at_high, 0);
}

// Token t of the convolution reads tokens t - 3 .. t only: a change at token 5 changes x, B, C at
// 5 .. 8, nothing before and nothing from 9 on.
TEST(Mamba2Inputs, ConvolutionIsCausalWithFourTaps) {
  const Mamba2Shape s = small_shape();
  const LayerWeights w = random_layer(s, 300);
  Matrix u = random_matrix(16, 32, 9);
  const SsdInputs a = ssm_inputs(s, w, u);
  for (std::size_t j = 0; j < 32; ++j) u(5, j) += 0.5;
  const SsdInputs b = ssm_inputs(s, w, u);
  for (std::size_t t = 0; t < 16; ++t) {
    const bool changed = t >= 5 && t <= 8;
    const bool same = std::memcmp(a.x.row(t).data(), b.x.row(t).data(), a.x.cols() * sizeof(double)) == 0;
    EXPECT_EQ(same, !changed) << "token " << t;
  }
}

// ---- the SSD ------------------------------------------------------------------------------------

struct FormCase {
  std::size_t T;
  int chunk;
  int groups;
  bool D_per_channel;
};

// scan = quadratic = chunked = the naive recurrence, chunk lengths that divide T and that do not.
TEST(Mamba2Ssd, ThreeFormsMatchNaiveRecurrence) {
  for (const FormCase c : {FormCase{37, 8, 1, false}, FormCase{37, 8, 2, true}, FormCase{37, 5, 4, false},
                           FormCase{64, 16, 2, false}, FormCase{64, 16, 1, true}, FormCase{37, 37, 1, false},
                           FormCase{37, 64, 2, false}, FormCase{20, 1, 1, false}, FormCase{1, 8, 1, false}}) {
    Mamba2Shape s = small_shape(c.groups);
    s.D_has_hdim = c.D_per_channel;
    const SsdInputs in = random_inputs(s, c.T, 400);
    const std::vector<double> D = random_vector(static_cast<std::size_t>(c.D_per_channel ? s.d_inner() : s.heads()),
                                                401, 0.5, 1.0);
    SCOPED_TRACE(::testing::Message() << "T " << c.T << " chunk " << c.chunk << " groups " << c.groups
                                      << (c.D_per_channel ? " D per channel" : " D per head"));
    const Table want = naive_scan(s, naive_of(in), D);
    const Matrix scan = ssd(s, in, D, SsdForm::scan);
    const Matrix quadratic = ssd(s, in, D, SsdForm::quadratic);
    const Matrix chunked = ssd(s, in, D, SsdForm::chunked, c.chunk);
    EXPECT_LT(relative_error(scan, want), 1e-13);
    EXPECT_LT(relative_error(quadratic, want), 1e-13);
    EXPECT_LT(relative_error(chunked, want), 1e-13);
    EXPECT_LT(relative_error(chunked, scan), 1e-13);
    EXPECT_LT(relative_error(quadratic, scan), 1e-13);
  }
}

// chunk 0 is shape.chunk_size: the same bits as that chunk length given.
TEST(Mamba2Ssd, ChunkZeroIsTheShapesChunkSize) {
  Mamba2Shape s = small_shape();
  s.chunk_size = 6;
  const SsdInputs in = random_inputs(s, 29, 500);
  const std::vector<double> D = random_vector(4, 501, 0.5, 1.0);
  EXPECT_TRUE(bitwise_equal(ssd(s, in, D, SsdForm::chunked), ssd(s, in, D, SsdForm::chunked, 6)));
  EXPECT_FALSE(bitwise_equal(ssd(s, in, D, SsdForm::chunked), ssd(s, in, D, SsdForm::chunked, 7)));
}

TEST(Mamba2Ssd, MixerMatrixMatchesItsDefinition) {
  for (const int groups : {1, 2})
    for (const bool per_channel : {false, true}) {
      Mamba2Shape s = small_shape(groups);
      s.D_has_hdim = per_channel;
      const SsdInputs in = random_inputs(s, 30, 600);
      const std::vector<double> D = random_vector(static_cast<std::size_t>(per_channel ? s.d_inner() : s.heads()), 601,
                                                  0.5, 1.0);
      for (int h = 0; h < s.heads(); ++h) {
        SCOPED_TRACE(::testing::Message() << "groups " << groups << " head " << h << " per channel " << per_channel);
        const Matrix M = mixer_matrix(s, in, D, h);
        const Table want = naive_mixer(s, naive_of(in), static_cast<std::size_t>(h),
                                       per_channel ? 0.0L : static_cast<Real>(D[static_cast<std::size_t>(h)]));
        EXPECT_LT(relative_error(M, want), 1e-13);
        for (std::size_t t = 0; t < 30; ++t)
          for (std::size_t u = t + 1; u < 30; ++u) EXPECT_EQ(M(t, u), 0.0);
      }
    }
}

// y_h = M_h x_h (+ D x_h): the quadratic form is the mixer matrix applied to x.
TEST(Mamba2Ssd, MixerMatrixTimesXIsTheSsd) {
  const Mamba2Shape s = small_shape(2);
  const SsdInputs in = random_inputs(s, 25, 700);
  const std::vector<double> D = random_vector(4, 701, 0.5, 1.0);
  const Matrix y = ssd(s, in, D, SsdForm::chunked, 7);
  for (int h = 0; h < 4; ++h) {
    const Matrix M = mixer_matrix(s, in, D, h);
    Table want(25, std::vector<Real>(16, 0));
    Matrix got(25, 16);
    for (std::size_t t = 0; t < 25; ++t)
      for (std::size_t p = 0; p < 16; ++p) {
        for (std::size_t u = 0; u < 25; ++u) want[t][p] += static_cast<Real>(M(t, u)) * in.x(u, h * 16 + p);
        got(t, p) = y(t, h * 16 + p);
      }
    EXPECT_LT(relative_error(got, want), 1e-13) << "head " << h;
  }
}

// Constant Delta and A: L[t, s] = exp((t - s) Delta A), so M[t, s] = exp((t - s) Delta A) (C_t . B_s) Delta.
TEST(Mamba2Ssd, ConstantDecayIsAPowerOfOneFactor) {
  const Mamba2Shape s = small_shape();
  SsdInputs in = random_inputs(s, 40, 800);
  const double delta = 0.3, A = -0.7;
  in.delta.fill(delta);
  in.A.assign(4, A);
  const std::vector<double> D(4, 0.0);
  const Matrix M = mixer_matrix(s, in, D, 2);
  double worst = 0.0, scale = 0.0;
  for (std::size_t t = 0; t < 40; ++t)
    for (std::size_t u = 0; u <= t; ++u) {
      double cb = 0.0;
      for (std::size_t n = 0; n < 8; ++n) cb += in.C(t, n) * in.B(u, n);
      const double want = std::exp(static_cast<double>(t - u) * delta * A) * cb * delta;
      worst = std::max(worst, std::fabs(M(t, u) - want));
      scale = std::max(scale, std::fabs(want));
    }
  EXPECT_LT(worst / scale, 1e-13);
}

// A -> 0 (A_log very negative: exp(Delta A) = 1) and B_t = b, C_t = c for every t: the state is a
// sum, y_t = (c . b) sum_(s <= t) Delta_s x_s + D x_t, in every form.
TEST(Mamba2Ssd, NoDecayWithConstantBAndCIsACumulativeSum) {
  const Mamba2Shape s = small_shape();
  SsdInputs in = random_inputs(s, 33, 900);
  const double A_log = -200.0;
  in.A.assign(4, -std::exp(A_log));
  const Matrix b = random_matrix(1, 8, 901), c = random_matrix(1, 8, 902);
  for (std::size_t t = 0; t < 33; ++t)
    for (std::size_t n = 0; n < 8; ++n) {
      in.B(t, n) = b(0, n);
      in.C(t, n) = c(0, n);
    }
  Real cb = 0;
  for (std::size_t n = 0; n < 8; ++n) cb += static_cast<Real>(b(0, n)) * c(0, n);
  const std::vector<double> D = random_vector(4, 903, 0.5, 1.0);
  Table want(33, std::vector<Real>(64));
  for (std::size_t col = 0; col < 64; ++col) {
    const std::size_t h = col / 16;
    Real sum = 0;
    for (std::size_t t = 0; t < 33; ++t) {
      sum += static_cast<Real>(in.delta(t, h)) * in.x(t, col);
      want[t][col] = cb * sum + static_cast<Real>(D[h]) * in.x(t, col);
    }
  }
  for (const SsdForm form : {SsdForm::scan, SsdForm::quadratic, SsdForm::chunked})
    EXPECT_LT(relative_error(ssd(s, in, D, form, 8), want), 1e-13) << static_cast<int>(form);
}

// ---- norms --------------------------------------------------------------------------------------

TEST(Mamba2Norm, RmsNormMatchesNaiveWithGroups) {
  for (const int groups : {1, 2, 4}) {
    const Matrix X0 = random_matrix(9, 24, 1000, 3.0, 0.5);
    const std::vector<double> w = random_vector(24, 1001, 0.3, 1.0);
    Matrix X = X0;
    rms_norm(w, 1e-5, X, groups);
    Table want = to_table(X0);
    naive_rms_norm(w, 1e-5L, want, static_cast<std::size_t>(groups));
    EXPECT_LT(relative_error(X, want), 1e-15) << groups << " groups";
  }
  // eps matters for a small row: x / sqrt(mean x^2 + eps)
  Matrix small(1, 4, 1e-3);
  rms_norm(std::vector<double>(4, 1.0), 1e-5, small);
  EXPECT_NEAR(small(0, 0), 1e-3 / std::sqrt(1e-6 + 1e-5), 1e-15);
  Matrix X(2, 6);
  EXPECT_THROW(rms_norm(std::vector<double>(6, 1.0), 1e-5, X, 4), Error);  // 4 groups of 6 columns
  EXPECT_THROW(rms_norm(std::vector<double>(5, 1.0), 1e-5, X), Error);
}

TEST(Mamba2Norm, FinalNormIsRmsNormOrNothing) {
  const Mamba2Shape s = small_shape();
  const Matrix X0 = random_matrix(7, 32, 1100, 2.0);
  const std::vector<double> w = random_vector(32, 1101, 0.3, 1.0);
  Matrix X = X0;
  apply_final_norm(s, w, {}, X);
  Table want = to_table(X0);
  naive_rms_norm(w, s.norm_eps, want, 1);
  EXPECT_LT(relative_error(X, want), 1e-15);
  Ablation off;
  off.norm = false;
  X = X0;
  apply_final_norm(s, w, off, X);
  EXPECT_TRUE(bitwise_equal(X, X0));
  X = random_matrix(7, 31, 1102);
  EXPECT_THROW(apply_final_norm(s, std::vector<double>(31, 1.0), {}, X), Error);
}

// ---- the block ----------------------------------------------------------------------------------

struct BlockCase {
  const char* name;
  Mamba2Shape shape;
  Ablation ablation;
};

std::vector<BlockCase> block_cases() {
  std::vector<BlockCase> cases;
  const auto with = [](auto edit) {
    Mamba2Shape s = small_shape(2);
    edit(s);
    return s;
  };
  const auto ab = [](auto edit) {
    Ablation a;
    edit(a);
    return a;
  };
  const Mamba2Shape base = small_shape(2);
  cases.push_back({"published", base, {}});
  cases.push_back({"lambda 0", base, ab([](Ablation& a) { a.lambda = 0.0; })});
  cases.push_back({"lambda -0.5", base, ab([](Ablation& a) { a.lambda = -0.5; })});
  cases.push_back({"no pre-norm", base, ab([](Ablation& a) { a.norm = false; })});
  cases.push_back({"no gate", base, ab([](Ablation& a) { a.gate = false; })});
  cases.push_back({"no gated norm", base, ab([](Ablation& a) { a.gated_norm = false; })});
  cases.push_back({"no gate, no gated norm", base, ab([](Ablation& a) {
                     a.gate = false;
                     a.gated_norm = false;
                   })});
  cases.push_back({"norm before gate", with([](Mamba2Shape& s) { s.norm_before_gate = true; }), {}});
  cases.push_back({"norm before gate, no gate", with([](Mamba2Shape& s) { s.norm_before_gate = true; }),
                   ab([](Ablation& a) { a.gate = false; })});
  cases.push_back({"rmsnorm false", with([](Mamba2Shape& s) { s.rmsnorm = false; }), {}});
  cases.push_back({"biases, no conv bias, D per channel, one group", with([](Mamba2Shape& s) {
                     s.bias = true;
                     s.conv_bias = false;
                     s.D_has_hdim = true;
                     s.ngroups = 1;
                   }),
                   ab([](Ablation& a) { a.lambda = 0.5; })});
  cases.push_back({"four groups, chunk 5",
                   with([](Mamba2Shape& s) {
                     s.ngroups = 4;
                     s.chunk_size = 5;
                   }),
                   {}});
  return cases;
}

TEST(Mamba2Block, MatchesNaiveCompositionForEachAblation) {
  for (const BlockCase& c : block_cases()) {
    SCOPED_TRACE(c.name);
    const LayerWeights w = random_layer(c.shape, 1200);
    const Matrix X0 = random_matrix(37, 32, 1201, 1.5);
    Table u = to_table(X0);
    if (c.ablation.norm) naive_rms_norm(w.norm, c.shape.norm_eps, u, 1);
    const Table branch = naive_mixer_branch(c.shape, w, c.ablation, u);
    Table want = to_table(X0);
    for (std::size_t t = 0; t < 37; ++t)
      for (std::size_t j = 0; j < 32; ++j) want[t][j] = c.ablation.lambda * want[t][j] + branch[t][j];
    for (const SsdForm form : {SsdForm::chunked, SsdForm::scan, SsdForm::quadratic}) {
      Matrix X = X0;
      BlockOutputs out;
      out.keep_head0 = true;
      apply_block(c.shape, w, c.ablation, X, &out, form);
      EXPECT_LT(relative_error(X, want), 1e-12) << static_cast<int>(form);
      EXPECT_LT(relative_error(out.mixer, branch), 1e-12) << static_cast<int>(form);
      // head 0's mixer matrix of the normed input (D_0 on the diagonal when D is per head)
      const NaiveInputs in = naive_inputs(c.shape, w, u);
      const Table M0 = naive_mixer(c.shape, in, 0, c.shape.D_has_hdim ? 0.0L : static_cast<Real>(w.D[0]));
      EXPECT_LT(relative_error(out.head0, M0), 1e-12);
    }
  }
}

TEST(Mamba2Block, OutputsAreOptionalAndHead0OnlyWhenAsked) {
  const Mamba2Shape s = small_shape();
  const LayerWeights w = random_layer(s, 1300);
  const Matrix X0 = random_matrix(12, 32, 1301);
  Matrix X1 = X0, X2 = X0;
  apply_block(s, w, {}, X1);
  BlockOutputs out;
  apply_block(s, w, {}, X2, &out);
  EXPECT_TRUE(bitwise_equal(X1, X2));
  EXPECT_TRUE(out.head0.empty());
  EXPECT_EQ(out.mixer.rows(), 12u);
  // lambda 0: X is the branch
  Ablation zero;
  zero.lambda = 0.0;
  Matrix X3 = X0;
  BlockOutputs out3;
  apply_block(s, w, zero, X3, &out3);
  EXPECT_TRUE(bitwise_equal(X3, out3.mixer));
  Matrix empty(0, 32);
  EXPECT_NO_THROW(apply_block(s, w, {}, empty));
}

// Changing token t changes no output before t, in every form, bit for bit.
TEST(Mamba2Block, IsCausal) {
  const Mamba2Shape s = small_shape(2);
  const LayerWeights w = random_layer(s, 1400);
  const Matrix X0 = random_matrix(29, 32, 1401);
  for (const SsdForm form : {SsdForm::chunked, SsdForm::scan, SsdForm::quadratic})
    for (const std::size_t t : {std::size_t{0}, std::size_t{9}, std::size_t{17}, std::size_t{28}}) {
      Matrix a = X0, b = X0;
      for (std::size_t j = 0; j < 32; ++j) b(t, j) = -2.0 * b(t, j) + 1.0;
      apply_block(s, w, {}, a, nullptr, form);
      apply_block(s, w, {}, b, nullptr, form);
      for (std::size_t r = 0; r < t; ++r)
        EXPECT_EQ(std::memcmp(a.row(r).data(), b.row(r).data(), 32 * sizeof(double)), 0)
            << "form " << static_cast<int>(form) << " token " << t << " row " << r;
      for (std::size_t r = t; r < std::min<std::size_t>(t + 4, 29); ++r)  // the convolution's reach at least
        EXPECT_NE(a(r, 0), b(r, 0)) << "token " << t << " row " << r;
    }
}

void expect_same_bits_on_1_2_3_threads(const Mamba2Shape& s, const LayerWeights& w, const Matrix& X0, SsdForm form) {
  std::vector<Matrix> X, mixer, head0;
  for (const int threads : {1, 2, 3}) {
    parallel::set_threads(threads);
    Matrix Y = X0;
    BlockOutputs out;
    out.keep_head0 = true;
    apply_block(s, w, {}, Y, &out, form);
    X.push_back(std::move(Y));
    mixer.push_back(std::move(out.mixer));
    head0.push_back(std::move(out.head0));
  }
  parallel::set_threads(1);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_TRUE(bitwise_equal(X[0], X[i])) << "form " << static_cast<int>(form) << ", " << i + 1 << " threads";
    EXPECT_TRUE(bitwise_equal(mixer[0], mixer[i]));
    EXPECT_TRUE(bitwise_equal(head0[0], head0[i]));
  }
}

TEST(Mamba2Block, ThreadCountChangesNoBit) {
  Mamba2Shape s = small_shape(2);
  s.chunk_size = 16;
  const LayerWeights w = random_layer(s, 1500);
  const Matrix X0 = random_matrix(64, 32, 1501);
  for (const SsdForm form : {SsdForm::chunked, SsdForm::scan, SsdForm::quadratic})
    expect_same_bits_on_1_2_3_threads(s, w, X0, form);
}

TEST(Mamba2Block, RefusesWeightsThatDoNotMatchTheShape) {
  const Mamba2Shape s = small_shape(2);
  const LayerWeights w = random_layer(s, 1600);
  Matrix X = random_matrix(5, 32, 1601);
  const auto refuses = [&](auto edit, const char* what) {
    LayerWeights bad = w;
    edit(bad);
    Matrix Y = X;
    EXPECT_THROW(apply_block(s, bad, {}, Y), Error) << what;
  };
  refuses([](LayerWeights& b) { b.W_in = Matrix(32, 10); }, "W_in");
  refuses([](LayerWeights& b) { b.b_in.assign(static_cast<std::size_t>(small_shape(2).d_in_proj()), 0.0); },
          "b_in without shape.bias");
  refuses([](LayerWeights& b) { b.conv = Matrix(3, b.conv.cols()); }, "conv taps");
  refuses([](LayerWeights& b) { b.conv_bias.clear(); }, "conv bias missing");
  refuses([](LayerWeights& b) { b.dt_bias.pop_back(); }, "dt_bias");
  refuses([](LayerWeights& b) { b.A_log.push_back(0.0); }, "A_log");
  refuses([](LayerWeights& b) { b.D.assign(64, 1.0); }, "D per channel for a per-head shape");
  refuses([](LayerWeights& b) { b.gated_norm.clear(); }, "gated norm");
  refuses([](LayerWeights& b) { b.W_out = Matrix(32, 32); }, "W_out");
  refuses([](LayerWeights& b) { b.b_out.assign(32, 0.0); }, "b_out without shape.bias");
  refuses([](LayerWeights& b) { b.norm.assign(31, 1.0); }, "norm");
  Ablation no_norm;
  no_norm.norm = false;
  LayerWeights without_norm = w;
  without_norm.norm.clear();
  Matrix Y = X;
  EXPECT_NO_THROW(apply_block(s, without_norm, no_norm, Y));  // the pre-norm's weight is not read

  Matrix narrow = random_matrix(5, 31, 1602);
  EXPECT_THROW(apply_block(s, w, {}, narrow), Error);
  Mamba2Shape odd = s;
  odd.headdim = 24;  // does not divide d_inner 64
  EXPECT_THROW(apply_block(odd, w, {}, X), Error);
  odd = s;
  odd.ngroups = 3;  // does not divide 4 heads
  EXPECT_THROW(ssm_inputs(odd, w, X), Error);
}

TEST(Mamba2Ssd, RefusesInconsistentInputs) {
  const Mamba2Shape s = small_shape();
  const SsdInputs in = random_inputs(s, 10, 1700);
  const std::vector<double> D(4, 1.0);
  EXPECT_NO_THROW(ssd(s, in, D, SsdForm::chunked));
  EXPECT_THROW(ssd(s, in, std::vector<double>(3, 1.0), SsdForm::chunked), Error);
  EXPECT_THROW(ssd(s, in, D, SsdForm::chunked, -1), Error);
  SsdInputs bad = in;
  bad.B = Matrix(10, 7);
  EXPECT_THROW(ssd(s, bad, D, SsdForm::scan), Error);
  bad = in;
  bad.delta = Matrix(9, 4);
  EXPECT_THROW(ssd(s, bad, D, SsdForm::quadratic), Error);
  bad = in;
  bad.A.pop_back();
  EXPECT_THROW(mixer_matrix(s, bad, D, 0), Error);
  EXPECT_THROW(mixer_matrix(s, in, D, 4), Error);
  EXPECT_THROW(mixer_matrix(s, in, D, -1), Error);
}

}  // namespace
}  // namespace rcsweep::models::mamba2
