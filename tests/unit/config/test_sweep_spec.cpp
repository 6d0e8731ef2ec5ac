// Valid sweep files: dimensions, grid order, depth, canonical text and plan hash.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"

namespace rcsweep::config {
namespace {

using I = std::int64_t;

// The example at the top of docs/CONFIG.md.
constexpr const char* example = R"(
[sweep]
name = "width-collapse"
seed = 1234
replicates = 5               # the seed axis

[model]                      # scalars: every parameter of MODELS.md
mixer = "softmax"
input = "orthonormal"
depth = 10                   # all layers 0..10 are recorded
sigma_qk = 1.0

[axes]                       # lists: swept as a Cartesian product
gap_fix = ["none", "perp"]
norm = ["none", "rms"]

[[zip]]
T = [64, 128, 256, 64, 128, 256]
d = [64, 128, 256, 128, 256, 512]

[[zip]]
lambda = [0.0, 1.0, 1.0]
skip_scale = [1.0, 1.0, "inv_sqrt_d"]

[output]
spectra = "last"             # none | last | all
)";

const ParamValue& value_of(const std::vector<ParamValue>& v, std::string_view name) { return param_value(v, name); }

TEST(SweepSpec, ParsesAxesAndZips) {
  const SweepSpec spec = parse_sweep(example);
  EXPECT_EQ(spec.name, "width-collapse");
  EXPECT_EQ(spec.seed, 1234u);
  EXPECT_EQ(spec.replicates, 5);
  EXPECT_EQ(spec.output.spectra, Spectra::last);
  ASSERT_EQ(spec.dims.size(), 4u);
  EXPECT_EQ(spec.dims[0].name, "gap_fix");
  EXPECT_EQ(spec.dims[1].name, "norm");
  EXPECT_EQ(spec.dims[2].name, "zip0");
  EXPECT_EQ(spec.dims[3].name, "zip1");
  EXPECT_EQ(spec.dims[2].params, (std::vector<std::string>{"T", "d"}));
  EXPECT_EQ(spec.dims[3].params, (std::vector<std::string>{"lambda", "skip_scale"}));
  EXPECT_EQ(spec.dims[2].size(), 6u);
  EXPECT_EQ(spec.dims[3].columns[1][2], ParamValue{std::string("inv_sqrt_d")});
  EXPECT_EQ(spec.n_points(), 2u * 2u * 6u * 3u);
  EXPECT_TRUE(spec.depth_axis.empty());
  EXPECT_EQ(spec.max_depth(), 10);

  // base: [model] values, else defaults; swept parameters keep their default.
  ASSERT_EQ(spec.base.size(), model_params().size());
  EXPECT_EQ(value_of(spec.base, "depth"), ParamValue{I{10}});
  EXPECT_EQ(value_of(spec.base, "heads"), ParamValue{I{1}});
  EXPECT_EQ(value_of(spec.base, "sigma_qk"), ParamValue{1.0});
  EXPECT_EQ(value_of(spec.base, "T"), ParamValue{I{0}});
  EXPECT_EQ(value_of(spec.base, "gap_fix"), ParamValue{std::string("none")});

  // Point 0 is the first value of every dimension; the last point the last value of each.
  const auto p0 = spec.point(0);
  EXPECT_EQ(value_of(p0, "T"), ParamValue{I{64}});
  EXPECT_EQ(value_of(p0, "d"), ParamValue{I{64}});
  EXPECT_EQ(value_of(p0, "lambda"), ParamValue{0.0});
  const auto last = spec.point(spec.n_points() - 1);
  EXPECT_EQ(value_of(last, "gap_fix"), ParamValue{std::string("perp")});
  EXPECT_EQ(value_of(last, "norm"), ParamValue{std::string("rms")});
  EXPECT_EQ(value_of(last, "T"), ParamValue{I{256}});
  EXPECT_EQ(value_of(last, "d"), ParamValue{I{512}});
  EXPECT_EQ(value_of(last, "skip_scale"), ParamValue{std::string("inv_sqrt_d")});
  EXPECT_EQ(value_of(last, "depth"), ParamValue{I{10}});
  const ModelParams m = resolve(last);
  EXPECT_DOUBLE_EQ(m.skip_scale, 1.0 / std::sqrt(512.0));
  EXPECT_THROW(spec.point(spec.n_points()), Error);
}

TEST(SweepSpec, RowMajorLastDimensionFastest) {
  const SweepSpec spec = parse_sweep(R"(
[sweep]
name = "rm"
[model]
depth = 2
[axes]
T = [1, 2]
d = [4, 5, 6]
)");
  ASSERT_EQ(spec.n_points(), 6u);
  EXPECT_EQ(spec.point_index(0), (std::vector<std::size_t>{0, 0}));
  EXPECT_EQ(spec.point_index(1), (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(spec.point_index(3), (std::vector<std::size_t>{1, 0}));
  EXPECT_EQ(spec.point_index(5), (std::vector<std::size_t>{1, 2}));
  const std::vector<std::pair<I, I>> expected = {{1, 4}, {1, 5}, {1, 6}, {2, 4}, {2, 5}, {2, 6}};
  for (std::size_t p = 0; p < 6; ++p) {
    const auto v = spec.point(p);
    EXPECT_EQ(std::get<I>(value_of(v, "T")), expected[p].first) << p;
    EXPECT_EQ(std::get<I>(value_of(v, "d")), expected[p].second) << p;
  }
}

TEST(SweepSpec, NoDimensionsIsOnePoint) {
  const SweepSpec spec = parse_sweep("[sweep]\nname = \"one\"\n[model]\nT = 4\nd = 8\ndepth = 3\n");
  EXPECT_TRUE(spec.dims.empty());
  EXPECT_EQ(spec.n_points(), 1u);
  EXPECT_EQ(spec.point(0), spec.base);
  EXPECT_EQ(spec.seed, 0u);
  EXPECT_EQ(spec.replicates, 1);
  EXPECT_EQ(spec.output.spectra, Spectra::none);
}

TEST(SweepSpec, AxesKeepFileOrderNotAlphabetical) {
  const SweepSpec spec = parse_sweep(R"(
[sweep]
name = "order"
[model]
depth = 1
[axes]
sigma_qk = [0.5, 1.0]
T = [2, 4]
lambda = [0.0]
d = [8]
[[zip]]
value_init = ["gaussian", "identity"]
heads = [1, 2]
)");
  ASSERT_EQ(spec.dims.size(), 5u);
  EXPECT_EQ(spec.dims[0].name, "sigma_qk");
  EXPECT_EQ(spec.dims[1].name, "T");
  EXPECT_EQ(spec.dims[2].name, "lambda");
  EXPECT_EQ(spec.dims[3].name, "d");
  EXPECT_EQ(spec.dims[4].params, (std::vector<std::string>{"value_init", "heads"}));
}

TEST(SweepSpec, ZipsComeAfterAxesWhateverTheFileOrder) {
  const SweepSpec spec = parse_sweep(R"(
[sweep]
name = "zip-first"
[model]
depth = 1
[[zip]]
T = [2, 4]
d = [4, 8]
[axes]
lambda = [0.0, 1.0, 2.0]
)");
  ASSERT_EQ(spec.dims.size(), 2u);
  EXPECT_EQ(spec.dims[0].name, "lambda");
  EXPECT_EQ(spec.dims[1].name, "zip0");
  EXPECT_EQ(spec.point_index(1), (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(param_value(spec.point(1), "T"), ParamValue{I{4}});
  EXPECT_EQ(param_value(spec.point(1), "lambda"), ParamValue{0.0});
}

TEST(SweepSpec, DepthAxisIsNotADimension) {
  const SweepSpec spec = parse_sweep(R"(
[sweep]
name = "depth"
[model]
T = 4
d = 8
[axes]
depth = [10, 2, 5]
lambda = [0.0, 1.0]
)");
  ASSERT_EQ(spec.dims.size(), 1u);
  EXPECT_EQ(spec.dims[0].name, "lambda");
  EXPECT_EQ(spec.depth_axis, (std::vector<I>{2, 5, 10}));
  EXPECT_EQ(spec.max_depth(), 10);
  EXPECT_EQ(spec.n_points(), 2u);
  EXPECT_EQ(value_of(spec.point(1), "depth"), ParamValue{I{10}});
  EXPECT_NE(spec.canonical_toml().find("depth = [2, 5, 10]"), std::string::npos) << spec.canonical_toml();
}

TEST(SweepSpec, ScaleAcceptsInvSqrtD) {
  const SweepSpec spec = parse_sweep(R"(
[sweep]
name = "scale"
[model]
T = 4
d = 16
depth = 1
sigma_qk = "inv_sqrt_d"
sigma_v = "inv_sqrt_d"
skip_scale = 2
)");
  EXPECT_EQ(value_of(spec.base, "sigma_qk"), ParamValue{std::string("inv_sqrt_d")});
  EXPECT_EQ(value_of(spec.base, "skip_scale"), ParamValue{2.0});  // normalised to a real
  const ModelParams m = resolve(spec.point(0));
  EXPECT_DOUBLE_EQ(m.sigma_qk, 0.25);
  EXPECT_DOUBLE_EQ(m.sigma_v, 0.25);
  EXPECT_DOUBLE_EQ(m.skip_scale, 2.0);
}

void expect_same_spec(const SweepSpec& a, const SweepSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.replicates, b.replicates);
  EXPECT_EQ(a.base, b.base);
  EXPECT_EQ(a.depth_axis, b.depth_axis);
  EXPECT_EQ(a.output.spectra, b.output.spectra);
  ASSERT_EQ(a.dims.size(), b.dims.size());
  for (std::size_t k = 0; k < a.dims.size(); ++k) {
    EXPECT_EQ(a.dims[k].name, b.dims[k].name);
    EXPECT_EQ(a.dims[k].params, b.dims[k].params);
    EXPECT_EQ(a.dims[k].columns, b.dims[k].columns);
  }
  ASSERT_EQ(a.n_points(), b.n_points());
  for (std::size_t p = 0; p < a.n_points(); ++p) EXPECT_EQ(a.point(p), b.point(p)) << p;
}

TEST(SweepSpec, CanonicalRoundTrip) {
  const SweepSpec spec = parse_sweep(example);
  const std::string text = spec.canonical_toml();
  const SweepSpec again = parse_sweep(text, "canonical");
  EXPECT_EQ(again.canonical_toml(), text);
  EXPECT_EQ(again.plan_hash(), spec.plan_hash());
  expect_same_spec(spec, again);
  // Every non-swept parameter is written, defaults included, and swept ones are not in [model].
  EXPECT_NE(text.find("value_scale = \"none\""), std::string::npos) << text;
  EXPECT_NE(text.find("heads = 1\n"), std::string::npos) << text;
  const std::string model_section = text.substr(text.find("[model]"), text.find("[axes]") - text.find("[model]"));
  EXPECT_EQ(model_section.find("\nT = "), std::string::npos) << text;
  EXPECT_EQ(model_section.find("\ngap_fix = "), std::string::npos) << text;
  EXPECT_NE(model_section.find("\ndepth = 10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[[zip]]\nT = [64, 128, 256, 64, 128, 256]\nd = "), std::string::npos) << text;
}

// The encoder's parameters, appended to the registry, are written only when not at their default:
// the canonical text (and plan hash) of a sweep without them is the one older rcsweeps wrote, whose
// [model] ends at collapse_rate.
TEST(SweepSpec, EncoderParametersAtTheirDefaultsLeaveTheCanonicalTextAsBefore) {
  const SweepSpec spec = parse_sweep(example);
  const std::string text = spec.canonical_toml();
  for (const char* key :
       {"\nblock = ", "\ninit = ", "\ninit_draw = ", "\nmeasure = ", "\nmask = ", "model_folder", "lambda_layers"})
    EXPECT_EQ(text.find(key), std::string::npos) << key << "\n" << text;
  EXPECT_NE(text.find("collapse_rate = 0.9\n\n[axes]"), std::string::npos) << text;
  // The plan hash older rcsweeps gave this sweep (docs/CONFIG.md "Canonical text"): their stores resume.
  EXPECT_EQ(spec.plan_hash(), "27eaef166cf5db40") << text;
  const ModelParams m = spec.model(spec.point(0));
  EXPECT_EQ(m.block, Block::stack);
  EXPECT_EQ(m.init, Init::random);
  EXPECT_EQ(m.init_draw, -1);
  EXPECT_EQ(m.measure, Measure::block);
  EXPECT_EQ(m.mask, Mask::none);
  EXPECT_TRUE(m.model_folder.empty());
  EXPECT_FALSE(m.tokens);
  EXPECT_FALSE(m.lambda_layers);
}

TEST(SweepSpec, CanonicalRoundTripWithDepthAxisAndOddName) {
  const SweepSpec spec = parse_sweep(R"(
[sweep]
name = "quote \" back \\ é"
seed = 7
[model]
T = 3
d = 3
sigma_A = 0.1
[axes]
depth = [4, 1]
)");
  const SweepSpec again = parse_sweep(spec.canonical_toml());
  EXPECT_EQ(again.name, "quote \" back \\ é");
  EXPECT_EQ(again.canonical_toml(), spec.canonical_toml());
  expect_same_spec(spec, again);
}

TEST(SweepSpec, HashIgnoresFormattingCommentsAndKeyOrder) {
  const SweepSpec a = parse_sweep(R"(
[sweep]
name = "h"
seed = 3
[model]
T = 8
d = 16
depth = 4
[axes]
lambda = [0.0, 0.5]
)");
  const SweepSpec b = parse_sweep(R"(
# a comment
[axes]
lambda = [ 0.0,
           0.5 ]   # same list
[model]
depth=4
d  =  16
T = 8
heads = 1          # the default, written out
[sweep]
seed = 3
name = 'h'
)");
  EXPECT_EQ(a.canonical_toml(), b.canonical_toml());
  EXPECT_EQ(a.plan_hash(), b.plan_hash());
  EXPECT_EQ(a.plan_hash().size(), 16u);
  EXPECT_EQ(a.plan_hash().find_first_not_of("0123456789abcdef"), std::string::npos);

  const SweepSpec c = parse_sweep(R"(
[sweep]
name = "h"
seed = 3
[model]
T = 8
d = 16
depth = 4
[axes]
lambda = [0.0, 0.25]
)");
  EXPECT_NE(a.plan_hash(), c.plan_hash());
}

TEST(SweepSpec, IntegerAndFloatRealsAreTheSame) {
  const char* head = "[sweep]\nname = \"x\"\n[model]\nT = 2\nd = 2\ndepth = 1\n";
  const SweepSpec a = parse_sweep(std::string(head) + "lambda = 1\n");
  const SweepSpec b = parse_sweep(std::string(head) + "lambda = 1.0\n");
  EXPECT_EQ(value_of(a.base, "lambda"), ParamValue{1.0});
  EXPECT_EQ(a.plan_hash(), b.plan_hash());
  EXPECT_NE(a.canonical_toml().find("lambda = 1.0\n"), std::string::npos) << a.canonical_toml();
  const SweepSpec c = parse_sweep(std::string(head) + "lambda = 2\n");
  EXPECT_NE(a.plan_hash(), c.plan_hash());
  // The same holds inside an axis list.
  const SweepSpec d = parse_sweep("[sweep]\nname = \"x\"\n[model]\nT = 2\nd = 2\ndepth = 1\n[axes]\nlambda = [0, 1]\n");
  const SweepSpec e = parse_sweep(
      "[sweep]\nname = \"x\"\n[model]\nT = 2\nd = 2\ndepth = 1\n[axes]\nlambda = [0.0, 1.0]\n");
  EXPECT_EQ(d.plan_hash(), e.plan_hash());
}

TEST(SweepSpec, HashIsFnv1aOfCanonicalText) {
  const SweepSpec spec = parse_sweep("[sweep]\nname = \"x\"\n[model]\nT = 2\nd = 2\ndepth = 1\n");
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : spec.canonical_toml()) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  EXPECT_EQ(spec.plan_hash(), std::string(buf));
}

}  // namespace
}  // namespace rcsweep::config
