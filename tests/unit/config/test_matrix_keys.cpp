// input = "matrix" / "file" and mixer = "matrix": the [model] keys input_matrix, mixer_matrix,
// input_path, input_dataset; their validation (with key paths) and their canonical text.
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

const std::string head = "[sweep]\nname = \"m\"\n[model]\nT = 2\nd = 3\ndepth = 4\n";

TEST(MatrixKeys, InputMatrixParsesAndAttaches) {
  const auto spec = parse_sweep(head + "input = \"matrix\"\ninput_matrix = [[1, 0, 0], [0.5, -2.0, 3e-3]]\n");
  ASSERT_TRUE(spec.input_matrix);
  EXPECT_EQ(spec.input_matrix->rows(), 2u);
  EXPECT_EQ(spec.input_matrix->cols(), 3u);
  EXPECT_EQ((*spec.input_matrix)(1, 1), -2.0);
  EXPECT_EQ((*spec.input_matrix)(0, 0), 1.0);  // integers are numbers
  const auto m = spec.model(spec.point(0));
  EXPECT_EQ(m.input, InputKind::matrix);
  EXPECT_EQ(m.input_matrix, spec.input_matrix);
  EXPECT_FALSE(m.mixer_matrix);
}

TEST(MatrixKeys, MixerMatrixParsesAndIsLinearInputIndependent) {
  const auto spec = parse_sweep(head + "mixer = \"matrix\"\nmixer_matrix = [[1, 0], [2, 1]]\n");
  const auto m = spec.model(spec.point(0));
  EXPECT_EQ(m.mixer, Mixer::matrix);
  ASSERT_TRUE(m.mixer_matrix);
  EXPECT_EQ((*m.mixer_matrix)(1, 0), 2.0);
  EXPECT_TRUE(m.homogeneous());
  EXPECT_FALSE(m.input_dependent_mixer());
  EXPECT_FALSE(m.ssm());
}

TEST(MatrixKeys, CanonicalTextHoldsTheMatricesAndRoundTrips) {
  const std::string text = head + "input = \"matrix\"\ninput_matrix = [[1, 0, 0], [0.1, 2, 3]]\nmixer = \"matrix\"\n"
                                  "mixer_matrix = [[1.0, 0.0], [2.0, 1.0]]\n[axes]\nlambda = [0, 1]\n";
  const auto spec = parse_sweep(text);
  const auto canon = spec.canonical_toml();
  EXPECT_NE(canon.find("input_matrix = [[1.0, 0.0, 0.0], [0.1, 2.0, 3.0]]"), std::string::npos) << canon;
  EXPECT_NE(canon.find("mixer_matrix = [[1.0, 0.0], [2.0, 1.0]]"), std::string::npos) << canon;
  const auto again = parse_sweep(canon);
  EXPECT_EQ(again.canonical_toml(), canon);
  EXPECT_EQ(again.plan_hash(), spec.plan_hash());
  // Any change of a matrix entry changes the plan hash.
  const auto other = parse_sweep(head + "input = \"matrix\"\ninput_matrix = [[1, 0, 0], [0.1, 2, 3.0000001]]\n"
                                        "mixer = \"matrix\"\nmixer_matrix = [[1.0, 0.0], [2.0, 1.0]]\n"
                                        "[axes]\nlambda = [0, 1]\n");
  EXPECT_NE(other.plan_hash(), spec.plan_hash());
}

TEST(MatrixKeys, InputFileKeysAndDigest) {
  auto spec = parse_sweep(head + "input = \"file\"\ninput_path = \"emb.h5\"\n");
  EXPECT_EQ(spec.input_path, "emb.h5");
  EXPECT_EQ(spec.input_dataset, "X");
  EXPECT_FALSE(spec.input_matrix);  // loaded by the CLI
  const auto before = spec.plan_hash();
  EXPECT_NE(spec.canonical_toml().find("input_path = \"emb.h5\"\ninput_dataset = \"X\"\n"), std::string::npos);
  Matrix X(2, 3, 0.25);
  spec.set_input_file(X);
  ASSERT_TRUE(spec.input_matrix);
  EXPECT_EQ(spec.model(spec.point(0)).input_matrix, spec.input_matrix);
  const auto loaded = spec.plan_hash();
  EXPECT_NE(loaded, before);  // the content is part of the hash (a comment line)
  X(1, 2) = 0.5;
  spec.set_input_file(X);
  EXPECT_NE(spec.plan_hash(), loaded);
  const auto custom = parse_sweep(head + "input = \"file\"\ninput_path = \"emb.h5\"\ninput_dataset = \"/g/E\"\n");
  EXPECT_EQ(custom.input_dataset, "/g/E");
}

TEST(MatrixKeys, ChoicesAppendedAtTheEnd) {
  const auto& reg = model_params();
  const auto& input = reg[*param_index("input")];
  const auto& mixer = reg[*param_index("mixer")];
  EXPECT_EQ(input.choices.at(static_cast<std::size_t>(InputKind::matrix)), "matrix");
  EXPECT_EQ(input.choices.at(static_cast<std::size_t>(InputKind::file)), "file");
  EXPECT_EQ(mixer.choices.at(static_cast<std::size_t>(Mixer::matrix)), "matrix");
  EXPECT_EQ(input.choices.at(static_cast<std::size_t>(InputKind::tokens)), "tokens");
  EXPECT_EQ(input.choices.back(), "tokens");
  const auto& mlp = reg[*param_index("mlp")];
  EXPECT_EQ(mlp.choices.at(static_cast<std::size_t>(Mlp::model)), "model");
  EXPECT_EQ(mlp.choices.back(), "model");
  EXPECT_EQ(mixer.choices.at(static_cast<std::size_t>(Mixer::s4d)), "s4d");
  EXPECT_EQ(mixer.choices.back(), "s4d");
}

// ---- errors ------------------------------------------------------------------------------

TEST(MatrixKeysErrors, RowsOfUnequalLength) {
  expect_only(head + "input = \"matrix\"\ninput_matrix = [[1, 0, 0], [1, 2]]\n", "model.input_matrix[1]",
              {"row 1 has 2 numbers but row 0 has 3"});
}

TEST(MatrixKeysErrors, NonNumbersAndNonFinite) {
  const auto issues = issues_of(head + "input = \"matrix\"\ninput_matrix = [[1, \"x\", 0], [nan, 2, inf]]\n");
  ASSERT_EQ(issues.size(), 3u) << dump(issues);
  EXPECT_EQ(issues[0].key, "model.input_matrix[0][1]");
  EXPECT_NE(issues[0].problem.find("must be a number, got a string \"x\""), std::string::npos);
  EXPECT_EQ(issues[1].key, "model.input_matrix[1][0]");
  EXPECT_NE(issues[1].problem.find("finite"), std::string::npos);
  EXPECT_EQ(issues[2].key, "model.input_matrix[1][2]");
}

TEST(MatrixKeysErrors, NotAListOfRows) {
  expect_only(head + "mixer = \"matrix\"\nmixer_matrix = 3\n", "model.mixer_matrix", {"list of rows", "an integer 3"});
  expect_only(head + "mixer = \"matrix\"\nmixer_matrix = []\n", "model.mixer_matrix", {"empty list"});
  expect_only(head + "mixer = \"matrix\"\nmixer_matrix = [1]\n", "model.mixer_matrix[0]",
              {"list of numbers", "an integer 1"});
  const auto issues = issues_of(head + "mixer = \"matrix\"\nmixer_matrix = [[1, 0], []]\n");
  ASSERT_GE(issues.size(), 1u);
  EXPECT_EQ(issues[0].key, "model.mixer_matrix[1]") << dump(issues);
}

TEST(MatrixKeysErrors, ShapeMustMatchTAndD) {
  expect_only(head + "input = \"matrix\"\ninput_matrix = [[1, 0], [0, 1]]\n", "model.input_matrix",
              {"is 2 x 2", "T x d = 2 x 3"});
  expect_only(head + "mixer = \"matrix\"\nmixer_matrix = [[1, 0, 0], [0, 1, 0]]\n", "model.mixer_matrix",
              {"is 2 x 3", "T x T = 2 x 2"});
}

TEST(MatrixKeysErrors, ShapeAgainstASweptT) {
  const std::string text = "[sweep]\nname = \"m\"\n[model]\nd = 2\ndepth = 1\ninput = \"matrix\"\n"
                           "input_matrix = [[1, 0], [0, 1]]\n[axes]\nT = [2, 3]\n";
  expect_only(text, "model.input_matrix", {"T x d = 3 x 2", "at 1 of 2 grid points"});
}

TEST(MatrixKeysErrors, MissingMatrix) {
  expect_only(head + "input = \"matrix\"\n", "model.input_matrix", {"required with input = \"matrix\""});
  expect_only(head + "mixer = \"matrix\"\n", "model.mixer_matrix", {"required with mixer = \"matrix\""});
  expect_only(head + "input = \"file\"\n", "model.input_path", {"required with input = \"file\""});
}

TEST(MatrixKeysErrors, GivenButUnused) {
  expect_only(head + "input = \"sphere\"\ninput_matrix = [[1, 0, 0], [0, 1, 0]]\n", "model.input_matrix",
              {"only used with input = \"matrix\""});
  expect_only(head + "mixer_matrix = [[1, 0], [0, 1]]\n", "model.mixer_matrix", {"only used with mixer = \"matrix\""});
  expect_only(head + "input_path = \"a.h5\"\n", "model.input_path", {"only used with input = \"file\""});
  // A swept input that takes "matrix" at some point uses it.
  EXPECT_NO_THROW(
      parse_sweep(head + "input_matrix = [[1, 0, 0], [0, 1, 0]]\n[axes]\ninput = [\"sphere\", \"matrix\"]\n"));
}

TEST(MatrixKeysErrors, NotSweepable) {
  expect_only(head + "input = \"matrix\"\ninput_matrix = [[1, 0, 0], [0, 1, 0]]\n[axes]\nmixer_matrix = [[1]]\n",
              "axes.mixer_matrix", {"not sweepable", "[model]"});
  const auto issues = issues_of(
      head + "input = \"file\"\ninput_path = \"a.h5\"\n[[zip]]\ninput_dataset = [\"X\", \"Y\"]\nlambda = [0, 1]\n");
  ASSERT_GE(issues.size(), 1u);
  EXPECT_EQ(issues[0].key, "zip[0].input_dataset") << dump(issues);
  EXPECT_NE(issues[0].problem.find("not sweepable"), std::string::npos);
}

TEST(MatrixKeysErrors, PathAndDatasetAreNonEmptyStrings) {
  expect_only(head + "input = \"file\"\ninput_path = 3\n", "model.input_path", {"non-empty string", "an integer 3"});
  expect_only(head + "input = \"file\"\ninput_path = \"a.h5\"\ninput_dataset = \"\"\n", "model.input_dataset",
              {"non-empty string"});
}

TEST(MatrixKeysErrors, MisspeltKeySuggestsTheMatrixKey) {
  expect_only(head + "input = \"matrix\"\ninput_matrix = [[1, 0, 0], [0, 1, 0]]\nmixer_matrx = [[1]]\n",
              "model.mixer_matrx", {"did you mean 'mixer_matrix'"});
}

}  // namespace
}  // namespace rcsweep::config
