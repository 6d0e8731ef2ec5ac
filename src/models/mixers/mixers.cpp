// The list of mixers: one line per mixer (its descriptor, defined in its own file here), in the
// order of the `mixer` choices (config::model_params()).
#include <string>

#include "base/error.hpp"
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {

extern const MixerKind softmax_kind, markov_kind, identity_kind, uniform_kind, relu_kind, sigmoid_kind, ssd_kind,
    lti_kind, matrix_kind, s4d_kind;

namespace {
const MixerKind* const registered[] = {
    &softmax_kind, &markov_kind, &identity_kind, &uniform_kind, &relu_kind,
    &sigmoid_kind, &ssd_kind,    &lti_kind,      &matrix_kind,  &s4d_kind,
};
}  // namespace

std::span<const MixerKind* const> mixer_kinds() { return registered; }

const MixerKind& mixer_kind(config::Mixer mixer) {
  for (const MixerKind* k : registered)
    if (k->mixer == mixer) return *k;
  throw Error("no descriptor of mixer " + std::to_string(static_cast<int>(mixer)) + " (src/models/mixers/mixers.cpp)");
}

}  // namespace rcsweep::models
