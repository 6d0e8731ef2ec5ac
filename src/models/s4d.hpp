// The S4D mixer (lambda-skip App. A.13.1): per-channel kernels K_c and their causal convolution,
// O[j, c] = sum_{i <= j} K_c[j - i] X[i, c], and its transpose (the reverse pass of gradients.cpp).
// The convolution is direct and register-blocked (s4d.cpp), with the operation order of the plain
// loop, so results are bitwise those of the scalar code; an FFT was measured faster at long T
// but changes results by rounding and needs a cached spectrum (docs/BENCHMARKS.md, "S4D causal
// convolution").
#pragma once
#include "base/matrix.hpp"
#include "config/params.hpp"
#include "models/random_source.hpp"

namespace rcsweep::models {

/// S4D-Real kernels, one per channel c, as a T x d matrix (column c = K_c):
/// K_c[k] = sum_n C_cn B_cn a_cn^k, a_cn = exp(-Delta_c (n + 1)), Delta_c log-uniform in
/// [1e-3, 1e-1]; B, C i.i.d. with variance N^-1/2 like the other SSMs.
Matrix s4d_kernels(const config::ModelParams& model, int layer, RandomSource& random);

/// acc <- beta acc + alpha O with O[j, c] = sum_{i <= j} K[j - i, c] X[i, c] (X, acc: T x d; K: at
/// least T x d). Each O[j, c] is summed in ascending i, a multiply then an add per term, from +0:
/// bitwise the plain triple loop (detail::s4d_mix_reference) on every machine.
void s4d_mix(const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc);

/// The transpose of the convolution: out[i, c] = sum_{j >= i} K[j - i, c] G[j, c], summed in
/// ascending j (bitwise detail::s4d_mix_transpose_reference).
Matrix s4d_mix_transpose(const Matrix& K, const Matrix& G);

/// max over channels of ||M^(c)||_F = sqrt(sum_k (T - k) K_c[k]^2) (lambda-skip C_M for S4D).
double s4d_max_fro(const Matrix& K);

namespace detail {
/// The instruction sets the kernels are compiled for; s4d_mix and s4d_mix_transpose use
/// s4d_isa() (AVX2 when the CPU has it; RCSWEEP_S4D_ISA=portable forces the baseline). Both give
/// the same bits.
enum class S4dIsa { portable, avx2 };
S4dIsa s4d_isa();
bool s4d_isa_available(S4dIsa isa);

/// The register-blocked direct convolution for one instruction set (what s4d_mix calls); the
/// transpose overwrites out (T x d); the kernel build resizes K to T x d.
void s4d_mix_direct(S4dIsa isa, const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc);
void s4d_mix_transpose_direct(S4dIsa isa, const Matrix& K, const Matrix& G, Matrix& out);
void s4d_kernels_build(S4dIsa isa, const config::ModelParams& model, int layer, RandomSource& random, Matrix& K);

/// The plain scalar loops: the reference for tests and benchmarks.
void s4d_mix_reference(const Matrix& K, const Matrix& X, double alpha, double beta, Matrix& acc);
Matrix s4d_mix_transpose_reference(const Matrix& K, const Matrix& G);
Matrix s4d_kernels_reference(const config::ModelParams& model, int layer, RandomSource& random);
double s4d_max_fro_reference(const Matrix& K);
}  // namespace detail

}  // namespace rcsweep::models
