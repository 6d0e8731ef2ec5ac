// Mamba-2's open_model: one entry per folder and process, config.json alone unless weights are asked
// for, the entry upgraded by a later call asking for weights, the config's and the checkpoint
// module's ConfigErrors passed through and not remembered, and concurrent callers given the same
// model.
#include "models/mamba2/model_cache.hpp"

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mamba2_test_folder.hpp"

namespace rcsweep::models::mamba2 {
namespace {

using test::TempDir;

TEST(Mamba2ModelCache, ConfigAloneWithoutWeights) {
  TempDir dir;
  test::write_config(dir.path());  // no model.safetensors
  const auto m = open_model(dir.path(), false);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->shape.d_model, test::d);
  EXPECT_EQ(m->shape.layers, test::n_layer);
  EXPECT_EQ(m->shape.heads(), 4);
  EXPECT_EQ(m->shape.ngroups, 2);
  EXPECT_EQ(m->shape.chunk_size, test::chunk);
  EXPECT_EQ(m->shape.vocab, 30);
  EXPECT_FALSE(m->folder);
  EXPECT_FALSE(m->weights);
  // The same entry again, under another spelling of the folder too.
  EXPECT_EQ(open_model(dir.path(), false), m);
  EXPECT_EQ(open_model(dir.path() / "." / "", false), m);
}

TEST(Mamba2ModelCache, WeightsAskedForLaterUpgradeTheEntry) {
  TempDir dir;
  test::write_config(dir.path());
  const RandomWeights source(open_model(dir.path(), false)->shape, 7, 1);
  test::write_checkpoint(dir.path(), source);
  const auto config_only = open_model(dir.path(), false);
  ASSERT_FALSE(config_only->weights);
  const auto with_weights = open_model(dir.path(), true);
  ASSERT_TRUE(with_weights->weights);
  ASSERT_TRUE(with_weights->folder);
  EXPECT_NE(with_weights, config_only);
  EXPECT_FALSE(config_only->weights);  // what an earlier caller holds stays as it was
  EXPECT_EQ(with_weights->folder->stored_bytes(), std::filesystem::file_size(dir / "model.safetensors"));
  EXPECT_EQ(with_weights->shape.d_model, test::d);
  // Later calls, with or without weights, get the entry with weights.
  EXPECT_EQ(open_model(dir.path(), false), with_weights);
  EXPECT_EQ(open_model(dir.path(), true), with_weights);
  // The weights are the source's, bitwise (written in F64).
  const LayerWeights a = source.layer(1), b = with_weights->weights->layer(1);
  EXPECT_TRUE(a.W_in == b.W_in);
  EXPECT_TRUE(a.W_out == b.W_out);
  EXPECT_TRUE(a.conv == b.conv);
  EXPECT_EQ(a.A_log, b.A_log);
}

TEST(Mamba2ModelCache, ErrorsPassThroughAndAreNotRemembered) {
  TempDir dir;
  const auto missing = checkpoint::test::config_error([&] { open_model(dir.path(), false); });
  EXPECT_NE(missing.find("config.json"), std::string::npos) << missing;
  test::write_config(dir.path());
  // No weights file: the folder's own message, naming it.
  const auto no_weights = checkpoint::test::config_error([&] { open_model(dir.path(), true); });
  EXPECT_NE(no_weights.find("safetensors"), std::string::npos) << no_weights;
  // The config alone still opens: the failed upgrade left nothing behind.
  EXPECT_EQ(open_model(dir.path(), false)->shape.d_model, test::d);
}

TEST(Mamba2ModelCache, AConfigThatIsNotMamba2IsTheShapesMessage) {
  TempDir dir;
  checkpoint::test::write_bytes(dir / "config.json",
                                R"({"d_model": 8, "n_layer": 2, "vocab_size": 30, "ssm_cfg": {"layer": "Mamba1"}})");
  const auto message = checkpoint::test::config_error([&] { open_model(dir.path(), false); });
  EXPECT_NE(message.find("layer"), std::string::npos) << message;
  EXPECT_NE(message.find("config.json"), std::string::npos) << message;
}

TEST(Mamba2ModelCache, ConcurrentCallersShareOneModel) {
  TempDir dir;
  test::write_config(dir.path());
  std::vector<std::future<std::shared_ptr<const LoadedModel>>> calls;
  for (int i = 0; i < 4; ++i)
    calls.push_back(std::async(std::launch::async, [&] { return open_model(dir.path(), false); }));
  const auto first = calls[0].get();
  for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_EQ(calls[i].get(), first);
}

}  // namespace
}  // namespace rcsweep::models::mamba2
