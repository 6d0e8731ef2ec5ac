// The parameter registry, value text and model resolution.
#include <gtest/gtest.h>

#include <cmath>
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

TEST(Params, CheckModelOrthonormalNeedsTAtMostD) {
  EXPECT_TRUE(check_model(resolve(defaults_with(8, 8))).empty());
  const auto problems = check_model(resolve(defaults_with(9, 8)));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].first, "input");
  auto v = defaults_with(9, 8);
  v[*param_index("input")] = std::string("sphere");
  EXPECT_TRUE(check_model(resolve(v)).empty());
}

}  // namespace
}  // namespace rcsweep::config
