// The plan: task ids, bundles (common random numbers), order, shards, spectra layout, cost model.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "models/block_kind.hpp"
#include "plan/plan.hpp"
#include "../checkpoint/checkpoint_test_support.hpp"

namespace rcsweep {
namespace {

plan::Plan make(const std::string& extra = "", plan::Shard shard = {}, const std::string& spectra = "none",
                const std::string& mixer_spectra = "none") {
  const std::string text = R"(
[sweep]
name = "p"
seed = 3
replicates = 2
[model]
depth = 4
[axes]
mixer = ["softmax", "markov"]
lambda = [0.0, 1.0]
[[zip]]
T = [8, 16, 32]
d = [16, 32, 64]
)" + extra + "\n[output]\nspectra = \"" +
                           spectra + "\"\nmixer_spectra = \"" + mixer_spectra + "\"\n";
  return plan::make_plan(config::parse_sweep(text, "test"), shard);
}

TEST(Plan, TasksArePointsTimesReplicatesWithStableIds) {
  const auto p = make();
  ASSERT_EQ(p.points.size(), 12u);
  ASSERT_EQ(p.tasks.size(), 24u);
  for (std::size_t i = 0; i < p.tasks.size(); ++i) {
    EXPECT_EQ(p.tasks[i].id, i);
    EXPECT_EQ(p.tasks[i].point, i / 2);
    EXPECT_EQ(p.tasks[i].replicate, static_cast<int>(i % 2));
  }
  EXPECT_EQ(make().hash, p.hash);  // same file, same plan
}

TEST(Plan, BundlesGroupTasksSharingRandomTensorsLargestFirst) {
  const auto p = make();
  ASSERT_EQ(p.bundles.size(), 6u);  // 3 (T, d) x 2 replicates
  std::set<std::uint64_t> seen;
  for (const auto& b : p.bundles) {
    ASSERT_EQ(b.tasks.size(), 4u);  // mixer x lambda
    const auto& first = p.tasks[b.tasks.front()];
    double flops = 0;
    for (auto id : b.tasks) {
      const auto& t = p.tasks[id];
      EXPECT_EQ(t.replicate, first.replicate);
      EXPECT_EQ(p.models[t.point].T, p.models[first.point].T);
      EXPECT_EQ(p.models[t.point].d, p.models[first.point].d);
      EXPECT_TRUE(seen.insert(id).second) << "task in two bundles";
      flops += t.flops;
    }
    EXPECT_DOUBLE_EQ(b.flops, flops);
    EXPECT_GT(b.bytes(), 0u);
  }
  EXPECT_EQ(seen.size(), p.tasks.size());
  for (std::size_t i = 1; i < p.bundles.size(); ++i) EXPECT_GE(p.bundles[i - 1].flops, p.bundles[i].flops);
}

TEST(Plan, CostGrowsWithSizeDepthAndHeads) {
  config::ModelParams m;
  m.T = 32;
  m.d = m.d_qk = 64;
  m.depth = 4;
  const double base = plan::layer_flops(m);
  auto bigger = m;
  bigger.d = bigger.d_qk = 128;
  EXPECT_GT(plan::layer_flops(bigger), 3 * base);  // the T d^2 products dominate
  bigger = m;
  bigger.heads = 2;
  EXPECT_GT(plan::layer_flops(bigger), 1.5 * base);
  bigger = m;
  bigger.mixer = config::Mixer::identity;
  EXPECT_LT(plan::layer_flops(bigger), base);
  const auto mem = plan::memory_estimate(m);
  EXPECT_EQ(mem.state, 8u * 32 * 64);
  EXPECT_EQ(mem.shared(), 8u * (64 * 64 + 2 * 64 * 64 + 32 * 64));  // W_V, W_Q and W_K, X_0
}

// A bundle's shared memory: kinds of shared tensors add up (Markov draws and its cached mixer
// besides the attention weights), and only a bundle of several tasks holds the layer-1 products.
TEST(Plan, BundleMemoryAddsSharedKindsAndLayerOneProductsOnlyWhenShared) {
  const auto both = make();
  const auto& b = both.bundles.front();  // T = 32, d = 64: softmax and markov, lambda 0 and 1
  ASSERT_EQ(b.tasks.size(), 4u);
  const std::size_t T = 32, d = 64;
  // W_V, W_Q W_K, P = W_Q W_K^T (2 softmax points at d = 2T: a tie, which goes to P), G + M, X_0
  const std::size_t weights = d * d + 2 * d * d + d * d + 2 * T * T + T * d;
  // X_0 W_V, and the softmax mixer M(X_0) of the two lambdas: one, held at layer 1 where a task's own
  // mixer (counted in its scratch) is held from layer 2 on, so it adds nothing beyond it
  const std::size_t layer1 = T * d;
  EXPECT_EQ(b.shared_bytes, 8 * (weights + layer1));
  EXPECT_GE(b.scratch_bytes, 8 * T * T);
  // with and without perp the bundle caches two mixers M(X_0): one more than a task's own
  const auto fixes = plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "f"
seed = 1
replicates = 1
[model]
T = 32
d = 64
depth = 2
[axes]
gap_fix = ["none", "perp"]
)",
                                                         "test"));
  // W_V, W_Q W_K, P (two attention points), X_0; X_0 W_V and the second mixer
  EXPECT_EQ(fixes.bundles.front().shared_bytes, 8 * (d * d + 2 * d * d + d * d + T * d + T * d + T * T));
  EXPECT_EQ(b.state_bytes, 4 * 8 * T * d);  // per task: X between layers
  const auto alone = plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "a"
seed = 1
replicates = 1
[model]
T = 32
d = 64
depth = 2
)",
                                                         "test"));
  EXPECT_EQ(alone.bundles.front().shared_bytes, 8 * (d * d + 2 * d * d + T * d));
  EXPECT_EQ(alone.bundles.front().state_bytes, 8 * T * d);
}

// The shared W_Q W_K^T product is used where the bundle's attention tasks save at least the flops
// P costs: one softmax point with d = 2T, d_qk = d saves 2 T d^2 = d^3 per layer, less than P's
// 2 d^3, so not; 2 points (lambda 0, 1) save 2 d^3, a tie, which goes to P; with 6 points (x 3
// norms) at every size. The choice is the same in every shard.
TEST(Plan, SharedQueryKeyProductWhereItSavesFlops) {
  const auto alone = plan::make_plan(
      config::parse_sweep("[sweep]\nname = \"a\"\n[model]\nT = 32\nd = 64\ndepth = 2\n", "test"));
  EXPECT_FALSE(alone.models.front().qk_product);
  const auto few = make();
  for (const auto& m : few.models) EXPECT_EQ(m.qk_product, m.mixer == config::Mixer::softmax) << m.T;
  const auto many = make("[[zip]]\nnorm = [\"none\", \"rms\", \"layernorm\"]\n");
  for (const auto& m : many.models) EXPECT_EQ(m.qk_product, m.mixer == config::Mixer::softmax) << m.T;
  const auto shard = make("[[zip]]\nnorm = [\"none\", \"rms\", \"layernorm\"]\n", {1, 3});
  for (std::size_t p = 0; p < many.models.size(); ++p) EXPECT_EQ(shard.models[p].qk_product, many.models[p].qk_product);
}

TEST(Plan, ShardsPartitionTheTasks) {
  const auto whole = make();
  std::multiset<std::uint64_t> covered;
  for (int i = 0; i < 3; ++i) {
    const auto shard = make("", {i, 3});
    EXPECT_EQ(shard.tasks.size(), whole.tasks.size());  // the store always holds every task
    for (const auto& b : shard.bundles)
      for (auto id : b.tasks) {
        EXPECT_EQ(static_cast<int>(id % 3), i);
        covered.insert(id);
      }
  }
  EXPECT_EQ(covered.size(), whole.tasks.size());
  EXPECT_EQ(std::set<std::uint64_t>(covered.begin(), covered.end()).size(), whole.tasks.size());
  EXPECT_THROW(make("", {3, 3}), Error);
}

TEST(Plan, SpectraOffsetsTileTheStorageExactly) {
  for (const char* spectra : {"none", "last", "all"}) {
    const auto p = make("", {}, spectra);
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
    for (const auto& t : p.tasks)
      for (int l = 0; l <= p.max_depth; ++l) {
        const auto off = p.spectrum_offset(t.id, l);
        EXPECT_EQ(off >= 0, p.spectrum_at(l));
        if (off >= 0) ranges.emplace_back(off, off + static_cast<std::int64_t>(p.spectrum_length(t.id)));
      }
    std::sort(ranges.begin(), ranges.end());
    std::int64_t end = 0;
    for (auto [a, b] : ranges) {
      EXPECT_EQ(a, end);  // contiguous, no overlap, no gap
      end = b;
    }
    EXPECT_EQ(end, p.spectrum_total());
  }
  const auto last = make("", {}, "last");
  EXPECT_EQ(last.spectrum_length(0), 8u);  // min(T, d)
  EXPECT_TRUE(last.spectrum_at(4));
  EXPECT_FALSE(last.spectrum_at(3));
}

// Mixer spectra: layers 1..L_max only (layer 0 has no mixer), T values each, tiling
// /spectra/m_sv exactly; independent of the X spectra.
TEST(Plan, MixerSpectraOffsetsTileTheStorageExactly) {
  for (const char* mixer : {"none", "last", "all"})
    for (const char* spectra : {"none", "all"}) {
      const auto p = make("", {}, spectra, mixer);
      const std::string mode = mixer;
      EXPECT_EQ(p.spec.output.mixer_spectra, mode == "none"   ? config::Spectra::none
                                             : mode == "last" ? config::Spectra::last
                                                              : config::Spectra::all);
      std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
      for (const auto& t : p.tasks) {
        EXPECT_EQ(p.mixer_spectrum_length(t.id), static_cast<std::size_t>(p.models[t.point].T));
        for (int l = 0; l <= p.max_depth; ++l) {
          const auto off = p.mixer_spectrum_offset(t.id, l);
          const bool want = mode == "all" ? l >= 1 : mode == "last" ? l == p.max_depth : false;
          EXPECT_EQ(p.mixer_spectrum_at(l), want) << mode << " layer " << l;
          EXPECT_EQ(off >= 0, want);
          if (off >= 0) ranges.emplace_back(off, off + static_cast<std::int64_t>(p.mixer_spectrum_length(t.id)));
        }
      }
      std::sort(ranges.begin(), ranges.end());
      std::int64_t end = 0;
      for (auto [a, b] : ranges) {
        EXPECT_EQ(a, end);  // contiguous, no overlap, no gap
        end = b;
      }
      EXPECT_EQ(end, p.mixer_spectrum_total());
      const std::int64_t per_task_layers = mode == "all" ? 4 : mode == "last" ? 1 : 0;
      std::int64_t sum_T = 0;
      for (const auto& t : p.tasks) sum_T += p.models[t.point].T;
      EXPECT_EQ(p.mixer_spectrum_total(), per_task_layers * sum_T);
      // the X spectra layout does not depend on mixer_spectra
      EXPECT_EQ(p.spectrum_total(), make("", {}, spectra).spectrum_total());
    }
  // Stored mixer spectra cost flops; the plan hash depends on the option.
  const auto none = make(), all = make("", {}, "none", "all"), last = make("", {}, "none", "last");
  EXPECT_GT(all.tasks[0].flops, last.tasks[0].flops);
  EXPECT_GT(last.tasks[0].flops, none.tasks[0].flops);
  EXPECT_NE(none.hash, all.hash);
  EXPECT_NE(last.hash, all.hash);
}

TEST(Plan, MixerSpectraLastAtDepthZeroStoresNothing) {
  const std::string text = R"(
[sweep]
name = "p"
[model]
T = 4
d = 8
depth = 0
[output]
mixer_spectra = "last"
)";
  const auto p = plan::make_plan(config::parse_sweep(text, "test"));
  EXPECT_FALSE(p.mixer_spectrum_at(0));
  EXPECT_EQ(p.mixer_spectrum_offset(0, 0), -1);
  EXPECT_EQ(p.mixer_spectrum_total(), 0);
}

// [output] mixer_spectra: default none, validated under its key path, part of the canonical TOML.
TEST(Plan, MixerSpectraOption) {
  const std::string head = "[sweep]\nname = \"p\"\n[model]\nT = 4\nd = 8\ndepth = 2\n";
  EXPECT_EQ(config::parse_sweep(head, "test").output.mixer_spectra, config::Spectra::none);
  const auto spec = config::parse_sweep(head + "[output]\nmixer_spectra = \"last\"\n", "test");
  EXPECT_EQ(spec.output.mixer_spectra, config::Spectra::last);
  EXPECT_EQ(spec.output.spectra, config::Spectra::none);
  const std::string canon = spec.canonical_toml();
  EXPECT_NE(canon.find("[output]\nspectra = \"none\"\nmixer_spectra = \"last\"\n"), std::string::npos) << canon;
  const auto again = config::parse_sweep(canon, "canonical");
  EXPECT_EQ(again.output.mixer_spectra, config::Spectra::last);
  EXPECT_EQ(again.canonical_toml(), canon);
  EXPECT_EQ(again.plan_hash(), spec.plan_hash());
  try {
    config::parse_sweep(head + "[output]\nmixer_spectra = \"some\"\n", "test");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 1u);
    EXPECT_EQ(e.issues()[0].key, "output.mixer_spectra");
    EXPECT_NE(e.issues()[0].problem.find("\"none\", \"last\", \"all\""), std::string::npos) << e.issues()[0].problem;
  }
  try {
    config::parse_sweep(head + "[output]\nmixer_spectrum = \"all\"\n", "test");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 1u);
    EXPECT_EQ(e.issues()[0].key, "output.mixer_spectrum");
    EXPECT_NE(e.issues()[0].problem.find("mixer_spectra"), std::string::npos) << e.issues()[0].problem;
  }
}

TEST(Plan, DepthAxisIsNotATaskDimension) {
  const std::string text = R"(
[sweep]
name = "p"
[model]
T = 4
d = 8
[axes]
depth = [2, 10, 5]
lambda = [0.0, 1.0]
)";
  const auto p = plan::make_plan(config::parse_sweep(text, "test"));
  EXPECT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(p.max_depth, 10);
  for (const auto& m : p.models) EXPECT_EQ(m.depth, 10);
}

}  // namespace
}  // namespace rcsweep

namespace rcsweep {
namespace {

// An encoder of width 8, 2 heads and intermediate_size 12 (only its config.json: random init).
struct EncoderFolder {
  EncoderFolder() {
    checkpoint::test::write_bytes(dir / "config.json",
                                  R"({"model_type": "bert", "vocab_size": 30, "max_position_embeddings": 24,
                                      "type_vocab_size": 2, "hidden_size": 8, "num_attention_heads": 2,
                                      "intermediate_size": 12, "num_hidden_layers": 3})");
  }
  config::ModelParams model(int T = 10) const {
    config::ModelParams m;
    m.block = config::Block::encoder;
    m.model_folder = dir.path().string();
    m.T = T;
    m.d = m.d_qk = 8;
    m.heads = 2;
    m.depth = 3;
    m.mlp = config::Mlp::model;
    m.norm = config::Norm::layernorm;
    return m;
  }
  checkpoint::test::TempDir dir;
};

// dgesdd's values-only flops of an m x n matrix (plan.cpp's svd_values_flops), m >= n.
double svd_flops(double m, double n) { return 4.0 * m * n * n - 4.0 / 3.0 * n * n * n + 10.0 * n * n; }

// A layer of another block is its descriptor's flops plus the metrics of today: the signal's SVD
// and pass, head 0's mixer metrics. The stack's own pricing does not see it.
TEST(Plan, AnEncoderLayerIsItsDescriptorsWorkWithTheMetrics) {
  const EncoderFolder folder;
  const config::ModelParams m = folder.model(10);
  const double T = 10, d = 8, n = 12;
  const double block = 8.0 * T * d * d + 4.0 * T * T * d + models::exp_flops * 2 * T * T + 10.0 * T * d +
                       4.0 * T * d * n + models::exp_flops * T * n + 10.0 * T * d;
  EXPECT_DOUBLE_EQ(models::block_kind(config::Block::encoder).layer_flops(m), block);
  EXPECT_DOUBLE_EQ(plan::layer_flops(m), block + svd_flops(T, d) + 8.0 * T * d + plan::mixer_metrics_flops(T));
  // Its memory: X_0 and one set of the block's weights shared, X per task, the descriptor's scratch.
  const auto mem = plan::memory_estimate(m);
  const models::BlockMemory b = models::block_kind(config::Block::encoder).memory(m);
  EXPECT_EQ(mem.shared(), 8 * (b.input + b.weights));
  EXPECT_EQ(mem.shared_parts[plan::MemoryEstimate::block_weights_part], 8 * b.weights);
  EXPECT_EQ(b.weights, static_cast<std::size_t>(4 * d * d + 2 * d * n + 7 * d + n));
  EXPECT_EQ(mem.state, 8 * b.state);
  EXPECT_EQ(mem.scratch, 8 * b.scratch);
}

}  // namespace
}  // namespace rcsweep

namespace rcsweep {
namespace {

plan::Plan encoder_sweep(const EncoderFolder& folder, const std::string& axes) {
  return plan::make_plan(config::parse_sweep(
      "[sweep]\nname = \"e\"\nseed = 1\nreplicates = 1\n[model]\nT = 8\nd = 8\n"
      "heads = 2\ndepth = 2\ninput = \"gaussian\"\nnorm = \"layernorm\"\n" +
          (axes.find("encoder") == std::string::npos ? std::string()
                                                     : "model_folder = \"" + folder.dir.path().string() + "\"\n") +
          "[axes]\n" + axes,
      "test"));
}

// Stack and encoder points of one (replicate, T, d) share a bundle; the encoder's attention takes
// no part in the stack's W_Q W_K^T choice, and the bundle holds one set of the block's weights per
// init and draw besides the stack's tensors.
TEST(Plan, EncoderPointsBesideStackPoints) {
  const EncoderFolder folder;
  const auto stack = encoder_sweep(folder, "lambda = [0.0, 1.0]\n");
  const auto both = encoder_sweep(folder, "block = [\"stack\", \"encoder\"]\nlambda = [0.0, 1.0]\n");
  ASSERT_EQ(both.bundles.size(), 1u);
  ASSERT_EQ(both.bundles.front().tasks.size(), 4u);
  for (const auto& m : both.models) {
    if (m.block == config::Block::encoder) {
      EXPECT_FALSE(m.qk_product);
    } else {
      EXPECT_EQ(m.qk_product, stack.models.front().qk_product);
      EXPECT_EQ(plan::layer_flops(m), plan::layer_flops(stack.models.front()));
    }
  }
  const auto encoder = std::find_if(both.models.begin(), both.models.end(),
                                    [](const config::ModelParams& m) { return m.block == config::Block::encoder; });
  ASSERT_NE(encoder, both.models.end());
  const std::size_t weights = models::block_kind(config::Block::encoder).memory(*encoder).weights;
  EXPECT_EQ(both.bundles.front().shared_bytes, stack.bundles.front().shared_bytes + 8 * weights);
  // Two draws: two sets; a lambda axis on top shares them.
  const auto draws = encoder_sweep(folder, "block = [\"encoder\"]\ninit_draw = [0, 1]\nlambda = [0.0, 1.0]\n");
  const auto one_draw = encoder_sweep(folder, "block = [\"encoder\"]\nlambda = [0.0, 1.0]\n");
  EXPECT_EQ(draws.bundles.front().shared_bytes, one_draw.bundles.front().shared_bytes + 8 * weights);
}

}  // namespace
}  // namespace rcsweep

namespace rcsweep {
namespace {

// A Mamba-2 model of d_model 8 (expand 2, headdim 4: 4 heads; d_state 3, chunks of 4 tokens), its
// config.json only (random init).
struct Mamba2Folder {
  Mamba2Folder() {
    checkpoint::test::write_bytes(dir / "config.json",
                                  R"({"d_model": 8, "n_layer": 2, "vocab_size": 30,
                                      "ssm_cfg": {"layer": "Mamba2", "d_state": 3, "headdim": 4,
                                                  "chunk_size": 4}})");
  }
  checkpoint::test::TempDir dir;
};

// The sweep with its folder attached as store::load_encoder_inputs attaches it (config.json read).
plan::Plan mamba2_sweep(const Mamba2Folder& folder, const std::string& axes) {
  const bool mamba2 = axes.find("mamba2") != std::string::npos;
  config::SweepSpec spec = config::parse_sweep(
      "[sweep]\nname = \"m\"\nseed = 1\nreplicates = 1\n[model]\nT = 8\nd = 8\ndepth = 2\ninput = \"gaussian\"\n"
      "norm = \"rms\"\n" +
          (mamba2 ? "model_folder = \"" + folder.dir.path().string() + "\"\n" : std::string()) + "[axes]\n" + axes,
      "test");
  if (mamba2) spec.set_encoder_inputs(folder.dir.path().string(), nullptr, "");
  return plan::make_plan(spec);
}

// The planner prices a mamba2 layer by its descriptor plus the metrics (as an encoder's), and a
// bundle of stack and mamba2 points holds the stack's tensors and one set of the block's weights
// per draw; the ablations share one set.
TEST(Plan, Mamba2PointsArePricedByTheirDescriptor) {
  const Mamba2Folder folder;
  const auto both = mamba2_sweep(folder, "block = [\"stack\", \"mamba2\"]\nlambda = [0.0, 1.0]\n");
  const auto stack = mamba2_sweep(folder, "block = [\"stack\"]\nlambda = [0.0, 1.0]\n");
  ASSERT_EQ(both.bundles.size(), 1u);
  const auto m2 = std::find_if(both.models.begin(), both.models.end(),
                               [](const config::ModelParams& m) { return m.block == config::Block::mamba2; });
  ASSERT_NE(m2, both.models.end());
  EXPECT_EQ(m2->model_folder, folder.dir.path().string());
  const models::BlockKind& kind = models::block_kind(config::Block::mamba2);
  const double T = 8, d = 8;
  EXPECT_DOUBLE_EQ(plan::layer_flops(*m2),
                   kind.layer_flops(*m2) + svd_flops(T, d) + 8.0 * T * d + plan::mixer_metrics_flops(T));
  const std::size_t weights = kind.memory(*m2).weights;
  EXPECT_EQ(both.bundles.front().shared_bytes, stack.bundles.front().shared_bytes + 8 * weights);
  const auto ablations = mamba2_sweep(folder, "block = [\"mamba2\"]\ngate = [\"silu\", \"none\"]\n"
                                              "gated_norm = [true, false]\n");
  const auto draws = mamba2_sweep(folder, "block = [\"mamba2\"]\ninit_draw = [0, 1]\n");
  const auto one = mamba2_sweep(folder, "block = [\"mamba2\"]\n");
  EXPECT_EQ(ablations.bundles.front().tasks.size(), 4u);
  EXPECT_EQ(ablations.bundles.front().shared_bytes, one.bundles.front().shared_bytes);  // one set of weights
  EXPECT_EQ(draws.bundles.front().shared_bytes, one.bundles.front().shared_bytes + 8 * weights);
}

}  // namespace
}  // namespace rcsweep
