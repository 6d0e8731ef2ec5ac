// Gradient norms g_{L,l} = ||dX_L / dW_{V,l}||_F^2 (MODELS.md "Gradient norms", Mind the Gap
// Prop. 3.6 / 3.8, Fig. 5): exact by the Kronecker formula on linear stacks, and Hutchinson's
// estimator E_v ||J^T v||^2 with a hand-written reverse pass for every stack. Pure: no MPI, no I/O.
//
// W_{V,l} is the value weight of layer l as used: W_V for attention, sigma_v I for value_init
// identity, and the identity for the SSM mixers (C_V = I; the derivative is taken at W = I with
// the values V = X W mixed by M). With several heads W_{V,l} is all heads' value weights together
// (g sums over heads).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/matrix.hpp"
#include "config/params.hpp"
#include "models/layer.hpp"

namespace rcsweep::models {

/// The taped forward pass of one task: layers[l - 1] is layer l's tape (apply_layer's recording
/// mode), carried at the same exact power-of-two scale as the task runner.
struct TaskTape {
  std::vector<LayerTape> layers;
  bool finite = true;   ///< false when the forward pass produced non-finite values
  Matrix X_out;         ///< X_L as carried
  long X_out_log2 = 0;  ///< X_L = X_out 2^X_out_log2
};

/// Run one task to depth L with tapes. `X0` is the task's input (make_input, input_scale applied).
TaskTape record_task(const config::ModelParams& model, RandomSource& random, const Matrix& X0, int L);

/// The reverse pass of one layer: given G = d<v, X_L>/dX_l (the cotangent of the layer's output),
/// returns the cotangent of its input and sets grad_W[h] = d<v, X_L>/dW_{V,l,h} (as carried: times
/// 2^tape.log2_scale for the true value).
Matrix layer_vjp(const config::ModelParams& model, const LayerTape& tape, const Matrix& G, std::vector<Matrix>& grad_W);

/// Whether the exact (Kronecker) route applies: input-independent single-head mixer with one
/// matrix per layer (not s4d), lambda = 0, no norm, gate or MLP.
bool exact_gradients_apply(const config::ModelParams& model);

/// log10 g_{L,l} and its standard error for output depths L in `depths` (each 1..L_max):
/// rows[k][l - 1] for depths[k], l = 1..depths[k] (length depths[k]).
struct GradientNorms {
  std::vector<std::vector<double>> log10_g;
  std::vector<std::vector<double>> stderr_log10;  ///< standard error of log10_g (0 when exact)
};

/// The exact route (requires exact_gradients_apply).
GradientNorms exact_gradient_norms(const config::ModelParams& model, const TaskTape& tape,
                                   const std::vector<int>& depths);

/// Hutchinson's estimate with `probes` Gaussian probes per output depth, the probe of depth L and
/// index p being the stream (layer L, Tensor::grad_probe, head p) of `random`. The standard error
/// is that of the mean over probes, carried to log10 by the delta method (relative error / ln 10).
GradientNorms hutchinson_gradient_norms(const config::ModelParams& model, const TaskTape& tape,
                                        const std::vector<int>& depths, int probes, const RandomSource& random);

}  // namespace rcsweep::models
