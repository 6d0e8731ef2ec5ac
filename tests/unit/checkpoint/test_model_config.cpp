// ModelConfig: typed accessors of config.json and their refusals naming file and key.
#include "checkpoint/model_config.hpp"

#include <nlohmann/json.hpp>
#include <string>

#include <gtest/gtest.h>

#include "checkpoint/safetensors.hpp"
#include "checkpoint_test_support.hpp"

namespace rcsweep::checkpoint {
namespace {

using test::config_error;

const char* const bert = R"({
  "architectures": ["BertModel"], "model_type": "bert", "hidden_size": 768, "num_attention_heads": 12,
  "layer_norm_eps": 1e-12, "initializer_range": 0.02, "hidden_act": "gelu", "tie_word_embeddings": true,
  "classifier_dropout": null, "vocab_size": 30522, "huge": 18446744073709551615, "float_size": 768.0,
  "id2label": {"0": "LABEL_0"}
})";

TEST(ModelConfig, TypedAccessors) {
  const ModelConfig c = ModelConfig::parse(bert, "m/config.json");
  EXPECT_EQ(c.file(), "m/config.json");
  EXPECT_EQ(c.integer("hidden_size"), 768);
  EXPECT_EQ(c.number("hidden_size"), 768.0);
  EXPECT_EQ(c.number("layer_norm_eps"), 1e-12);
  EXPECT_EQ(c.string("hidden_act"), "gelu");
  EXPECT_TRUE(c.boolean("tie_word_embeddings"));
  EXPECT_EQ(c.strings("architectures"), std::vector<std::string>{"BertModel"});
  EXPECT_TRUE(c.has("vocab_size"));
  EXPECT_FALSE(c.has("classifier_dropout"));  // null counts as absent
  EXPECT_EQ(c.integer("max_position_embeddings", 512), 512);
  EXPECT_EQ(c.number("classifier_dropout", 0.1), 0.1);
  EXPECT_EQ(c.string("position_embedding_type", "absolute"), "absolute");
  EXPECT_FALSE(c.boolean("is_decoder", false));
  EXPECT_EQ(c.json().at("id2label").at("0"), "LABEL_0");
}

TEST(ModelConfig, RefusesMissingAndMistypedKeysNamingFileAndKey) {
  const ModelConfig c = ModelConfig::parse(bert, "m/config.json");
  const auto check = [](auto&& f, const std::string& want) {
    const std::string m = config_error(f);
    EXPECT_NE(m.find("m/config.json: key " + want), std::string::npos) << m;
  };
  check([&] { (void)c.integer("num_hidden_layers"); }, "\"num_hidden_layers\" is missing");
  check([&] { (void)c.number("classifier_dropout"); }, "\"classifier_dropout\" is null");
  check([&] { (void)c.integer("hidden_act"); }, "\"hidden_act\" is a JSON string, not an integer");
  check([&] { (void)c.integer("float_size"); }, "\"float_size\" is a JSON floating-point number, not an integer");
  check([&] { (void)c.integer("huge"); }, "\"huge\" is 18446744073709551615, too large");
  check([&] { (void)c.string("hidden_size"); }, "\"hidden_size\" is a JSON number, not a string");
  check([&] { (void)c.boolean("hidden_size"); }, "\"hidden_size\" is a JSON number, not true or false");
  check([&] { (void)c.number("architectures"); }, "\"architectures\" is a JSON array, not a number");
  check([&] { (void)c.strings("id2label"); }, "\"id2label\" is a JSON object, not an array of strings");
  check([&] { (void)c.integer("hidden_act", 3); },
        "\"hidden_act\" is a JSON string");  // a fallback does not hide a wrong type
  const ModelConfig mixed = ModelConfig::parse(R"({"architectures": ["A", 1]})", "m/config.json");
  check([&] { (void)mixed.strings("architectures"); }, "\"architectures\" holds a JSON number");
}

TEST(ModelConfig, RefusesFilesThatAreNotJsonObjects) {
  const auto check = [](const std::string& text, const std::string& want) {
    const std::string m = config_error([&] { (void)ModelConfig::parse(text, "x/config.json"); });
    EXPECT_NE(m.find("x/config.json: the configuration " + want), std::string::npos) << m;
  };
  check("{\"a\": 1,}", "is not valid JSON");
  check("", "is not valid JSON");
  check("[1]", "is a JSON array, not an object");
  check("3", "is a JSON number, not an object");
  // nlohmann-json throws out_of_range for a number beyond a double even with allow_exceptions=false
  check("{\"a\": 1e400}", "is not valid JSON");
  const std::string long_number = config_error(
      [] { (void)ModelConfig::parse("{\"a\": 1e" + std::string(5000, '9') + "}", "c"); });
  EXPECT_LT(long_number.size(), 500u) << long_number;  // the quoted input is cut
  check(std::string(70, '[') + std::string(70, ']'), "is nested more than 64 levels");
  test::TempDir dir;
  const std::string missing = config_error([&] { (void)ModelConfig::load(dir / "config.json"); });
  EXPECT_NE(missing.find("config.json: no such file"), std::string::npos) << missing;
  test::write_bytes(dir / "config.json", R"({"hidden_size": 64})");
  EXPECT_EQ(ModelConfig::load(dir / "config.json").integer("hidden_size"), 64);
}

TEST(ModelConfig, NestingDepth) {
  EXPECT_EQ(json_nesting_depth("1"), 0);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}]})"), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a[[[": "\"[[["})"), 1);  // brackets inside strings do not count
  EXPECT_EQ(json_nesting_depth("]]]]["), 1);
}

}  // namespace
}  // namespace rcsweep::checkpoint
