// Whole tasks: scale safety over deep stacks, divergence records, common random numbers and
// bitwise independence of bundling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "plan/bundle_job.hpp"
#include "plan/threads.hpp"
#include "linalg/linalg.hpp"

#include "model_fixtures.hpp"
#include "models/task_runner.hpp"

namespace rcsweep {
namespace {

bool bitwise_equal(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// MODELS.md "Scale": a 200-layer linear stack without norm overflows float64 many times over
// (each Markov layer with N(0, 100^2) values multiplies ||X|| by about 100 sqrt(d)), yet every
// scale-invariant metric stays finite and log_fro keeps the true scale.
TEST(TaskRunner, DeepHomogeneousStackStaysFiniteAndExact) {
  const auto plan = test::plan_from("mixer = \"markov\"\nT = 8\nd = 16\ndepth = 200\nlambda = 0.5\nsigma_v = 100.0");
  const auto out = models::run_task(plan::bundle_job(plan, {0}));
  EXPECT_EQ(out.outcome, models::Outcome::done) << out.message;
  for (int l = 0; l <= 200; ++l)
    for (auto name : {"log_fro", "sr_cov", "sr_x", "mu_rel", "res_rel", "m_s1", "m_gap"}) {
      if (l == 0 && name[0] == 'm' && name[1] == '_') continue;
      EXPECT_TRUE(std::isfinite(out.layers[l][metrics::metric_index(name)])) << name << " at layer " << l;
    }
  EXPECT_GT(out.layers[200][metrics::metric_index("log_fro")], 709.8);  // far beyond DBL_MAX = e^709.78
  EXPECT_EQ(out.layers[200][metrics::metric_index("fro")], HUGE_VAL);   // the true norm is not representable
}

// Renormalising by powers of two must not change the metrics: compare a short stack (no
// overflow possible) with the same stack computed at unit skip_scale but scaled weights... the
// simplest exact check: skip_scale = 4 multiplies every layer's branch by 4, which with lambda = 0
// multiplies X_l by 4^l exactly, so scale-invariant metrics agree bitwise and log_fro moves by
// l ln 4. This also checks common random numbers (same weights for both tasks).
TEST(TaskRunner, PowerOfTwoScaleChangesOnlyLogFro) {
  const auto plan = test::plan_from("mixer = \"markov\"\nT = 10\nd = 12\ndepth = 6", "skip_scale = [1.0, 4.0]");
  std::vector<models::TaskOutput> outs;
  models::run_bundle(plan::bundle_job(plan, {0, 1}), [&](models::TaskOutput&& o) { outs.push_back(std::move(o)); });
  ASSERT_EQ(outs.size(), 2u);
  for (int l = 0; l <= 6; ++l) {
    for (auto name : {"sr_cov", "sr_x", "mu_rel", "res_rel"})
      EXPECT_TRUE(
          bitwise_equal(outs[0].layers[l][metrics::metric_index(name)], outs[1].layers[l][metrics::metric_index(name)]))
          << name << " layer " << l;
    EXPECT_NEAR(
        outs[1].layers[l][metrics::metric_index("log_fro")] - outs[0].layers[l][metrics::metric_index("log_fro")],
        l * std::log(4.0), 1e-10);
  }
}

// A softmax stack without norm is not scale-invariant: with huge value weights it overflows.
// That is recorded as "diverged at layer l" with NaN after it, not a crash and not silent NaN.
TEST(TaskRunner, NonHomogeneousOverflowIsRecordedAsDiverged) {
  const auto plan = test::plan_from("mixer = \"softmax\"\nT = 8\nd = 8\ndepth = 200\nsigma_v = 1e30");
  const auto out = models::run_task(plan::bundle_job(plan, {0}));
  ASSERT_EQ(out.outcome, models::Outcome::diverged);
  EXPECT_NE(out.message.find("diverged at layer"), std::string::npos);
  const int at = std::stoi(out.message.substr(std::string("diverged at layer ").size()));
  EXPECT_GT(at, 1);
  EXPECT_LT(at, 200);
  EXPECT_TRUE(std::isfinite(out.layers[at - 1][metrics::metric_index("sr_cov")]));
  for (int l = at; l <= 200; ++l) EXPECT_TRUE(std::isnan(out.layers[l][metrics::metric_index("sr_cov")]));
}

// uniform + perp is M = 11^T/T - 11^T/T = 0: X is exactly zero after layer 1, the complete
// collapse; recorded as "vanished at layer 1" (told apart from an overflow), NaN from there on.
TEST(TaskRunner, ExactlyZeroSignalIsRecordedAsVanished) {
  const auto plan = test::plan_from("mixer = \"uniform\"\ngap_fix = \"perp\"\nT = 8\nd = 8\ndepth = 4");
  const auto out = models::run_task(plan::bundle_job(plan, {0}));
  ASSERT_EQ(out.outcome, models::Outcome::vanished) << out.message;
  EXPECT_TRUE(out.message.starts_with("vanished at layer 1: every entry of X is zero")) << out.message;
  EXPECT_TRUE(std::isfinite(out.layers[0][metrics::metric_index("sr_cov")]));
  for (int l = 1; l <= 4; ++l) EXPECT_TRUE(std::isnan(out.layers[l][metrics::metric_index("log_fro")]));
}

// With a norm, softmax is safe at any depth.
TEST(TaskRunner, NormalisedSoftmaxStackRunsDeep) {
  const auto plan = test::plan_from("mixer = \"softmax\"\nT = 8\nd = 8\ndepth = 200\nnorm = \"rms\"\nlambda = 1.0");
  const auto out = models::run_task(plan::bundle_job(plan, {0}));
  EXPECT_EQ(out.outcome, models::Outcome::done);
  EXPECT_TRUE(std::isfinite(out.layers[200][metrics::metric_index("sr_cov")]));
  EXPECT_NEAR(out.layers[200][metrics::metric_index("fro")], std::sqrt(8.0), 1e-12);  // rows of unit norm
}

// Running a task inside a bundle or alone gives bitwise the same numbers (what makes results
// independent of the MPI layout), and tasks differing only in lambda share weights: at lambda = 0
// both variants of a linear stack coincide exactly with the lambda-free task.
TEST(TaskRunner, BundlingIsBitwiseInvisible) {
  const auto plan = test::plan_from("T = 6\nd = 10\ndepth = 4",
                                    "mixer = [\"softmax\", \"markov\"]\nlambda = [0.0, 0.5]\n"
                                    "gap_fix = [\"none\", \"perp\"]",
                                    2, "all");
  std::vector<std::uint64_t> bundle = plan.bundles.front().tasks;
  ASSERT_EQ(bundle.size(), 8u);
  std::vector<models::TaskOutput> together;
  models::run_bundle(plan::bundle_job(plan, bundle), [&](models::TaskOutput&& o) { together.push_back(std::move(o)); });
  for (const auto& t : together) {
    const auto alone = models::run_task(plan::bundle_job(plan, {t.task}));
    for (int l = 0; l <= 4; ++l) {
      for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k)
        EXPECT_TRUE(bitwise_equal(t.layers[l][k], alone.layers[l][k]) ||
                    (std::isnan(t.layers[l][k]) && std::isnan(alone.layers[l][k])));
      EXPECT_EQ(t.spectra[l], alone.spectra[l]);
    }
  }
}

// The same at sizes where OpenBLAS's GEMM kernels tile the rows (T = 37 and 13: not multiples of
// any kernel's tile; d = 200 and 301), with two heads and a softmax/markov/identity mix, on
// whatever kernel this machine runs: alone, in the whole bundle, and in a part of it in another
// order (a resumed bundle) give bitwise the same numbers. bench/check_kernels.sh runs it under
// every OPENBLAS_CORETYPE the CPU supports.
TEST(TaskRunner, BundleCompositionIsBitwiseInvisible) {
  const int threads = linalg::set_blas_threads(1);  // as the driver runs tasks
  for (const char* shape : {"T = 37\nd = 200", "T = 13\nd = 301"}) {
    const auto plan = test::plan_from(
        std::string(shape) + "\ndepth = 3\nheads = 2\nnorm = \"layernorm\"",
        "mixer = [\"softmax\", \"markov\", \"identity\"]\nlambda = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0]", 1);
    const bool qk = std::any_of(plan.models.begin(), plan.models.end(), [](const auto& m) { return m.qk_product; });
    EXPECT_EQ(qk, plan.models.front().T == 37);  // X W_Q W_K^T through the shared product, or Q K^T
    const std::vector<std::uint64_t> bundle = plan.bundles.front().tasks;
    ASSERT_EQ(bundle.size(), 18u);
    const std::vector<std::uint64_t> part = {bundle[16], bundle[1], bundle[5], bundle[9]};
    for (const auto& tasks : {bundle, part}) {
      std::vector<models::TaskOutput> together;
      models::run_bundle(plan::bundle_job(plan, tasks),
                         [&](models::TaskOutput&& o) { together.push_back(std::move(o)); });
      ASSERT_EQ(together.size(), tasks.size());
      for (const auto& t : together) {
        const auto alone = models::run_task(plan::bundle_job(plan, {t.task}));
        ASSERT_EQ(alone.outcome, models::Outcome::done);
        for (int l = 0; l <= 3; ++l)
          for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k)
            EXPECT_TRUE(bitwise_equal(t.layers[l][k], alone.layers[l][k]) ||
                        (std::isnan(t.layers[l][k]) && std::isnan(alone.layers[l][k])))
                << shape << ": task " << t.task << " layer " << l << " metric " << k;
      }
    }
  }
  linalg::set_blas_threads(threads);
}

TEST(TaskRunner, RejectsTasksOfAnotherBundle) {
  const auto plan = test::plan_from("T = 6\ndepth = 1", "d = [6, 8]");
  EXPECT_THROW(models::run_bundle(plan::bundle_job(plan, {0, 1}), [](models::TaskOutput&&) {}), Error);
}

TEST(TaskRunner, SpectraAreStoredWhereRequestedAndNormalised) {
  const auto plan = test::plan_from("T = 5\nd = 7\ndepth = 3", "", 1, "last");
  const auto out = models::run_task(plan::bundle_job(plan, {0}));
  for (int l = 0; l < 3; ++l) EXPECT_TRUE(out.spectra[l].empty());
  ASSERT_EQ(out.spectra[3].size(), 5u);
  double ss = 0;
  for (double s : out.spectra[3]) ss += s * s;
  EXPECT_NEAR(ss, 1.0, 1e-13);
  EXPECT_NEAR(out.spectra[3][0] * out.layers[3][metrics::metric_index("fro")],
              out.layers[3][metrics::metric_index("s1")], 1e-12 * out.layers[3][metrics::metric_index("s1")]);
}

}  // namespace
}  // namespace rcsweep

namespace rcsweep {
namespace {

// Every number a task records, bitwise (NaN payloads included).
void expect_bitwise_equal(const models::TaskOutput& a, const models::TaskOutput& b, const std::string& where) {
  const auto same = [](const std::vector<double>& x, const std::vector<double>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
  };
  EXPECT_EQ(a.task, b.task) << where;
  EXPECT_EQ(a.outcome, b.outcome) << where;
  ASSERT_EQ(a.layers.size(), b.layers.size()) << where;
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    EXPECT_EQ(std::memcmp(a.layers[l].data(), b.layers[l].data(), sizeof a.layers[l]), 0)
        << where << ": task " << a.task << " layer " << l;
  for (std::size_t l = 0; l < a.spectra.size(); ++l) {
    EXPECT_TRUE(same(a.spectra[l], b.spectra[l])) << where << ": spectrum, layer " << l;
    EXPECT_TRUE(same(a.mixer_sv[l], b.mixer_sv[l])) << where << ": mixer sv, layer " << l;
    EXPECT_TRUE(same(a.mixer_eig_re[l], b.mixer_eig_re[l])) << where << ": mixer eig, layer " << l;
  }
  EXPECT_EQ(std::memcmp(a.theory.data(), b.theory.data(), sizeof a.theory), 0) << where;
  EXPECT_TRUE(same(a.grad_log10, b.grad_log10)) << where << ": gradients";
}

std::vector<models::TaskOutput> run_on(const plan::Plan& plan, const std::vector<std::uint64_t>& tasks, int threads) {
  parallel::set_threads(threads);
  std::vector<models::TaskOutput> out;
  models::run_bundle(plan::bundle_job(plan, tasks), [&](models::TaskOutput&& o) { out.push_back(std::move(o)); });
  parallel::set_threads(1);
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.task < y.task; });
  return out;
}

// A rank's threads are invisible in the results: a bundle of small tasks (run concurrently, one
// per thread) and a task whose products are split over the threads give bitwise the same numbers
// on 1, 2 and 3 threads (plan/threads.hpp, base/parallel.hpp).
TEST(TaskRunner, ThreadsAreBitwiseInvisible) {
  const int blas = linalg::set_blas_threads(1);
  const auto small = test::plan_from("T = 24\nd = 40\ndepth = 3\nheads = 2\nnorm = \"layernorm\"",
                                     "mixer = [\"softmax\", \"markov\", \"ssd\", \"identity\"]\nlambda = [0.0, 1.0]", 1,
                                     "all");
  const std::vector<std::uint64_t> bundle = small.bundles.front().tasks;
  ASSERT_EQ(bundle.size(), 8u);
  EXPECT_EQ(plan::thread_mode(small, bundle, 2), plan::ThreadMode::tasks);
  // T = 2048, d = 128: the logits (2048 x 2048, k = 128) are a split GEMM, the mixer metrics a
  // split matrix-vector product; one task: its layers run on all threads.
  const auto big = test::plan_from(
      "mixer = \"softmax\"\ninput = \"sphere\"\nT = 2048\nd = 128\ndepth = 2\nnorm = \"layernorm\"");
  const std::vector<std::uint64_t> one = big.bundles.front().tasks;
  EXPECT_EQ(plan::thread_mode(big, one, 2), plan::ThreadMode::layer);
  ASSERT_GT(linalg::gemm_parts(2048, 2048, 128).parts.count(), 1u);
  for (const auto& [plan, tasks] : {std::pair{&small, bundle}, std::pair{&big, one}}) {
    const auto reference = run_on(*plan, tasks, 1);
    for (int threads : {2, 3}) {
      const auto out = run_on(*plan, tasks, threads);
      ASSERT_EQ(out.size(), reference.size());
      for (std::size_t i = 0; i < out.size(); ++i)
        expect_bitwise_equal(out[i], reference[i], std::to_string(threads) + " threads");
    }
  }
  linalg::set_blas_threads(blas);
}

// run_bundle asks `cancelled` checks_per_layer times per layer, whatever the bundle (one task, a
// bundle of 8 run one after the other or concurrently, tasks that diverge early), and once more
// per task before its gradients: a caller counting the calls knows the progress. One task's checks
// fall within its layers: a stop asked at the second check of layer 1 ends the bundle before the
// layer is done.
TEST(TaskRunner, CancelledIsAskedAFixedNumberOfTimesPerLayer) {
  const auto count = [](const plan::Plan& plan, const std::vector<std::uint64_t>& tasks, int threads) {
    parallel::set_threads(threads);
    int calls = 0, done = 0;
    models::run_bundle(
        plan::bundle_job(plan, tasks), [&](models::TaskOutput&&) { ++done; },
        [&] {
          ++calls;
          return false;
        });
    parallel::set_threads(1);
    EXPECT_EQ(done, static_cast<int>(tasks.size()));
    return calls;
  };
  const auto one = test::plan_from("mixer = \"softmax\"\nT = 8\nd = 12\ndepth = 5\nnorm = \"layernorm\"");
  EXPECT_EQ(count(one, one.bundles.front().tasks, 1), 5 * models::checks_per_layer);
  const auto eight = test::plan_from("T = 8\nd = 12\ndepth = 3\nheads = 2",
                                     "mixer = [\"softmax\", \"markov\"]\nlambda = [0.0, 1.0]\n"
                                     "sigma_v = [1.0, 1e200]");  // sigma_v = 1e200 without a norm: diverges
  const auto bundle = eight.bundles.front().tasks;
  ASSERT_EQ(bundle.size(), 8u);
  bool diverged = false;
  models::run_bundle(plan::bundle_job(eight, bundle),
                     [&](models::TaskOutput&& o) { diverged = diverged || o.outcome == models::Outcome::diverged; });
  EXPECT_TRUE(diverged);
  for (int threads : {1, 2, 3}) EXPECT_EQ(count(eight, bundle, threads), 3 * models::checks_per_layer) << threads;
  auto grads = test::plan_from("mixer = \"softmax\"\nT = 4\nd = 6\ndepth = 2");
  grads.spec.output.gradients = config::Spectra::last;
  EXPECT_EQ(count(grads, grads.bundles.front().tasks, 1), 2 * models::checks_per_layer + 1);

  int calls = 0, done = 0;
  EXPECT_THROW(models::run_bundle(
                   plan::bundle_job(one, one.bundles.front().tasks), [&](models::TaskOutput&&) { ++done; },
                   [&] { return ++calls == 2; }),
               models::Cancelled);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(done, 0);
}

}  // namespace
}  // namespace rcsweep
