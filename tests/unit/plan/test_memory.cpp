// A rank's memory (plan/memory.hpp): what grows with depth, rank 0's writer, BLAS, the address space,
// and the refusals of check_memory.
#include <gtest/gtest.h>

#include <filesystem>
#include <new>
#include <stdexcept>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "metrics/metrics.hpp"
#include "plan/memory.hpp"
#include "plan/threads.hpp"
#include "../models/encoder/encoder_test_folder.hpp"

namespace rcsweep {
namespace {

constexpr double MiB = 1024.0 * 1024.0;

plan::Plan make(long long depth, int replicates = 1, const std::string& output = "", int T = 4, int d = 4) {
  const std::string text = "[sweep]\nname = \"m\"\nseed = 1\nreplicates = " + std::to_string(replicates) +
                           "\n[model]\nT = " + std::to_string(T) + "\nd = " + std::to_string(d) +
                           "\ndepth = " + std::to_string(depth) + "\n[axes]\nlambda = [0.0, 0.5, 1.0]\n[output]\n" +
                           output + "\n";
  return plan::make_plan(config::parse_sweep(text, "test"));
}

// Bytes per layer of one task's results, counted here from what a task holds: 14 metrics
// (8 bytes each) and four std::vector<double> headers (24 bytes each: spectra, mixer_sv,
// mixer_eig_re, mixer_eig_im) per layer.
constexpr double result_bytes_per_layer = 14 * 8 + 4 * 24;
// Rank 0's offset tables: x_sv_offset and m_offset, one int64 per task and layer each.
constexpr double table_bytes_per_layer = 2 * 8;
// The packed message: 14 metrics and four list lengths per layer (docs/SCALING.md "Bytes per task").
constexpr double message_bytes_per_layer = 14 * 8 + 4 * 8;

TEST(Memory, MetricsPerLayerAreTheStoredOnes) {
  // task_result_bytes counts 14 doubles per layer: the number of layer metrics.
  ASSERT_EQ(metrics::n_layer_metrics, 14u);
  const auto a = make(100), b = make(101);
  EXPECT_DOUBLE_EQ(plan::task_result_bytes(b, b.models[0]) - plan::task_result_bytes(a, a.models[0]),
                   result_bytes_per_layer);
}

TEST(Memory, ResultsGrowLinearlyInDepthWithTheirBytesPerLayer) {
  for (const long long depth : {10LL, 1000LL, 50000LL}) {  // 2 x depth within the limit of 100000
    const auto p = make(depth), q = make(2 * depth);
    const double L = static_cast<double>(depth);
    // slope of one task's results and message in depth
    EXPECT_DOUBLE_EQ(plan::task_result_bytes(q, q.models[0]) - plan::task_result_bytes(p, p.models[0]),
                     L * result_bytes_per_layer);
    EXPECT_DOUBLE_EQ(plan::task_message_bytes(q, q.models[0]) - plan::task_message_bytes(p, p.models[0]),
                     L * message_bytes_per_layer);
    // one rank: the bundle of 3 tasks holds their results, rank 0 its offset tables of all 3 tasks
    const auto mp = plan::rank_memory(p, {}), mq = plan::rank_memory(q, {});
    const double slope = (mq.resident() - mp.resident()) / L;
    EXPECT_NEAR(slope, 3 * result_bytes_per_layer + 3 * table_bytes_per_layer + 3 * 8.0, 1e-6) << depth;
    EXPECT_EQ(p.bundles[0].results_bytes, static_cast<std::size_t>(3 * plan::task_result_bytes(p, p.models[0])));
  }
}

TEST(Memory, DepthIsMostOfADeepSweep) {
  // plan used to say 40 MiB at any depth; at the deepest a sweep may be the results dominate.
  const auto p = make(100000);
  const auto m = plan::rank_memory(p, {});
  EXPECT_GT(m.resident(), 3 * 1e5 * result_bytes_per_layer);
  EXPECT_LT(m.resident(), 3 * 1e5 * (result_bytes_per_layer + 2 * table_bytes_per_layer) + 100 * MiB);
  EXPECT_DOUBLE_EQ(m.results, static_cast<double>(p.bundles[0].results_bytes));
}

TEST(Memory, StoredLayersAreThoseOfThePlan) {
  for (const long long depth : {1LL, 2LL, 7LL})
    for (const char* kind : {"none", "last", "all"}) {
      const std::string out = std::string("spectra = \"") + kind + "\"\nmixer_spectra = \"" + kind +
                              "\"\ngradients = \"" + kind + "\"";
      const auto p = make(depth, 1, out, 4, 6), none = make(depth, 1, "", 4, 6);
      double spectra = 0, mixer = 0;
      for (int l = 0; l <= p.max_depth; ++l) {
        spectra += p.spectrum_at(l);
        mixer += p.mixer_spectrum_at(l);
      }
      const double L = static_cast<double>(depth), g = static_cast<double>(p.gradient_depths().size());
      EXPECT_DOUBLE_EQ(plan::task_message_bytes(p, p.models[0]) - plan::task_message_bytes(none, none.models[0]),
                       8 * 4 * spectra + 24 * 4 * mixer + 16 * L * g)
          << kind << " " << depth;
    }
}

TEST(Memory, StoredSpectraAndGradientsCount) {
  const int T = 16, d = 32, L = 50;
  const auto none = make(L, 1, "", T, d);
  const auto all = make(L, 1, "spectra = \"all\"", T, d);
  const auto mixer = make(L, 1, "mixer_spectra = \"last\"", T, d);
  const auto grads = make(L, 1, "gradients = \"all\"", T, d);
  const double base = plan::task_result_bytes(none, none.models[0]);
  // every layer's T singular values (k = min(T, d)), each in its own heap block of 16 bytes more
  EXPECT_DOUBLE_EQ(plan::task_result_bytes(all, all.models[0]) - base, (L + 1) * (8.0 * T + 16));
  // the last layer's T singular values and T complex eigenvalues
  EXPECT_DOUBLE_EQ(plan::task_result_bytes(mixer, mixer.models[0]) - base, 3 * (8.0 * T + 16));
  // gradient norms and their errors at every output depth: 2 x L x L doubles
  EXPECT_DOUBLE_EQ(plan::task_result_bytes(grads, grads.models[0]) - base, 2.0 * 8 * L * L);
  EXPECT_DOUBLE_EQ(plan::task_message_bytes(grads, grads.models[0]) - plan::task_message_bytes(none, none.models[0]),
                   16.0 * L * L);
}

TEST(Memory, RankZeroCollectsABatchFromEveryRank) {
  // 8 replicates: 8 bundles of 3 tasks. On 4 ranks rank 0 may hold the results of 3 other ranks'
  // units at once; a worker packs its unit into a message that doubles as it grows.
  const auto p = make(100000, 8);
  const auto one = plan::rank_memory(p, {1, 1, 1, 1, false});
  const auto four = plan::rank_memory(p, {1, 1, 4, 1, false});
  const double result = plan::task_result_bytes(p, p.models[0]);
  const double message = 3 * plan::task_message_bytes(p, p.models[0]);
  EXPECT_DOUBLE_EQ(one.message, 0.0);
  // one rank: its previous unit's results wait for the write while it computes the next
  EXPECT_GE(one.writer, 3 * result);
  EXPECT_LT(one.writer, 3 * result + 6 * 8.0 * 100001 + 24 * (16.0 * 100001 + 324) + 1);
  EXPECT_DOUBLE_EQ(four.message, 2 * message);
  EXPECT_DOUBLE_EQ(four.writer - one.writer, 9 * result + 9 * 8.0 * 100001 + message);
  EXPECT_GT(four.resident(), one.resident());
}

TEST(Memory, ReadingStoredResultsCountsWholeDatasets) {
  const auto p = make(100000, 8);  // 24 tasks
  const auto plain = plan::rank_memory(p, {});
  const auto reads = plan::rank_memory(p, {1, 1, 1, 1, true});
  EXPECT_GE(reads.writer - plain.writer, 24 * 14 * 8.0 * 100001 - plain.writer);
}

TEST(Memory, AddressSpaceHasTheBlasBuffersAndTheProgram) {
  const auto p = make(10);
  const auto m = plan::rank_memory(p, {});
  // a tiny sweep: the program's address space and one BLAS buffer, little else
  EXPECT_NEAR(m.address_space(), plan::program_address_bytes + plan::blas_buffer_bytes, 5 * MiB);
  EXPECT_LT(m.blas, plan::blas_buffer_bytes);
  // each further OpenMP thread: a buffer and a stack; each BLAS worker started at load: its buffer and stack
  const auto threads = plan::rank_memory(p, {4, 1, 1, 1, false});
  EXPECT_NEAR(threads.address_space() - m.address_space(),
              3 * (plan::blas_buffer_bytes + plan::thread_stack_bytes) + threads.unit - m.unit, 1.0);
  const auto loaded = plan::rank_memory(p, {1, 1, 1, 2, false});
  EXPECT_DOUBLE_EQ(loaded.address_space() - m.address_space(), plan::blas_worker_bytes);
  EXPECT_DOUBLE_EQ(loaded.resident(), m.resident());  // untouched buffers are not resident
}

TEST(Memory, RefusalsNameTheLimitAndTheEstimate) {
  const auto p = make(100000);
  try {
    plan::check_memory(p, {}, 64 * MiB, "--mem-per-rank 64M", std::nullopt);
    FAIL() << "a sweep of 1e5 layers fits 64 MiB";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 1u);
    EXPECT_EQ(e.issues()[0].key, "--mem-per-rank");
    const std::string& text = e.issues()[0].problem;
    EXPECT_NE(text.find("the largest bundle (3 tasks with T = 4, d = 4, 100000 layers) needs about"), std::string::npos)
        << text;
    EXPECT_NE(text.find("more than the budget of 64.0 MiB (--mem-per-rank 64M)"), std::string::npos) << text;
    EXPECT_NE(text.find("the results of its 100001 layers per task take"), std::string::npos) << text;
  }
  const auto small = make(10);
  EXPECT_NO_THROW(plan::check_memory(small, {}, 1024 * MiB, "--mem-per-rank 1G", 2048 * MiB));
  try {
    plan::check_memory(small, {}, 1024 * MiB, "--mem-per-rank 1G", 300 * MiB);
    FAIL() << "a rank fits 300 MiB of address space";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues()[0].key, "ulimit -v");
    const std::string& text = e.issues()[0].problem;
    EXPECT_NE(text.find("of address space per rank"), std::string::npos) << text;
    EXPECT_NE(text.find("more than the limit of 300.0 MiB (RLIMIT_AS, ulimit -v)"), std::string::npos) << text;
  }
}

TEST(Memory, OutOfMemoryIsNamedWithTheEstimate) {
  EXPECT_TRUE(is_out_of_memory(std::bad_alloc()));
  EXPECT_TRUE(is_out_of_memory(std::length_error("vector::_M_default_append")));
  EXPECT_FALSE(is_out_of_memory(std::runtime_error("H5Dwrite failed")));
  const std::string text = out_of_memory_message("running the sweep", std::bad_alloc(), 1024 * MiB);
  EXPECT_EQ(text.rfind("out of memory while running the sweep (std::bad_alloc): a rank needs about 1.0 GiB", 0), 0u)
      << text;
  EXPECT_NE(text.find("--mem-per-rank"), std::string::npos) << text;
}

}  // namespace
}  // namespace rcsweep

namespace rcsweep {
namespace {

// An encoder with init = "checkpoint" maps its checkpoint once per rank: rank_memory counts the
// files once per folder (not per model or task) in the resident bytes, which `plan` shows apart;
// random init maps nothing.
TEST(Memory, ACheckpointIsMappedOncePerRank) {
  models::encoder::test::TempDir dir;
  models::encoder::test::write_checkpoint(
      dir.path(), models::encoder::RandomWeights(models::encoder::test::tiny_bert(8, 2, 3, 12), 1, 0));
  const double file = static_cast<double>(std::filesystem::file_size(dir / "model.safetensors"));
  config::ModelParams m;
  m.block = config::Block::encoder;
  m.model_folder = dir.path().string();
  m.input = config::InputKind::gaussian;
  m.T = 10;
  m.d = m.d_qk = 8;
  m.heads = 2;
  m.depth = 2;
  plan::Plan p;
  p.max_depth = 2;
  p.models = {m, m};
  p.models[1].lambda = 0.5;
  const plan::RankMemory random = plan::rank_memory(p, {});
  EXPECT_EQ(random.model, 0.0);
  p.models[1].init = config::Init::checkpoint;  // one model of two maps the folder
  const plan::RankMemory mapped = plan::rank_memory(p, {});
  EXPECT_EQ(mapped.model, file);
  EXPECT_EQ(mapped.resident(), random.resident() + file);
  EXPECT_EQ(mapped.address_space(), random.address_space() + file);
  p.models[0].init = config::Init::checkpoint;  // both: still once
  EXPECT_EQ(plan::rank_memory(p, {}).model, file);
}

}  // namespace
}  // namespace rcsweep
