#include "models/gradients.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.hpp"
#include "base/pow2.hpp"
#include "linalg/linalg.hpp"
#include "models/mixers/mixer_kind.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models {
using config::ModelParams;
using linalg::Op;

namespace {
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
const double ln2 = std::log(2.0);

double sum_squares(const Matrix& A) {
  double ss = 0.0;
  for (double a : A.values()) ss += a * a;
  return ss;
}

bool all_finite(const Matrix& X) {
  return std::all_of(X.values().begin(), X.values().end(), [](double x) { return std::isfinite(x); });
}

// C = alpha op(A) op(B) (+ beta C), allocating C when beta == 0.
Matrix product(double alpha, const Matrix& A, Op opa, const Matrix& B, Op opb) {
  Matrix C(opa == Op::none ? A.rows() : A.cols(), opb == Op::none ? B.cols() : B.rows());
  linalg::gemm(alpha, A, opa, B, opb, 0.0, C);
  return C;
}

// Cotangent of the pre-norm rows U given the cotangent G of Y = norm(U) (row-wise).
// rms: y = u / ||u||, g_u = (g - y (y.g)) / ||u||.
// layernorm: y = (u - mean) / s, s = sqrt(var + 1e-5), g_u = (g - mean(g) - y mean(g y)) / s.
Matrix norm_vjp(config::Norm norm, const Matrix& U, const Matrix& G) {
  if (norm == config::Norm::none) return G;
  const std::size_t T = U.rows(), d = U.cols();
  Matrix out(T, d);
  std::vector<double> y(d);
  for (std::size_t i = 0; i < T; ++i) {
    const auto u = U.row(i);
    const auto g = G.row(i);
    auto o = out.row(i);
    if (norm == config::Norm::rms) {
      double ss = 0.0;
      for (double v : u) ss += v * v;
      const double inv = 1.0 / std::sqrt(ss);
      double yg = 0.0;
      for (std::size_t j = 0; j < d; ++j) {
        y[j] = u[j] * inv;
        yg += y[j] * g[j];
      }
      for (std::size_t j = 0; j < d; ++j) o[j] = (g[j] - y[j] * yg) * inv;
    } else {
      double mean = 0.0;
      for (double v : u) mean += v;
      mean /= static_cast<double>(d);
      double var = 0.0;
      for (double v : u) var += (v - mean) * (v - mean);
      var /= static_cast<double>(d);
      const double inv = 1.0 / std::sqrt(var + 1e-5);
      double gm = 0.0, gym = 0.0;
      for (std::size_t j = 0; j < d; ++j) {
        y[j] = (u[j] - mean) * inv;
        gm += g[j];
        gym += g[j] * y[j];
      }
      gm /= static_cast<double>(d);
      gym /= static_cast<double>(d);
      for (std::size_t j = 0; j < d; ++j) o[j] = (g[j] - gm - y[j] * gym) * inv;
    }
  }
  return out;
}

// gap_fix outliers, M = M_raw - A_r with A_r = sum_{i<=r} s_i u_i v_i^T: the cotangent of M_raw
// given that of M. In the bases of the SVD M_raw = U S V^T, dA_r = U D V^T with K = U^T dM_raw V and
// D_ij = K_ij (i, j <= r), 0 (i, j > r), and for exactly one of i, j (call it q) <= r, o the other:
// D_ij = (s_q^2 K_ij + s_i s_j K_ji) / (s_q^2 - s_o^2) (differentiating M = U S V^T with
// dU = U Omega_U, dV = V Omega_V antisymmetric). The backward pass applies the adjoint of K -> D.
Matrix outliers_vjp(const Matrix& M_raw, int outliers_r, const Matrix& G) {
  const auto svd = linalg::svd(M_raw);
  const std::size_t k = svd.s.size(), r = outliers_rank(svd.s, outliers_r);  // as apply_gap_fix
  if (r == 0) return G;
  const Matrix V = [&] {  // V = Vt^T
    Matrix out(svd.Vt.cols(), svd.Vt.rows());
    for (std::size_t i = 0; i < svd.Vt.rows(); ++i)
      for (std::size_t j = 0; j < svd.Vt.cols(); ++j) out(j, i) = svd.Vt(i, j);
    return out;
  }();
  const Matrix GD = product(1.0, product(1.0, svd.U, Op::trans, G, Op::none), Op::none, V, Op::none);
  Matrix GK(k, k, 0.0);
  const auto& s = svd.s;
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = 0; j < k; ++j) {
      const bool ti = i < r, tj = j < r;
      if (ti && tj) {
        GK(i, j) += GD(i, j);
      } else if (ti != tj) {
        const std::size_t q = ti ? i : j, o = ti ? j : i;
        const double c = 1.0 / (s[q] * s[q] - s[o] * s[o]);
        GK(i, j) += c * s[q] * s[q] * GD(i, j);
        GK(j, i) += c * s[i] * s[j] * GD(i, j);
      }
    }
  Matrix out = G;  // G_raw = G - U GK V^T
  linalg::gemm(-1.0, product(1.0, svd.U, Op::none, GK, Op::none), Op::none, V, Op::trans, 1.0, out);
  return out;
}

// Adds to G_X the cotangent of X through an input-dependent mixer M(X), given G_M (cotangent of
// M after gap_fix): gap_fix undone here, the mixer's own part its descriptor's (MixerKind::vjp).
void mixer_vjp(const ModelParams& model, const HeadTape& head, const Matrix& X, Matrix G_M, Matrix& G_X) {
  const std::size_t T = X.rows();
  const MixerKind& kind = mixer_kind(model.mixer);
  if (!kind.vjp) throw Error("mixer_vjp: the mixer does not depend on X");
  if (model.gap_fix == config::GapFix::outliers) G_M = outliers_vjp(head.M_raw, model.outliers_r, G_M);
  // The mixer before gap_fix (perp subtracts a constant).
  Matrix P = model.gap_fix == config::GapFix::outliers ? head.M_raw : head.M;
  if (model.gap_fix == config::GapFix::perp)
    for (double& p : P.values()) p += 1.0 / static_cast<double>(T);
  kind.vjp(model, head, X, P, G_M, G_X);
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }
double silu_prime(double z) {
  const double s = 1.0 / (1.0 + std::exp(-z));
  return s * (1.0 + z * (1.0 - s));
}
}  // namespace

TaskTape record_task(const ModelParams& model, RandomSource& random, const Matrix& X0, int L) {
  TaskTape tape;
  tape.layers.resize(static_cast<std::size_t>(L));
  Matrix X = X0;
  long log2_scale = 0;
  const bool carried = model.norm == config::Norm::none && model.homogeneous();
  for (int layer = 1; layer <= L; ++layer) {
    auto& t = tape.layers[static_cast<std::size_t>(layer - 1)];
    apply_layer(model, layer, random, X, nullptr, {}, &t);
    t.log2_scale = log2_scale;
    if (!all_finite(X)) {
      tape.finite = false;
      tape.layers.resize(static_cast<std::size_t>(layer));
      break;
    }
    if (carried) log2_scale += renormalise_pow2(X.values());
  }
  tape.X_out = std::move(X);
  tape.X_out_log2 = log2_scale;
  return tape;
}

Matrix layer_vjp(const ModelParams& model, const LayerTape& tape, const Matrix& G_out, std::vector<Matrix>& grad_W) {
  const Matrix& X = tape.X;
  const std::size_t T = X.rows(), d = X.cols();
  Matrix G = G_out;
  if (model.mlp == config::Mlp::relu) {
    // X_out = norm(U_mlp), U_mlp = lambda_mlp Y + b ReLU(H) W_2, H = a Y W_1 (layer.cpp apply_mlp).
    const std::size_t m = tape.W_1.cols();
    const double a = std::sqrt(2.0 / static_cast<double>(d)), b = 1.0 / std::sqrt(static_cast<double>(m));
    const Matrix G_U = norm_vjp(model.norm, tape.U_mlp, G);
    Matrix G_H = product(b, G_U, Op::none, tape.W_2, Op::trans);
    for (std::size_t i = 0; i < G_H.size(); ++i)
      if (!(tape.H.data()[i] > 0.0)) G_H.data()[i] = 0.0;
    G = G_U;
    for (double& g : G.values()) g *= model.lambda_mlp;
    linalg::gemm(a, G_H, Op::none, tape.W_1, Op::trans, 1.0, G);
  }
  // Y = norm(U), U = lambda X + B, B = O or O * SiLU(Z), Z = X W_G / sqrt(d), O = s sum_h M_h X W_h.
  const Matrix G_U = norm_vjp(model.norm, tape.U, G);
  Matrix G_X = G_U;
  for (double& g : G_X.values()) g *= model.lambda;
  Matrix G_O = G_U;
  if (model.gate == config::Gate::silu) {
    const double c = 1.0 / std::sqrt(static_cast<double>(d));
    const Matrix Z = product(c, X, Op::none, tape.W_G, Op::none);
    Matrix G_Z(T, d);
    for (std::size_t i = 0; i < G_O.size(); ++i) {
      const double z = Z.data()[i];
      G_Z.data()[i] = G_U.data()[i] * tape.O.data()[i] * silu_prime(z);
      G_O.data()[i] = G_U.data()[i] * silu(z);
    }
    linalg::gemm(c, G_Z, Op::none, tape.W_G, Op::trans, 1.0, G_X);
  }
  const double s = model.skip_scale;
  const MixerKind& kind = mixer_kind(model.mixer);
  grad_W.resize(tape.heads.size());
  for (std::size_t h = 0; h < tape.heads.size(); ++h) {
    const HeadTape& head = tape.heads[h];
    // V = X W, O += s M V: G_V = s M^T G_O (per channel: s times the mixer's transpose).
    Matrix G_V;
    if (kind.apply_transpose) {
      G_V = kind.apply_transpose(tape, G_O);
      for (double& g : G_V.values()) g *= s;
    } else {
      G_V = product(s, head.M, Op::trans, G_O, Op::none);
    }
    grad_W[h] = product(1.0, X, Op::trans, G_V, Op::none);
    linalg::gemm(1.0, G_V, Op::none, head.W_V, Op::trans, 1.0, G_X);
    if (model.input_dependent_mixer())  // G_M = s G_O V^T
      mixer_vjp(model, head, X, product(s, G_O, Op::none, head.V, Op::trans), G_X);
  }
  return G_X;
}

bool exact_gradients_apply(const ModelParams& model) { return model.linear_stack(); }

namespace {
GradientNorms empty_norms(const std::vector<int>& depths) {
  GradientNorms out;
  for (int L : depths) {
    out.log10_g.emplace_back(static_cast<std::size_t>(L), nan);
    out.stderr_log10.emplace_back(static_cast<std::size_t>(L), nan);
  }
  return out;
}

// ln ||A||_F^2 of a matrix carried at scale 2^log2.
double log_sq(const Matrix& A, long log2) { return std::log(sum_squares(A)) + 2.0 * static_cast<double>(log2) * ln2; }
}  // namespace

GradientNorms exact_gradient_norms(const ModelParams& model, const TaskTape& tape, const std::vector<int>& depths) {
  if (!exact_gradients_apply(model)) throw Error("exact_gradient_norms: not a linear single-head stack");
  GradientNorms out = empty_norms(depths);
  if (!tape.finite) return out;
  const auto W = [&](int l) -> const Matrix& { return tape.layers[static_cast<std::size_t>(l - 1)].heads[0].W_V; };
  const auto M = [&](int l) -> const Matrix& { return tape.layers[static_cast<std::size_t>(l - 1)].heads[0].M; };
  const double log_s2 = std::log(model.skip_scale * model.skip_scale);
  // g_{L,l} = s^{2L} ||M_L..M_1 X_0 W_1..W_{l-1}||^2 ||W_{l+1}..W_L||^2 (Mind the Gap App. A,
  // proof of Prop. 3.6: dX_L/dW_l = P_1 (x) P_2), all products carried at power-of-two scales.
  Matrix Y = tape.layers.front().X;  // M_L..M_1 X_0, advanced one layer at a time
  long y_log2 = tape.layers.front().log2_scale;
  int done_depth = 0;
  for (std::size_t k = 0; k < depths.size(); ++k) {
    const int L = depths[k];
    if (L > static_cast<int>(tape.layers.size())) continue;
    for (; done_depth < L; ++done_depth) {
      Y = product(1.0, M(done_depth + 1), Op::none, Y, Op::none);
      y_log2 += renormalise_pow2(Y.values());
    }
    std::vector<double> prefix(static_cast<std::size_t>(L)), suffix(static_cast<std::size_t>(L));
    Matrix Z = Y;
    long z_log2 = y_log2;
    for (int l = 1; l <= L; ++l) {
      prefix[static_cast<std::size_t>(l - 1)] = log_sq(Z, z_log2);
      if (l == L) break;
      Z = product(1.0, Z, Op::none, W(l), Op::none);
      z_log2 += renormalise_pow2(Z.values());
    }
    Matrix R = Matrix::identity(static_cast<std::size_t>(model.d));
    long r_log2 = 0;
    for (int l = L; l >= 1; --l) {
      suffix[static_cast<std::size_t>(l - 1)] = log_sq(R, r_log2);
      if (l == 1) break;
      R = product(1.0, W(l), Op::none, R, Op::none);
      r_log2 += renormalise_pow2(R.values());
    }
    for (int l = 1; l <= L; ++l) {
      const auto i = static_cast<std::size_t>(l - 1);
      out.log10_g[k][i] = (static_cast<double>(L) * log_s2 + prefix[i] + suffix[i]) / std::log(10.0);
      out.stderr_log10[k][i] = 0.0;
    }
  }
  return out;
}

GradientNorms hutchinson_gradient_norms(const ModelParams& model, const TaskTape& tape, const std::vector<int>& depths,
                                        int probes, const RandomSource& random) {
  if (probes < 1) throw Error("hutchinson_gradient_norms: probes must be >= 1");
  GradientNorms out = empty_norms(depths);
  if (!tape.finite) return out;
  const auto T = static_cast<std::size_t>(model.T), d = static_cast<std::size_t>(model.d);
  std::vector<Matrix> grad_W;
  for (std::size_t k = 0; k < depths.size(); ++k) {
    const int L = depths[k];
    if (L > static_cast<int>(tape.layers.size())) continue;
    // ln z[p][l - 1], z = ||J_l^T v_p||^2 (true scale)
    std::vector<std::vector<double>> log_z(static_cast<std::size_t>(probes), std::vector<double>(L));
    for (int p = 0; p < probes; ++p) {
      Matrix G(T, d);
      rng::fill_normal(random.key(L, rng::Tensor::grad_probe, p), G.values());
      long g_log2 = 0;  // true cotangent = G 2^g_log2 (the reverse pass is linear in G)
      for (int l = L; l >= 1; --l) {
        const LayerTape& t = tape.layers[static_cast<std::size_t>(l - 1)];
        G = layer_vjp(model, t, G, grad_W);
        double ss = 0.0;
        for (const auto& gw : grad_W) ss += sum_squares(gw);
        log_z[static_cast<std::size_t>(p)][static_cast<std::size_t>(l - 1)] =
            std::log(ss) + 2.0 * static_cast<double>(g_log2 + t.log2_scale) * ln2;
        g_log2 += renormalise_pow2(G.values());
      }
    }
    for (int l = 1; l <= L; ++l) {
      const auto i = static_cast<std::size_t>(l - 1);
      double top = -std::numeric_limits<double>::infinity();
      for (const auto& z : log_z) top = std::max(top, z[i]);
      if (!std::isfinite(top)) {
        out.log10_g[k][i] = top;  // -inf: an exactly zero gradient; NaN stays NaN
        out.stderr_log10[k][i] = std::isnan(top) ? nan : 0.0;
        continue;
      }
      double mean = 0.0;  // of z / e^top
      for (const auto& z : log_z) mean += std::exp(z[i] - top);
      mean /= probes;
      double var = 0.0;
      for (const auto& z : log_z) var += (std::exp(z[i] - top) - mean) * (std::exp(z[i] - top) - mean);
      var = probes > 1 ? var / (probes - 1) : nan;
      out.log10_g[k][i] = (top + std::log(mean)) / std::log(10.0);
      out.stderr_log10[k][i] = std::sqrt(var / probes) / mean / std::log(10.0);
    }
  }
  return out;
}

}  // namespace rcsweep::models
