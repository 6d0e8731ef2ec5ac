// block = "encoder" in a sweep file (docs/CONFIG.md "Encoder blocks"): the model_folder and
// lambda_layers keys, the parameters block, init, init_draw, measure, mask, input "tokens" and mlp
// "model", their canonical text, and every refusal of the configuration (no file opened: the model
// folder and the token file are checked by store::load_encoder_inputs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::dump;
using test::expect_only;
using test::issues_of;

const std::string head = "[sweep]\nname = \"enc\"\nreplicates = 2\n[model]\nT = 4\nd = 8\ndepth = 3\n";
// The published block: both skips, its MLP and its LayerNorms.
const std::string encoder = "block = \"encoder\"\nmodel_folder = \"models/tiny\"\nheads = 2\nlambda = 1.0\n"
                            "mlp = \"model\"\nnorm = \"layernorm\"\n";
const std::string tokens = "input = \"tokens\"\ninput_path = \"tokens/excerpts.txt\"\n";

TEST(EncoderKeys, EncoderSweepParsesAndAttachesTheFolder) {
  const auto spec = parse_sweep(head + encoder + tokens + "[axes]\ninit = [\"random\", \"checkpoint\"]\n");
  EXPECT_EQ(spec.model_folder, "models/tiny");
  EXPECT_EQ(spec.input_path, "tokens/excerpts.txt");
  ASSERT_EQ(spec.n_points(), 2u);
  const auto m = spec.model(spec.point(1));
  EXPECT_EQ(m.block, Block::encoder);
  EXPECT_EQ(m.init, Init::checkpoint);
  EXPECT_EQ(m.input, InputKind::tokens);
  EXPECT_EQ(m.mlp, Mlp::model);
  EXPECT_EQ(m.norm, Norm::layernorm);
  EXPECT_TRUE(m.model_folder.empty());  // attached once the folder is loaded (set_encoder_inputs)
  EXPECT_FALSE(m.tokens);               // not read yet
  EXPECT_FALSE(m.input_matrix);
  EXPECT_EQ(spec.model(spec.point(0)).init, Init::random);
}

TEST(EncoderKeys, LoadedFolderTokensAndDigestAttach) {
  auto spec = parse_sweep(head + encoder + tokens + "measure = \"attention\"\ninit_draw = 3\n");
  const std::string before = spec.plan_hash();
  auto excerpts = std::make_shared<const std::vector<std::vector<std::int64_t>>>(
      std::vector<std::vector<std::int64_t>>{{1, 2, 3, 4}, {5, 6, 7, 8, 9}});
  spec.set_encoder_inputs("/abs/models/tiny", excerpts, "config.json FNV-1a 0123456789abcdef");
  const auto m = spec.model(spec.point(0));
  EXPECT_EQ(m.model_folder, "/abs/models/tiny");
  EXPECT_EQ(m.tokens, excerpts);
  EXPECT_EQ(m.measure, Measure::attention);
  EXPECT_EQ(m.init_draw, 3);
  const std::string text = spec.canonical_toml();
  EXPECT_NE(text.find("model_folder = \"models/tiny\"\n# model content: config.json FNV-1a 0123456789abcdef\n"),
            std::string::npos)
      << text;  // the folder as written, not the absolute path
  EXPECT_EQ(text.find("/abs/"), std::string::npos) << text;
  EXPECT_NE(spec.plan_hash(), before);  // the digest is part of the plan
  spec.set_encoder_inputs("/abs/models/tiny", excerpts, "config.json FNV-1a 0123456789abcdee");
  EXPECT_NE(spec.canonical_toml(), text);
}

// The canonical text parses back to the same sweep; the encoder's parameters are written when not
// at their default or swept, input_dataset only with input = "file".
TEST(EncoderKeys, CanonicalRoundTrip) {
  const auto spec = parse_sweep(head + encoder + tokens +
                                "init_draw = 0\n[axes]\nmeasure = [\"block\", \"attention\"]\n"
                                "lambda_mlp = [0.0, 1.0]\n");
  const std::string text = spec.canonical_toml();
  for (const char* line : {"block = \"encoder\"\n", "init_draw = 0\n", "mlp = \"model\"\n", "input = \"tokens\"\n",
                           "model_folder = \"models/tiny\"\n", "measure = [\"block\", \"attention\"]\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  EXPECT_EQ(text.find("\ninit = "), std::string::npos) << text;  // "random", the default
  EXPECT_EQ(text.find("input_dataset"), std::string::npos) << text;
  const auto again = parse_sweep(text, "canonical");
  EXPECT_EQ(again.canonical_toml(), text);
  EXPECT_EQ(again.plan_hash(), spec.plan_hash());
  EXPECT_EQ(again.model_folder, spec.model_folder);
  ASSERT_EQ(again.n_points(), spec.n_points());
  for (std::size_t p = 0; p < spec.n_points(); ++p) EXPECT_EQ(again.point(p), spec.point(p)) << p;
  // An encoder on another input: orthonormal rows fed to the first block.
  const auto other = parse_sweep(head + encoder);
  EXPECT_EQ(other.model(other.point(0)).input, InputKind::orthonormal);
  EXPECT_EQ(parse_sweep(other.canonical_toml()).canonical_toml(), other.canonical_toml());
}

// ---- the extra keys ----------------------------------------------------------------------

TEST(EncoderKeys, ModelFolderIsRequiredWithEncoderAndOnlyUsedThere) {
  expect_only(head + "block = \"encoder\"\nheads = 2\n", "model.model_folder",
              {"required with block = \"encoder\"", "config.json"});
  expect_only(head + "model_folder = \"m\"\n", "model.model_folder",
              {"is only used with block = \"encoder\" or \"mamba2\", but block is never \"encoder\" nor "
               "\"mamba2\" in this sweep"});
  // Required as soon as one point has an encoder.
  expect_only(head + "[axes]\nblock = [\"stack\", \"encoder\"]\n", "model.model_folder", {"required"});
}

TEST(EncoderKeys, ModelFolderMustBeANonEmptyStringWithoutNul) {
  const std::string enc = head + "block = \"encoder\"\nheads = 2\n";
  expect_only(enc + "model_folder = 3\n", "model.model_folder",
              {"must be a non-empty string (a model folder with config.json", "an integer 3"});
  expect_only(enc + "model_folder = \"\"\n", "model.model_folder", {"an empty string"});
  expect_only(enc + "model_folder = \"a\\u0000b\"\n", "model.model_folder", {"must not hold a NUL character"});
  expect_only(head + "[axes]\nmodel_folder = [\"a\", \"b\"]\n", "axes.model_folder", {"not sweepable"});
}

TEST(EncoderKeys, TokensNeedAnEncoderAndAnInputPath) {
  expect_only(head + encoder + "input = \"tokens\"\n", "model.input_path",
              {"required with input = \"tokens\": the token file"});
  expect_only(head + tokens, "model.input",
              {"\"tokens\" (the model's embedding of token ids) is only used with block = \"encoder\" or "
               "\"mamba2\", but block is \"stack\" here"});
  expect_only(head + encoder + tokens + "input_dataset = \"X\"\n", "model.input_dataset",
              {"is only used with input = \"file\""});
  expect_only(head + encoder + "input_path = \"t.txt\"\n", "model.input_path", {"is only used with input = \"file\""});
  expect_only(head + encoder + "input_path = \"t.txt\"\n[axes]\ninput = [\"file\", \"tokens\"]\n", "axes.input",
              {"\"file\" at some grid points and \"tokens\" at others", "one file"});
}

// ---- the encoder's restrictions, each on its key ---------------------------------------------

TEST(EncoderKeys, StackParametersHaveNoMeaningWithAnEncoder) {
  struct Case {
    std::string line, key;
    std::vector<std::string> fragments;
  };
  const std::string no_meaning = "has no meaning with block = \"encoder\" (";
  const std::vector<Case> cases = {
      {"mixer = \"markov\"", "model.mixer", {no_meaning + "the block's attention is softmax", "\"softmax\""}},
      {"d_qk = 4", "model.d_qk", {no_meaning + "queries and keys are d / heads wide"}},
      {"sigma_qk = 0.5", "model.sigma_qk", {no_meaning + "W_Q and W_K are the model's"}},
      {"sigma_A = 2.0", "model.sigma_A", {no_meaning + "it is Markov attention's"}},
      {"gap_fix = \"perp\"", "model.gap_fix", {no_meaning, "leave gap_fix at its default \"none\""}},
      {"outliers_r = 1", "model.outliers_r", {no_meaning}},
      {"value_init = \"orthogonal\"", "model.value_init", {no_meaning + "W_V is the model's"}},
      {"sigma_v = 2.0", "model.sigma_v", {no_meaning + "W_V is the model's"}},
      {"value_scale = \"inv_sqrt_d\"", "model.sigma_v", {"value_scale counts in it"}},
      {"gate = \"silu\"", "model.gate", {no_meaning + "the block has no output gate"}},
      {"mlp_ratio = 2", "model.mlp_ratio", {no_meaning + "the MLP's width is config.json's intermediate_size"}},
      {"state_dim = 8", "model.state_dim", {no_meaning + "it is the state-space mixers'"}},
      {"alpha = 0.5", "model.alpha", {no_meaning}},
      {"collapse_rate = 0.5", "model.collapse_rate", {no_meaning + "lambda-skip Theorem 4.1"}},
      {"skip_scale = 2.0", "model.skip_scale", {"must be 1 with block = \"encoder\"", "got 2"}},
      {"norm = \"rms\"", "model.norm", {"\"rms\" is not a norm of the encoder block"}},
      {"mlp = \"relu\"", "model.mlp", {"\"relu\" is the stack's MLP", "\"model\" keeps the block's own MLP"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    // The line replaces the published block's own setting of the same key, if any.
    std::string text = head + encoder;
    const std::string key = c.line.substr(0, c.line.find(" = "));
    if (const auto at = text.find("\n" + key + " = "); at != std::string::npos)
      text.erase(at + 1, text.find('\n', at + 1) - at);
    const auto issues = issues_of(text + c.line + "\n");
    ASSERT_EQ(issues.size(), 1u) << dump(issues);
    EXPECT_EQ(issues[0].key, c.key) << dump(issues);
    for (const auto& f : c.fragments) EXPECT_NE(issues[0].problem.find(f), std::string::npos) << f << dump(issues);
  }
  // bc_init = "identity" sets state_dim to d: both are named.
  const auto issues = issues_of(head + encoder + "bc_init = \"identity\"\n");
  ASSERT_EQ(issues.size(), 2u) << dump(issues);
  EXPECT_EQ(issues[0].key, "model.bc_init") << dump(issues);
  EXPECT_EQ(issues[1].key, "model.state_dim") << dump(issues);
  // input_scale only with tokens (the other inputs feed X_0 as given).
  expect_only(head + encoder + tokens + "input_scale = 2.0\n", "model.input_scale",
              {"has no meaning with input = \"tokens\""});
  EXPECT_NO_THROW(parse_sweep(head + encoder + "input = \"sphere\"\ninput_scale = 2.0\n"));
  // The published block's parameters and the ablations are accepted.
  EXPECT_NO_THROW(parse_sweep(head + encoder + "lambda_mlp = 0.0\nmeasure = \"attention\"\ninit = \"checkpoint\"\n"));
  EXPECT_NO_THROW(parse_sweep(head + "block = \"encoder\"\nmodel_folder = \"m\"\nnorm = \"none\"\nmlp = \"none\"\n"));
}

TEST(EncoderKeys, EncoderParametersAreOnlyUsedWithAnEncoder) {
  const std::string only = "is only used with block = \"encoder\", but block is \"stack\" here";
  const std::string blocks_only = "is only used with block = \"encoder\" or \"mamba2\", but block is \"stack\" here";
  expect_only(head + "init = \"checkpoint\"\n", "model.init", {"\"checkpoint\" (the model folder's", blocks_only});
  expect_only(head + "init_draw = 2\n", "model.init_draw", {"a draw of the model's random weights (2)", blocks_only});
  expect_only(head + "measure = \"attention\"\n", "model.measure", {only});
  expect_only(head + "mlp = \"model\"\n", "model.mlp", {"\"model\" (the encoder block's own MLP)", only});
  expect_only(head + "init_draw = -2\n", "model.init_draw", {"must be >= -1"});
  // block swept: the stack's points fail, counted.
  expect_only(head + "model_folder = \"m\"\nheads = 2\nmlp = \"model\"\n[axes]\nblock = [\"stack\", \"encoder\"]\n",
              "model.mlp", {only, "at 1 of 2 grid points, e.g. point 0 (block = stack)"});
}

// ---- the attention mask -----------------------------------------------------------------

TEST(EncoderKeys, MaskIsAnEncoderAxis) {
  const auto spec = parse_sweep(head + encoder + "[axes]\nmask = [\"none\", \"causal\"]\n");
  ASSERT_EQ(spec.n_points(), 2u);
  EXPECT_EQ(spec.model(spec.point(0)).mask, Mask::none);
  EXPECT_EQ(spec.model(spec.point(1)).mask, Mask::causal);
  const std::string text = spec.canonical_toml();
  EXPECT_NE(text.find("[axes]\nmask = [\"none\", \"causal\"]\n"), std::string::npos) << text;
  const auto again = parse_sweep(text, "canonical");
  EXPECT_EQ(again.canonical_toml(), text);
  EXPECT_EQ(again.point(1), spec.point(1));
  // Under [model]: written only when not at its default "none" (the plan hash of a sweep without
  // it stays as it was).
  const auto none = parse_sweep(head + encoder + "mask = \"none\"\n");
  EXPECT_EQ(none.canonical_toml(), parse_sweep(head + encoder).canonical_toml());
  EXPECT_EQ(none.canonical_toml().find("mask"), std::string::npos);
  const auto causal = parse_sweep(head + encoder + "mask = \"causal\"\n");
  EXPECT_NE(causal.canonical_toml().find("\nmask = \"causal\"\n"), std::string::npos) << causal.canonical_toml();
  EXPECT_NE(causal.plan_hash(), none.plan_hash());
  EXPECT_EQ(parse_sweep(causal.canonical_toml()).canonical_toml(), causal.canonical_toml());
}

TEST(EncoderKeys, MaskIsOnlyUsedWithAnEncoder) {
  const std::string only = "is only used with block = \"encoder\", but block is \"stack\" here";
  expect_only(head + "mask = \"causal\"\n", "model.mask",
              {"\"causal\" (the encoder block's causal attention mask)", only});
  expect_only(head + "model_folder = \"m\"\nheads = 2\nmask = \"causal\"\n[axes]\nblock = [\"stack\", \"encoder\"]\n",
              "model.mask", {only, "at 1 of 2 grid points, e.g. point 0 (block = stack)"});
  expect_only(head + encoder + "mask = \"triangular\"\n", "model.mask", {"must be one of \"none\", \"causal\""});
  EXPECT_NO_THROW(parse_sweep(head + "mask = \"none\"\n"));  // its default is the stack's too
}

// ---- one lambda per layer -----------------------------------------------------------------

TEST(EncoderKeys, LambdaLayersAttachToEveryPointAndEnterTheCanonicalText) {
  const std::string no_lambda = "block = \"encoder\"\nmodel_folder = \"models/tiny\"\nheads = 2\n"
                                "mlp = \"model\"\nnorm = \"layernorm\"\n";
  const auto spec = parse_sweep(head + no_lambda +
                                "lambda_layers = [1, 0.5, -0.25]\n[axes]\nlambda_mlp = [\"lambda\", 1.0]\n");
  ASSERT_TRUE(spec.lambda_layers);
  EXPECT_EQ(*spec.lambda_layers, (std::vector<double>{1.0, 0.5, -0.25}));
  for (std::size_t p = 0; p < spec.n_points(); ++p)
    EXPECT_EQ(spec.model(spec.point(p)).lambda_layers, spec.lambda_layers);
  EXPECT_TRUE(spec.model(spec.point(0)).lambda_mlp_is_lambda);
  EXPECT_FALSE(spec.model(spec.point(1)).lambda_mlp_is_lambda);
  const std::string text = spec.canonical_toml();
  EXPECT_NE(text.find("model_folder = \"models/tiny\"\nlambda_layers = [1.0, 0.5, -0.25]\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("\nlambda = "), std::string::npos) << text;  // replaced by lambda_layers
  const auto again = parse_sweep(text, "canonical");
  EXPECT_EQ(again.canonical_toml(), text);
  EXPECT_EQ(*again.lambda_layers, *spec.lambda_layers);
  // The values are the plan's: another profile is another plan hash, none at all the text without
  // the key.
  const auto other = parse_sweep(head + no_lambda +
                                 "lambda_layers = [1, 0.5, -0.5]\n[axes]\nlambda_mlp = [\"lambda\", 1.0]\n");
  EXPECT_NE(other.plan_hash(), spec.plan_hash());
  const auto without = parse_sweep(head + no_lambda + "[axes]\nlambda_mlp = [\"lambda\", 1.0]\n");
  EXPECT_EQ(without.canonical_toml().find("lambda_layers"), std::string::npos);
  EXPECT_FALSE(without.model(without.point(0)).lambda_layers);
  // With a depth axis, one value per layer up to the largest depth (every task runs to it).
  std::string axis = head + no_lambda + "lambda_layers = [1, 1, 0, 0, 0]\n[axes]\ndepth = [5, 2]\n";
  axis.erase(axis.find("depth = 3\n"), 10);
  const auto deeper = parse_sweep(axis);
  EXPECT_EQ(deeper.max_depth(), 5);
  EXPECT_EQ(parse_sweep(deeper.canonical_toml()).canonical_toml(), deeper.canonical_toml());
  // Set on the command line like any [model] key.
  const auto overridden = parse_sweep(head + no_lambda, "sweep", {"model.lambda_layers=[0, 1, 0]"});
  EXPECT_EQ(*overridden.lambda_layers, (std::vector<double>{0.0, 1.0, 0.0}));
}

TEST(EncoderKeys, LambdaLayersRefusals) {
  const std::string enc = head + "block = \"encoder\"\nmodel_folder = \"m\"\nheads = 2\n";  // depth = 3
  std::string with_depth_axis = enc;
  with_depth_axis.erase(with_depth_axis.find("depth = 3\n"), 10);
  expect_only(enc + "lambda_layers = [1.0, 0.5]\n", "model.lambda_layers",
              {"has 2 values but the depth is 3: give exactly one lambda per layer, lambda_l of layer l = 1..3"});
  expect_only(enc + "lambda_layers = [1.0]\n", "model.lambda_layers", {"has 1 value but the depth is 3"});
  expect_only(with_depth_axis + "lambda_layers = [1, 1, 1]\n[axes]\ndepth = [3, 4]\n", "model.lambda_layers",
              {"has 3 values but the depth is 4 (the depth axis's largest: every task runs to it)"});
  expect_only(enc + "lambda_layers = [1, 1, 1]\n[axes]\nlambda = [0.0, 1.0]\n", "axes.lambda",
              {"is swept, but lambda_layers gives every layer its own lambda and replaces lambda at every grid point"});
  expect_only(enc + "lambda_layers = [1, 1, 1]\n[[zip]]\nlambda = [0.0, 1.0]\ninit_draw = [0, 1]\n", "zip[0].lambda",
              {"is swept, but lambda_layers"});
  expect_only(enc + "lambda = 1.0\nlambda_layers = [1, 1, 1]\n", "model.lambda",
              {"lambda_layers gives every layer its own lambda and replaces lambda: give one or the other"});
  expect_only(enc + "lambda_layers = 1.0\n", "model.lambda_layers",
              {"must be a list of numbers, one lambda per layer (lambda_1 of layer 1 first)", "a float 1"});
  expect_only(enc + "lambda_layers = [1.0, \"x\", 0.0]\n", "model.lambda_layers[1]",
              {"must be a number (the lambda of layer 2), got a string \"x\""});
  expect_only(enc + "lambda_layers = [1.0, nan, 0.0]\n", "model.lambda_layers[1]",
              {"must be a finite number, got nan"});
  expect_only(enc + "[axes]\nlambda_layers = [[1.0, 1.0, 1.0]]\n", "axes.lambda_layers", {"not sweepable"});
  // The stack: refused at each of its points, on the key.
  const std::string stack_only = "one lambda per layer is only implemented for block = \"encoder\"";
  expect_only(head + "lambda_layers = [1, 1, 1]\n", "model.lambda_layers", {stack_only, "but block is \"stack\" here"});
  expect_only(
      head + "model_folder = \"m\"\nheads = 2\nlambda_layers = [1, 1, 1]\n[axes]\nblock = [\"stack\", \"encoder\"]\n",
      "model.lambda_layers", {stack_only, "at 1 of 2 grid points, e.g. point 0 (block = stack)"});
}

TEST(EncoderKeys, GradientsAreRefusedForEncoders) {
  expect_only(head + encoder + "[output]\ngradients = \"last\"\n", "output.gradients",
              {"not implemented for block = \"encoder\"", "leave gradients at \"none\""});
  // "exact" needs a linear stack: not said a second time for an encoder.
  expect_only(head + encoder + "[output]\ngradients = \"all\"\ngrad_method = \"exact\"\n", "output.gradients",
              {"not implemented for block = \"encoder\""});
  EXPECT_NO_THROW(parse_sweep(head + encoder + "[output]\nspectra = \"all\"\nmixer_spectra = \"last\"\n"));
}

}  // namespace
}  // namespace rcsweep::config
