// open_model: one entry per folder and process, config.json alone unless weights are asked for,
// the entry upgraded by a later call asking for weights, the checkpoint module's ConfigErrors
// passed through and not remembered, and concurrent callers given the same model.
#include "models/encoder/model_cache.hpp"

#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "encoder_test_folder.hpp"

namespace rcsweep::models::encoder {
namespace {

using test::TempDir;

TEST(ModelCache, ConfigAloneWithoutWeights) {
  TempDir dir;
  test::write_config(dir.path(), test::tiny_bert(8, 2, 3));  // no model.safetensors
  const auto m = open_model(dir.path(), false);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->shape.d, 8);
  EXPECT_EQ(m->shape.heads, 2);
  EXPECT_EQ(m->shape.layers, 3);
  EXPECT_EQ(m->shape.vocab, 30);
  EXPECT_FALSE(m->folder);
  EXPECT_FALSE(m->weights);
  // The same entry again, under another spelling of the folder too.
  EXPECT_EQ(open_model(dir.path(), false), m);
  EXPECT_EQ(open_model(dir.path() / "." / "", false), m);
}

TEST(ModelCache, WeightsAskedForLaterUpgradeTheEntry) {
  TempDir dir;
  const RandomWeights source(test::tiny_bert(), 7, 1);
  test::write_checkpoint(dir.path(), source);
  const auto config_only = open_model(dir.path(), false);
  ASSERT_FALSE(config_only->weights);
  const auto with_weights = open_model(dir.path(), true);
  ASSERT_TRUE(with_weights->weights);
  ASSERT_TRUE(with_weights->folder);
  EXPECT_NE(with_weights, config_only);
  EXPECT_FALSE(config_only->weights);  // what an earlier caller holds stays as it was
  EXPECT_EQ(&with_weights->weights->folder(), with_weights->folder.get());
  EXPECT_EQ(with_weights->folder->stored_bytes(), std::filesystem::file_size(dir / "model.safetensors"));
  EXPECT_EQ(with_weights->shape.d, source.shape().d);
  EXPECT_EQ(with_weights->shape.layers, source.shape().layers);
  // Later calls, with or without weights, get the entry with weights.
  EXPECT_EQ(open_model(dir.path(), false), with_weights);
  EXPECT_EQ(open_model(dir.path(), true), with_weights);
  // The weights are the source's, bitwise (written in F64).
  const BlockWeights a = source.block(1), b = with_weights->weights->block(1);
  EXPECT_TRUE(a.W_Q == b.W_Q);
  EXPECT_TRUE(a.W_2 == b.W_2);
  EXPECT_EQ(a.b_O, b.b_O);
}

TEST(ModelCache, CheckpointErrorsPassThroughAndAreNotRemembered) {
  TempDir dir;
  const auto missing = checkpoint::test::config_error([&] { open_model(dir.path(), false); });
  EXPECT_NE(missing.find("config.json"), std::string::npos) << missing;
  test::write_config(dir.path(), test::tiny_bert());
  // No weights file: the folder's own message, naming it.
  const auto no_weights = checkpoint::test::config_error([&] { open_model(dir.path(), true); });
  EXPECT_NE(no_weights.find("model.safetensors"), std::string::npos) << no_weights;
  // The config alone still opens (the failed upgrade left nothing behind), and so does the folder
  // once its weights are there.
  EXPECT_EQ(open_model(dir.path(), false)->shape.d, 8);
  test::write_checkpoint(dir.path(), RandomWeights(test::tiny_bert(), 1, 0));
  EXPECT_TRUE(open_model(dir.path(), true)->weights);
}

TEST(ModelCache, BadConfigIsTheShapesMessage) {
  TempDir dir;
  checkpoint::test::write_bytes(dir / "config.json", R"({"model_type": "xlnet"})");
  const auto message = checkpoint::test::config_error([&] { open_model(dir.path(), false); });
  EXPECT_NE(message.find("xlnet"), std::string::npos) << message;
}

TEST(ModelCache, ConcurrentCallersShareOneModel) {
  TempDir dir;
  test::write_checkpoint(dir.path(), RandomWeights(test::tiny_bert(), 3, 0));
  std::vector<std::future<std::shared_ptr<const LoadedModel>>> calls;
  for (int i = 0; i < 4; ++i)
    calls.push_back(std::async(std::launch::async, [&] { return open_model(dir.path(), true); }));
  const auto first = calls[0].get();
  ASSERT_TRUE(first->weights);
  for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_EQ(calls[i].get(), first);
}

}  // namespace
}  // namespace rcsweep::models::encoder
