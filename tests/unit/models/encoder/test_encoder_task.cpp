// Encoder tasks in run_bundle (encoder_task.hpp, docs/ENCODERS.md "In a sweep"): every layer's row is
// the metrics of the block's output (or its attention branch) and of head 0's attention computed
// directly from embed, apply_block, signal_metrics and mixer_metrics; a task's numbers are bitwise
// the same alone, in any bundle (stack tasks included) and on any number of threads; the bundle's
// tasks share their weights; the checkpoint of a draw gives that draw's numbers.
#include "models/encoder/encoder_task.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/parallel.hpp"
#include "config/params.hpp"
#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "models/task_runner.hpp"
#include "encoder_test_folder.hpp"

namespace rcsweep::models::encoder {
namespace {

using test::TempDir;

constexpr std::uint64_t seed = 11;
constexpr int T = 7, d = 8, heads = 2, depth = 4;  // depth beyond the config's 3 layers: a fresh draw

// Token excerpts over a vocabulary of 30 (repeated ids, longer than T).
std::shared_ptr<const std::vector<std::vector<std::int64_t>>> excerpts() {
  return std::make_shared<const std::vector<std::vector<std::int64_t>>>(std::vector<std::vector<std::int64_t>>{
      {2, 5, 5, 9, 1, 29, 14, 3, 3}, {7, 7, 0, 12, 19, 4, 22, 8}, {1, 2, 3, 4, 5, 6, 7}});
}

// The published block on the first T tokens of excerpt `replicate`, random init.
config::ModelParams encoder_model(const std::string& folder) {
  config::ModelParams m;
  m.block = config::Block::encoder;
  m.model_folder = folder;
  m.input = config::InputKind::tokens;
  m.tokens = excerpts();
  m.T = T;
  m.d = m.d_qk = d;
  m.heads = heads;
  m.depth = depth;
  m.lambda = m.lambda_mlp = 1.0;
  m.mlp = config::Mlp::model;
  m.norm = config::Norm::layernorm;
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

void expect_same_output(const TaskOutput& a, const TaskOutput& b, const std::string& where) {
  EXPECT_EQ(a.outcome, b.outcome) << where;
  ASSERT_EQ(a.layers.size(), b.layers.size()) << where;
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    EXPECT_TRUE(same_row(a.layers[l], b.layers[l])) << where << " " << l;
  EXPECT_EQ(a.mixer_sv, b.mixer_sv) << where;
  EXPECT_EQ(a.spectra, b.spectra) << where;
}

// The rows of a task computed directly: X_0 = embed of the excerpt's first T ids with the draw's
// embeddings, then the blocks with groups 0, 1, 2, 3 of RandomWeights (group 3 beyond the config's
// layers), each with ablations[l - 1] (default: ablation_of(m, l)), the metrics of the block's
// output (or of its attention branch) and of head 0's A.
std::vector<metrics::LayerRow> direct_rows(const EncoderShape& shape, const config::ModelParams& m, int replicate,
                                           std::uint32_t draw, std::vector<Matrix>* head0 = nullptr,
                                           const std::vector<Ablation>* ablations = nullptr) {
  EncoderShape deep = shape;
  deep.layers = depth;
  const RandomWeights w(deep, seed, draw);
  const auto& ids = (*m.tokens)[static_cast<std::size_t>(replicate)];
  Excerpt excerpt;
  excerpt.ids.assign(ids.begin(), ids.begin() + T);
  std::vector<std::int64_t> distinct = excerpt.ids;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const EmbeddingRequest request{.ids = distinct, .max_position = T - 1};
  Matrix X = embed(shape, w.embeddings(request), request, excerpt);
  std::vector<metrics::LayerRow> rows;
  rows.push_back(metrics::to_row(metrics::signal_metrics(X, 0.0), metrics::MixerMetrics{}));
  for (int l = 1; l <= depth; ++l) {
    BlockOutputs out;
    out.keep_head0 = true;
    const Ablation ablation = ablations ? ablations->at(static_cast<std::size_t>(l - 1)) : ablation_of(m, l);
    apply_block(shape, w.block(l - 1), ablation, {}, X, &out);
    const Matrix& signal = m.measure == config::Measure::attention ? out.attention : X;
    rows.push_back(metrics::to_row(metrics::signal_metrics(signal, 0.0), metrics::mixer_metrics(out.head0)));
    if (head0) head0->push_back(out.head0);
  }
  return rows;
}

class EncoderTask : public ::testing::Test {
 protected:
  void SetUp() override { test::write_config(dir_.path(), test::tiny_bert(d, heads, 3)); }
  std::string folder() const { return dir_.path().string(); }
  EncoderShape shape() const { return open_model(dir_.path(), false)->shape; }
  TempDir dir_;
};

TEST_F(EncoderTask, LayersAreTheBlocksMetrics) {
  const config::ModelParams m = encoder_model(folder());
  for (int replicate : {0, 2}) {
    const auto out = run(job_of({&m}, replicate));
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].outcome, Outcome::done) << out[0].message;
    const auto rows = direct_rows(shape(), m, replicate, static_cast<std::uint32_t>(replicate));
    for (int l = 0; l <= depth; ++l) EXPECT_TRUE(same_row(out[0].layers[l], rows[l])) << "layer " << l;
    for (double v : out[0].theory) EXPECT_TRUE(std::isnan(v));  // no theorem for an encoder
  }
}

TEST_F(EncoderTask, MeasureAttentionRecordsTheBranch) {
  config::ModelParams m = encoder_model(folder());
  m.measure = config::Measure::attention;
  const auto out = run(job_of({&m}, 1));
  ASSERT_EQ(out[0].outcome, Outcome::done) << out[0].message;
  const auto rows = direct_rows(shape(), m, 1, 1);
  for (int l = 0; l <= depth; ++l) EXPECT_TRUE(same_row(out[0].layers[l], rows[l])) << "layer " << l;
  // The block's output is another signal: layers 1.. differ from measure = "block", layer 0 not.
  const config::ModelParams block = encoder_model(folder());
  const auto other = run(job_of({&block}, 1));
  EXPECT_TRUE(same_row(out[0].layers[0], other[0].layers[0]));
  constexpr auto sr = metrics::metric_index("sr_cov");
  for (int l = 1; l <= depth; ++l) EXPECT_NE(out[0].layers[l][sr], other[0].layers[l][sr]) << l;
}

// The draw: init_draw k is the same model whatever the replicate; -1 is the replicate's.
TEST_F(EncoderTask, InitDrawChoosesTheModel) {
  config::ModelParams fixed = encoder_model(folder());
  fixed.init_draw = 2;
  fixed.tokens = std::make_shared<const std::vector<std::vector<std::int64_t>>>(
      std::vector<std::vector<std::int64_t>>{excerpts()->at(0), excerpts()->at(0), excerpts()->at(0)});
  const auto out = run(job_of({&fixed}, 0));
  const auto rows = direct_rows(shape(), fixed, 0, 2);
  for (int l = 0; l <= depth; ++l) EXPECT_TRUE(same_row(out[0].layers[l], rows[l])) << l;
  // Replicate 1 reads the same excerpt here: with the fixed draw it is the same task.
  expect_same_output(run(job_of({&fixed}, 1))[0], out[0], "init_draw 2, replicate 1");
}

// The ablations of the sweep's keys change the numbers (every metric of the last layer differs).
TEST_F(EncoderTask, AblationsDiffer) {
  const config::ModelParams published = encoder_model(folder());
  config::ModelParams no_skip = published, no_mlp = published, no_norm = published;
  no_skip.lambda = 0.0;
  no_mlp.mlp = config::Mlp::none;
  no_norm.norm = config::Norm::none;
  const auto out = run(job_of({&published, &no_skip, &no_mlp, &no_norm}));
  ASSERT_EQ(out.size(), 4u);
  constexpr auto sr = metrics::metric_index("sr_cov"), mu = metrics::metric_index("mu_rel");
  for (std::size_t i = 1; i < out.size(); ++i) {
    ASSERT_EQ(out[i].outcome, Outcome::done) << out[i].message;
    EXPECT_TRUE(same_row(out[i].layers[0], out[0].layers[0]));  // the same X_0
    EXPECT_NE(out[i].layers[depth][sr], out[0].layers[depth][sr]) << i;
    EXPECT_NE(out[i].layers[depth][mu], out[0].layers[depth][mu]) << i;
  }
  EXPECT_EQ(ablation_of(no_skip, 1).lambda_attention, 0.0);
  EXPECT_FALSE(ablation_of(no_mlp, 1).mlp);
  EXPECT_FALSE(ablation_of(no_norm, 1).norm);
  EXPECT_FALSE(ablation_of(published, 1).causal);
}

// lambda_layers: block l is apply_block with lambda_attention = lambda_l, and lambda_mlp = lambda_l
// where lambda_mlp is "lambda", its own number otherwise; the layers before a change are the same.
TEST_F(EncoderTask, PerLayerLambdaIsEachLayersLambda) {
  const std::vector<double> lambdas = {1.0, 0.0, 0.5, -0.25};
  config::ModelParams follows = encoder_model(folder());
  follows.lambda_layers = std::make_shared<const std::vector<double>>(lambdas);
  follows.lambda_mlp_is_lambda = true;
  config::ModelParams own = follows;  // lambda_mlp = 1.0 given as a number
  own.lambda_mlp_is_lambda = false;
  own.lambda_mlp = 1.0;
  const auto out = run(job_of({&follows, &own}, 1));
  ASSERT_EQ(out.size(), 2u);
  for (const bool is_lambda : {true, false}) {
    const TaskOutput& task = out[is_lambda ? 0 : 1];
    ASSERT_EQ(task.outcome, Outcome::done) << task.message;
    std::vector<Ablation> ablations;
    for (const double lambda : lambdas)
      ablations.push_back({.lambda_attention = lambda, .lambda_mlp = is_lambda ? lambda : 1.0});
    const auto rows = direct_rows(shape(), follows, 1, 1, nullptr, &ablations);
    for (int l = 0; l <= depth; ++l)
      EXPECT_TRUE(same_row(task.layers[l], rows[l])) << "lambda_mlp is lambda " << is_lambda << ", layer " << l;
  }
  // Layer 1 (lambda_1 = 1) is the published block's; layer 2 (lambda_2 = 0) is not.
  const config::ModelParams published = encoder_model(folder());
  const auto base = run(job_of({&published}, 1));
  EXPECT_TRUE(same_row(out[0].layers[1], base[0].layers[1]));
  constexpr auto sr = metrics::metric_index("sr_cov");
  EXPECT_NE(out[0].layers[2][sr], base[0].layers[2][sr]);
  for (int l = 1; l <= depth; ++l) EXPECT_EQ(ablation_of(follows, l).lambda_attention, lambdas[l - 1]) << l;
  EXPECT_THROW((void)ablation_of(follows, depth + 1), Error);
  EXPECT_THROW((void)ablation_of(follows, 0), Error);
  // A model whose lambda_layers is not one per layer is refused before any block runs.
  config::ModelParams short_list = follows;
  short_list.lambda_layers = std::make_shared<const std::vector<double>>(std::vector<double>{1.0, 0.5});
  EXPECT_THROW((void)TaskEncoder(short_list, seed, 0), Error);
}

// mask = "causal" is Ablation::causal in every block: the rows of apply_block with causal = true,
// head 0's attention lower triangular (its spectrum), and other numbers than without the mask.
TEST_F(EncoderTask, CausalMaskIsTheCausalAblation) {
  config::ModelParams causal = encoder_model(folder());
  causal.mask = config::Mask::causal;
  EXPECT_TRUE(ablation_of(causal, 1).causal);
  BundleJob job = job_of({&causal}, 2);
  job.recording.mixer_spectrum_layers.assign(depth + 1, true);
  const auto out = run(job);
  ASSERT_EQ(out[0].outcome, Outcome::done) << out[0].message;
  const std::vector<Ablation> ablations(depth, Ablation{.causal = true});
  std::vector<Matrix> head0;
  const auto rows = direct_rows(shape(), causal, 2, 2, &head0, &ablations);
  for (int l = 0; l <= depth; ++l) EXPECT_TRUE(same_row(out[0].layers[l], rows[l])) << "layer " << l;
  for (int l = 1; l <= depth; ++l) {
    const Matrix& A = head0[static_cast<std::size_t>(l - 1)];
    for (std::size_t i = 0; i < A.rows(); ++i)
      for (std::size_t j = i + 1; j < A.cols(); ++j) EXPECT_EQ(A(i, j), 0.0) << l << " " << i << " " << j;
    EXPECT_EQ(A(0, 0), 1.0);  // the first token sees itself only
    EXPECT_EQ(out[0].mixer_sv[l], linalg::singular_values(A)) << l;
  }
  const config::ModelParams open = encoder_model(folder());
  const auto other = run(job_of({&open}, 2));
  EXPECT_TRUE(same_row(out[0].layers[0], other[0].layers[0]));  // the same X_0
  constexpr auto sr = metrics::metric_index("sr_cov");
  for (int l = 1; l <= depth; ++l) EXPECT_NE(out[0].layers[l][sr], other[0].layers[l][sr]) << l;
}

// A bundle of encoder tasks (ablations, measures, draws), a stack task and an encoder on a
// Gaussian input: each task bitwise as alone, on 1, 2 and 3 threads, run concurrently or not.
TEST_F(EncoderTask, BundlingAndThreadsAreBitwiseInvisible) {
  const int blas = linalg::set_blas_threads(1);
  std::vector<config::ModelParams> models(9, encoder_model(folder()));
  models[7].mask = config::Mask::causal;
  models[8].lambda_layers = std::make_shared<const std::vector<double>>(std::vector<double>{0.5, 1.0, 0.0, 2.0});
  models[8].lambda_mlp_is_lambda = true;
  models[1].lambda = 0.5;
  models[2].measure = config::Measure::attention;
  models[3].init_draw = 0;
  models[4].mlp = config::Mlp::none;
  models[5].input = config::InputKind::gaussian;  // X_0 of the stack's input, no embedding
  models[6] = config::ModelParams{};              // a stack task of the same (T, d)
  models[6].T = T;
  models[6].d = models[6].d_qk = d;
  models[6].depth = depth;
  models[6].input = config::InputKind::gaussian;
  models[6].norm = config::Norm::layernorm;
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
  // The Gaussian input is the stack's X_0: both tasks record the same layer 0.
  EXPECT_TRUE(same_row(alone[5].layers[0], alone[6].layers[0]));
  EXPECT_FALSE(same_row(alone[0].layers[0], alone[5].layers[0]));
}

// Head 0's attention is the layer's mixer: its spectrum where asked, and the mixer metrics.
TEST_F(EncoderTask, MixerSpectraAreHeadZerosAttention) {
  const config::ModelParams m = encoder_model(folder());
  BundleJob job = job_of({&m}, 0);
  job.recording.mixer_spectrum_layers = {false, false, true, false, true};
  const auto out = run(job);
  std::vector<Matrix> head0;
  direct_rows(shape(), m, 0, 0, &head0);
  for (int l = 1; l <= depth; ++l) {
    if (!job.recording.mixer_spectrum_at(l)) {
      EXPECT_TRUE(out[0].mixer_sv[l].empty());
      continue;
    }
    EXPECT_EQ(out[0].mixer_sv[l], linalg::singular_values(head0[l - 1])) << l;
    ASSERT_EQ(out[0].mixer_eig_re[l].size(), static_cast<std::size_t>(T));
    // A row-stochastic A: its largest eigenvalue is 1, s_1 >= 1.
    EXPECT_NEAR(*std::max_element(out[0].mixer_eig_re[l].begin(), out[0].mixer_eig_re[l].end()), 1.0, 1e-12);
    EXPECT_GE(out[0].mixer_sv[l][0], 1.0 - 1e-12);
  }
}

// init = "checkpoint" reads the folder's weights: a checkpoint written from draw 3 in F64 gives
// bitwise the numbers of init = "random", init_draw = 3.
TEST_F(EncoderTask, CheckpointOfADrawIsThatDraw) {
  TempDir checkpoint_dir;
  EncoderShape deep = test::tiny_bert(d, heads, depth);
  test::write_checkpoint(checkpoint_dir.path(), RandomWeights(deep, seed, 3));
  config::ModelParams random = encoder_model(checkpoint_dir.path().string()), trained = random;
  random.init_draw = 3;
  trained.init = config::Init::checkpoint;
  const auto out = run(job_of({&random, &trained}, 1));
  ASSERT_EQ(out.size(), 2u);
  expect_same_output(out[1], out[0], "checkpoint of draw 3");
  ASSERT_TRUE(open_model(checkpoint_dir.path(), false)->weights);  // the runner opened its weights
  // Another draw is another model.
  random.init_draw = 4;
  EXPECT_FALSE(same_row(run(job_of({&random}, 1))[0].layers[depth], out[1].layers[depth]));
}

// The runner's contract: checks_per_layer calls of `cancelled` per layer, and a stop ends the bundle.
TEST_F(EncoderTask, CancelledIsAskedAFixedNumberOfTimesPerLayer) {
  const config::ModelParams a = encoder_model(folder());
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

// Without its LayerNorms and with huge weights the block overflows: recorded as diverged, the
// layers before it kept. A checkpoint of a draw scaled by 1e80 (the published std 0.02 would not).
TEST_F(EncoderTask, OverflowIsRecordedAsDiverged) {
  class Scaled final : public WeightSource {
   public:
    explicit Scaled(const RandomWeights& w) : w_(w) {}
    const EncoderShape& shape() const override { return w_.shape(); }
    EmbeddingWeights embeddings(const EmbeddingRequest& r) const override { return w_.embeddings(r); }
    BlockWeights block(int group) const override {
      BlockWeights b = w_.block(group);
      for (Matrix* W : {&b.W_V, &b.W_O, &b.W_1, &b.W_2})
        for (double& x : W->values()) x *= 1e80;
      return b;
    }

   private:
    const RandomWeights& w_;
  };
  TempDir checkpoint_dir;
  const RandomWeights w(test::tiny_bert(d, heads, depth), seed, 0);
  test::write_checkpoint(checkpoint_dir.path(), Scaled(w));
  config::ModelParams m = encoder_model(checkpoint_dir.path().string());
  m.init = config::Init::checkpoint;
  m.norm = config::Norm::none;
  const auto out = run(job_of({&m}));
  ASSERT_EQ(out[0].outcome, Outcome::diverged);
  EXPECT_TRUE(out[0].message.starts_with("diverged at layer ")) << out[0].message;
  const int at = std::stoi(out[0].message.substr(std::string("diverged at layer ").size()));
  EXPECT_GE(at, 1);
  EXPECT_TRUE(std::isfinite(out[0].layers[at - 1][metrics::metric_index("sr_cov")]));
  for (int l = at; l <= depth; ++l) EXPECT_TRUE(std::isnan(out[0].layers[l][metrics::metric_index("sr_cov")]));
}

TEST(EncoderTaskParts, GroupAtAnyDepth) {
  EncoderShape bert = test::tiny_bert(8, 2, 3);
  EXPECT_EQ(group_at(bert, 1), 0);
  EXPECT_EQ(group_at(bert, 5), 4);  // a fresh draw per block beyond num_hidden_layers
  EncoderShape albert = bert;
  albert.family = Family::albert;
  albert.layers = 4;
  albert.hidden_groups = 2;
  EXPECT_EQ(group_at(albert, 2), 0);
  EXPECT_EQ(group_at(albert, 3), 1);
  EXPECT_EQ(group_at(albert, 9), 1);  // beyond: the last group again
  config::ModelParams m;
  EXPECT_EQ(draw_of(m, 5), 5u);
  m.init_draw = 0;
  EXPECT_EQ(draw_of(m, 5), 0u);
}

// ALBERT's one layer group serves every layer: drawn once for the bundle (RandomSource::kept), the
// same object after the layer changes and after release(); BERT's layers are drawn layer by layer.
TEST(EncoderTaskParts, KeptIsBuiltOnceAcrossLayersAndRelease) {
  RandomSource random(seed, 0, T, d);
  int built = 0;
  const auto make = [&] { return ++built; };
  EXPECT_EQ(random.kept<int>("group 0", make), 1);
  (void)random.derived<int>(1, "layer", 0, [] { return 7; });
  random.release();
  (void)random.derived<int>(2, "layer", 0, [] { return 8; });
  EXPECT_EQ(random.kept<int>("group 0", make), 1);
  EXPECT_EQ(random.kept<int>("group 1", make), 2);
  EXPECT_EQ(built, 2);
  int derived_built = 0;
  (void)random.derived<int>(3, "group 0", 0, [&] { return ++derived_built; });
  random.release();
  (void)random.derived<int>(3, "group 0", 0, [&] { return ++derived_built; });
  EXPECT_EQ(derived_built, 2);  // derived: per layer, dropped by release()
}

TEST(EncoderTaskParts, AlbertsGroupIsDrawnOnceForTheBundle) {
  TempDir dir;
  const nlohmann::json albert = {
      {"model_type", "albert"},   {"vocab_size", 30},          {"max_position_embeddings", 24},
      {"type_vocab_size", 2},     {"hidden_size", d},          {"embedding_size", 4},
      {"num_attention_heads", 2}, {"intermediate_size", 12},   {"num_hidden_layers", 3},
      {"num_hidden_groups", 1},   {"inner_group_num", 1},      {"pad_token_id", 0},
      {"layer_norm_eps", 1e-12},  {"initializer_range", 0.02}, {"hidden_act", "gelu_new"}};
  checkpoint::test::write_bytes(dir.path() / "config.json", albert.dump());
  const config::ModelParams m = encoder_model(dir.path().string());
  const TaskEncoder encoder(m, seed, 0);
  RandomSource random(seed, 0, T, d);
  const BlockWeights& first = encoder.block(1, random);
  const std::vector<double> W_Q(first.W_Q.values().begin(), first.W_Q.values().end());
  random.release();
  const BlockWeights& third = encoder.block(3, random);
  EXPECT_EQ(&first, &third);
  EXPECT_TRUE(std::equal(W_Q.begin(), W_Q.end(), third.W_Q.values().begin(), third.W_Q.values().end()));

  TempDir bert;
  test::write_config(bert.path(), test::tiny_bert(d, heads, 3));
  const TaskEncoder bert_encoder(encoder_model(bert.path().string()), seed, 0);
  RandomSource bert_random(seed, 0, T, d);
  const auto values = [](const Matrix& M) { return std::vector<double>(M.values().begin(), M.values().end()); };
  const std::vector<double> layer1 = values(bert_encoder.block(1, bert_random).W_Q);
  EXPECT_NE(layer1, values(bert_encoder.block(2, bert_random).W_Q));
}

TEST(EncoderTaskParts, RefusesAStackModelAndAShortExcerpt) {
  TempDir dir;
  test::write_config(dir.path(), test::tiny_bert(d, heads, 3));
  EXPECT_THROW((void)TaskEncoder(config::ModelParams{}, seed, 0), Error);
  config::ModelParams m = encoder_model(dir.path().string());
  m.T = 9;
  RandomSource random(seed, 1, m.T, m.d);
  EXPECT_THROW(TaskEncoder(m, seed, 1).input(random), Error);  // excerpt 1 has 8 tokens
  EXPECT_THROW(TaskEncoder(m, seed, 3).input(random), Error);  // no excerpt 3
}

}  // namespace
}  // namespace rcsweep::models::encoder
