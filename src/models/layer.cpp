#include "models/layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "linalg/linalg.hpp"

namespace rcsweep::models {
using config::Mixer;
using config::ModelParams;
using linalg::Op;
using rng::Tensor;

Matrix make_input(const ModelParams& model, RandomSource& random) {
  const auto T = static_cast<std::size_t>(model.T), d = static_cast<std::size_t>(model.d);
  switch (model.input) {
    case config::InputKind::orthonormal: {
      // Mind the Gap §2.2: X_0 X_0^T = I_T. Q (d x T) from a thin QR; X_0 = Q^T.
      const Matrix Q = linalg::thin_q(random.normal(0, Tensor::input, 0, d, T));
      Matrix X(T, d);
      for (std::size_t i = 0; i < d; ++i)
        for (std::size_t j = 0; j < T; ++j) X(j, i) = Q(i, j);
      return X;
    }
    case config::InputKind::sphere: {
      Matrix X = random.normal(0, Tensor::input, 0, T, d);
      apply_norm(config::Norm::rms, X);
      return X;
    }
    case config::InputKind::gaussian: {
      Matrix X = random.normal(0, Tensor::input, 0, T, d);
      const double s = 1.0 / std::sqrt(static_cast<double>(d));
      for (double& x : X.values()) x *= s;
      return X;
    }
  }
  return {};
}

void softmax_rows(Matrix& S) {
  for (std::size_t i = 0; i < S.rows(); ++i) {
    auto row = S.row(i);
    const double mx = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (double& s : row) {
      s = std::exp(s - mx);
      sum += s;
    }
    const double inv = 1.0 / sum;
    for (double& s : row) s *= inv;
  }
}

Matrix mixer_matrix(const ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random) {
  const auto T = static_cast<std::size_t>(model.T), d = static_cast<std::size_t>(model.d);
  switch (model.mixer) {
    case Mixer::softmax: {
      // Mind the Gap eq. (1): softmax(X W_Q W_K^T X^T / sqrt(d_qk)), W_Q, W_K ~ N(0, sigma_qk^2).
      const auto dqk = static_cast<std::size_t>(model.d_qk);
      const Matrix Q = linalg::matmul(X, random.normal(layer, Tensor::query, head, d, dqk));
      const Matrix K = linalg::matmul(X, random.normal(layer, Tensor::key, head, d, dqk));
      Matrix S(T, T);
      const double scale = model.sigma_qk * model.sigma_qk / std::sqrt(static_cast<double>(dqk));
      linalg::gemm(scale, Q, Op::none, K, Op::trans, 0.0, S);
      softmax_rows(S);
      return S;
    }
    case Mixer::markov: {
      // Mind the Gap Def. 3.1 / App. A.5: Z = exp(G), G ~ N(-s^2/2, s^2), s^2 = ln(1 + sigma_A^2),
      // so E Z = 1 and Var Z = sigma_A^2; rows normalised.
      const double s2 = std::log1p(model.sigma_A * model.sigma_A), s = std::sqrt(s2);
      Matrix M = random.normal(layer, Tensor::markov, head, T, T);
      for (std::size_t i = 0; i < T; ++i) {
        auto row = M.row(i);
        double sum = 0.0;
        for (double& z : row) {
          z = std::exp(s * z - 0.5 * s2);
          sum += z;
        }
        const double inv = 1.0 / sum;
        for (double& z : row) z *= inv;
      }
      return M;
    }
    case Mixer::identity:
      return Matrix::identity(T);
    case Mixer::uniform:
      return Matrix(T, T, 1.0 / static_cast<double>(T));
  }
  return {};
}

void apply_gap_fix(config::GapFix fix, Matrix& M) {
  if (fix == config::GapFix::none) return;
  const double c = 1.0 / static_cast<double>(M.rows());  // Mind the Gap eq. (8): A - (1/T) 1 1^T
  for (double& m : M.values()) m -= c;
}

const Matrix& value_weight(const ModelParams& model, int layer, int head, RandomSource& random, Matrix& scratch) {
  const auto d = static_cast<std::size_t>(model.d);
  const Matrix* base = nullptr;
  if (model.value_init == config::ValueInit::orthogonal) {
    base = &random.derived<Matrix>(layer, "haar_value", head, [&] {
      return linalg::thin_q(random.normal(layer, Tensor::value, head, d, d));
    });
  } else {
    base = &random.normal(layer, Tensor::value, head, d, d);
  }
  if (model.sigma_v == 1.0) return *base;
  scratch = *base;
  for (double& w : scratch.values()) w *= model.sigma_v;
  return scratch;
}

void apply_norm(config::Norm norm, Matrix& Y) {
  const std::size_t d = Y.cols();
  switch (norm) {
    case config::Norm::none:
      return;
    case config::Norm::rms:  // lambda-skip eq. (4): Y = D Y~, D = diag(1 / ||Y~_i||)
      for (std::size_t i = 0; i < Y.rows(); ++i) {
        auto row = Y.row(i);
        double ss = 0.0;
        for (double y : row) ss += y * y;
        const double inv = 1.0 / std::sqrt(ss);
        for (double& y : row) y *= inv;
      }
      return;
    case config::Norm::layernorm:  // PyTorch LayerNorm without affine, eps 1e-5, biased variance
      for (std::size_t i = 0; i < Y.rows(); ++i) {
        auto row = Y.row(i);
        double mean = 0.0;
        for (double y : row) mean += y;
        mean /= static_cast<double>(d);
        double var = 0.0;
        for (double y : row) var += (y - mean) * (y - mean);
        var /= static_cast<double>(d);
        const double inv = 1.0 / std::sqrt(var + 1e-5);
        for (double& y : row) y = (y - mean) * inv;
      }
      return;
  }
}

namespace {
// The mixer of one head after gap_fix, with its metrics.
struct MixedHead {
  Matrix M;
  metrics::MixerMetrics metrics;
};

MixedHead make_mixed_head(const ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                          bool want_metrics) {
  MixedHead h{mixer_matrix(model, layer, head, X, random), {}};
  apply_gap_fix(model.gap_fix, h.M);
  if (want_metrics) h.metrics = metrics::mixer_metrics(h.M);
  return h;
}

// An input-independent mixer (markov, identity, uniform) is the same matrix for every task of a
// bundle with the same mixer parameters: build it and its metrics once per layer.
std::string shared_mixer_name(const ModelParams& model) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "mixer:%d:%d:%a", static_cast<int>(model.mixer), static_cast<int>(model.gap_fix),
                model.mixer == Mixer::markov ? model.sigma_A : 0.0);
  return buf;
}
}  // namespace

void apply_layer(const ModelParams& model, int layer, RandomSource& random, Matrix& X,
                 metrics::MixerMetrics* mixer_metrics, const std::string& shared_x) {
  const std::size_t T = X.rows(), d = X.cols();
  const bool shared = !shared_x.empty();
  char params[128];
  // lambda-skip eq. (3): Y~ = lambda X + skip_scale * sum_h M_h X W_V,h
  Matrix Y = X;
  double beta = model.lambda;  // the first accumulation into Y scales the skip term
  Matrix scratch;
  for (int h = 0; h < model.heads; ++h) {
    const bool want_metrics = h == 0 && mixer_metrics;
    const auto mix = [&, h] { return make_mixed_head(model, layer, h, X, random, h == 0); };
    MixedHead own;
    const MixedHead* mixed = &own;
    if (!model.input_dependent_mixer()) {
      mixed = &random.derived<MixedHead>(layer, shared_mixer_name(model), h, mix);
    } else if (shared) {  // the same X for every task of the bundle: the same softmax M
      std::snprintf(params, sizeof params, ":softmax:%d:%a:%d", model.d_qk, model.sigma_qk,
                    static_cast<int>(model.gap_fix));
      mixed = &random.derived<MixedHead>(layer, shared_x + params, h, mix);
    } else {
      own = make_mixed_head(model, layer, h, X, random, want_metrics);
    }
    if (want_metrics) *mixer_metrics = mixed->metrics;

    double alpha = model.skip_scale;
    const Matrix* values = &X;  // value_init identity: W_V = sigma_v I
    Matrix own_values;
    if (model.value_init == config::ValueInit::identity) {
      alpha *= model.sigma_v;
    } else {
      const auto product = [&] {
        Matrix V(T, d);
        linalg::gemm(1.0, X, Op::none, value_weight(model, layer, h, random, scratch), Op::none, 0.0, V);
        return V;
      };
      if (shared) {
        std::snprintf(params, sizeof params, ":XW_V:%d:%a", static_cast<int>(model.value_init), model.sigma_v);
        values = &random.derived<Matrix>(layer, shared_x + params, h, product);
      } else {
        own_values = product();
        values = &own_values;
      }
    }
    if (model.mixer == Mixer::identity && model.gap_fix == config::GapFix::none) {
      // M = I: Y = beta Y + alpha V without a T x T product
      const double* v = values->data();
      double* y = Y.data();
      for (std::size_t i = 0; i < Y.size(); ++i) y[i] = beta * y[i] + alpha * v[i];
    } else {
      linalg::gemm(alpha, mixed->M, Op::none, *values, Op::none, beta, Y);
    }
    beta = 1.0;
  }
  apply_norm(model.norm, Y);
  X = std::move(Y);
}

}  // namespace rcsweep::models
