// Mamba-2 tasks in run_bundle (mamba2_task.hpp, docs/MAMBA2.md "In a sweep") and the block's
// descriptor (mamba2_kind.cpp): every layer's row is the metrics of X_l and of head 0's mixer matrix
// computed directly from RandomWeights, apply_block, signal_metrics and mixer_metrics; the ablation
// of each layer is the sweep's lambda (or lambda_layers), norm, gate and gated_norm; a task's
// numbers are bitwise the same alone, in any bundle (stack tasks included) and on any number of
// threads.
#include "models/mamba2/mamba2_task.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "config/params.hpp"
#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "models/mamba2/checkpoint_weights.hpp"
#include "models/task_runner.hpp"
#include "mamba2_test_folder.hpp"

namespace rcsweep::models::mamba2 {
namespace {

using test::TempDir;
using test::write_config;

constexpr std::uint64_t seed = 5;
// d_model 8, expand 2 (E = 16), headdim 4 (4 heads), 2 groups of d_state 3, chunks of 4 tokens:
// T = 7 is a full chunk and a shorter one; depth 4 beyond the config's 2 layers (a fresh draw).
constexpr int T = 7, d = test::d, depth = 4, chunk = test::chunk;

std::shared_ptr<const std::vector<std::vector<std::int64_t>>> excerpts() {
  return std::make_shared<const std::vector<std::vector<std::int64_t>>>(std::vector<std::vector<std::int64_t>>{
      {2, 5, 5, 9, 1, 29, 14, 3, 3}, {7, 7, 0, 12, 19, 4, 22, 8}, {1, 2, 3, 4, 5, 6, 7}});
}

// The published block on the first T tokens of excerpt `replicate`, random init.
config::ModelParams mamba2_model(const std::string& folder) {
  config::ModelParams m;
  m.block = config::Block::mamba2;
  m.model_folder = folder;
  m.input = config::InputKind::tokens;
  m.tokens = excerpts();
  m.T = T;
  m.d = m.d_qk = d;
  m.depth = depth;
  m.lambda = 1.0;
  m.norm = config::Norm::rms;
  m.gate = config::Gate::silu;
  return m;
}

BundleJob job_of(const std::vector<const config::ModelParams*>& models, int replicate = 0) {
  BundleJob job;
  job.seed = seed;
  job.replicate = replicate;
  job.max_depth = depth;
  job.recording.mixer_spectrum_layers.assign(depth + 1, false);
  for (std::size_t i = 0; i < models.size(); ++i) job.tasks.push_back({.id = i, .model = models[i]});
  for (std::size_t i = 0; i < models.size(); ++i) job.order.push_back(i);
  return job;
}

std::vector<TaskOutput> run(const BundleJob& job) {
  std::vector<TaskOutput> out;
  run_bundle(job, [&](TaskOutput&& o) { out.push_back(std::move(o)); });
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.task < b.task; });
  return out;
}

bool same_row(const metrics::LayerRow& a, const metrics::LayerRow& b) {
  return std::memcmp(a.data(), b.data(), sizeof a) == 0;
}

// The rows of a task computed directly: X_0 = the draw's embedding rows of the excerpt's first T
// ids, then layers 0, 1, 2, 3 of RandomWeights (2 and 3 beyond the config's layers), each with
// ablations[l - 1] (default: ablation_of(m, l)), the metrics of X_l and of head 0's mixer matrix.
std::vector<metrics::LayerRow> direct_rows(const Mamba2Shape& shape, const config::ModelParams& m, int replicate,
                                           std::uint32_t draw, std::vector<Matrix>* head0 = nullptr,
                                           const std::vector<Ablation>* ablations = nullptr) {
  const RandomWeights w(shape, seed, draw);
  const auto& ids = (*m.tokens)[static_cast<std::size_t>(replicate)];
  Matrix X = w.embedding(std::span<const std::int64_t>(ids.data(), T));
  std::vector<metrics::LayerRow> rows;
  rows.push_back(metrics::to_row(metrics::signal_metrics(X, 0.0), metrics::MixerMetrics{}));
  for (int l = 1; l <= depth; ++l) {
    BlockOutputs out;
    out.keep_head0 = true;
    const Ablation ablation = ablations ? ablations->at(static_cast<std::size_t>(l - 1)) : ablation_of(m, l);
    apply_block(shape, w.layer(l - 1), ablation, X, &out, SsdForm::chunked);
    rows.push_back(metrics::to_row(metrics::signal_metrics(X, 0.0), metrics::mixer_metrics(out.head0)));
    if (head0) head0->push_back(out.head0);
  }
  return rows;
}

class Mamba2Task : public ::testing::Test {
 protected:
  void SetUp() override { write_config(dir_.path()); }
  std::string folder() const { return dir_.path().string(); }
  Mamba2Shape shape() const { return open_model(dir_.path(), false)->shape; }
  TempDir dir_;
};

TEST_F(Mamba2Task, LayersAreTheBlocksMetrics) {
  const config::ModelParams m = mamba2_model(folder());
  ASSERT_EQ(shape().chunk_size, chunk);
  ASSERT_EQ(shape().heads(), 4);
  for (int replicate : {0, 2}) {
    const auto out = run(job_of({&m}, replicate));
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].outcome, Outcome::done) << out[0].message;
    const auto rows = direct_rows(shape(), m, replicate, static_cast<std::uint32_t>(replicate));
    for (int l = 0; l <= depth; ++l) EXPECT_TRUE(same_row(out[0].layers[l], rows[l])) << "layer " << l;
    for (double v : out[0].theory) EXPECT_TRUE(std::isnan(v));  // no theorem for a Mamba-2 block
  }
}

TEST_F(Mamba2Task, AblationOfEachLayer) {
  config::ModelParams m = mamba2_model(folder());
  Ablation a = ablation_of(m, 1);
  EXPECT_EQ(a.lambda, 1.0);
  EXPECT_TRUE(a.norm && a.gate && a.gated_norm);
  m.lambda = -0.5;
  m.norm = config::Norm::none;
  m.gate = config::Gate::none;
  m.gated_norm = false;
  a = ablation_of(m, 3);
  EXPECT_EQ(a.lambda, -0.5);
  EXPECT_FALSE(a.norm || a.gate || a.gated_norm);
  m.lambda_layers = std::make_shared<const std::vector<double>>(std::vector<double>{1.0, 0.0, -1.0, 0.5});
  for (int l = 1; l <= depth; ++l) EXPECT_EQ(ablation_of(m, l).lambda, (*m.lambda_layers)[l - 1]) << l;
  EXPECT_THROW((void)ablation_of(m, depth + 1), Error);
  EXPECT_THROW((void)ablation_of(m, 0), Error);
  EXPECT_EQ(draw_of(m, 3), 3u);
  m.init_draw = 1;
  EXPECT_EQ(draw_of(m, 3), 1u);
}

// lambda_layers: block l is apply_block with lambda = lambda_l; the ablations' keys each change the
// numbers (the last layer's sr_cov and mu_rel differ from the published block's).
TEST_F(Mamba2Task, PerLayerLambdaAndAblationsAreTheBlocks) {
  const std::vector<double> lambdas = {1.0, 0.0, -0.5, 2.0};
  config::ModelParams per_layer = mamba2_model(folder());
  per_layer.lambda_layers = std::make_shared<const std::vector<double>>(lambdas);
  const config::ModelParams published = mamba2_model(folder());
  config::ModelParams no_norm = published, no_gate = published, no_gated_norm = published, no_skip = published;
  no_norm.norm = config::Norm::none;
  no_gate.gate = config::Gate::none;
  no_gated_norm.gated_norm = false;
  no_skip.lambda = 0.0;
  const auto out = run(job_of({&published, &per_layer, &no_norm, &no_gate, &no_gated_norm, &no_skip}, 1));
  ASSERT_EQ(out.size(), 6u);
  std::vector<Ablation> ablations;
  for (const double lambda : lambdas) ablations.push_back({.lambda = lambda});
  const auto rows = direct_rows(shape(), per_layer, 1, 1, nullptr, &ablations);
  for (int l = 0; l <= depth; ++l) EXPECT_TRUE(same_row(out[1].layers[l], rows[l])) << "layer " << l;
  EXPECT_TRUE(same_row(out[1].layers[1], out[0].layers[1]));  // lambda_1 = 1: the published block
  constexpr auto sr = metrics::metric_index("sr_cov"), mu = metrics::metric_index("mu_rel");
  for (std::size_t i = 1; i < out.size(); ++i) {
    ASSERT_EQ(out[i].outcome, Outcome::done) << out[i].message;
    EXPECT_TRUE(same_row(out[i].layers[0], out[0].layers[0]));  // the same X_0
    EXPECT_NE(out[i].layers[depth][sr], out[0].layers[depth][sr]) << i;
    EXPECT_NE(out[i].layers[depth][mu], out[0].layers[depth][mu]) << i;
  }
  const std::vector<Ablation> off(depth, Ablation{.lambda = 1.0, .gated_norm = false});
  const auto off_rows = direct_rows(shape(), no_gated_norm, 1, 1, nullptr, &off);
  for (int l = 0; l <= depth; ++l) EXPECT_TRUE(same_row(out[4].layers[l], off_rows[l])) << "gated_norm off " << l;
  // A model whose lambda_layers is not one per layer is refused before any block runs.
  config::ModelParams short_list = per_layer;
  short_list.lambda_layers = std::make_shared<const std::vector<double>>(std::vector<double>{1.0, 0.5});
  EXPECT_THROW((void)TaskMamba2(short_list, seed, 0), Error);
  config::ModelParams stack = published;
  stack.block = config::Block::stack;
  EXPECT_THROW((void)TaskMamba2(stack, seed, 0), Error);
}

// Head 0's mixer matrix is the layer's mixer: its spectrum where asked (lower triangular: its
// eigenvalues are its diagonal, real).
TEST_F(Mamba2Task, MixerSpectraAreHeadZerosMixerMatrix) {
  const config::ModelParams m = mamba2_model(folder());
  BundleJob job = job_of({&m}, 0);
  job.recording.mixer_spectrum_layers = {false, true, false, false, true};
  const auto out = run(job);
  std::vector<Matrix> head0;
  direct_rows(shape(), m, 0, 0, &head0);
  for (int l = 1; l <= depth; ++l) {
    if (!job.recording.mixer_spectrum_at(l)) {
      EXPECT_TRUE(out[0].mixer_sv[l].empty());
      continue;
    }
    const Matrix& M = head0[static_cast<std::size_t>(l - 1)];
    ASSERT_EQ(M.rows(), static_cast<std::size_t>(T));
    for (std::size_t i = 0; i < M.rows(); ++i)
      for (std::size_t j = i + 1; j < M.cols(); ++j) EXPECT_EQ(M(i, j), 0.0) << l;  // causal
    EXPECT_EQ(out[0].mixer_sv[l], linalg::singular_values(M)) << l;
    for (double im : out[0].mixer_eig_im[l]) EXPECT_EQ(im, 0.0);
  }
}

// A bundle of Mamba-2 tasks (ablations, draws, a per-layer profile, a Gaussian input) and a stack
// task: each task bitwise as alone, on 1, 2 and 3 threads, run concurrently or not.
TEST_F(Mamba2Task, BundlingAndThreadsAreBitwiseInvisible) {
  const int blas = linalg::set_blas_threads(1);
  std::vector<config::ModelParams> models(8, mamba2_model(folder()));
  models[1].lambda = -1.0;
  models[2].gated_norm = false;
  models[3].init_draw = 0;
  models[4].norm = config::Norm::none;
  models[5].input = config::InputKind::gaussian;  // X_0 of the stack's input, no embedding
  models[6] = config::ModelParams{};              // a stack task of the same (T, d)
  models[6].T = T;
  models[6].d = models[6].d_qk = d;
  models[6].depth = depth;
  models[6].input = config::InputKind::gaussian;
  models[6].norm = config::Norm::rms;
  models[7].lambda_layers = std::make_shared<const std::vector<double>>(std::vector<double>{0.5, 1.0, 0.0, 2.0});
  std::vector<const config::ModelParams*> all;
  for (const auto& m : models) all.push_back(&m);
  std::vector<TaskOutput> alone;
  for (const auto* m : all) alone.push_back(run(job_of({m}, 1))[0]);
  for (int threads : {1, 2, 3})
    for (bool concurrent : {false, true}) {
      parallel::set_threads(threads);
      BundleJob job = job_of(all, 1);
      job.concurrent = concurrent;
      std::reverse(job.order.begin(), job.order.end());
      job.recording.mixer_spectrum_layers.assign(depth + 1, true);
      const auto together = run(job);
      parallel::set_threads(1);
      ASSERT_EQ(together.size(), all.size());
      for (std::size_t i = 0; i < all.size(); ++i) {
        const std::string where = std::to_string(threads) + " threads, task " + std::to_string(i);
        for (std::size_t l = 0; l < together[i].layers.size(); ++l)
          EXPECT_TRUE(same_row(together[i].layers[l], alone[i].layers[l])) << where << ", layer " << l;
        EXPECT_EQ(together[i].outcome, alone[i].outcome) << where;
      }
    }
  linalg::set_blas_threads(blas);
  EXPECT_TRUE(same_row(alone[5].layers[0], alone[6].layers[0]));  // the stack's Gaussian X_0
  EXPECT_FALSE(same_row(alone[0].layers[0], alone[5].layers[0]));
  for (const auto& o : alone) EXPECT_EQ(o.outcome, Outcome::done) << o.message;
}

// init = "checkpoint" reads the folder's weights: a checkpoint written from draw 3 in F64 gives
// bitwise the numbers of init = "random", init_draw = 3 (its 2 layers); deeper than its n_layer it
// is refused.
TEST_F(Mamba2Task, CheckpointOfADrawIsThatDraw) {
  TempDir checkpoint_dir;
  test::write_checkpoint(checkpoint_dir.path(), RandomWeights(shape(), seed, 3));
  config::ModelParams random = mamba2_model(checkpoint_dir.path().string());
  random.depth = test::n_layer;
  random.init_draw = 3;
  config::ModelParams trained = random;
  trained.init = config::Init::checkpoint;
  BundleJob job = job_of({&random, &trained}, 1);
  job.max_depth = test::n_layer;
  job.recording.mixer_spectrum_layers.assign(test::n_layer + 1, true);
  const auto out = run(job);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].outcome, Outcome::done) << out[0].message;
  ASSERT_EQ(out[1].outcome, Outcome::done) << out[1].message;
  for (int l = 0; l <= test::n_layer; ++l) EXPECT_TRUE(same_row(out[1].layers[l], out[0].layers[l])) << "layer " << l;
  EXPECT_EQ(out[1].mixer_sv, out[0].mixer_sv);
  ASSERT_TRUE(open_model(checkpoint_dir.path(), false)->weights);  // the runner opened its weights
  // Another draw is another model.
  random.init_draw = 4;
  job = job_of({&random}, 1);
  job.max_depth = test::n_layer;
  EXPECT_FALSE(same_row(run(job)[0].layers[test::n_layer], out[1].layers[test::n_layer]));
  // A checkpoint runs its layers only (the sweep's checks refuse a deeper one before any work).
  trained.depth = test::n_layer + 1;
  EXPECT_THROW((void)TaskMamba2(trained, seed, 0), Error);
}

// A checkpoint's projections are converted and transposed in panels of stored rows on the rank's
// threads: in_proj and out_proj of a folder with several panels of each (d_model 72, 336 rows of
// in_proj) are bitwise the F64 draw they were written from, on 1, 2 and 3 threads.
TEST(Mamba2CheckpointThreads, ProjectionsAreBitwiseTheDrawOnAnyThreads) {
  Mamba2Shape s;
  s.d_model = 72;
  s.layers = 1;
  s.vocab = 30;
  s.vocab_rows = 32;
  s.d_state = 3;
  s.headdim = 4;
  s.ngroups = 2;
  s.chunk_size = chunk;
  const RandomWeights draw(s, seed, 2);
  TempDir dir;
  test::write_checkpoint(dir.path(), draw);  // its config.json is write_config's: replaced
  const nlohmann::json c = {{"d_model", s.d_model},
                            {"n_layer", s.layers},
                            {"vocab_size", s.vocab},
                            {"pad_vocab_size_multiple", 8},
                            {"ssm_cfg",
                             {{"layer", "Mamba2"},
                              {"d_state", s.d_state},
                              {"headdim", s.headdim},
                              {"expand", s.expand},
                              {"ngroups", s.ngroups},
                              {"chunk_size", s.chunk_size}}}};
  checkpoint::test::write_bytes(dir.path() / "config.json", c.dump());
  const auto weights = CheckpointWeights::open(dir.path());
  ASSERT_EQ(weights->shape().d_in_proj(), 336);
  const LayerWeights want = draw.layer(0);
  const auto same = [](const Matrix& a, const Matrix& b) {
    return a.rows() == b.rows() && a.cols() == b.cols() &&
           std::memcmp(a.values().data(), b.values().data(), a.values().size() * sizeof(double)) == 0;
  };
  for (const int threads : {1, 2, 3}) {
    parallel::set_threads(threads);
    const LayerWeights got = weights->layer(0);
    parallel::set_threads(1);
    EXPECT_TRUE(same(got.W_in, want.W_in)) << threads << " threads";
    EXPECT_TRUE(same(got.W_out, want.W_out)) << threads << " threads";
    EXPECT_TRUE(same(got.conv, want.conv)) << threads << " threads";
  }
}

// Without its norms and with huge weights the block overflows: recorded as diverged, the layers
// before it kept. A checkpoint of a draw whose projections are scaled by 1e100 (the published
// initialisation would not overflow).
TEST_F(Mamba2Task, OverflowIsRecordedAsDiverged) {
  class Scaled final : public WeightSource {
   public:
    explicit Scaled(const RandomWeights& w) : w_(w) {}
    const Mamba2Shape& shape() const override { return w_.shape(); }
    Matrix embedding(std::span<const std::int64_t> ids) const override { return w_.embedding(ids); }
    std::vector<double> final_norm() const override { return w_.final_norm(); }
    LayerWeights layer(int layer) const override {
      LayerWeights w = w_.layer(layer);
      for (Matrix* W : {&w.W_in, &w.W_out})
        for (double& x : W->values()) x *= 1e100;
      return w;
    }

   private:
    const RandomWeights& w_;
  };
  TempDir checkpoint_dir;
  const RandomWeights w(shape(), seed, 0);
  test::write_checkpoint(checkpoint_dir.path(), Scaled(w));
  config::ModelParams m = mamba2_model(checkpoint_dir.path().string());
  m.init = config::Init::checkpoint;
  m.norm = config::Norm::none;
  m.gated_norm = false;
  m.depth = test::n_layer;
  BundleJob job = job_of({&m});
  job.max_depth = test::n_layer;
  const auto out = run(job);
  ASSERT_EQ(out[0].outcome, Outcome::diverged) << out[0].message;
  EXPECT_TRUE(out[0].message.starts_with("diverged at layer ")) << out[0].message;
  const int at = std::stoi(out[0].message.substr(std::string("diverged at layer ").size()));
  EXPECT_GE(at, 1);
  EXPECT_TRUE(std::isfinite(out[0].layers[at - 1][metrics::metric_index("sr_cov")]));
  for (int l = at; l <= test::n_layer; ++l)
    EXPECT_TRUE(std::isnan(out[0].layers[l][metrics::metric_index("sr_cov")])) << l;
}

// The runner's contract: checks_per_layer calls of `cancelled` per layer, and a stop ends the bundle.
TEST_F(Mamba2Task, CancelledIsAskedAFixedNumberOfTimesPerLayer) {
  const config::ModelParams a = mamba2_model(folder());
  config::ModelParams b = a;
  b.lambda = 0.0;
  for (const auto& models :
       {std::vector<const config::ModelParams*>{&a}, std::vector<const config::ModelParams*>{&a, &b}}) {
    int calls = 0, done = 0;
    run_bundle(
        job_of(models), [&](TaskOutput&&) { ++done; },
        [&] {
          ++calls;
          return false;
        });
    EXPECT_EQ(calls, depth * checks_per_layer);
    EXPECT_EQ(done, static_cast<int>(models.size()));
  }
  int calls = 0;
  EXPECT_THROW(run_bundle(
                   job_of({&a}), [](TaskOutput&&) {}, [&] { return ++calls == 2; }),
               Cancelled);
}

}  // namespace
}  // namespace rcsweep::models::mamba2
