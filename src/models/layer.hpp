// One layer of MODELS.md "One layer", and its parts, as pure functions of the signal and the
// bundle's random tensors.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/matrix.hpp"
#include "config/params.hpp"
#include "linalg/lanczos.hpp"
#include "metrics/metrics.hpp"
#include "models/random_source.hpp"

namespace rcsweep::models {

/// Input X_0 (T x d) of MODELS.md "Inputs": orthonormal rows (thin QR of a d x T Gaussian with
/// the sign fix, transposed), unit-norm Gaussian rows ("sphere"), or N(0, 1/d) entries.
Matrix make_input(const config::ModelParams& model, RandomSource& random);

/// The first T token ids of excerpt `replicate` of the model's token file (input "tokens": a model
/// block's X_0 embeds them; replicate r is excerpt r). Throws Error when no file is loaded, the
/// excerpt is missing or shorter than T (the sweep's checks refuse that before any work).
std::span<const std::int64_t> excerpt_ids(const config::ModelParams& model, int replicate);

/// The draw of a model block's random initialisation a task uses: init_draw, or the replicate when
/// it is -1.
std::uint32_t draw_of(const config::ModelParams& model, int replicate) noexcept;

/// Where a task's layer finds the products X W of its signal with the layer's weights (X W_V, and
/// X W_Q W_K^T for attention with qk_product) and its input-dependent mixers: an empty key, formed
/// for this call only; else every task with this key holds X bitwise (the bundle's input at layer
/// 1), and they are cached in `random` under `key` + the product's name by the first task asking.
/// Either way a product is one GEMM of the task's own shapes, so a task's bits never depend on
/// which other tasks share its bundle, whatever the BLAS kernel.
struct ProductCache {
  std::string key;
};

/// The factors of the SSD mixer M = L(alpha) ⊙ (C B^T): B = X W_B, C = X W_C (T x N).
struct SsdFactors {
  Matrix B, C;
};

/// The T x T mixer matrix of head `head` at layer `layer` (1-based) for signal X, before gap_fix.
/// For ssd with Gaussian B, C, `factors` (when given) receives B and C. An input-dependent mixer
/// (attention, ssd) is built in the allocation of `storage` (any contents; reused when large
/// enough), the others ignore it.
Matrix mixer_matrix(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                    const ProductCache& products = {}, SsdFactors* factors = nullptr, Matrix storage = {});

/// A matrix of the sweep file (or its input file) `what`, checked against the model's shape
/// (rows x cols): the config checks it, so a mismatch, or no matrix, is a wiring error (e.g. a
/// model not resolved by SweepSpec::model): throws rcsweep::Error.
Matrix given_matrix(const Matrix* A, std::size_t rows, std::size_t cols, const char* what);

/// The attention logits S = X W_Q W_K^T X^T sigma_qk^2 / sqrt(d_qk) of head `head` at `layer`
/// (Mind the Gap eq. (1)), from standard-normal W_Q, W_K (the sigma_qk^2 is applied once to the
/// product; with qk_product as (X P) X^T, P = W_Q W_K^T shared by the bundle, X P through
/// `products`), T x T in the allocation of `storage`.
Matrix attention_logits(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                        const ProductCache& products, Matrix storage);

/// The SSD mixer M = L(alpha) ⊙ (C B^T), minus (1/T) 1 1^T with `perp`, as an operator whose
/// products are scans (lambda-skip §4.2.1, the recurrent form of the selective SSM):
/// (M v)_j = sum_n C_jn s_jn with s_jn = alpha s_(j-1)n + B_jn v_j, and (M^T u)_i = sum_n B_in r_in
/// with r_in = alpha r_(i+1)n + C_in u_i: O(T N) per product instead of O(T^2). `f` must outlive
/// the operator.
linalg::LinearOperator ssd_operator(const SsdFactors& f, double alpha, bool perp);

/// Row-wise softmax in place, max-subtracted (rows sum to 1).
void softmax_rows(Matrix& S);

/// The entrywise part of an attention mixer, in place on the T x T logits S: softmax rows,
/// ReLU(S)/T or sigmoid(S - ln T) (Mind the Gap eq. (1), Fig. 1(c), 1(d)).
void attention_map(config::Mixer mixer, Matrix& S);

/// An i.i.d. Markov matrix from standard normals G, in place (Mind the Gap Def. 3.1 / App. A.5):
/// Z = exp(s G - s^2/2), s^2 = ln(1 + sigma_A^2), so E Z = 1 and Var Z = sigma_A^2; rows normalised.
void markov_rows(double sigma_A, Matrix& G);

/// The number r of leading singular triplets gap_fix outliers removes, given the singular values s
/// (descending): outliers_r when positive, else the argmax of s_i - s_(i+1); at most s.size().
std::size_t outliers_rank(const std::vector<double>& s, int outliers_r);

/// M <- L(alpha) * M entrywise (times `gain`): L(alpha)_ji = gain alpha^(j-i) for j >= i, else 0
/// (lambda-skip App. A.3 eq. (12)).
void apply_decay_mask(double alpha, double gain, Matrix& M);

/// Apply gap_fix in place: perp subtracts 1/T from every entry (Mind the Gap eq. (8), (16));
/// outliers removes the leading r singular triplets, r = outliers_r or (0) the argmax gap.
void apply_gap_fix(config::GapFix fix, Matrix& M, int outliers_r = 0);

/// The value weight W_V of a head (d x d), including sigma_v: gaussian N(0, sigma_v^2),
/// orthogonal (Haar, from the thin QR of a Gaussian) x sigma_v. Not used for value_init identity.
const Matrix& value_weight(const config::ModelParams& model, int layer, int head, RandomSource& random,
                           Matrix& scratch);

/// Row normalisation in place: rms divides each row by its Euclidean norm (lambda-skip eq. (4));
/// layernorm subtracts the row mean and divides by sqrt(var + 1e-5) (biased variance, no affine).
/// Returns the rows the rms norm found exactly zero (they become NaN, 0/0).
std::size_t apply_norm(config::Norm norm, Matrix& Y);

/// What a layer reports besides its output.
struct LayerStats {
  metrics::MixerMetrics head0;      ///< metrics of head 0's M after gap_fix
  double max_m_fro = 0.0;           ///< max over heads of ||M_h||_F (lambda-skip C_M)
  double max_cv_fro = 0.0;          ///< max over heads of ||skip_scale C_V,h||_F (lambda-skip S)
  bool keep_head0 = false;          ///< set before the call: copy head 0's M (after gap_fix) into head0_M
  metrics::MixerNeeds head0_needs;  ///< set before the call: the parts of head0 to compute
  /// Rows of X that were exactly zero when the rms norm scaled them (0/0: NaN): the signal of those
  /// tokens vanished, as opposed to an overflow.
  std::size_t zero_rows_normed = 0;
  Matrix head0_M;  ///< T x T, only when keep_head0
};

/// Everything the reverse pass of one layer needs (models/gradients): the layer's input and every
/// weight as used, and the intermediate values that the backward formulas read. Filled by
/// apply_layer when it is given a tape (a second, recording mode of the same code, so the taped
/// forward is bitwise the untaped one). Weights are the standard-normal draws unless noted.
struct HeadTape {
  Matrix M;         ///< T x T mixer after gap_fix (empty for s4d)
  Matrix M_raw;     ///< T x T mixer before gap_fix; only for gap_fix outliers on input-dependent mixers
  Matrix W_V;       ///< d x d value weight as used: W_V, sigma_v I (value_init identity) or I (SSMs)
  Matrix W_Q, W_K;  ///< d x d_qk (attention mixers)
  Matrix W_B, W_C;  ///< d x N, scaled by N^-1/4 (ssd with bc_init gaussian)
  /// Products of the input the reverse pass reuses for every probe: V = X W_V; Q = X W_Q and
  /// K = X W_K (attention); B = X W_B and C = X W_C (ssd, bc_init gaussian).
  Matrix V, Q, K, B, C;
};
struct LayerTape {
  Matrix X;                     ///< the layer's input as carried (true input = X 2^log2_scale)
  long log2_scale = 0;          ///< set by the caller
  std::vector<HeadTape> heads;  ///< one per head (one for s4d)
  Matrix s4d_K;                 ///< T x d S4D kernels (s4d)
  Matrix W_G, O;                ///< gate weight and the ungated mixer branch (gate = silu)
  Matrix U;                     ///< the pre-norm sum lambda X + branch (norm != none)
  Matrix W_1, W_2, H, U_mlp;    ///< MLP weights, its pre-ReLU hidden, its pre-norm sum (mlp = relu)
};

/// The stages of a layer after which apply_layer calls LayerScratch::stage_done, in order: head
/// 0's mixer formed (logits or products, entrywise map, gap_fix), head 0's mixer metrics, the
/// mixing products of every head. The rest of the layer (gate, norm, MLP) is cheap beside them.
inline constexpr int layer_stages = 3;

/// What the caller of apply_layer lends it from one layer to the next (models::run_bundle).
struct LayerScratch {
  /// A T x T allocation in which the layer builds its own input-dependent mixer, given back after
  /// the layer (a mixer shared through `random`'s cache does not use it). Reused from layer to
  /// layer, its pages are touched once per task: a fresh T x T block, above glibc's mmap
  /// threshold, was mapped, faulted in and unmapped at every layer.
  Matrix mixer;
  /// Called after each of the layer_stages stages, on the thread that runs the layer; may throw
  /// (the layer is then abandoned).
  std::function<void()> stage_done;
};

/// One layer (MODELS.md "One layer"): X <- norm(lambda X + skip_scale sum_h gap_fix(M_h) X C_V,h),
/// with C_V = W_V for attention and I for SSM mixers, the optional SiLU gate on the mixer branch
/// and the optional MLP sub-block. `stats` (nullable) receives the mixer metrics and the norms of
/// Theorem 4.1 (max-accumulated: initialise once per task). `products` says where the products of
/// X with the layer's weights are cached (see ProductCache). The results are bitwise the same
/// whether the products were shared or formed alone, and whatever `lent` (nullable) lends.
void apply_layer(const config::ModelParams& model, int layer, RandomSource& random, Matrix& X, LayerStats* stats,
                 const ProductCache& products = {}, LayerTape* tape = nullptr, LayerScratch* lent = nullptr);

/// The W_B (tensor ssm_b) or W_C (ssm_c) of the selective SSM, or b, c of the LTI gain: i.i.d.
/// N(0, N^-1/2).
Matrix ssm_weight(int layer, rng::Tensor tensor, int head, std::size_t rows, std::size_t cols, int N,
                  RandomSource& random);

}  // namespace rcsweep::models
