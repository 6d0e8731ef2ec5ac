// Which finished tasks of a sweep are tasks of a grown one (plan/reuse.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "config/sweep_spec.hpp"
#include "plan/plan.hpp"
#include "plan/reuse.hpp"

namespace rcsweep {
namespace {

std::string sweep(const std::string& replicates, const std::string& lambdas, const std::string& extra = "") {
  return "[sweep]\nname = \"g\"\nseed = 5\nreplicates = " + replicates +
         "\n[model]\nmixer = \"softmax\"\nT = 8\nd = 8\ndepth = 3\n" + extra + "[axes]\nlambda = " + lambdas + "\n";
}

plan::Plan make(const std::string& text) { return plan::make_plan(config::parse_sweep(text, "test")); }

TEST(Reuse, DifferencesNameTheKeyAndBothValues) {
  const auto a = config::parse_sweep(sweep("2", "[0.0, 0.5]"), "a");
  const auto b = config::parse_sweep(sweep("3", "[0.0, 0.5, 1.0]", "norm = \"rms\"\n"), "b");
  const auto d = plan::config_differences(a, b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], "sweep.replicates: 2 -> 3");
  EXPECT_EQ(d[1], "model.norm: \"none\" -> \"rms\"");
  EXPECT_EQ(d[2], "axes.lambda: [0.0, 0.5] -> [0.0, 0.5, 1.0]");
  EXPECT_TRUE(plan::config_differences(a, a).empty());
  // A parameter that moves from [model] to [axes]: absent on one side each.
  const auto c = config::parse_sweep(
      "[sweep]\nname = \"g\"\nseed = 5\nreplicates = 2\n[model]\nmixer = \"softmax\"\nT = 8\nd = 8\ndepth = 3\n"
      "lambda = 0.5\n",
      "c");
  const auto moved = plan::config_differences(c, a);
  EXPECT_NE(std::find(moved.begin(), moved.end(), "model.lambda: 0.5 -> (absent)"), moved.end());
  EXPECT_NE(std::find(moved.begin(), moved.end(), "axes.lambda: (absent) -> [0.0, 0.5]"), moved.end());
}

// An encoder sweep's model folder and the digest of what it read (config.json, token file,
// checkpoint headers: a comment line of the canonical text) are differences that change every task.
TEST(Reuse, ModelFolderAndItsContentAreDifferences) {
  const std::string encoder = "block = \"encoder\"\nmodel_folder = \"m\"\nheads = 2\nlambda = 1.0\n";
  auto a = config::parse_sweep("[sweep]\nname = \"g\"\n[model]\nT = 4\nd = 8\ndepth = 2\n" + encoder, "a");
  auto b = a;
  a.set_encoder_inputs("/abs/m", nullptr, "config.json FNV-1a 0000000000000001");
  b.set_encoder_inputs("/abs/m", nullptr, "config.json FNV-1a 0000000000000002");
  const auto d = plan::config_differences(a, b);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "model.model_content: config.json FNV-1a 0000000000000001 -> config.json FNV-1a 0000000000000002");
  auto c = config::parse_sweep("[sweep]\nname = \"g\"\n[model]\nT = 4\nd = 8\ndepth = 2\n" +
                                   std::string(encoder).replace(encoder.find("\"m\""), 3, "\"other\""),
                               "c");
  c.set_encoder_inputs("/abs/other", nullptr, "config.json FNV-1a 0000000000000001");
  const auto moved = plan::config_differences(a, c);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0], "model.model_folder: \"m\" -> \"other\"");
}

// Task ids are point * replicates + replicate: growing both renumbers every task but the first.
TEST(Reuse, MoreReplicatesAndAxisValuesMatchEveryOldTask) {
  const auto from = make(sweep("2", "[0.0, 0.5]"));
  const auto to = make(sweep("3", "[0.0, 0.25, 0.5]"));
  const auto m = plan::match_tasks(from, to);
  EXPECT_TRUE(m.blockers.empty());
  EXPECT_TRUE(m.rerouted.empty());
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected = {{0, 0}, {1, 1}, {2, 6}, {3, 7}};
  EXPECT_EQ(m.pairs, expected);
  for (const auto& [a, b] : m.pairs) {  // same parameters, same replicate
    EXPECT_EQ(from.points[from.tasks[a].point], to.points[to.tasks[b].point]);
    EXPECT_EQ(from.tasks[a].replicate, to.tasks[b].replicate);
  }
  // Shrinking: only what both have.
  const auto back = plan::match_tasks(to, from);
  EXPECT_EQ(back.pairs.size(), 4u);
  const auto other = plan::match_tasks(from, make(sweep("2", "[1.0, 2.0]")));
  EXPECT_TRUE(other.pairs.empty());
  EXPECT_TRUE(other.blockers.empty());
}

TEST(Reuse, SeedDepthAndOutputChangeEveryTask) {
  const auto from = make(sweep("2", "[0.0, 0.5]"));
  auto text = sweep("2", "[0.0, 0.5]");
  const auto seed = plan::match_tasks(from, make(std::string(text).replace(text.find("seed = 5"), 8, "seed = 6")));
  EXPECT_TRUE(seed.pairs.empty());
  ASSERT_EQ(seed.blockers.size(), 1u);
  EXPECT_EQ(seed.blockers[0], "sweep.seed: 5 -> 6");
  const auto deeper = plan::match_tasks(from, make(std::string(text).replace(text.find("depth = 3"), 9, "depth = 4")));
  EXPECT_TRUE(deeper.pairs.empty());
  ASSERT_EQ(deeper.blockers.size(), 1u);
  EXPECT_NE(deeper.blockers[0].find("3 -> 4"), std::string::npos);
  const auto spectra = plan::match_tasks(from, make(text + "[output]\nspectra = \"all\"\n"));
  EXPECT_TRUE(spectra.pairs.empty());
  EXPECT_EQ(spectra.blockers.size(), 1u);
  // A depth label below L_max changes nothing: every task still runs to depth 3.
  const auto labels = plan::match_tasks(
      from, make(std::string(text).replace(text.find("depth = 3\n"), 10, "") + "depth = [1, 3]\n"));
  EXPECT_TRUE(labels.blockers.empty());
  EXPECT_EQ(labels.pairs.size(), 4u);
}

// The attention logits' product order is chosen from the whole grid (plan.cpp): T = 4 < d = 8
// with one model per (T, d) takes Q K^T, with 3 the shared P. Such tasks are computed again.
TEST(Reuse, TasksWhoseLogitsChangeRouteAreNotReused) {
  const auto narrow = [](const std::string& lambdas) {
    return "[sweep]\nname = \"g\"\nseed = 5\n[model]\nT = 4\nd = 8\ndepth = 2\n[axes]\nlambda = " + lambdas + "\n";
  };
  const auto from = make(narrow("[0.0]")), to = make(narrow("[0.0, 0.5, 1.0]"));
  ASSERT_NE(from.models[0].qk_product, to.models[0].qk_product);
  const auto m = plan::match_tasks(from, to);
  EXPECT_TRUE(m.pairs.empty());
  EXPECT_EQ(m.rerouted, std::vector<std::uint64_t>{0});
  // At T = d the route is the same for one model or many (a tie goes to the product).
  const auto square = plan::match_tasks(make(sweep("1", "[0.0]")), make(sweep("1", "[0.0, 0.5]")));
  EXPECT_EQ(square.pairs.size(), 1u);
  EXPECT_TRUE(square.rerouted.empty());
}

}  // namespace
}  // namespace rcsweep
