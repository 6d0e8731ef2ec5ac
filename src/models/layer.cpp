#include "models/layer.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/exp.hpp"
#include "base/parallel.hpp"
#include "base/sum.hpp"
#include "linalg/linalg.hpp"
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {
using config::Mixer;
using config::ModelParams;
using linalg::Op;
using rng::Tensor;

Matrix given_matrix(const Matrix* A, std::size_t rows, std::size_t cols, const char* what) {
  if (!A) throw Error(std::string(what) + ": no matrix attached to the model (resolve it with SweepSpec::model)");
  if (A->rows() != rows || A->cols() != cols)
    throw Error(std::string(what) + ": the matrix is " + std::to_string(A->rows()) + " x " + std::to_string(A->cols()) +
                ", the model needs " + std::to_string(rows) + " x " + std::to_string(cols));
  return *A;
}

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
    case config::InputKind::matrix:  // the [model] input_matrix (MODELS.md "Inputs")
    case config::InputKind::file:    // the dataset read by the CLI (store::read_matrix)
      return given_matrix(model.input_matrix.get(), T, d,
                          model.input == config::InputKind::matrix ? "input = \"matrix\" (input_matrix)"
                                                                   : "input = \"file\" (input_path)");
    case config::InputKind::tokens:  // the encoder's embedding of a token file's excerpt
      throw Error("input = \"tokens\" is the embedding of an encoder's token ids, not an input of the stack");
  }
  return {};
}

std::span<const std::int64_t> excerpt_ids(const ModelParams& model, int replicate) {
  const auto T = static_cast<std::size_t>(model.T);
  const auto* excerpts = model.tokens.get();
  if (excerpts == nullptr) throw Error("input = \"tokens\": no token file loaded (SweepSpec::model)");
  if (replicate < 0 || static_cast<std::size_t>(replicate) >= excerpts->size())
    throw Error("input = \"tokens\": replicate " + std::to_string(replicate) + " has no excerpt (the token file has " +
                std::to_string(excerpts->size()) + ")");
  const std::vector<std::int64_t>& ids = (*excerpts)[static_cast<std::size_t>(replicate)];
  if (ids.size() < T)
    throw Error("input = \"tokens\": excerpt " + std::to_string(replicate) + " has " + std::to_string(ids.size()) +
                " tokens, fewer than T = " + std::to_string(T));
  return {ids.data(), T};
}

std::uint32_t draw_of(const ModelParams& model, int replicate) noexcept {
  return static_cast<std::uint32_t>(model.init_draw >= 0 ? model.init_draw : replicate);
}

// Rows are computed independently: any partition into parts over the threads gives the same bits.
void softmax_rows(Matrix& S) {
  parallel::for_rows(S.rows(), S.cols(), [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i) {
      auto row = S.row(i);
      const double mx = *std::max_element(row.begin(), row.end());
      const double inv = 1.0 / exp_affine_sum(row.data(), row.size(), 1.0, mx);
      for (double& s : row) s *= inv;
    }
  });
}

namespace {
// f(x) for every entry of M, rows in parts over the threads.
template <class F>
void map_entries(Matrix& M, F f) {
  parallel::for_rows(M.rows(), M.cols(), [&](std::size_t first, std::size_t end) {
    for (double& x : std::span<double>(M.data() + first * M.cols(), (end - first) * M.cols())) x = f(x);
  });
}
}  // namespace

void attention_map(Mixer mixer, Matrix& S) {
  const MixerKind& kind = mixer_kind(mixer);
  if (!kind.map) throw Error("attention_map: not an attention mixer");
  kind.map(S);
}

void markov_rows(double sigma_A, Matrix& G) {
  const double s2 = std::log1p(sigma_A * sigma_A), s = std::sqrt(s2);
  parallel::for_rows(G.rows(), G.cols(), [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i) {
      auto row = G.row(i);
      const double inv = 1.0 / exp_affine_sum(row.data(), row.size(), s, 0.5 * s2);
      for (double& z : row) z *= inv;
    }
  });
}

namespace {
// X W of a task's signal with a layer weight: one GEMM of the task's own shapes, so its bits do not
// depend on which other tasks share the bundle. From random's cache under products.key + `name`
// when the bundle's tasks share X (the first task asking forms it), else into `own`.
ConstMatrixView task_product(int layer, int head, const ProductCache& products, const std::string& name,
                             const Matrix& X, const std::function<const Matrix&()>& weight, RandomSource& random,
                             Matrix& own) {
  const auto product = [&] { return linalg::matmul(X, weight()); };
  if (products.key.empty()) {
    own = product();
    return own;
  }
  return random.derived<Matrix>(layer, products.key + name, head, product);
}

// Names of the products in the cache (they must determine the weight: every parameter it depends on).
std::string value_product_name(const ModelParams& model) {
  char name[64];
  std::snprintf(name, sizeof name, ":XW_V:%d:%a", static_cast<int>(model.value_init), model.sigma_v);
  return name;
}
std::string qk_product_name(const ModelParams& model) { return ":XP:" + std::to_string(model.d_qk); }

// Whether the layer forms X W_V (C_V = W_V: not for SSMs or value_init identity).
bool forms_value_product(const ModelParams& model) {
  return !model.ssm() && model.value_init != config::ValueInit::identity;
}

// P = W_Q W_K^T (d x d) of a head, from standard-normal draws, shared by the bundle.
const Matrix& qk_weight(const ModelParams& model, int layer, int head, RandomSource& random) {
  const auto d = static_cast<std::size_t>(model.d), dqk = static_cast<std::size_t>(model.d_qk);
  return random.derived<Matrix>(layer, "qk_product:" + std::to_string(model.d_qk), head, [&] {
    return linalg::matmul(random.normal(layer, Tensor::query, head, d, dqk),
                          random.normal(layer, Tensor::key, head, d, dqk), Op::none, Op::trans);
  });
}

}  // namespace

Matrix attention_logits(const ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                        const ProductCache& products, Matrix storage) {
  const auto T = static_cast<std::size_t>(model.T), d = static_cast<std::size_t>(model.d);
  const auto dqk = static_cast<std::size_t>(model.d_qk);
  const double scale = model.sigma_qk * model.sigma_qk / std::sqrt(static_cast<double>(dqk));
  if (model.qk_product) {  // S = scale (X P) X^T, P = W_Q W_K^T (d x d) shared by the bundle
    Matrix own;
    const ConstMatrixView XP = task_product(
        layer, head, products, qk_product_name(model), X,
        [&]() -> const Matrix& { return qk_weight(model, layer, head, random); }, random, own);
    Matrix S = std::move(storage);
    S.resize(T, T);  // every entry written below (beta = 0)
    linalg::gemm(scale, XP, Op::none, X, Op::trans, 0.0, S);
    return S;
  }
  const Matrix Q = linalg::matmul(X, random.normal(layer, Tensor::query, head, d, dqk));
  const Matrix K = linalg::matmul(X, random.normal(layer, Tensor::key, head, d, dqk));
  Matrix S = std::move(storage);
  S.resize(T, T);  // every entry written below (beta = 0)
  linalg::gemm(scale, Q, Op::none, K, Op::trans, 0.0, S);
  return S;
}

void apply_decay_mask(double alpha, double gain, Matrix& M) {
  const std::size_t T = M.rows();
  std::vector<double> power(T);
  power[0] = gain;
  for (std::size_t k = 1; k < T; ++k) power[k] = power[k - 1] * alpha;
  parallel::for_rows(T, T, [&](std::size_t first, std::size_t end) {
    for (std::size_t j = first; j < end; ++j)
      for (std::size_t i = 0; i < T; ++i) M(j, i) = i <= j ? M(j, i) * power[j - i] : 0.0;
  });
}

linalg::LinearOperator ssd_operator(const SsdFactors& f, double alpha, bool perp) {
  const std::size_t T = f.B.rows(), N = f.B.cols();
  if (f.C.rows() != T || f.C.cols() != N) throw Error("ssd_operator: B and C must have the same shape");
  // y_j = sum_n c_jn s_n after s_n <- alpha s_n + b_jn x_j, rows in the order `forward` gives;
  // then minus sum(x) / T with perp.
  const auto scan = [alpha, perp, T, N](const Matrix& in, const Matrix& out, bool forward, const double* x, double* y) {
    std::vector<double> state(N, 0.0);
    for (std::size_t step = 0; step < T; ++step) {
      const std::size_t j = forward ? step : T - 1 - step;
      const double* b = in.row(j).data();
      const double* c = out.row(j).data();
      double acc = 0.0;
      for (std::size_t n = 0; n < N; ++n) {
        state[n] = alpha * state[n] + b[n] * x[j];
        acc += c[n] * state[n];
      }
      y[j] = acc;
    }
    if (perp) {
      const double mean = sum4({x, T}) / static_cast<double>(T);
      for (std::size_t i = 0; i < T; ++i) y[i] -= mean;
    }
  };
  return {T, T, [&f, scan](const double* x, double* y) { scan(f.B, f.C, true, x, y); },
          [&f, scan](const double* u, double* z) { scan(f.C, f.B, false, u, z); }};
}

// Variance N^-1/2, so (C B^T)_ij has unit variance for unit-norm tokens (MODELS.md 'Mixers').
Matrix ssm_weight(int layer, Tensor tensor, int head, std::size_t rows, std::size_t cols, int N, RandomSource& random) {
  Matrix W = random.normal(layer, tensor, head, rows, cols);
  const double sd = std::pow(static_cast<double>(N), -0.25);
  for (double& w : W.values()) w *= sd;
  return W;
}

Matrix mixer_matrix(const ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                    const ProductCache& products, SsdFactors* factors, Matrix storage) {
  return mixer_kind(model.mixer).matrix(model, layer, head, X, random, products, factors, std::move(storage));
}

std::size_t outliers_rank(const std::vector<double>& s, int outliers_r) {
  std::size_t r = static_cast<std::size_t>(std::max(outliers_r, 0));
  if (r == 0 && s.size() >= 2) {
    double best = -1.0;
    for (std::size_t i = 0; i + 1 < s.size(); ++i)
      if (s[i] - s[i + 1] > best) {
        best = s[i] - s[i + 1];
        r = i + 1;
      }
  }
  return std::min(r, s.size());
}

void apply_gap_fix(config::GapFix fix, Matrix& M, int outliers_r) {
  switch (fix) {
    case config::GapFix::none: return;
    case config::GapFix::perp: {
      const double c = 1.0 / static_cast<double>(M.rows());  // Mind the Gap eq. (8): A - (1/T) 1 1^T
      map_entries(M, [c](double m) { return m - c; });
      return;
    }
    case config::GapFix::outliers: {
      // Mind the Gap App. A.5: M - sum_{i <= r} s_i u_i v_i^T, r = argmax_i (s_i - s_(i+1)) or fixed.
      const auto svd = linalg::svd(M);
      const std::size_t r = outliers_rank(svd.s, outliers_r);
      if (r == 0) return;
      Matrix US(M.rows(), r), Vt(r, M.cols());
      for (std::size_t i = 0; i < M.rows(); ++i)
        for (std::size_t j = 0; j < r; ++j) US(i, j) = svd.U(i, j) * svd.s[j];
      for (std::size_t j = 0; j < r; ++j)
        for (std::size_t c = 0; c < M.cols(); ++c) Vt(j, c) = svd.Vt(j, c);
      linalg::gemm(-1.0, US, Op::none, Vt, Op::none, 1.0, M);
      return;
    }
  }
}

const Matrix& value_weight(const ModelParams& model, int layer, int head, RandomSource& random, Matrix& scratch) {
  const auto d = static_cast<std::size_t>(model.d);
  const Matrix* base = nullptr;
  if (model.value_init == config::ValueInit::orthogonal) {
    base = &random.derived<Matrix>(layer, "haar_value", head,
                                   [&] { return linalg::thin_q(random.normal(layer, Tensor::value, head, d, d)); });
  } else {
    base = &random.normal(layer, Tensor::value, head, d, d);
  }
  if (model.sigma_v == 1.0) return *base;
  scratch = *base;
  for (double& w : scratch.values()) w *= model.sigma_v;
  return scratch;
}

namespace {
// Sum of (v - shift)^2 in 4 independent partial sums, as sum4 (base/sum.hpp) does for v (a single
// accumulator is a latency chain).
double squares4(std::span<const double> v, double shift) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (std::size_t l = 0; l < 4; ++l) s[l] += (v[i + l] - shift) * (v[i + l] - shift);
  for (; i < v.size(); ++i) s[0] += (v[i] - shift) * (v[i] - shift);
  return (s[0] + s[1]) + (s[2] + s[3]);
}
}  // namespace

std::size_t apply_norm(config::Norm norm, Matrix& Y) {
  const std::size_t d = Y.cols();
  switch (norm) {
    case config::Norm::none: return 0;
    case config::Norm::rms: {  // lambda-skip eq. (4): Y = D Y~, D = diag(1 / ||Y~_i||)
      std::atomic<std::size_t> zero_rows{0};
      parallel::for_rows(Y.rows(), d, [&](std::size_t first, std::size_t end) {
        for (std::size_t i = first; i < end; ++i) {
          auto row = Y.row(i);
          double ss = 0.0;
          for (double y : row) ss += y * y;
          if (ss == 0.0) zero_rows.fetch_add(1, std::memory_order_relaxed);
          const double inv = 1.0 / std::sqrt(ss);
          for (double& y : row) y *= inv;
        }
      });
      return zero_rows.load();
    }
    case config::Norm::layernorm:  // PyTorch LayerNorm without affine, eps 1e-5, biased variance
      parallel::for_rows(Y.rows(), d, [&](std::size_t first, std::size_t end) {
        for (std::size_t i = first; i < end; ++i) {
          auto row = Y.row(i);
          const double mean = sum4(row) / static_cast<double>(d);
          const double var = squares4(row, mean) / static_cast<double>(d);
          const double inv = 1.0 / std::sqrt(var + 1e-5);
          for (double& y : row) y = (y - mean) * inv;
        }
      });
      return 0;
  }
  return 0;
}

namespace {
// The stages of a layer passed so far (layer_stages in all, each reported once to
// lent->stage_done).
class Stages {
 public:
  explicit Stages(LayerScratch* lent) : lent_(lent) {}
  void next() {
    ++passed_;
    if (lent_ && lent_->stage_done) lent_->stage_done();
  }
  void up_to(int n) {
    while (passed_ < n) next();
  }

 private:
  LayerScratch* lent_;
  int passed_ = 0;
};

// The mixer of one head after gap_fix, with its metrics.
struct MixedHead {
  Matrix M;
  metrics::MixerMetrics metrics;
  double fro = 0.0;  // ||M||_F after gap_fix (lambda-skip C_M)
};

double frobenius(const Matrix& A) {
  double ss = 0.0;
  for (double a : A.values()) ss += a * a;
  return std::sqrt(ss);
}

// Only head 0's metrics are reported (MODELS.md); every head's norm enters C_M. An input-dependent
// M is built in `storage`'s allocation; `stages` (nullable) passes a stage once M is formed and
// once its metrics (the parts in `needs`) are (head 0).
MixedHead make_mixed_head(const ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                          const ProductCache& products, metrics::MixerNeeds needs, Matrix storage = {},
                          Stages* stages = nullptr) {
  // A mixer with factors of M (SSD's B and C) gives its metrics products from them where they use
  // Lanczos: O(T N) per product instead of O(T^2).
  const MixerKind& kind = mixer_kind(model.mixer);
  const bool factored = head == 0 && kind.has_factors && kind.has_factors(model) &&
                        model.gap_fix != config::GapFix::outliers &&
                        static_cast<std::size_t>(model.T) >= metrics::mixer_lanczos_min_order;
  SsdFactors factors;
  MixedHead h{mixer_matrix(model, layer, head, X, random, products, factored ? &factors : nullptr, std::move(storage)),
              {},
              0.0};
  apply_gap_fix(model.gap_fix, h.M, model.outliers_r);
  if (head == 0) {
    if (stages) stages->next();
    std::optional<linalg::LinearOperator> op;
    if (factored) op = kind.factors_operator(model, factors);
    h.metrics = metrics::mixer_metrics(h.M, op ? &*op : nullptr, needs);
    h.fro = h.metrics.m_fro;
    if (stages) stages->next();
  } else {
    h.fro = frobenius(h.M);
  }
  return h;
}

// Cache name of everything a mixer matrix depends on besides the layer's random tensors and X.
std::string mixer_key(const ModelParams& model) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "mixer:%d:%d:%d:%a:%a:%d:%d:%a:%d", static_cast<int>(model.mixer),
                static_cast<int>(model.gap_fix), model.outliers_r, model.sigma_A, model.sigma_qk, model.d_qk,
                model.state_dim, model.alpha, static_cast<int>(model.bc_init));
  return buf;
}

// Output gate O <- O * SiLU(X W_G), W_G ~ N(0, 1/d) (lambda-skip §3.1, footnote 1).
void apply_gate(int layer, const Matrix& X, RandomSource& random, Matrix& O, LayerTape* tape) {
  const std::size_t d = X.cols();
  Matrix Z(X.rows(), d, Matrix::uninitialized);
  const Matrix& W_G = random.normal(layer, Tensor::gate, 0, d, d);
  if (tape) {
    tape->W_G = W_G;
    tape->O = O;
  }
  linalg::gemm(1.0 / std::sqrt(static_cast<double>(d)), X, Op::none, W_G, Op::none, 0.0, Z);
  parallel::for_rows(O.rows(), O.cols(), [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first * O.cols(); i < end * O.cols(); ++i) {
      const double z = Z.data()[i];
      O.data()[i] *= z / (1.0 + std::exp(-z));
    }
  });
}

// The row normalisation of `out` (the pre-norm sum taped), its zero rows counted.
void normalise(const ModelParams& model, Matrix& out, LayerTape* tape, LayerStats* stats) {
  if (tape && model.norm != config::Norm::none) tape->U = out;
  const std::size_t zero_rows = apply_norm(model.norm, out);
  if (stats) stats->zero_rows_normed += zero_rows;
}

// MLP sub-block X <- norm(lambda_mlp X + ReLU(X W_1) W_2), W_1 ~ N(0, 2/d) (d x m), W_2 ~ N(0, 1/m)
// (m x d), m = mlp_ratio d (Dong et al. §3.2).
void apply_mlp(const ModelParams& model, int layer, RandomSource& random, Matrix& X, LayerTape* tape,
               LayerStats* stats) {
  const auto d = static_cast<std::size_t>(model.d), m = static_cast<std::size_t>(model.mlp_ratio) * d;
  Matrix H(X.rows(), m, Matrix::uninitialized);
  const Matrix& W_1 = random.normal(layer, Tensor::mlp_in, 0, d, m);
  const Matrix& W_2 = random.normal(layer, Tensor::mlp_out, 0, m, d);
  linalg::gemm(std::sqrt(2.0 / static_cast<double>(d)), X, Op::none, W_1, Op::none, 0.0, H);
  if (tape) {
    tape->W_1 = W_1;
    tape->W_2 = W_2;
    tape->H = H;
  }
  map_entries(H, [](double h) { return h > 0.0 ? h : 0.0; });
  linalg::gemm(1.0 / std::sqrt(static_cast<double>(m)), H, Op::none, W_2, Op::none, model.lambda_mlp, X);
  if (tape && model.norm != config::Norm::none) tape->U_mlp = X;
  const std::size_t zero_rows = apply_norm(model.norm, X);
  if (stats) stats->zero_rows_normed += zero_rows;
}

Matrix scaled_identity(std::size_t d, double scale) {
  Matrix I = Matrix::identity(d);
  for (double& x : I.values()) x *= scale;
  return I;
}

// The mixer of head h: the bundle's when it does not depend on X, or when the bundle's tasks
// share X (the cache of `random`); else the task's own, built in the allocation lent, into `own`.
const MixedHead& head_mixer(const ModelParams& model, int layer, int h, const Matrix& X, RandomSource& random,
                            const ProductCache& products, const LayerStats* stats, LayerScratch* lent, Stages& stages,
                            MixedHead& own) {
  const metrics::MixerNeeds needs = stats ? stats->head0_needs : metrics::MixerNeeds{};
  const auto mix = [&, h] { return make_mixed_head(model, layer, h, X, random, products, needs); };
  if (!model.input_dependent_mixer()) return random.derived<MixedHead>(layer, mixer_key(model), h, mix);
  if (!products.key.empty()) return random.derived<MixedHead>(layer, products.key + mixer_key(model), h, mix);
  own = make_mixed_head(model, layer, h, X, random, products, needs, lent ? std::move(lent->mixer) : Matrix{},
                        h == 0 ? &stages : nullptr);
  return own;
}

// The value map C_V,h of head h as the mixing product takes it: alpha (skip_scale, times sigma_v
// for value_init identity), the values V it multiplies (X, or X W_V from the cache or in `own`)
// and ||C_V,h||_F including skip_scale (lambda-skip S).
struct ValueMap {
  double alpha = 0.0;
  double cv_fro = 0.0;
  ConstMatrixView values;
};
ValueMap value_map(const ModelParams& model, int layer, int h, const Matrix& X, RandomSource& random,
                   const ProductCache& products, Matrix& scratch, Matrix& own) {
  const std::size_t d = X.cols();
  ValueMap v{model.skip_scale, 0.0, X};
  if (model.ssm()) {  // C_V = I
    v.cv_fro = model.skip_scale * std::sqrt(static_cast<double>(d));
  } else if (model.value_init == config::ValueInit::identity) {  // W_V = sigma_v I
    v.alpha *= model.sigma_v;
    v.cv_fro = std::abs(v.alpha) * std::sqrt(static_cast<double>(d));
  } else {
    const Matrix& W = value_weight(model, layer, h, random, scratch);
    char params[128];
    std::snprintf(params, sizeof params, "value_fro:%d:%a", static_cast<int>(model.value_init), model.sigma_v);
    v.cv_fro = std::abs(model.skip_scale) * random.derived<double>(layer, params, h, [&] { return frobenius(W); });
    v.values = task_product(
        layer, h, products, value_product_name(model), X, [&]() -> const Matrix& { return W; }, random, own);
  }
  return v;
}

// Tape mode: what the reverse pass needs of head h (HeadTape), V the very values of the forward.
void record_head(const ModelParams& model, int layer, int h, const Matrix& X, const Matrix& M, ConstMatrixView values,
                 RandomSource& random, Matrix& scratch, HeadTape& tape) {
  const std::size_t T = X.rows(), d = X.cols();
  tape.M = M;
  if (model.gap_fix == config::GapFix::outliers && model.input_dependent_mixer())
    tape.M_raw = mixer_matrix(model, layer, h, X, random);
  if (const auto record = mixer_kind(model.mixer).record) record(model, layer, h, X, random, tape);
  if (model.ssm())
    tape.W_V = Matrix::identity(d);
  else if (model.value_init == config::ValueInit::identity)
    tape.W_V = scaled_identity(d, model.sigma_v);
  else
    tape.W_V = value_weight(model, layer, h, random, scratch);
  if (forms_value_product(model)) {  // the very V of the forward pass
    tape.V = Matrix(T, d, Matrix::uninitialized);
    for (std::size_t i = 0; i < T; ++i) std::copy_n(values.row(i).data(), d, tape.V.row(i).data());
  } else {
    tape.V = linalg::matmul(X, tape.W_V);
  }
}

// The mixer branch of every head: acc <- beta acc + sum_h M_h X C_V,h alpha_h (lambda-skip eq.
// (3)), with the heads' tapes and stats; passes the stages up to the mixing products.
void mix_heads(const ModelParams& model, int layer, RandomSource& random, const Matrix& X, double beta, Matrix& acc,
               LayerStats* stats, const ProductCache& products, LayerTape* tape, LayerScratch* lent, Stages& stages) {
  const MixerKind& kind = mixer_kind(model.mixer);
  Matrix scratch;
  for (int h = 0; h < model.heads; ++h) {
    MixedHead own;
    const MixedHead& mixed = head_mixer(model, layer, h, X, random, products, stats, lent, stages, own);
    if (h == 0) stages.up_to(2);  // M and its metrics (taken from the cache, or formed above)
    Matrix own_values;
    const ValueMap v = value_map(model, layer, h, X, random, products, scratch, own_values);
    if (tape)
      record_head(model, layer, h, X, mixed.M, v.values, random, scratch, tape->heads[static_cast<std::size_t>(h)]);
    if (stats) {
      if (h == 0) stats->head0 = mixed.metrics;
      if (h == 0 && stats->keep_head0) stats->head0_M = mixed.M;
      stats->max_m_fro = std::max(stats->max_m_fro, mixed.fro);
      stats->max_cv_fro = std::max(stats->max_cv_fro, v.cv_fro);
    }
    if (kind.mix)
      kind.mix(model, mixed.M, v.values, v.alpha, beta, acc);
    else
      linalg::gemm(v.alpha, mixed.M, Op::none, v.values, Op::none, beta, acc);
    beta = 1.0;
    if (lent && &mixed == &own) lent->mixer = std::move(own.M);  // for the next head or layer
  }
}
}  // namespace

void apply_layer(const ModelParams& model, int layer, RandomSource& random, Matrix& X, LayerStats* stats,
                 const ProductCache& products, LayerTape* tape, LayerScratch* lent) {
  const MixerKind& kind = mixer_kind(model.mixer);
  Stages stages(lent);
  if (tape) {
    tape->X = X;
    tape->heads.assign(static_cast<std::size_t>(kind.per_channel ? 1 : model.heads), HeadTape{});
  }
  // lambda-skip eq. (3): Y~ = lambda X + skip_scale * sum_h M_h X C_V,h. Without a gate the sum is
  // accumulated straight into Y = lambda X; with one it is formed apart first (O), gated, added.
  // With one head whose value product V = X W_V is formed, no gate and no tape, nothing reads X
  // once M and V are: Y is X itself (no copy of X per layer).
  const bool gated = model.gate == config::Gate::silu;
  const bool in_place = !gated && !tape && model.heads == 1 && !kind.per_channel && forms_value_product(model);
  Matrix Y = in_place ? Matrix() : X;
  Matrix O;
  if (gated) O = Matrix(X.rows(), X.cols());  // zeros: read by the mixing (times beta = 0)
  Matrix& acc = gated ? O : in_place ? X : Y;
  const double beta = gated ? 0.0 : model.lambda;
  if (kind.apply)  // one mixer per channel
    kind.apply(model, layer, X, beta, acc, random, tape, stats);
  else
    mix_heads(model, layer, random, X, beta, acc, stats, products, tape, lent, stages);
  stages.up_to(layer_stages);  // the mixing products
  if (gated) {
    apply_gate(layer, X, random, O, tape);
    for (std::size_t i = 0; i < Y.size(); ++i) Y.data()[i] = model.lambda * Y.data()[i] + O.data()[i];
  }
  Matrix& out = in_place ? X : Y;
  normalise(model, out, tape, stats);
  if (model.mlp == config::Mlp::relu) apply_mlp(model, layer, random, out, tape, stats);
  if (!in_place) X = std::move(Y);
}

}  // namespace rcsweep::models
