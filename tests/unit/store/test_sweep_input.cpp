// A sweep's input file (src/store/sweep_input.cpp): input = "file" read relative to the sweep file's
// folder into the spec, its shape checked against T x d at every grid point that uses it, and
// every refusal a ConfigError on model.input_path. The files are written with the plain HDF5 C API.
// An encoder sweep's model folder and token file: tiny BERT and RoBERTa folders written by the test
// (config.json, and for init = "checkpoint" a model.safetensors of RandomWeights), each load-time
// refusal with its key, and the digest of what was read in the canonical text.
#include "store/sweep_input.hpp"

#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../models/encoder/encoder_test_folder.hpp"
#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "models/encoder/encoder.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using test::H5Id;

namespace {

const std::string head = "[sweep]\nname = \"in\"\n[model]\ndepth = 2\ninput = \"file\"\ninput_path = \"emb.h5\"\n";

class SweepInput : public test::StoreDirTest {
 protected:
  /// A float64 dataset "X" of `rows` x `cols` holding 0, 1, 2, ... row-major, in the file `name`.
  fs::path write_input(const std::string& name, hsize_t rows, hsize_t cols) {
    const fs::path p = path(name);
    fs::create_directories(p.parent_path());
    std::vector<double> values(rows * cols);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) + 0.25;
    H5Id f(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t dims[2] = {rows, cols};
    H5Id space(H5Screate_simple(2, dims, nullptr));
    H5Id d(H5Dcreate2(f.id, "X", H5T_IEEE_F64LE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    EXPECT_GE(H5Dwrite(d.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    return p;
  }
  /// The sweep file `name` with `text`, its path.
  fs::path write_sweep(const std::string& name, const std::string& text) {
    const fs::path p = path(name);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

/// The one issue of the ConfigError `f` throws: "key: problem"; a marker otherwise.
template <class F>
std::string config_issue_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    if (e.issues().size() != 1) return "NOT ONE ISSUE: " + std::string(e.what());
    return e.issues()[0].key + ": " + e.issues()[0].problem;
  } catch (const std::exception& e) {
    return std::string("WRONG EXCEPTION TYPE: ") + e.what();
  }
  return "NO EXCEPTION";
}

TEST_F(SweepInput, FileNextToTheSweepFileIsLoadedAsStored) {
  write_input("sub/emb.h5", 2, 3);
  const fs::path sweep = write_sweep("sub/s.toml", head + "T = 2\nd = 3\n");
  auto spec = config::load_sweep(sweep);
  EXPECT_FALSE(spec.input_matrix);
  const auto before = spec.plan_hash();
  store::load_input_file(spec, sweep);
  ASSERT_TRUE(spec.input_matrix);
  ASSERT_EQ(spec.input_matrix->rows(), 2u);
  ASSERT_EQ(spec.input_matrix->cols(), 3u);
  EXPECT_EQ((*spec.input_matrix)(0, 0), 0.25);
  EXPECT_EQ((*spec.input_matrix)(1, 2), 5.25);  // row-major
  EXPECT_NE(spec.plan_hash(), before);          // the content is part of the plan
  EXPECT_EQ(spec.model(spec.point(0)).input_matrix, spec.input_matrix);
}

TEST_F(SweepInput, NoInputPathLeavesTheSpecAlone) {
  auto spec = config::parse_sweep("[sweep]\nname = \"x\"\n[model]\nT = 2\nd = 3\ndepth = 1\n", "test");
  const auto before = spec.plan_hash();
  store::load_input_file(spec, path("s.toml"));
  EXPECT_FALSE(spec.input_matrix);
  EXPECT_EQ(spec.plan_hash(), before);
}

TEST_F(SweepInput, AbsolutePathIsTakenAsIs) {
  const fs::path input = write_input("elsewhere/emb.h5", 2, 3);
  auto spec = config::parse_sweep("[sweep]\nname = \"in\"\n[model]\ndepth = 2\nT = 2\nd = 3\ninput = \"file\"\n"
                                  "input_path = \"" +
                                      input.string() + "\"\n",
                                  "test");
  store::load_input_file(spec, path("other/s.toml"));
  ASSERT_TRUE(spec.input_matrix);
  EXPECT_EQ(spec.input_matrix->rows(), 2u);
}

TEST_F(SweepInput, WrongShapeNamesBothShapes) {
  const fs::path input = write_input("emb.h5", 2, 3);
  const fs::path sweep = write_sweep("s.toml", head + "T = 3\nd = 2\n");
  EXPECT_EQ(
      config_issue_of([&] { store::load_sweep_with_input(sweep, {}); }),
      "model.input_path: dataset 'X' of '" + input.string() + "' is 2 x 3 (rows x columns) but must be T x d = 3 x 2");
}

TEST_F(SweepInput, GridPointsThatMissAreCountedWithTheFirst) {
  const fs::path input = write_input("emb.h5", 2, 3);
  const fs::path sweep = write_sweep("s.toml", head + "d = 3\n[axes]\nT = [2, 4, 8]\n");
  EXPECT_EQ(config_issue_of([&] { store::load_sweep_with_input(sweep, {}); }),
            "model.input_path: dataset 'X' of '" + input.string() +
                "' is 2 x 3 (rows x columns) but must be T x d = 4 x 3 (at 2 of 3 grid points, e.g. point 1)");
}

TEST_F(SweepInput, OverridesApplyBeforeTheCheck) {
  write_input("emb.h5", 4, 3);
  const fs::path sweep = write_sweep("s.toml", head + "T = 2\nd = 3\n");
  EXPECT_NE(config_issue_of([&] { store::load_sweep_with_input(sweep, {}); }), "NO EXCEPTION");
  const auto spec = store::load_sweep_with_input(sweep, {"model.T=4"});
  ASSERT_TRUE(spec.input_matrix);
  EXPECT_EQ(spec.input_matrix->rows(), 4u);
  EXPECT_EQ(spec.overrides, std::vector<std::string>{"model.T=4"});
}

TEST_F(SweepInput, UnreadableFileIsAConfigErrorOnInputPath) {
  const fs::path sweep = write_sweep("s.toml", head + "T = 2\nd = 3\n");
  const std::string missing = config_issue_of([&] { store::load_sweep_with_input(sweep, {}); });
  EXPECT_EQ(missing.rfind("model.input_path: ", 0), 0u) << missing;
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
  std::ofstream(path("emb.h5")) << "not HDF5";
  const std::string not_hdf5 = config_issue_of([&] { store::load_sweep_with_input(sweep, {}); });
  EXPECT_EQ(not_hdf5.rfind("model.input_path: ", 0), 0u) << not_hdf5;
}

// ---- encoder blocks: the model folder and the token file -------------------------------------

namespace enc = rcsweep::models::encoder;

/// A sweep of the tiny BERT of encoder_test_folder.hpp (d 8, 2 heads, 3 layers, vocabulary 30,
/// 24 positions) in "models/tiny", reading tokens from "tokens.txt", 3 replicates.
const std::string encoder_head =
    "[sweep]\nname = \"enc\"\nreplicates = 3\n[model]\ndepth = 3\nblock = \"encoder\"\nmodel_folder = "
    "\"models/tiny\"\nheads = 2\nlambda = 1.0\nmlp = \"model\"\nnorm = \"layernorm\"\n";
const std::string tokens_input = "input = \"tokens\"\ninput_path = \"tokens.txt\"\n";

class EncoderInput : public SweepInput {
 protected:
  /// config.json of the tiny BERT (and, with `weights`, model.safetensors of a random draw) in `name`.
  fs::path write_model(const std::string& name, bool weights, const enc::EncoderShape& shape = enc::test::tiny_bert()) {
    const fs::path folder = path(name);
    fs::create_directories(folder);
    if (weights)
      enc::test::write_checkpoint(folder, enc::RandomWeights(shape, 11, 0));
    else
      enc::test::write_config(folder, shape);
    return folder;
  }
  /// A token file of `excerpts` lines of `length` ids each (1, 2, ... cycling below 30).
  fs::path write_tokens(const std::string& name, std::size_t excerpts, std::size_t length) {
    std::string text = "# excerpts for the test\n";
    for (std::size_t e = 0; e < excerpts; ++e) {
      for (std::size_t i = 0; i < length; ++i) text += (i ? " " : "") + std::to_string(1 + (e + i) % 29);
      text += "\n";
    }
    return write_text(name, text);
  }
  fs::path write_text(const std::string& name, const std::string& text) {
    const fs::path p = path(name);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

/// Every issue of the ConfigError `f` throws, as "key: problem"; a marker otherwise.
template <class F>
std::vector<std::string> config_issues_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    std::vector<std::string> out;
    for (const auto& i : e.issues()) out.push_back(i.key + ": " + i.problem);
    return out;
  } catch (const std::exception& e) {
    return {std::string("WRONG EXCEPTION TYPE: ") + e.what()};
  }
  return {"NO EXCEPTION"};
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out;
}

TEST_F(EncoderInput, FolderAndTokensAreLoadedBesideTheSweepFile) {
  const fs::path folder = write_model("sub/models/tiny", false);
  write_tokens("sub/tokens.txt", 4, 6);
  const fs::path sweep = write_sweep("sub/s.toml", encoder_head + tokens_input + "T = 6\nd = 8\n");
  const auto parsed = config::load_sweep(sweep);
  const auto spec = store::load_sweep_with_input(sweep, {});
  EXPECT_FALSE(spec.input_matrix);  // input_path is the token file, not an HDF5 input
  EXPECT_EQ(spec.model_folder, "models/tiny");
  EXPECT_EQ(fs::path(spec.model_folder_path), fs::absolute(folder).lexically_normal());
  ASSERT_TRUE(spec.tokens);
  ASSERT_EQ(spec.tokens->size(), 4u);  // every excerpt of the file, the comment skipped
  EXPECT_EQ((*spec.tokens)[1], (std::vector<std::int64_t>{2, 3, 4, 5, 6, 7}));
  const auto m = spec.model(spec.point(0));
  EXPECT_EQ(m.model_folder, spec.model_folder_path);
  EXPECT_EQ(m.tokens, spec.tokens);
  const std::string text = spec.canonical_toml();
  EXPECT_NE(text.find("model_folder = \"models/tiny\"\n# model content: FNV-1a "), std::string::npos) << text;
  EXPECT_NE(text.find(" (config.json "), std::string::npos) << text;
  EXPECT_NE(text.find("; tokens 4 excerpts "), std::string::npos) << text;
  EXPECT_EQ(text.find("checkpoint"), std::string::npos) << text;  // init = "random": config.json alone
  EXPECT_NE(spec.plan_hash(), parsed.plan_hash());
  EXPECT_EQ(store::load_sweep_with_input(sweep, {}).plan_hash(), spec.plan_hash());  // the same files, the same plan
}

// A store keeps its sweep as canonical text (/config): read back by stored_sweep, with the content
// digests restored, it plans to the store's plan hash with nothing read from disk (merge and
// validation read stores whose model folder or input file is elsewhere).
TEST_F(EncoderInput, StoredSweepReproducesThePlanHashWithoutTheFiles) {
  write_model("sub/models/tiny", false);
  write_tokens("sub/tokens.txt", 4, 6);
  const auto spec = store::load_sweep_with_input(
      write_sweep("sub/s.toml", encoder_head + tokens_input + "T = 6\nd = 8\n"), {});
  const auto stored = store::stored_sweep(spec.canonical_toml(), "s.h5:/config");
  EXPECT_EQ(stored.plan_hash(), spec.plan_hash());
  EXPECT_EQ(stored.model_digest, spec.model_digest);
  EXPECT_TRUE(stored.model_folder_path.empty());
  EXPECT_FALSE(stored.tokens);
  EXPECT_TRUE(stored.model(stored.point(0)).model_folder.empty());  // the planner prices it without the folder
  // Without the digest the text is another sweep.
  std::string text = spec.canonical_toml();
  text.erase(text.find("# model content: "),
             text.find('\n', text.find("# model content: ")) + 1 - text.find("# model content: "));
  EXPECT_NE(store::stored_sweep(text, "s.h5:/config").plan_hash(), spec.plan_hash());
}

TEST_F(SweepInput, StoredSweepRestoresTheInputFileDigest) {
  write_input("emb.h5", 2, 3);
  const fs::path sweep = write_sweep("s.toml", head + "T = 2\nd = 3\n");
  const auto spec = store::load_sweep_with_input(sweep, {});
  ASSERT_FALSE(spec.input_file_digest.empty());
  const auto stored = store::stored_sweep(spec.canonical_toml(), "s.h5:/config");
  EXPECT_EQ(stored.input_file_digest, spec.input_file_digest);
  EXPECT_EQ(stored.plan_hash(), spec.plan_hash());
}

TEST_F(EncoderInput, OtherInputsReadNoTokenFile) {
  write_model("models/tiny", false);
  const fs::path sweep = write_sweep("s.toml", encoder_head + "T = 6\nd = 8\ninput = \"sphere\"\n");
  const auto spec = store::load_sweep_with_input(sweep, {});
  EXPECT_FALSE(spec.tokens);
  EXPECT_FALSE(spec.model(spec.point(0)).tokens);
  EXPECT_EQ(spec.model(spec.point(0)).model_folder, spec.model_folder_path);
}

TEST_F(EncoderInput, NoEncoderLeavesTheSpecAlone) {
  auto spec = config::parse_sweep("[sweep]\nname = \"x\"\n[model]\nT = 2\nd = 3\ndepth = 1\n", "test");
  const auto before = spec.plan_hash();
  store::load_encoder_inputs(spec, path("s.toml"));
  EXPECT_TRUE(spec.model_folder_path.empty());
  EXPECT_EQ(spec.plan_hash(), before);
}

/// `text` with "depth = 3" replaced by depth `L`.
std::string with_depth(std::string text, int L) {
  return text.replace(text.find("depth = 3"), 9, "depth = " + std::to_string(L));
}

TEST_F(EncoderInput, CheckpointIsOpenedAndItsHeadersAreInTheDigest) {
  write_model("models/tiny", true);
  write_tokens("tokens.txt", 3, 6);
  const std::string checkpoint = encoder_head + tokens_input + "T = 6\nd = 8\ninit = \"checkpoint\"\n";
  const auto spec = store::load_sweep_with_input(write_sweep("s.toml", checkpoint), {});
  const std::string text = spec.canonical_toml();
  EXPECT_NE(text.find("; checkpoint 1 file, "), std::string::npos) << text;
  // A checkpoint has its blocks only: init = "checkpoint" runs at most num_hidden_layers of them.
  const auto deeper = with_depth(checkpoint, 4);
  EXPECT_EQ(config_issues_of([&] { store::load_sweep_with_input(write_sweep("d.toml", deeper), {}); }),
            std::vector<std::string>{"model.depth: is 4 but the checkpoint has num_hidden_layers = 3 ('" +
                                     (fs::absolute(path("models/tiny")).lexically_normal() / "config.json").string() +
                                     "'): init = \"checkpoint\" runs at most its 3 trained blocks (init = \"random\" "
                                     "draws any depth)"});
  // A random draw has any depth.
  const std::string random = encoder_head + tokens_input + "T = 6\nd = 8\n";
  EXPECT_NO_THROW(store::load_sweep_with_input(write_sweep("r.toml", with_depth(random, 40)), {}));
}

TEST_F(EncoderInput, WidthAndHeadsMustBeTheModels) {
  write_model("models/tiny", false);
  write_tokens("tokens.txt", 3, 6);
  const std::string config = (fs::absolute(path("models/tiny")).lexically_normal() / "config.json").string();
  const auto both = config_issues_of([&] {
    store::load_sweep_with_input(
        write_sweep("s.toml", std::string(encoder_head).replace(encoder_head.find("heads = 2"), 9, "heads = 4") +
                                  "T = 6\nd = 16\n"),
        {});
  });
  EXPECT_EQ(both, (std::vector<std::string>{"model.d: is 16 but the model's hidden_size is 8 ('" + config +
                                                "'): an encoder block is as wide as its model",
                                            "model.heads: is 4 but the model's num_attention_heads is 2 ('" + config +
                                                "'): an encoder block has its model's heads"}))
      << joined(both);
  // A swept width: the points that miss are counted, the first named.
  const auto swept = config_issues_of([&] {
    store::load_sweep_with_input(write_sweep("a.toml", encoder_head + "T = 6\n[axes]\nd = [8, 16, 32]\n"), {});
  });
  ASSERT_EQ(swept.size(), 1u) << joined(swept);
  EXPECT_EQ(swept[0].rfind("axes.d: is 16 but the model's hidden_size is 8", 0), 0u) << swept[0];
  EXPECT_NE(swept[0].find("(at 2 of 3 grid points, e.g. point 1 (d = 16))"), std::string::npos) << swept[0];
  // Only the encoder's points are checked: a stack point of another width is fine.
  EXPECT_NO_THROW(store::load_sweep_with_input(
      write_sweep("z.toml", "[sweep]\nname = \"z\"\n[model]\ndepth = 3\nT = 6\nmodel_folder = \"models/tiny\"\n"
                            "heads = 2\nlambda = 1.0\n[[zip]]\nblock = [\"encoder\", \"stack\"]\nd = [8, 16]\n"
                            "mlp = [\"model\", \"none\"]\nnorm = [\"layernorm\", \"none\"]\n"),
      {}));
}

TEST_F(EncoderInput, ContextMustFitThePositions) {
  write_model("models/tiny", false);  // 24 positions from 0
  write_tokens("tokens.txt", 3, 30);
  const auto bert = config_issues_of([&] {
    store::load_sweep_with_input(
        write_sweep("s.toml", encoder_head + tokens_input + "d = 8\n[axes]\nT = [4, 24, 25]\n"), {});
  });
  ASSERT_EQ(bert.size(), 1u) << joined(bert);
  EXPECT_EQ(bert[0].rfind("axes.T: is 25 but the model's max_position_embeddings = 24 (", 0), 0u) << bert[0];
  EXPECT_NE(bert[0].find("holds positions up to 23, and the tokens take positions 0..24: T may be at most 24 (at 1 "
                         "of 3 grid points, e.g. point 2 (T = 25))"),
            std::string::npos)
      << bert[0];
  // RoBERTa's positions start after its padding id: 24 positions with pad_token_id 1 hold 22 tokens.
  const fs::path roberta = path("models/roberta");
  fs::create_directories(roberta);
  std::ofstream(roberta / "config.json")
      << R"({"model_type": "roberta", "vocab_size": 30, "max_position_embeddings": 24, "type_vocab_size": 1,
             "hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 12, "num_hidden_layers": 3,
             "pad_token_id": 1})";
  const std::string on_roberta =
      std::string(encoder_head).replace(encoder_head.find("models/tiny"), 11, "models/roberta") + tokens_input +
      "d = 8\n";
  EXPECT_NO_THROW(store::load_sweep_with_input(write_sweep("r22.toml", on_roberta + "T = 22\n"), {}));
  const auto over = config_issues_of(
      [&] { store::load_sweep_with_input(write_sweep("r23.toml", on_roberta + "T = 23\n"), {}); });
  ASSERT_EQ(over.size(), 1u) << joined(over);
  EXPECT_NE(over[0].find("model.T: is 23 "), std::string::npos) << over[0];
  EXPECT_NE(over[0].find("positions 2..24: T may be at most 22"), std::string::npos) << over[0];
}

TEST_F(EncoderInput, ReplicatesExcerptsAndTheirLengthsAreChecked) {
  write_model("models/tiny", false);
  write_text("tokens.txt", "1 2 3 4 5 6\n1 2 3 4 5\n1 2 3 4 5 6 7\n1 2\n");
  const std::string file = path("tokens.txt").string();
  // 3 replicates read excerpts 0..2: excerpt 1 (line 2) is shorter than T = 6, excerpt 3 is not read.
  const auto short_one = config_issues_of([&] {
    store::load_sweep_with_input(write_sweep("s.toml", encoder_head + tokens_input + "d = 8\n[axes]\nT = [4, 6]\n"),
                                 {});
  });
  EXPECT_EQ(short_one,
            std::vector<std::string>{"model.input_path: the token file '" + file +
                                     "' has 1 excerpt shorter than T = 6 tokens (the largest T that reads tokens; "
                                     "each replicate reads the first T tokens of its excerpt, never padding): "
                                     "excerpt 1 (line 2) has 5"})
      << joined(short_one);
  EXPECT_NO_THROW(
      store::load_sweep_with_input(write_sweep("t.toml", encoder_head + tokens_input + "d = 8\nT = 5\n"), {}));
  // More replicates than excerpts.
  const std::string five = std::string(encoder_head).replace(encoder_head.find("replicates = 3"), 14, "replicates = 5");
  const auto many = config_issues_of(
      [&] { store::load_sweep_with_input(write_sweep("r.toml", five + tokens_input + "d = 8\nT = 2\n"), {}); });
  EXPECT_EQ(many, std::vector<std::string>{"sweep.replicates: is 5 but the token file '" + file +
                                           "' has 4 excerpts: replicate r reads excerpt r, so a point runs at most as "
                                           "many replicates as the file has excerpts"})
      << joined(many);
}

TEST_F(EncoderInput, IdsReadMustBeInTheVocabulary) {
  write_model("models/tiny", false);  // vocab_size 30
  // Excerpt 0 has 30 at token 2 and 31 at token 5; excerpt 2 has 99 at token 1; ids after T = 4 are not read.
  write_text("tokens.txt", "1 30 3 4 31\n1 2 3 4\n99 2 3 4 500\n");
  const auto issues = config_issues_of(
      [&] { store::load_sweep_with_input(write_sweep("s.toml", encoder_head + tokens_input + "d = 8\nT = 4\n"), {}); });
  ASSERT_EQ(issues.size(), 1u) << joined(issues);
  EXPECT_EQ(issues[0].rfind("model.input_path: the token file '" + path("tokens.txt").string() +
                                "' has 2 token ids not below the model's vocab_size = 30 (",
                            0),
            0u)
      << issues[0];
  EXPECT_NE(issues[0].find("among the tokens read: id 30 (excerpt 0, line 1, token 2); id 99 (excerpt 2, line 3, "
                           "token 1)"),
            std::string::npos)
      << issues[0];
}

TEST_F(EncoderInput, ManyBadExcerptsListTheFirstFewAndACount) {
  write_model("models/tiny", false);
  write_tokens("tokens.txt", 8, 3);
  const std::string eight =
      std::string(encoder_head).replace(encoder_head.find("replicates = 3"), 14, "replicates = 8");
  const auto issues = config_issues_of(
      [&] { store::load_sweep_with_input(write_sweep("s.toml", eight + tokens_input + "d = 8\nT = 4\n"), {}); });
  ASSERT_EQ(issues.size(), 1u) << joined(issues);
  EXPECT_NE(issues[0].find("has 8 excerpts shorter than T = 4"), std::string::npos) << issues[0];
  EXPECT_NE(issues[0].find("excerpt 2 (line 4) has 3; and 5 more"), std::string::npos) << issues[0];
}

TEST_F(EncoderInput, FilesThatCannotBeReadAreConfigErrors) {
  write_tokens("tokens.txt", 3, 6);
  const fs::path sweep = write_sweep("s.toml", encoder_head + tokens_input + "d = 8\nT = 6\n");
  // No folder: named on model.model_folder.
  const auto missing = config_issues_of([&] { store::load_sweep_with_input(sweep, {}); });
  ASSERT_EQ(missing.size(), 1u) << joined(missing);
  EXPECT_EQ(missing[0].rfind("model.model_folder: '" + fs::absolute(path("models/tiny")).lexically_normal().string() +
                                 "' is not a folder (no such file or folder): block = \"encoder\" needs a model folder",
                             0),
            0u)
      << missing[0];
  // A folder without config.json: the checkpoint module's error, naming the file.
  fs::create_directories(path("models/tiny"));
  const auto no_config = config_issues_of([&] { store::load_sweep_with_input(sweep, {}); });
  ASSERT_FALSE(no_config.empty());
  EXPECT_NE(no_config[0].find("config.json"), std::string::npos) << joined(no_config);
  // init = "checkpoint" with config.json alone: the weights are missing, named.
  enc::test::write_config(path("models/tiny"), enc::test::tiny_bert());
  const auto no_weights = config_issues_of([&] {
    store::load_sweep_with_input(write_sweep("c.toml", encoder_head + tokens_input +
                                                           "d = 8\nT = 6\ninit = "
                                                           "\"checkpoint\"\n"),
                                 {});
  });
  ASSERT_FALSE(no_weights.empty());
  EXPECT_NE(joined(no_weights).find("safetensors"), std::string::npos) << joined(no_weights);
  // A token file that is not one: the token file's error, naming file, line and column.
  write_text("tokens.txt", "1 2 3\n4 -5 6\n");
  const auto bad_tokens = config_issues_of([&] { store::load_sweep_with_input(sweep, {}); });
  ASSERT_FALSE(bad_tokens.empty());
  EXPECT_NE(joined(bad_tokens).find("tokens.txt"), std::string::npos) << joined(bad_tokens);
  EXPECT_NE(joined(bad_tokens).find("line 2"), std::string::npos) << joined(bad_tokens);
  // No token file.
  fs::remove(path("tokens.txt"));
  EXPECT_NE(joined(config_issues_of([&] { store::load_sweep_with_input(sweep, {}); })).find("tokens.txt"),
            std::string::npos);
}

// The digest of what was read is part of the plan: a changed config.json, token file or checkpoint
// header changes the plan hash (a store is then not resumed with another model or other tokens).
TEST_F(EncoderInput, DigestFollowsConfigTokensAndCheckpoint) {
  write_model("models/tiny", true);
  write_tokens("tokens.txt", 3, 6);
  const fs::path sweep = write_sweep("s.toml", encoder_head + tokens_input + "T = 6\nd = 8\ninit = \"checkpoint\"\n");
  const std::string first = store::load_sweep_with_input(sweep, {}).plan_hash();
  EXPECT_EQ(store::load_sweep_with_input(sweep, {}).plan_hash(), first);
  // One id of the token file.
  write_text("tokens.txt", "1 2 3 4 5 6\n2 3 4 5 6 7\n3 4 5 6 7 9\n");
  const std::string tokens_changed = store::load_sweep_with_input(sweep, {}).plan_hash();
  EXPECT_NE(tokens_changed, first);
  // config.json's bytes (a key the checks do not read).
  std::string config;
  {
    std::ifstream in(path("models/tiny") / "config.json");
    config.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(path("models/tiny") / "config.json")
      << config.substr(0, config.rfind('}')) + ",\"architectures\":[\"BertModel\"]}";
  const std::string config_changed = store::load_sweep_with_input(sweep, {}).plan_hash();
  EXPECT_NE(config_changed, tokens_changed);
  EXPECT_NE(config_changed, first);
}

TEST_F(EncoderInput, CheckpointHeadersAreDigested) {
  // Two checkpoints of the same config.json and tensors, one with a metadata entry in its header.
  // (Separate folders: the process opens a folder once, open_model's memo.)
  write_model("a/models/tiny", true);
  write_tokens("a/tokens.txt", 3, 6);
  const std::string text = encoder_head + tokens_input + "T = 6\nd = 8\ninit = \"checkpoint\"\n";
  const auto a = store::load_sweep_with_input(write_sweep("a/s.toml", text), {});
  fs::create_directories(path("b/models/tiny"));
  fs::copy_file(path("a/models/tiny/config.json"), path("b/models/tiny/config.json"));
  write_tokens("b/tokens.txt", 3, 6);
  // The same tensors with a metadata entry: another header.
  std::string weights;
  {
    std::ifstream in(path("a/models/tiny/model.safetensors"), std::ios::binary);
    weights.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::uint64_t length = 0;
  std::memcpy(&length, weights.data(), 8);
  std::string header = weights.substr(8, length);
  header.insert(1, "\"__metadata__\":{\"format\":\"pt\"},");
  checkpoint::test::write_bytes(path("b/models/tiny/model.safetensors"),
                                checkpoint::test::safetensors_bytes(header, weights.substr(8 + length)));
  const auto b = store::load_sweep_with_input(write_sweep("b/s.toml", text), {});
  const auto digest = [](const config::SweepSpec& s) {
    const std::string t = s.canonical_toml();
    const auto at = t.find("# model content: ");
    return t.substr(at, t.find('\n', at) - at);
  };
  const std::string da = digest(a), db = digest(b);
  const auto parts = [](const std::string& d) { return d.substr(d.find(" ("), d.find("; checkpoint") - d.find(" (")); };
  EXPECT_EQ(parts(da), parts(db));  // config.json and tokens
  EXPECT_NE(da, db);
}

// Every example sweep loads with what it reads (model folders, token files, input files) and
// passes the checks against them: the encoder examples name folders and a token file of the
// repository (jobs/examples/models/, jobs/examples/tokens/).
TEST(ExampleSweeps, EveryExampleLoadsWithItsInputs) {
  const fs::path examples = fs::path(RCSWEEP_SOURCE_DIR) / "jobs" / "examples";
  int files = 0, encoders = 0;
  for (const auto& entry : fs::directory_iterator(examples)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    config::SweepSpec spec;
    try {
      spec = store::load_sweep_with_input(entry.path(), {});
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    if (spec.model_folder.empty()) continue;
    ++encoders;
    EXPECT_TRUE(fs::is_directory(spec.model_folder_path));
    EXPECT_NE(spec.canonical_toml().find("# model content: FNV-1a "), std::string::npos);
  }
  EXPECT_GT(files, 10);
  EXPECT_GE(encoders, 2);  // encoder_init.toml, encoder_quick.toml
}

}  // namespace
