// The linear time-invariant SSM: M_ij = C A^(i-j) B per head, input-independent (models/layer.cpp).
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {
namespace {
// Per head: M X; plus B and C.
double flops(const config::ModelParams& m) {
  const double T = m.T, d = m.d, H = m.heads, N = m.state_dim;
  return H * (2.0 * T * T * d + normal_flops * 2.0 * N);
}

// Per head M X (M is the bundle's).
double seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads;
  return H * p.gemm(T, d, T);
}

MixerDraws draws(const config::ModelParams& m) {
  const std::size_t d = m.d, N = m.state_dim;
  return {.ssm = 2 * d * N};
}

MixerMemory memory(const config::ModelParams&) { return {.fixed_mixer = true}; }
}  // namespace

extern const MixerKind lti_kind{config::Mixer::lti, "lti",      false,  flops, seconds, draws, memory,
                                no_seconds,         no_seconds, no_dump};

}  // namespace rcsweep::models
