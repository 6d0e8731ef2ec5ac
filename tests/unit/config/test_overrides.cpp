// Command-line overrides: reading KEY=VALUE, applying it to the sweep document before validation
// (the result equals the edited file), and the errors of malformed or invalid overrides.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.hpp"
#include "config/overrides.hpp"
#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::dump;

// ---------------------------------------------------------------------------------------------
// Reading an override

TEST(ParseOverride, KeyPathAndTomlValue) {
  const auto o = parse_override("model.T=256");
  EXPECT_EQ(o.text, "model.T=256");
  EXPECT_EQ(o.path, (std::vector<PathStep>{std::string("model"), std::string("T")}));
  EXPECT_EQ(o.key, "model.T");
  EXPECT_EQ(o.value, "256");
  EXPECT_EQ(parse_override("axes.lambda=[0,0.5,1]").value, "[0,0.5,1]");
  EXPECT_EQ(parse_override("model.mixer=\"markov\"").value, "\"markov\"");
  EXPECT_EQ(parse_override("model.input_matrix=[[1, 0], [0, 1]]").value, "[[1, 0], [0, 1]]");
  EXPECT_EQ(parse_override("model.lambda=-1.5").value, "-1.5");
  EXPECT_EQ(parse_override(" sweep.seed = 7 ").value, "7");  // spaces around key and value
}

TEST(ParseOverride, BareWordsAreStrings) {
  EXPECT_EQ(parse_override("model.mixer=softmax").value, "\"softmax\"");
  EXPECT_EQ(parse_override("model.skip_scale=inv_sqrt_d").value, "\"inv_sqrt_d\"");
  EXPECT_EQ(parse_override("sweep.name=my sweep-2").value, "\"my sweep-2\"");
  EXPECT_EQ(parse_override("model.mixer=").value, "\"\"");  // empty: the empty string, as in Hydra
  // inside lists too, mixed with TOML values and quoted strings
  EXPECT_EQ(parse_override("axes.gap_fix=[none,perp]").value, "[\"none\", \"perp\"]");
  EXPECT_EQ(parse_override("axes.skip_scale=[1.0, inv_sqrt_d, 'x']").value, "[1.0, \"inv_sqrt_d\", 'x']");
  EXPECT_EQ(parse_override("model.m=[[a, 1], []]").value, "[[\"a\", 1], []]");
  // TOML keywords stay TOML
  EXPECT_EQ(parse_override("model.lambda=nan").value, "nan");
  EXPECT_EQ(parse_override("model.gate=true").value, "true");
}

TEST(ParseOverride, ZipIndexAsBracketOrDottedNumber) {
  for (const char* text : {"zip[0].T=[4,8]", "zip.0.T=[4,8]"}) {
    const auto o = parse_override(text);
    EXPECT_EQ(o.key, "zip[0].T") << text;
    EXPECT_EQ(o.path, (std::vector<PathStep>{std::string("zip"), std::size_t{0}, std::string("T")})) << text;
  }
  EXPECT_EQ(parse_override("zip[1]={T=[4]}").key, "zip[1]");
}

/// The one issue of a malformed override: its key and a phrase of its problem.
void expect_malformed(const std::string& text, const std::string& key, const std::string& phrase) {
  try {
    parse_override(text);
    ADD_FAILURE() << "no ConfigError for " << text;
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 1u) << dump(e.issues());
    EXPECT_EQ(e.issues()[0].key, key) << dump(e.issues());
    EXPECT_NE(e.issues()[0].problem.find("command-line override '" + printable(text) + "'"), std::string::npos)
        << dump(e.issues());
    EXPECT_NE(e.issues()[0].problem.find(phrase), std::string::npos) << phrase << "\n" << dump(e.issues());
  }
}

TEST(ParseOverride, MalformedOverridesAreNamed) {
  expect_malformed("model.T", "", "no '='");
  expect_malformed("=256", "", "empty key");
  expect_malformed("model..T=1", "", "empty part in the key 'model..T'");
  expect_malformed("model.=1", "", "empty part");
  expect_malformed("0.T=1", "", "starts with an index");
  expect_malformed("model.T[x]=1", "", "'T[x]' in the key 'model.T[x]' is not a key");
  expect_malformed("model.\"T\"=1", "", "is not a key");
  expect_malformed("zip[99999999].T=1", "", "index 99999999 is too large");
  expect_malformed("+model.gate=silu", "", "'+', '++' and '~' prefixes are not supported");
  expect_malformed("~axes.lambda=1", "", "not supported");
  expect_malformed("axes.lambda=[0,0.5", "axes.lambda", "the value is not TOML");
  expect_malformed("axes.lambda=[0,,1]", "axes.lambda", "not TOML");
  expect_malformed("sweep.name=a\"b", "sweep.name", "nor a bare word");
  expect_malformed("model.T=1\nmodel.d=2", "", "line break");
}

TEST(ParseOverride, EveryMalformedOverrideIsReportedAtOnce) {
  try {
    parse_overrides({"model.T=4", "modelT", "axes.lambda=[1", "=3"});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 3u) << dump(e.issues());
    EXPECT_NE(e.issues()[0].problem.find("'modelT'"), std::string::npos);
    EXPECT_EQ(e.issues()[1].key, "axes.lambda");
    EXPECT_NE(e.issues()[2].problem.find("'=3'"), std::string::npos);
  }
}

TEST(ParseOverride, LineOfOverridesQuotesWhatWouldNotReadBack) {
  EXPECT_EQ(overrides_line({"model.T=256", "axes.lambda=[0,0.5,1]"}), "model.T=256 axes.lambda=[0,0.5,1]");
  EXPECT_EQ(overrides_line({"axes.lambda=[0, 1]", "sweep.name=it's"}), "'axes.lambda=[0, 1]' 'sweep.name=it'\\''s'");
  EXPECT_EQ(overrides_line({}), "");
}

TEST(ParseOverride, IssuesOnAnOverriddenKeySayWhereTheValueCameFrom) {
  const auto overrides = parse_overrides({"axes.lambda=[0,nan]", "model.T=0", "model.T=-1"});
  std::vector<ConfigIssue> issues = {{"axes.lambda[1]", "x"}, {"model.T", "y"}, {"model.Tx", "z"}, {"model", "w"}};
  mark_overridden(issues, overrides);
  EXPECT_EQ(issues[0].problem, "x (set on the command line by 'axes.lambda=[0,nan]')");
  EXPECT_EQ(issues[1].problem, "y (set on the command line by 'model.T=-1')");  // the later one wins
  EXPECT_EQ(issues[2].problem, "z");
  EXPECT_EQ(issues[3].problem, "w");
  // the same parameter given in another place: the override is named, as the other side
  std::vector<ConfigIssue> both = {{"zip[1].T", "given in both"}, {"zip[1].T[0]", "bad"}, {"zip[1].d", "d"}};
  mark_overridden(both, overrides);
  EXPECT_EQ(both[0].problem, "given in both ('model.T' is set on the command line by 'model.T=-1')");
  EXPECT_EQ(both[1].problem, "bad");
  EXPECT_EQ(both[2].problem, "d");
}

// ---------------------------------------------------------------------------------------------
// Applying overrides: a sweep with overrides equals the sweep of the edited file.

const std::string base = R"(
[sweep]
name = "ov"
replicates = 2

[model]
T = 4
d = 8
depth = 2
mixer = "softmax"

[axes]
lambda = [0.0, 1.0]
gap_fix = ["none", "perp"]

[[zip]]
sigma_qk = [1.0, 2.0]
sigma_v = [1.0, 0.5]

[[zip]]
heads = [1, 2]
)";

/// `base` with `from` replaced by `to` (which must occur).
std::string edited(std::string text, const std::vector<std::pair<std::string, std::string>>& edits) {
  for (const auto& [from, to] : edits) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  }
  return text;
}

void expect_same_sweep(const std::vector<std::string>& overrides, const std::string& edited_text) {
  const SweepSpec with = parse_sweep(base, "base.toml", overrides);
  const SweepSpec file = parse_sweep(edited_text, "edited.toml");
  EXPECT_EQ(with.canonical_toml(), file.canonical_toml());
  EXPECT_EQ(with.plan_hash(), file.plan_hash());
  EXPECT_EQ(with.overrides, overrides);
  EXPECT_TRUE(file.overrides.empty());
}

TEST(ApplyOverrides, ScalarsOfEveryTable) {
  expect_same_sweep({"model.T=6", "sweep.replicates=3", "sweep.seed=9", "model.mixer=markov", "output.spectra=last"},
                    edited(base, {{"T = 4", "T = 6"},
                                  {"replicates = 2", "replicates = 3\nseed = 9"},
                                  {"mixer = \"softmax\"", "mixer = \"markov\""}}) +
                        "\n[output]\nspectra = \"last\"\n");
}

TEST(ApplyOverrides, AnAxisKeepsItsPlaceAndANewOneGoesLast) {
  expect_same_sweep({"axes.lambda=[0,0.5,1]"}, edited(base, {{"lambda = [0.0, 1.0]", "lambda = [0.0, 0.5, 1.0]"}}));
  expect_same_sweep({"axes.d=[8,16]", "axes.norm=[none,rms]"},
                    edited(base, {{"d = 8\n", ""},
                                  {"gap_fix = [\"none\", \"perp\"]\n",
                                   "gap_fix = [\"none\", \"perp\"]\nd = [8, 16]\nnorm = [\"none\", \"rms\"]\n"}}));
}

TEST(ApplyOverrides, ModelAndAxesReplaceEachOther) {
  // a swept parameter fixed, a fixed one swept
  expect_same_sweep({"model.lambda=0.5"},
                    edited(base, {{"lambda = [0.0, 1.0]\n", ""}, {"depth = 2", "depth = 2\nlambda = 0.5"}}));
  expect_same_sweep(
      {"axes.T=[4,8]"},
      edited(base,
             {{"T = 4\n", ""}, {"gap_fix = [\"none\", \"perp\"]\n", "gap_fix = [\"none\", \"perp\"]\nT = [4, 8]\n"}}));
  // and back: the later override wins
  expect_same_sweep({"axes.T=[4,8]", "model.T=4"}, base);
}

TEST(ApplyOverrides, ZipTablesByIndex) {
  expect_same_sweep(
      {"zip[1].heads=[1,2,4]", "zip.0.sigma_qk=[1.0,3.0]"},
      edited(base, {{"heads = [1, 2]", "heads = [1, 2, 4]"}, {"sigma_qk = [1.0, 2.0]", "sigma_qk = [1.0, 3.0]"}}));
}

TEST(ApplyOverrides, MissingTablesAreCreated) {
  const std::string bare = "[sweep]\nname = \"b\"\n";
  const SweepSpec spec = parse_sweep(bare, "bare.toml",
                                     {"model.T=2", "model.d=4", "model.depth=1", "axes.lambda=[0,1]"});
  EXPECT_EQ(spec.canonical_toml(),
            parse_sweep(bare + "[model]\nT = 2\nd = 4\ndepth = 1\n[axes]\nlambda = [0.0, 1.0]\n").canonical_toml());
}

// ---------------------------------------------------------------------------------------------
// Errors

std::vector<ConfigIssue> issues_with(const std::vector<std::string>& overrides, const std::string& text = base) {
  try {
    parse_sweep(text, "base.toml", overrides);
  } catch (const ConfigError& e) {
    return e.issues();
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

void expect_issue(const std::vector<std::string>& overrides, const std::string& key,
                  std::initializer_list<std::string> phrases, const std::string& text = base) {
  const auto issues = issues_with(overrides, text);
  ASSERT_EQ(issues.size(), 1u) << dump(issues);
  EXPECT_EQ(issues[0].key, key) << dump(issues);
  for (const auto& p : phrases) EXPECT_NE(issues[0].problem.find(p), std::string::npos) << p << "\n" << dump(issues);
}

TEST(OverrideErrors, ValuesAreValidatedLikeTheFileAndNamedAsFromTheCommandLine) {
  expect_issue({"sweep.replicates=0"}, "sweep.replicates",
               {"must be an integer >= 1, got 0", "(set on the command line by 'sweep.replicates=0')"});
  expect_issue({"model.T=0"}, "model.T", {"must be >= 1, got 0", "'model.T=0'"});
  expect_issue({"axes.lambda=[0,nan]"}, "axes.lambda[1]", {"must be a finite number", "'axes.lambda=[0,nan]'"});
  expect_issue({"model.mixer=sofmax"}, "model.mixer", {"must be one of", "\"sofmax\"", "command line"});
  expect_issue({"model.lamda=0.5"}, "model.lamda", {"did you mean 'lambda'?", "command line"});
  expect_issue({"zip[0].sigma_v=[1.0]"}, "zip[0]", {"unequal length"});
}

TEST(OverrideErrors, AZipListIsNotReplacedByModelOrAxes) {
  expect_issue(
      {"model.sigma_qk=2.0"}, "zip[0].sigma_qk",
      {"given in both model and zip[0]", "('model.sigma_qk' is set on the command line by 'model.sigma_qk=2.0')"});
}

TEST(OverrideErrors, PathsThatCannotBeSet) {
  expect_issue({"zip[2].T=[1]"}, "zip[2].T",
               {"'zip[2].T=[1]'", "the sweep file has 2 [[zip]] table(s), zip[0]..zip[1]"});
  expect_issue({"zip.2.T=[1]"}, "zip[2].T", {"has 2 [[zip]] table(s)"});
  expect_issue({"zip[0].T=[1]"}, "zip[0].T", {"has no [[zip]] table"},
               "[sweep]\nname = \"b\"\n[model]\nT = 2\nd = 4\ndepth = 1\n");
  expect_issue({"zip.T=[1]"}, "zip.T", {"'zip' is a list, not a table: give the index of one, e.g. zip[0].T"});
  expect_issue({"model.T.x=1"}, "model.T.x", {"'model.T' is an integer, not a table"});
  expect_issue({"model[0]=1"}, "model[0]", {"'model' is a table, not a list"});
  expect_issue({"axes.lambda[5]=1"}, "axes.lambda[5]", {"'axes.lambda' has 2 element(s)"});
  expect_issue({"axes.T[0]=1"}, "axes.T[0]", {"'axes.T' is not in the sweep file"});
  // every failing override at once
  EXPECT_EQ(issues_with({"zip[2].T=[1]", "model.T.x=1"}).size(), 2u);
}

TEST(OverrideErrors, AnElementOfAListCanBeSet) {
  const auto spec = parse_sweep(base, "base.toml", {"axes.lambda[1]=0.5"});
  EXPECT_EQ(spec.canonical_toml(),
            parse_sweep(edited(base, {{"lambda = [0.0, 1.0]", "lambda = [0.0, 0.5]"}})).canonical_toml());
}

}  // namespace
}  // namespace rcsweep::config
