// The mixer descriptors (models/mixers/): one per `mixer` choice, and what the planner asks of them.
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "config/params.hpp"
#include "models/mixers/mixer_kind.hpp"
#include "model_fixtures.hpp"

namespace rcsweep {
namespace {

const config::ParamInfo& mixer_param() {
  for (const auto& p : config::model_params())
    if (p.name == "mixer") return p;
  throw Error("no mixer parameter");
}

TEST(MixerKinds, OnePerMixerChoiceInTheRegistrysOrder) {
  const auto& choices = mixer_param().choices;
  const auto kinds = models::mixer_kinds();
  ASSERT_EQ(kinds.size(), choices.size());
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const auto mixer = static_cast<config::Mixer>(i);  // decoding is by position
    EXPECT_EQ(kinds[i]->name, choices[i]) << i;
    EXPECT_EQ(kinds[i]->mixer, mixer) << choices[i];
    EXPECT_EQ(&models::mixer_kind(mixer), kinds[i]) << choices[i];
    EXPECT_NE(kinds[i]->layer_flops, nullptr) << choices[i];
    EXPECT_NE(kinds[i]->task_seconds, nullptr) << choices[i];
    EXPECT_NE(kinds[i]->draws, nullptr) << choices[i];
    EXPECT_NE(kinds[i]->memory, nullptr) << choices[i];
    EXPECT_NE(kinds[i]->shared_seconds, nullptr) << choices[i];
    EXPECT_NE(kinds[i]->input_mixer_seconds, nullptr) << choices[i];
    EXPECT_NE(kinds[i]->dump, nullptr) << choices[i];
    EXPECT_NE(kinds[i]->matrix, nullptr) << choices[i];
    EXPECT_EQ(config::mixer_choices()[i].name, kinds[i]->name) << i;
  }
  EXPECT_THROW(models::mixer_kind(static_cast<config::Mixer>(choices.size())), Error);
}

// Prices of one second per product and per entry: a mixer's seconds count its products and passes.
struct UnitPrices final : models::LayerPrices {
  double gemm(double m, double n, double k) const override { return 2.0 * m * n * k; }
  double mixer_metrics(double) const override { return 1000.0; }
  double exp_rate() const override { return 1.0; }
  double pass_rate() const override { return 1.0; }
  double conv_rate() const override { return 1.0; }
};

TEST(MixerKinds, CostsArePositiveAndGrowWithTheSequence) {
  const UnitPrices prices;
  for (const models::MixerKind* k : models::mixer_kinds()) {
    auto small = test::small_model(k->mixer, 8, 6), long_one = test::small_model(k->mixer, 32, 6);
    small.state_dim = long_one.state_dim = 4;
    EXPECT_GT(k->layer_flops(small), 0.0) << k->name;
    EXPECT_GT(k->task_seconds(small, prices), 0.0) << k->name;
    EXPECT_GT(k->layer_flops(long_one), k->layer_flops(small)) << k->name;
    EXPECT_GT(k->task_seconds(long_one, prices), k->task_seconds(small, prices)) << k->name;
  }
}

// Where each task has its own mixer (attention, ssd), its metrics are the task's; the others' are
// the bundle's (plan/cost_model.cpp), so the mixer metrics' price does not enter their seconds.
TEST(MixerKinds, InputDependentMixersPayTheirOwnMixerMetrics) {
  const UnitPrices prices;
  struct NoMetrics final : models::LayerPrices {
    double gemm(double m, double n, double k) const override { return 2.0 * m * n * k; }
    double mixer_metrics(double) const override { return 0.0; }
    double exp_rate() const override { return 1.0; }
    double pass_rate() const override { return 1.0; }
    double conv_rate() const override { return 1.0; }
  } none;
  for (const models::MixerKind* k : models::mixer_kinds()) {
    auto m = test::small_model(k->mixer);
    m.state_dim = 4;
    EXPECT_EQ(k->task_seconds(m, prices) - k->task_seconds(m, none), m.input_dependent_mixer() ? 1000.0 : 0.0)
        << k->name;
  }
}

// What a descriptor says it draws and holds agrees with the registry's classes of mixers
// (config::ModelParams): SSMs draw B and C, only Markov draws a T x T Gaussian, the
// input-independent mixers with a single M cache it, and only S4D has one mixer per channel.
TEST(MixerKinds, DrawsAndMemoryAgreeWithTheMixersClass) {
  for (const models::MixerKind* k : models::mixer_kinds()) {
    auto m = test::small_model(k->mixer, 8, 6);
    m.state_dim = 4;
    const models::MixerDraws draws = k->draws(m);
    const models::MixerMemory memory = k->memory(m);
    EXPECT_EQ(draws.ssm > 0, m.ssm()) << k->name;
    EXPECT_EQ(draws.square, k->mixer == config::Mixer::markov ? 64u : 0u) << k->name;
    EXPECT_EQ(k->per_channel, k->mixer == config::Mixer::s4d) << k->name;
    EXPECT_EQ(memory.fixed_mixer, !m.input_dependent_mixer() && !k->per_channel) << k->name;
    EXPECT_EQ(memory.kernels > 0, k->per_channel) << k->name;
    EXPECT_EQ(k->input_mixer_seconds(m, UnitPrices()) > 0.0, m.input_dependent_mixer()) << k->name;
    // the dump: W_Q, W_K per attention head; W_B, W_C per SSD head when drawn; S4D's kernels
    const models::MixerDump dump = k->dump(m);
    EXPECT_EQ(dump.per_head.size(), m.attention() || k->mixer == config::Mixer::ssd ? 2u : 0u) << k->name;
    EXPECT_EQ(dump.per_layer.size(), k->per_channel ? 1u : 0u) << k->name;
  }
}

// The layer's and the reverse pass's hooks agree with the mixer's class: an attention map and a
// reverse pass for the attention mixers, a reverse pass exactly for the input-dependent ones, a
// mixing step and its transpose exactly for the per-channel ones (the same as the configuration's
// row says), factors with their operator.
TEST(MixerKinds, HooksAgreeWithTheMixersClass) {
  for (const models::MixerKind* k : models::mixer_kinds()) {
    const auto m = test::small_model(k->mixer, 8, 6);
    EXPECT_EQ(k->map != nullptr, m.attention()) << k->name;
    EXPECT_EQ(k->vjp != nullptr, m.input_dependent_mixer()) << k->name;
    EXPECT_EQ(k->per_channel, config::mixer_choice(k->mixer).per_channel) << k->name;
    EXPECT_EQ(k->apply != nullptr, k->per_channel) << k->name;
    EXPECT_EQ(k->apply_transpose != nullptr, k->per_channel) << k->name;
    EXPECT_EQ(k->has_factors != nullptr, k->factors_operator != nullptr) << k->name;
    if (k->per_channel) {
      EXPECT_EQ(k->mix, nullptr) << k->name;
      EXPECT_EQ(k->record, nullptr) << k->name;
    }
  }
}

}  // namespace
}  // namespace rcsweep
