// Malformed sweep files: each problem is reported with its exact key path, all at once.
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::dump;
using test::expect_only;
using test::issues_of;

const std::string head = "[sweep]\nname = \"bad\"\n";
const std::string model = "[model]\nT = 4\nd = 8\ndepth = 2\n";

TEST(SweepErrors, UnknownModelKeyWithSuggestion) {
  expect_only(head + model + "lamda = 0.5\n", "model.lamda", {"unknown parameter 'lamda'", "did you mean 'lambda'?"});
}

TEST(SweepErrors, SuggestionIgnoresCaseButNeedsSomethingInCommon) {
  expect_only(head + "[model]\nt = 4\nd = 8\ndepth = 2\n", "model.t", {"did you mean 'T'?"});
  const auto issues = issues_of(head + model + "zz = 1\n");
  ASSERT_EQ(issues.size(), 1u) << dump(issues);
  EXPECT_EQ(issues[0].key, "model.zz");
  EXPECT_EQ(issues[0].problem.find("did you mean"), std::string::npos) << dump(issues);
}

TEST(SweepErrors, UnknownKeyFarFromAnyNameHasNoSuggestion) {
  const auto issues = issues_of(head + model + "temperature = 0.5\n");
  ASSERT_EQ(issues.size(), 1u) << dump(issues);
  EXPECT_EQ(issues[0].key, "model.temperature");
  EXPECT_EQ(issues[0].problem.find("did you mean"), std::string::npos) << dump(issues);
}

TEST(SweepErrors, UnknownAxisAndZipParameter) {
  expect_only(head + model + "[axes]\nsigmaqk = [1.0]\n", "axes.sigmaqk", {"did you mean 'sigma_qk'?"});
  expect_only(head + "[model]\nT = 4\ndepth = 2\n[[zip]]\nd = [8]\nhaeds = [1]\n", "zip[0].haeds",
              {"unknown parameter 'haeds'", "did you mean 'heads'?"});
}

TEST(SweepErrors, UnknownKeyInSweepAndOutput) {
  expect_only(head + "replicate = 3\n" + model, "sweep.replicate", {"unknown key 'replicate'", "'replicates'"});
  expect_only(head + model + "[output]\nspectrum = \"all\"\n", "output.spectrum", {"did you mean 'spectra'?"});
}

TEST(SweepErrors, UnknownTopLevelTable) {
  expect_only(head + model + "[axis]\nT = [1]\n", "axis", {"unknown table [axis]", "did you mean 'axes'?"});
}

TEST(SweepErrors, IntegerParameterGivenAString) {
  expect_only(head + "[model]\nT = \"four\"\nd = 8\ndepth = 2\n", "model.T", {"must be an integer", "\"four\""});
}

TEST(SweepErrors, IntegerParameterGivenAFloat) {
  expect_only(head + "[model]\nT = 4.0\nd = 8\ndepth = 2\n", "model.T", {"must be an integer", "write 4, not 4.0"});
  expect_only(head + "[model]\nT = 4\nd = 8.5\ndepth = 2\n", "model.d", {"must be an integer, got 8.5"});
}

TEST(SweepErrors, NanLambda) {
  expect_only(head + model + "lambda = nan\n", "model.lambda", {"finite", "nan"});
  expect_only(head + model + "[axes]\nlambda = [0.0, 1.0, -inf]\n", "axes.lambda[2]", {"finite", "-inf"});
}

TEST(SweepErrors, NegativeT) {
  expect_only(head + "[model]\nd = 8\ndepth = 2\n[axes]\nT = [4, -4]\n", "axes.T[1]", {"must be >= 1", "-4"});
}

TEST(SweepErrors, NonPositiveScaleAndBadScaleKeyword) {
  expect_only(head + model + "sigma_A = 0\n", "model.sigma_A", {"must be > 0"});
  expect_only(head + model + "sigma_qk = \"sqrt_d\"\n", "model.sigma_qk", {"\"inv_sqrt_d\"", "\"sqrt_d\""});
}

TEST(SweepErrors, EmptyAxis) { expect_only(head + model + "[axes]\nlambda = []\n", "axes.lambda", {"empty list"}); }

TEST(SweepErrors, AxisValueNotAList) {
  expect_only(head + model + "[axes]\nlambda = 0.5\n", "axes.lambda", {"must be a list", "[model]"});
}

TEST(SweepErrors, ListUnderModel) { expect_only(head + model + "lambda = [0.5, 1.0]\n", "model.lambda", {"[axes]"}); }

TEST(SweepErrors, ZipLengthMismatch) {
  expect_only(head + "[model]\ndepth = 2\n[[zip]]\nT = [4, 8, 16]\nd = [16, 32]\n", "zip[0]",
              {"unequal length", "T has 3", "d has 2"});
}

TEST(SweepErrors, SecondZipIsNumberedOne) {
  expect_only(head + model + "[[zip]]\nlambda = [0.0]\n[[zip]]\nsigma_v = [1.0, 0.0]\n", "zip[1].sigma_v[1]",
              {"must be > 0"});
}

TEST(SweepErrors, ParameterInModelAndAxes) {
  expect_only(head + model + "[axes]\nT = [4, 8]\n", "axes.T", {"given in both model and axes"});
  expect_only(head + model + "[axes]\nlambda = [0.0]\n[[zip]]\nlambda = [1.0]\n", "zip[0].lambda",
              {"given in both axes and zip[0]"});
}

TEST(SweepErrors, MissingRequiredParameters) {
  const auto issues = issues_of(head + "[model]\nd = 8\n");
  ASSERT_EQ(issues.size(), 2u) << dump(issues);
  EXPECT_EQ(issues[0].key, "model.T");
  EXPECT_NE(issues[0].problem.find("required parameter 'T'"), std::string::npos) << dump(issues);
  EXPECT_EQ(issues[1].key, "model.depth");
}

TEST(SweepErrors, DepthInZip) {
  expect_only(head + "[model]\nT = 4\nd = 8\n[[zip]]\ndepth = [1, 2]\nlambda = [0.0, 1.0]\n", "zip[0].depth",
              {"depth is not a task dimension", "[axes]"});
}

TEST(SweepErrors, BadSpectraValue) {
  expect_only(head + model + "[output]\nspectra = \"first\"\n", "output.spectra",
              {"\"none\", \"last\", \"all\"", "\"first\""});
}

TEST(SweepErrors, ReplicatesZeroAndNegativeSeed) {
  expect_only("[sweep]\nname = \"x\"\nreplicates = 0\n" + model, "sweep.replicates", {">= 1", "got 0"});
  expect_only("[sweep]\nname = \"x\"\nseed = -1\n" + model, "sweep.seed", {"non-negative"});
}

TEST(SweepErrors, MissingName) {
  expect_only("[sweep]\nseed = 1\n" + model, "sweep.name", {"required"});
  expect_only(model, "sweep.name", {"required"});
}

TEST(SweepErrors, BadChoiceListsChoices) {
  expect_only(head + model + "mixer = \"linear\"\n", "model.mixer",
              {"must be one of \"softmax\", \"markov\", \"identity\", \"uniform\"", "\"linear\""});
  expect_only(head + model + "[axes]\nnorm = [\"none\", \"batch\"]\n", "axes.norm[1]", {"\"layernorm\""});
}

TEST(SweepErrors, TomlSyntaxErrorHasLineNumber) {
  const auto issues = issues_of("[sweep]\nname = \"x\"\n[model]\nT = = 4\n");
  ASSERT_EQ(issues.size(), 1u) << dump(issues);
  EXPECT_EQ(issues[0].key, "");
  EXPECT_NE(issues[0].problem.find("TOML syntax error in bad.toml at line 4, column "), std::string::npos)
      << dump(issues);
}

TEST(SweepErrors, DuplicateAxisValues) {
  expect_only(head + model + "[axes]\nlambda = [0.0, 1, 1.0]\n", "axes.lambda[2]",
              {"duplicate value 1", "identical grid points"});
  expect_only(head + "[model]\nT = 4\nd = 8\n[axes]\ndepth = [2, 4, 2]\n", "axes.depth[2]", {"duplicate"});
}

TEST(SweepErrors, DuplicateZipEntries) {
  expect_only(head + "[model]\ndepth = 1\n[[zip]]\nT = [4, 8, 4]\nd = [8, 8, 8]\n", "zip[0]",
              {"entry 2 repeats entry 0"});
}

TEST(SweepErrors, ZipWrittenAsPlainTable) { expect_only(head + model + "[zip]\nlambda = [0.0]\n", "zip", {"[[zip]]"}); }

TEST(SweepErrors, TopLevelParameter) {
  expect_only("T = 4\n" + head + "[model]\nd = 8\ndepth = 1\n", "T", {"under [model]"});
  expect_only(head + "T = 4\n[model]\nd = 8\ndepth = 1\n", "sweep.T", {"unknown key 'T' in [sweep]", "[model]"});
}

TEST(SweepErrors, AllProblemsReportedAtOnce) {
  const auto issues = issues_of(R"(
[sweep]
name = "many"
replicates = 0
[model]
T = 4
d = 8
lamda = 0.5
mixer = "linear"
[axes]
T = [4, 8]
sigma_qk = []
[[zip]]
lambda = [0.0, 1.0]
heads = [1]
[output]
spectra = "some"
[extra]
x = 1
)");
  std::vector<std::string> keys;
  for (const auto& i : issues) keys.push_back(i.key);
  const std::vector<std::string> expected = {"sweep.replicates", "model.lamda",   "model.mixer",
                                             "axes.T",           "axes.sigma_qk", "zip[0]",
                                             "output.spectra",   "extra",         "model.depth"};
  EXPECT_EQ(keys, expected) << dump(issues);
}

TEST(SweepErrors, WhatListsEveryIssue) {
  try {
    parse_sweep(head + "[model]\nT = -1\nd = 0\ndepth = 1\n");
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model.T: must be >= 1"), std::string::npos) << what;
    EXPECT_NE(what.find("model.d: must be >= 1"), std::string::npos) << what;
  }
}

TEST(SweepErrors, GradientOptions) {
  expect_only(head + model + "[output]\ngradients = \"every\"\n", "output.gradients",
              {"must be one of \"none\", \"last\", \"all\"", "\"every\""});
  expect_only(head + model + "[output]\ngradients = \"last\"\ngrad_method = \"autograd\"\n", "output.grad_method",
              {"\"auto\", \"exact\", \"hutchinson\""});
  expect_only(head + model + "[output]\ngradients = \"last\"\ngrad_probes = 1\n", "output.grad_probes",
              {"from 2 to 100000"});
  expect_only(head + model + "[output]\ngrad_probe = 4\n", "output.grad_probe", {"did you mean 'grad_probes'?"});
  expect_only(head + "[model]\nT = 4\nd = 8\ndepth = 0\n[output]\ngradients = \"all\"\n", "output.gradients",
              {"depth >= 1"});
}

// [output] metrics: "all" (the default, every metric but the opt-in ones; absent from the
// canonical text: plan hashes of files without the key do not change) or a list, which may hold
// "all"; fro and log_fro are always added.
TEST(SweepErrors, MetricSelection) {
  const auto plain = parse_sweep(head + model, "a.toml");
  EXPECT_EQ(plain.output.metrics, metrics::default_metrics());
  EXPECT_FALSE(plain.output.metrics[metrics::metric_index("res_best")]);
  const auto all = parse_sweep(head + model + "[output]\nmetrics = \"all\"\n", "a.toml");
  EXPECT_EQ(all.output.metrics, metrics::default_metrics());
  EXPECT_EQ(all.plan_hash(), plain.plan_hash());
  EXPECT_EQ(all.canonical_toml().find("metrics"), std::string::npos);
  const auto listed = parse_sweep(head + model + "[output]\nmetrics = [\"all\"]\n", "a.toml");
  EXPECT_EQ(listed.plan_hash(), plain.plan_hash());
  const auto opt_in = parse_sweep(head + model + "[output]\nmetrics = [\"all\", \"res_best\"]\n", "a.toml");
  EXPECT_EQ(opt_in.output.metrics, metrics::all_metrics());
  EXPECT_NE(opt_in.canonical_toml().find("\"m_fro\", \"res_best\"]\n"), std::string::npos) << opt_in.canonical_toml();
  const auto some = parse_sweep(head + model + "[output]\nmetrics = [\"mu\", \"sr_cov\", \"mu\"]\n", "a.toml");
  EXPECT_EQ(metrics::names_of(some.output.metrics), "fro log_fro sr_cov mu");
  EXPECT_NE(some.canonical_toml().find("metrics = [\"fro\", \"log_fro\", \"sr_cov\", \"mu\"]\n"), std::string::npos)
      << some.canonical_toml();
  EXPECT_NE(some.plan_hash(), plain.plan_hash());
  // the canonical text reads back as the same selection
  EXPECT_EQ(parse_sweep(some.canonical_toml(), "c.toml").output.metrics, some.output.metrics);

  expect_only(head + model + "[output]\nmetrics = [\"sr_cv\"]\n", "output.metrics[0]",
              {"must be a per-layer metric", "\"sr_cv\"", "did you mean 'sr_cov'?"});
  expect_only(head + model + "[output]\nmetrics = [\"s1\", 2]\n", "output.metrics[1]", {"an integer"});
  expect_only(head + model + "[output]\nmetrics = []\n", "output.metrics", {"must be \"all\" or a non-empty list"});
  expect_only(head + model + "[output]\nmetrics = \"sr_cov\"\n", "output.metrics",
              {"must be \"all\" or a non-empty list", "\"sr_cov\""});
  expect_only(head + model + "[output]\nmetric = [\"s1\"]\n", "output.metric", {"did you mean 'metrics'?"});
  // a replicate target needs its metric computed
  expect_only("[sweep]\nname = \"bad\"\nreplicates = { min = 2, max = 8, step = 2, targets = [{ metric = \"mu\", "
              "layer = \"last\", rel_se = 0.1 }] }\n" +
                  model + "[output]\nmetrics = [\"sr_cov\"]\n",
              "sweep.replicates.targets[0].metric", {"'mu' is not computed: add it to output.metrics"});
}

}  // namespace
}  // namespace rcsweep::config
