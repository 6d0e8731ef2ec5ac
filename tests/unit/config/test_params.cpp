// The parameter registry, value text and model resolution.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>

#include "base/error.hpp"
#include "config/params.hpp"

namespace rcsweep::config {
namespace {

TEST(Params, RegistryNamesAreUniqueAndIndexed) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < model_params().size(); ++i) {
    const auto& info = model_params()[i];
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(param_index(info.name), i);
    EXPECT_FALSE(info.doc.empty()) << info.name;
    if (info.kind == ParamKind::choice) {
      ASSERT_FALSE(info.choices.empty()) << info.name;
      EXPECT_EQ(std::get<std::string>(info.default_value), info.choices.front()) << info.name;
    }
  }
  EXPECT_FALSE(param_index("nope"));
}

TEST(Params, ValueText) {
  EXPECT_EQ(to_toml(ParamValue{std::int64_t{3}}), "3");
  EXPECT_EQ(to_toml(ParamValue{1.0}), "1.0");
  EXPECT_EQ(to_toml(ParamValue{0.5}), "0.5");
  EXPECT_EQ(to_toml(ParamValue{0.1}), "0.1");
  EXPECT_EQ(to_toml(ParamValue{1e-300}), "1e-300");
  EXPECT_EQ(to_toml(ParamValue{std::string("softmax")}), "\"softmax\"");
  EXPECT_EQ(to_text(ParamValue{std::string("softmax")}), "softmax");
  const double third = 1.0 / 3.0;
  EXPECT_EQ(std::strtod(to_text(ParamValue{third}).c_str(), nullptr), third);
}

std::vector<ParamValue> defaults_with(std::int64_t T, std::int64_t d) {
  std::vector<ParamValue> v;
  for (const auto& info : model_params()) v.push_back(info.default_value);
  v[*param_index("T")] = T;
  v[*param_index("d")] = d;
  v[*param_index("depth")] = std::int64_t{3};
  return v;
}

TEST(Params, ResolveDecodesAndFoldsScales) {
  auto v = defaults_with(4, 16);
  v[*param_index("mixer")] = std::string("markov");
  v[*param_index("value_scale")] = std::string("inv_sqrt_d");
  v[*param_index("sigma_v")] = 2.0;
  v[*param_index("skip_scale")] = std::string("inv_sqrt_d");
  const ModelParams m = resolve(v);
  EXPECT_EQ(m.mixer, Mixer::markov);
  EXPECT_EQ(m.T, 4);
  EXPECT_EQ(m.d_qk, 16);  // 0 means d
  EXPECT_DOUBLE_EQ(m.sigma_v, 0.5);
  EXPECT_DOUBLE_EQ(m.skip_scale, 0.25);
  EXPECT_TRUE(m.homogeneous());
  v.pop_back();
  EXPECT_THROW(resolve(v), Error);
}

// The model blocks' parameters, appended at the end of the registry (the /points columns of older
// stores keep their order), decoded by position like the others.
TEST(Params, ResolveDecodesTheEncoderParameters) {
  const auto& reg = model_params();
  const std::vector<std::string_view> tail = {"block", "init", "init_draw", "measure", "mask", "gated_norm"};
  ASSERT_GE(reg.size(), tail.size());
  for (std::size_t k = 0; k < tail.size(); ++k) EXPECT_EQ(reg[reg.size() - tail.size() + k].name, tail[k]);
  EXPECT_EQ(reg[*param_index("init_draw")].min_int, -1);
  const ModelParams defaults = resolve(defaults_with(4, 16));
  EXPECT_EQ(defaults.block, Block::stack);
  EXPECT_EQ(defaults.init, Init::random);
  EXPECT_EQ(defaults.init_draw, -1);
  EXPECT_EQ(defaults.measure, Measure::block);
  EXPECT_EQ(defaults.mask, Mask::none);
  EXPECT_TRUE(defaults.lambda_mlp_is_lambda);  // lambda_mlp = "lambda", the default
  EXPECT_FALSE(defaults.lambda_layers);        // a [model] key, attached by SweepSpec::model()
  auto v = defaults_with(4, 16);
  v[*param_index("block")] = std::string("encoder");
  v[*param_index("init")] = std::string("checkpoint");
  v[*param_index("init_draw")] = std::int64_t{7};
  v[*param_index("measure")] = std::string("attention");
  v[*param_index("input")] = std::string("tokens");
  v[*param_index("mlp")] = std::string("model");
  v[*param_index("mask")] = std::string("causal");
  v[*param_index("lambda_mlp")] = 0.5;
  const ModelParams m = resolve(v);
  EXPECT_EQ(m.mask, Mask::causal);
  EXPECT_FALSE(m.lambda_mlp_is_lambda);
  EXPECT_EQ(m.lambda_mlp, 0.5);
  EXPECT_EQ(m.block, Block::encoder);
  EXPECT_EQ(m.init, Init::checkpoint);
  EXPECT_EQ(m.init_draw, 7);
  EXPECT_EQ(m.measure, Measure::attention);
  EXPECT_EQ(m.input, InputKind::tokens);
  EXPECT_EQ(m.mlp, Mlp::model);
  EXPECT_FALSE(m.homogeneous());   // biases and LayerNorm's eps: the scale of X matters
  EXPECT_FALSE(m.linear_stack());  // not a stack
  v[*param_index("block")] = std::string("transformer");
  EXPECT_THROW(resolve(v), Error);
}

TEST(Params, CheckModelOrthonormalNeedsTAtMostD) {
  EXPECT_TRUE(check_model(resolve(defaults_with(8, 8))).empty());
  const auto problems = check_model(resolve(defaults_with(9, 8)));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].first, "input");
  auto v = defaults_with(9, 8);
  v[*param_index("input")] = std::string("sphere");
  EXPECT_TRUE(check_model(resolve(v)).empty());
}

// The mixer table: one row per enumerator, in order, named as the "mixer" choices; the classes
// the predicates read, as MODELS.md "One layer" states them.
TEST(Params, MixerChoicesAreTheRegistrysChoicesWithTheirClasses) {
  const auto& choices = model_params()[*param_index("mixer")].choices;
  ASSERT_EQ(mixer_choices().size(), choices.size());
  for (std::size_t i = 0; i < choices.size(); ++i) {
    EXPECT_EQ(mixer_choices()[i].name, choices[i]) << i;
    EXPECT_EQ(static_cast<std::size_t>(mixer_choices()[i].mixer), i) << choices[i];
    EXPECT_EQ(&mixer_choice(static_cast<Mixer>(i)), &mixer_choices()[i]) << choices[i];
  }
  ModelParams m;
  const auto classes = [&](Mixer mixer) {
    m.mixer = mixer;
    return std::string(m.attention() ? "A" : "-") + (m.input_dependent_mixer() ? "X" : "-") + (m.ssm() ? "S" : "-") +
           (m.linear_stack() ? "L" : "-") + (m.homogeneous() ? "H" : "-");
  };
  EXPECT_EQ(classes(Mixer::softmax), "AX---");
  EXPECT_EQ(classes(Mixer::relu), "AX---");
  EXPECT_EQ(classes(Mixer::sigmoid), "AX---");
  EXPECT_EQ(classes(Mixer::ssd), "-XS--");
  EXPECT_EQ(classes(Mixer::markov), "---LH");
  EXPECT_EQ(classes(Mixer::identity), "---LH");
  EXPECT_EQ(classes(Mixer::uniform), "---LH");
  EXPECT_EQ(classes(Mixer::matrix), "---LH");
  EXPECT_EQ(classes(Mixer::lti), "--SLH");
  EXPECT_EQ(classes(Mixer::s4d), "--S-H");  // one mixer per channel: not a linear stack
  EXPECT_TRUE(mixer_choice(static_cast<Mixer>(choices.size())).name.empty());
}

// A mixer's own checks (its row's `check`) come after the input's, with their key and message.
TEST(Params, CheckModelRunsTheMixersChecks) {
  auto v = defaults_with(9, 8);
  v[*param_index("mixer")] = std::string("s4d");
  v[*param_index("gap_fix")] = std::string("perp");
  auto problems = check_model(resolve(v));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].first, "input");
  EXPECT_EQ(problems[1].first, "gap_fix");
  EXPECT_EQ(problems[1].second, "s4d has one mixer per channel and no gap fix: use gap_fix = \"none\"");
  v = defaults_with(4, 8);
  v[*param_index("mixer")] = std::string("matrix");
  ModelParams m = resolve(v);
  problems = check_model(m);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].first, "mixer_matrix");
  EXPECT_EQ(problems[0].second, "required with mixer = \"matrix\": give the T x T mixer as a list of T rows");
  m.mixer_matrix = std::make_shared<const Matrix>(4, 3);
  problems = check_model(m);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].second, "is 4 x 3 (rows x columns) but must be T x T = 4 x 4");
  m.mixer_matrix = std::make_shared<const Matrix>(4, 4);
  EXPECT_TRUE(check_model(m).empty());
}

}  // namespace
}  // namespace rcsweep::config
