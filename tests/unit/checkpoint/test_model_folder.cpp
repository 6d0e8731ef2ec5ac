// ModelFolder: a single-file and a sharded folder read back, a Linear weight transposed on any
// thread count, and each refusal naming file and tensor.
#include "checkpoint/model_folder.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/parallel.hpp"
#include "checkpoint_test_support.hpp"

namespace rcsweep::checkpoint {
namespace {

using test::config_error;
using test::TempDir;
using test::Writer;

const char* const config = R"({"model_type": "bert", "hidden_size": 2, "num_hidden_layers": 2})";

std::string f32(std::vector<float> v) { return test::bytes_of(v); }

// A folder with config.json and two shards: embeddings in shard 1, the layers in shard 2.
void write_sharded(const TempDir& dir) {
  test::write_bytes(dir / "config.json", config);
  Writer a, b;
  a.add("embeddings.weight", "F32", "[2,2]", f32({1, 2, 3, 4}));
  b.add("layer.0.weight", "F16", "[2]", test::bytes_of(std::vector<std::uint16_t>{0x3c00, 0xc000}))
      .add("layer.1.weight", "BF16", "[1,2]", test::bytes_of(std::vector<std::uint16_t>{0x3f80, 0x4040}));
  a.write(dir / "model-00001-of-00002.safetensors");
  b.write(dir / "model-00002-of-00002.safetensors");
  test::write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {"total_size": 28}, "weight_map": {
    "embeddings.weight": "model-00001-of-00002.safetensors",
    "layer.0.weight": "model-00002-of-00002.safetensors",
    "layer.1.weight": "model-00002-of-00002.safetensors"}})");
}

TEST(ModelFolder, SingleFile) {
  TempDir dir;
  test::write_bytes(dir / "config.json", config);
  Writer w;
  w.add("b", "F64", "[2]", test::bytes_of(std::vector<double>{0.5, -1})).add("a", "F32", "[1,2]", f32({7, 8}));
  w.write(dir / "model.safetensors");
  const ModelFolder m = ModelFolder::open(dir.path());
  EXPECT_EQ(m.config().integer("num_hidden_layers"), 2);
  EXPECT_EQ(m.tensor_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.values("b"), (std::vector<double>{0.5, -1}));
  EXPECT_EQ(m.matrix("a")(0, 1), 8.0);
  EXPECT_EQ(m.stored_bytes(), std::filesystem::file_size(dir / "model.safetensors"));
  EXPECT_EQ(m.files().size(), 1u);
  m.expect("a", {1, 2});
  EXPECT_EQ(m.weights_file(), (dir / "model.safetensors").string());
}

// An nn.Linear weight [out, in] of 150 x 13 (three panels of stored rows, the last one short) in
// F32: its transpose holds entry (i, j) = stored (j, i) exactly, the same bits on 1, 2 and 3 threads;
// a 1-D tensor is refused.
TEST(ModelFolder, TransposedIsTheExactTransposeOnAnyThreadCount) {
  TempDir dir;
  test::write_bytes(dir / "config.json", config);
  constexpr std::size_t out = 150, in = 13;
  std::vector<float> stored(out * in);
  for (std::size_t k = 0; k < stored.size(); ++k) stored[k] = static_cast<float>(k % 97) * 0.25f - 7.0f;
  Writer w;
  w.add("linear", "F32", "[150,13]", f32(stored)).add("bias", "F32", "[2]", f32({1, 2}));
  w.write(dir / "model.safetensors");
  const ModelFolder m = ModelFolder::open(dir.path());
  for (const int threads : {1, 2, 3}) {
    parallel::set_threads(threads);
    const Matrix t = m.transposed("linear");
    parallel::set_threads(1);
    ASSERT_EQ(t.rows(), in);
    ASSERT_EQ(t.cols(), out);
    for (std::size_t i = 0; i < in; ++i)
      for (std::size_t j = 0; j < out; ++j)
        ASSERT_EQ(t(i, j), static_cast<double>(stored[j * in + i])) << i << ", " << j << " on " << threads;
  }
  EXPECT_THROW(m.transposed("bias"), Error);
}

TEST(ModelFolder, Sharded) {
  TempDir dir;
  write_sharded(dir);
  const ModelFolder m = ModelFolder::open(dir.path());
  ASSERT_EQ(m.files().size(), 2u);
  EXPECT_EQ(m.tensor_names(), (std::vector<std::string>{"embeddings.weight", "layer.0.weight", "layer.1.weight"}));
  EXPECT_EQ(m.values("embeddings.weight"), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(m.values("layer.0.weight"), (std::vector<double>{1, -2}));
  EXPECT_EQ(m.values("layer.1.weight"), (std::vector<double>{1, 3}));
  EXPECT_EQ(m.file_of("layer.1.weight").file(), (dir / "model-00002-of-00002.safetensors").string());
  EXPECT_EQ(m.stored_bytes(), std::filesystem::file_size(dir / "model-00001-of-00002.safetensors") +
                                  std::filesystem::file_size(dir / "model-00002-of-00002.safetensors"));
  const std::string shape = config_error([&] { m.expect("layer.0.weight", {3}); });
  EXPECT_NE(shape.find("model-00002-of-00002.safetensors: tensor \"layer.0.weight\" has shape [2], expected [3]"),
            std::string::npos)
      << shape;
  const std::string missing = config_error([&] { (void)m.values("pooler.weight"); });
  EXPECT_NE(missing.find("model.safetensors.index.json: tensor \"pooler.weight\" is missing"), std::string::npos)
      << missing;
  EXPECT_EQ(m.weights_file(), (dir / "model.safetensors.index.json").string());
  std::vector<double> row(2);
  m.rows("embeddings.weight", 1, 1, row);
  EXPECT_EQ(row, (std::vector<double>{3, 4}));
  m.rows("layer.1.weight", 0, 1, row);
  EXPECT_EQ(row, (std::vector<double>{1, 3}));
}

TEST(ModelFolder, SingleFileWinsOverAnIndex) {
  TempDir dir;
  write_sharded(dir);
  Writer w;
  w.add("only", "F32", "[1]", f32({5}));
  w.write(dir / "model.safetensors");
  EXPECT_EQ(ModelFolder::open(dir.path()).tensor_names(), std::vector<std::string>{"only"});
}

// The message of opening `dir`, which must contain every one of `want`.
void expect_refusal(const TempDir& dir, const std::vector<std::string>& want) {
  const std::string m = config_error([&] { (void)ModelFolder::open(dir.path()); });
  for (const std::string& w : want) EXPECT_NE(m.find(w), std::string::npos) << "want '" << w << "' in: " << m;
}

TEST(ModelFolder, RefusesMissingFiles) {
  TempDir dir;
  expect_refusal(dir, {"config.json: no such file"});
  test::write_bytes(dir / "config.json", config);
  expect_refusal(dir, {dir.path().string(), "no model.safetensors and no model.safetensors.index.json"});
  test::write_bytes(dir / "pytorch_model.bin", "x");
  expect_refusal(dir, {"pytorch_model.bin is a PyTorch file: scripts/convert_checkpoint.py converts it"});
  const std::string nodir = config_error([&] { (void)ModelFolder::open(dir / "nope"); });
  EXPECT_NE(nodir.find("not a model folder"), std::string::npos);
}

TEST(ModelFolder, RefusesBadIndexes) {
  TempDir dir;
  write_sharded(dir);
  const auto index = dir / "model.safetensors.index.json";
  std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
  expect_refusal(dir,
                 {"model.safetensors.index.json: tensor \"layer.0.weight\": shard \"model-00002-of-00002.safetensors\" "
                  "named by the weight_map does not exist"});
  test::write_bytes(index, R"({"weight_map": {"x": "../model-00001-of-00002.safetensors", "y": 3}})");
  expect_refusal(dir,
                 {"tensor \"x\": shard \"../model-00001-of-00002.safetensors\" is not a file name in the model folder",
                  "tensor \"y\": the weight_map names a JSON number"});
  test::write_bytes(index, R"({"weight_map": ["a"]})");
  expect_refusal(dir, {"model.safetensors.index.json: no \"weight_map\" object"});
  test::write_bytes(index, R"({"weight_map": {}})");
  expect_refusal(dir, {"the weight_map names no tensor"});
  test::write_bytes(index, R"({"weight_map": )");
  expect_refusal(dir, {"model.safetensors.index.json: the index is not valid JSON"});
  test::write_bytes(index, R"({"weight_map": {"embeddings.weight": "model-00001-of-00002.safetensors",
                                              "encoder.weight": "model-00001-of-00002.safetensors"}})");
  expect_refusal(dir, {"tensor \"encoder.weight\": the weight_map puts it in \"model-00001-of-00002.safetensors\", "
                       "which does not hold it"});
}

TEST(ModelFolder, RefusesABadShardNamingIt) {
  TempDir dir;
  write_sharded(dir);
  test::write_bytes(dir / "model-00002-of-00002.safetensors",
                    test::safetensors_bytes(R"({"layer.0.weight":{"dtype":"F16","shape":[4],"data_offsets":[0,4]}})",
                                            std::string(4, '\0')));
  expect_refusal(dir, {"model-00002-of-00002.safetensors: tensor \"layer.0.weight\"", "needs 8"});
  test::write_bytes(dir / "config.json", "[]");
  expect_refusal(dir, {"config.json: the configuration is a JSON array"});
}

}  // namespace
}  // namespace rcsweep::checkpoint
