// block = "mamba2" in a sweep file (docs/CONFIG.md "Mamba-2 blocks"): the published block and its
// ablations (lambda, lambda_layers, norm, gate, gated_norm) as axes, gated_norm's values and its
// canonical text (written only when false: the plan hash of every other sweep stays), and the
// refusals of the configuration, each naming its key (no file opened: the model folder and the
// token file are checked by store::load_encoder_inputs).
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

const std::string head = "[sweep]\nname = \"m2\"\nreplicates = 2\n[model]\nT = 4\nd = 8\ndepth = 3\n";
// The published block: the skip, the pre-norms, the gate (the gated norm is on by default).
const std::string block = "block = \"mamba2\"\nmodel_folder = \"models/m2\"\n";
const std::string mamba2 = block + "lambda = 1.0\nnorm = \"rms\"\ngate = \"silu\"\n";

TEST(Mamba2Keys, TheAblationsAreAxes) {
  const auto spec = parse_sweep(head + block +
                                "[axes]\nlambda = [1.0, 0.0, -0.5]\nnorm = [\"rms\", \"none\"]\n"
                                "gate = [\"silu\", \"none\"]\ngated_norm = [true, false]\n");
  ASSERT_EQ(spec.n_points(), 24u);
  const ModelParams first = spec.model(spec.point(0));
  EXPECT_EQ(first.block, Block::mamba2);
  EXPECT_EQ(first.lambda, 1.0);
  EXPECT_EQ(first.norm, Norm::rms);
  EXPECT_EQ(first.gate, Gate::silu);
  EXPECT_TRUE(first.gated_norm);
  EXPECT_FALSE(first.homogeneous());  // SiLU, the norms' eps: the scale of X matters
  const ModelParams last = spec.model(spec.point(23));
  EXPECT_EQ(last.lambda, -0.5);
  EXPECT_EQ(last.norm, Norm::none);
  EXPECT_EQ(last.gate, Gate::none);
  EXPECT_FALSE(last.gated_norm);
  EXPECT_TRUE(last.model_folder.empty());  // attached once the folder is loaded (set_encoder_inputs)
  const std::string text = spec.canonical_toml();
  EXPECT_NE(text.find("gated_norm = [\"true\", \"false\"]\n"), std::string::npos) << text;
  const auto again = parse_sweep(text, "canonical");
  EXPECT_EQ(again.canonical_toml(), text);
  EXPECT_EQ(again.plan_hash(), spec.plan_hash());
  // Loaded: every point gets the folder.
  auto loaded = spec;
  loaded.set_encoder_inputs("/abs/models/m2", nullptr, "digest");
  EXPECT_EQ(loaded.model(loaded.point(5)).model_folder, "/abs/models/m2");
}

TEST(Mamba2Keys, GatedNormIsWrittenOnlyWhenOff) {
  const auto on = parse_sweep(head + mamba2 + "gated_norm = true\n");
  EXPECT_EQ(on.canonical_toml(), parse_sweep(head + mamba2).canonical_toml());
  EXPECT_EQ(on.canonical_toml().find("gated_norm"), std::string::npos);
  const auto off = parse_sweep(head + mamba2 + "gated_norm = false\n");
  EXPECT_FALSE(off.model(off.point(0)).gated_norm);
  EXPECT_NE(off.canonical_toml().find("\ngated_norm = \"false\"\n"), std::string::npos) << off.canonical_toml();
  EXPECT_NE(off.plan_hash(), on.plan_hash());
  EXPECT_EQ(parse_sweep(off.canonical_toml()).canonical_toml(), off.canonical_toml());
  // The string spelling is the same value; a command-line override too.
  EXPECT_EQ(parse_sweep(head + mamba2 + "gated_norm = \"false\"\n").plan_hash(), off.plan_hash());
  EXPECT_EQ(parse_sweep(head + mamba2, "sweep", {"model.gated_norm=false"}).plan_hash(), off.plan_hash());
  // A stack sweep's text (and plan hash) has no gated_norm.
  const auto stack = parse_sweep(head);
  EXPECT_EQ(stack.canonical_toml().find("gated_norm"), std::string::npos);
  expect_only(head + mamba2 + "gated_norm = 1\n", "model.gated_norm", {"must be one of \"true\", \"false\""});
  expect_only(head + mamba2 + "gated_norm = \"off\"\n", "model.gated_norm", {"must be one of \"true\", \"false\""});
}

TEST(Mamba2Keys, LambdaLayersAndCheckpointAreAccepted) {
  const auto spec = parse_sweep(head + "block = \"mamba2\"\nmodel_folder = \"m\"\nnorm = \"rms\"\ngate = \"silu\"\n"
                                       "lambda_layers = [1, -1, 0.5]\n[axes]\ninit = [\"random\", \"checkpoint\"]\n");
  EXPECT_EQ(*spec.model(spec.point(1)).lambda_layers, (std::vector<double>{1.0, -1.0, 0.5}));
  EXPECT_EQ(spec.model(spec.point(1)).init, Init::checkpoint);
  EXPECT_NO_THROW(parse_sweep(head + mamba2 + "input = \"tokens\"\ninput_path = \"t.txt\"\ninit_draw = 3\n"));
  EXPECT_NO_THROW(parse_sweep(head + mamba2 + "input = \"gaussian\"\n[output]\nmixer_spectra = \"all\"\n"));
}

TEST(Mamba2Keys, WhatTheBlockDoesNotHaveIsRefusedOnItsKey) {
  std::string layernorm = head + mamba2;
  layernorm.replace(layernorm.find("norm = \"rms\""), 12, "norm = \"layernorm\"");
  expect_only(layernorm, "model.norm", {"\"layernorm\" is not a norm of the Mamba-2 block"});
  expect_only(head + block + "[axes]\nnorm = [\"rms\", \"layernorm\"]\n", "axes.norm",
              {"is not a norm of the Mamba-2 block", "at 1 of 2 grid points"});
  expect_only(head + mamba2 + "mlp = \"model\"\n", "model.mlp", {"the Mamba-2 block has no MLP"});
  expect_only(head + mamba2 + "mlp = \"relu\"\n", "model.mlp", {"the Mamba-2 block has no MLP"});
  expect_only(head + mamba2 + "mask = \"causal\"\n", "model.mask",
              {"has no meaning with block = \"mamba2\" (the SSD is causal already)"});
  expect_only(head + mamba2 + "measure = \"attention\"\n", "model.measure", {"has no meaning with block = \"mamba2\""});
  expect_only(head + mamba2 + "heads = 2\n", "model.heads", {"config.json's expand d_model / headdim heads"});
  expect_only(head + mamba2 + "mixer = \"ssd\"\n", "model.mixer", {"the block's mixer is its SSD"});
  expect_only(head + mamba2 + "state_dim = 8\n", "model.state_dim", {"config.json's d_state"});
  expect_only(head + mamba2 + "lambda_mlp = 1.0\n", "model.lambda_mlp", {"the block has no MLP"});
  expect_only(head + mamba2 + "skip_scale = 0.5\n", "model.skip_scale", {"must be 1 with block = \"mamba2\""});
  expect_only(head + mamba2 + "input = \"tokens\"\ninput_path = \"t.txt\"\ninput_scale = 2.0\n", "model.input_scale",
              {"has no meaning with input = \"tokens\""});
  expect_only(head + mamba2 + "[output]\ngradients = \"last\"\n", "output.gradients",
              {"not implemented for block = \"mamba2\""});
}

TEST(Mamba2Keys, FolderAndGatedNormBelongToTheirBlocks) {
  expect_only(head + "block = \"mamba2\"\n", "model.model_folder", {"required with block = \"mamba2\"", "config.json"});
  expect_only(head + "gated_norm = false\n", "model.gated_norm",
              {"only used with block = \"mamba2\", but block is \"stack\" here"});
  expect_only(head + "block = \"encoder\"\nmodel_folder = \"m\"\nheads = 2\ngated_norm = false\n", "model.gated_norm",
              {"only used with block = \"mamba2\", but block is \"encoder\" here"});
  expect_only(head + "model_folder = \"m\"\n[axes]\nblock = [\"encoder\", \"mamba2\"]\n", "axes.block",
              {"is \"encoder\" at some grid points and \"mamba2\" at others"});
  // Keys of the model blocks at a stack point name both blocks.
  expect_only(head + "init = \"checkpoint\"\n", "model.init",
              {"is only used with block = \"encoder\" or \"mamba2\", but block is \"stack\" here"});
}

}  // namespace
}  // namespace rcsweep::config
