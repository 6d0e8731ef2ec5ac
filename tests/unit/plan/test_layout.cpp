// Ranks per node x threads per rank (plan/layout.hpp): one rank per core for many small tasks, threads
// for a bundle that does not fit one core's share of the memory, for one big task and for fewer
// tasks than cores; ties to fewer threads; a clear error when nothing fits; the units of a schedule
// priced on the threads.
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "plan/cost_model.hpp"
#include "plan/layout.hpp"
#include "plan/threads.hpp"

namespace rcsweep {
namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

struct Priced {
  plan::Plan plan;
  std::vector<plan::BundleWork> work;
};

/// The plan of a sweep file's text, its bundles priced at the built-in rates.
Priced priced(const std::string& text) {
  Priced p{plan::make_plan(config::parse_sweep(text, "test")), {}};
  for (const auto& b : p.plan.bundles)
    p.work.push_back(plan::bundle_work(p.plan, b.tasks, plan::default_calibration()));
  return p;
}

/// 2 mixers x 3 widths x 3 lambda x 6 replicates = 108 small tasks, in bundles of 6.
Priced many_small() {
  return priced(R"(
[sweep]
name = "small"
replicates = 6
[model]
T = 32
depth = 12
[axes]
mixer = ["softmax", "markov"]
d = [32, 64, 128]
lambda = [0.0, 0.5, 1.0]
)");
}

/// `replicates` tasks of T = d = `width` (one bundle each).
Priced big(int replicates, int width = 1024) {
  return priced("[sweep]\nname = \"big\"\nreplicates = " + std::to_string(replicates) +
                "\n[model]\nT = " + std::to_string(width) + "\nd = " + std::to_string(width) + "\ndepth = 2\n");
}

/// One bundle: a scan of 8 lambda values on a wide signal (its 8 X dominate its memory).
Priced scan() {
  return priced(R"(
[sweep]
name = "scan"
replicates = 1
[model]
T = 256
d = 512
depth = 4
[axes]
lambda = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0]
)");
}

plan::LayoutRequest node(int cores, double mem_bytes) {
  plan::LayoutRequest r;
  r.cores_per_node = cores;
  r.mem_per_node = mem_bytes;
  r.memory_source = "test";
  return r;
}

/// The ConfigError choose_layout throws: key and message ("" when none).
std::pair<std::string, std::string> error_of(const Priced& p, const plan::LayoutRequest& r) {
  try {
    plan::choose_layout(p.plan, p.work, r);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues().size(), 1u) << e.what();
    return {e.issues().at(0).key, e.issues().at(0).problem};
  }
  return {"", ""};
}

TEST(Layout, ThreadCandidatesDivideTheCores) {
  EXPECT_EQ(plan::thread_candidates(1), (std::vector<int>{1}));
  EXPECT_EQ(plan::thread_candidates(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(plan::thread_candidates(6), (std::vector<int>{1, 2, 6}));
  EXPECT_EQ(plan::thread_candidates(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(plan::thread_candidates(12), (std::vector<int>{1, 2, 4, 12}));
  EXPECT_EQ(plan::thread_candidates(64), (std::vector<int>{1, 2, 4, 8, 16, 32, 64}));
}

TEST(Layout, ManySmallTasksGetOneRankPerCore) {
  const auto p = many_small();
  for (const int cores : {2, 8, 64}) {
    const auto l = plan::choose_layout(p.plan, p.work, node(cores, 64 * GiB));
    EXPECT_EQ(l.chosen.threads, 1) << cores << " cores: " << l.reason;
    EXPECT_EQ(l.chosen.ranks_per_node, cores);
    EXPECT_EQ(l.chosen.ranks, cores);
    EXPECT_EQ(
        l.reason.rfind("one rank per core: 108 tasks for " + std::to_string(cores) + " cores, no layer of 2 GFLOP", 0),
        0u)
        << l.reason;
    EXPECT_EQ(l.candidates.size(), plan::thread_candidates(cores).size());
    EXPECT_DOUBLE_EQ(l.chosen.budget_per_rank, 64 * GiB / cores);
  }
  // two nodes: one rank per core on both
  auto two = node(4, 64 * GiB);
  two.nodes = 2;
  const auto l = plan::choose_layout(p.plan, p.work, two);
  EXPECT_EQ(l.chosen.threads, 1);
  EXPECT_EQ(l.chosen.ranks, 8);
  EXPECT_EQ(l.chosen.ranks_per_node, 4);
}

TEST(Layout, OneBigTaskGetsAllCoresInOneRank) {
  const auto p = big(1);
  ASSERT_GE(plan::layer_flops(p.plan.models.at(0)), plan::layer_split_min_flops);
  for (const int cores : {2, 4, 6}) {
    const auto l = plan::choose_layout(p.plan, p.work, node(cores, 64 * GiB));
    EXPECT_EQ(l.chosen.threads, cores) << l.reason;
    EXPECT_EQ(l.chosen.ranks, 1);
    EXPECT_EQ(l.chosen.ranks_per_node, 1);
    EXPECT_NEAR(l.chosen.makespan_s, p.work.at(0).seconds() / cores, 1e-9 * p.work.at(0).seconds());
    EXPECT_NE(l.reason.find("1 task for " + std::to_string(cores) + " cores"), std::string::npos) << l.reason;
    EXPECT_NE(l.reason.find("threads per rank: about"), std::string::npos) << l.reason;
  }
}

TEST(Layout, FewSmallTasksGainNothingFromThreads) {
  // one small task on 2 cores: its products are too small to be split, so threads would not
  // shorten it; the tie goes to one thread per rank
  const auto p = priced("[sweep]\nname = \"one\"\nreplicates = 1\n[model]\nT = 16\nd = 16\ndepth = 3\n");
  ASSERT_LT(plan::layer_flops(p.plan.models.at(0)), plan::layer_split_min_flops);
  const auto l = plan::choose_layout(p.plan, p.work, node(2, 8 * GiB));
  EXPECT_EQ(l.chosen.threads, 1) << l.reason;
  EXPECT_EQ(l.chosen.ranks, 1);
  EXPECT_EQ(l.candidates[1].makespan_s, l.candidates[0].makespan_s);
  EXPECT_EQ(l.reason.rfind("1 task for 2 cores; more threads per rank would not be faster, about ", 0), 0u) << l.reason;
}

TEST(Layout, FewerBigTasksThanCoresShareTheCores) {
  // 3 big tasks on 8 cores: 3 ranks of 2 threads take half a task's time, one rank of 8 threads
  // running them one after the other 3/8
  const auto p = big(3);
  const auto l = plan::choose_layout(p.plan, p.work, node(8, 64 * GiB));
  EXPECT_EQ(l.chosen.threads, 8) << l.reason;
  EXPECT_EQ(l.chosen.ranks, 1);
  const double task = p.work[0].seconds();
  EXPECT_NEAR(l.candidates[0].makespan_s, task, 1e-9 * task);      // 3 ranks x 1 thread
  EXPECT_NEAR(l.candidates[1].makespan_s, task / 2, 1e-9 * task);  // 3 ranks x 2 threads
  EXPECT_NEAR(l.chosen.makespan_s, 3 * task / 8, 1e-9 * task);
  EXPECT_EQ(l.reason.rfind("3 tasks for 8 cores; 8 threads per rank: about ", 0), 0u) << l.reason;
}

TEST(Layout, BigTasksAsManyAsCoresTieToOneThread) {
  // 4 big tasks (one bundle each) on 2 cores: 2 ranks x 2 tasks or 1 rank x 4 tasks on 2 threads
  // take the same estimated time; the tie goes to one thread per rank
  const auto p = big(4);
  const auto l = plan::choose_layout(p.plan, p.work, node(2, 64 * GiB));
  ASSERT_EQ(l.candidates.size(), 2u);
  EXPECT_NEAR(l.candidates[1].makespan_s, l.candidates[0].makespan_s, 1e-9 * l.candidates[0].makespan_s);
  EXPECT_EQ(l.chosen.threads, 1) << l.reason;
  EXPECT_EQ(l.chosen.ranks, 2);
  EXPECT_NE(l.reason.find("GFLOP"), std::string::npos) << l.reason;
  EXPECT_NE(l.reason.find("more threads per rank would not be faster"), std::string::npos) << l.reason;
  // 3 of them on 2 cores: one thread per rank leaves one rank a second task; 2 threads split each
  const auto three = big(3);
  const auto t = plan::choose_layout(three.plan, three.work, node(2, 64 * GiB));
  EXPECT_EQ(t.chosen.threads, 2) << t.reason;
  EXPECT_LT(t.chosen.makespan_s, 0.9 * t.candidates[0].makespan_s);
}

TEST(Layout, MemoryBoundBundleGetsThreads) {
  const auto p = scan();
  ASSERT_EQ(p.plan.bundles.size(), 1u);
  // enough memory for one rank per core: 8 tasks for 4 cores, none big
  const auto plenty = plan::choose_layout(p.plan, p.work, node(4, 64 * GiB));
  EXPECT_EQ(plenty.chosen.threads, 1) << plenty.reason;
  EXPECT_EQ(plenty.chosen.ranks, 4);

  const auto one = plan::estimate_layout(p.plan, p.work, node(4, 64 * GiB), 1);
  const auto two = plan::estimate_layout(p.plan, p.work, node(4, 64 * GiB), 2);
  ASSERT_GE(two.bytes_per_rank, one.bytes_per_rank);  // tasks mode: two tasks' temporaries at once
  // the rank memory of plan/memory.hpp: the bundle, BLAS, the program and, on 4 ranks, rank 0's writer
  EXPECT_DOUBLE_EQ(one.bytes_per_rank, plan::rank_memory(p.plan, {1, 1, one.ranks, 1, false}).resident());
  EXPECT_GT(one.bytes_per_rank, static_cast<double>(p.plan.bundles[0].bytes()) + plan::rank_program_bytes);
  // a node whose memory holds 2 such ranks, not 4
  const auto l = plan::choose_layout(p.plan, p.work, node(4, 2 * two.bytes_per_rank));
  EXPECT_GE(l.chosen.threads, 2) << l.reason;
  EXPECT_TRUE(l.chosen.fits());
  EXPECT_FALSE(l.candidates.front().fits());
  EXPECT_LE(l.chosen.ranks_per_node * l.chosen.bytes_per_rank, 2 * two.bytes_per_rank);
  EXPECT_EQ(l.reason.rfind("one rank per core does not fit in memory", 0), 0u) << l.reason;
}

TEST(Layout, NothingFitsIsAnErrorNamingTheMemoryOption) {
  const auto p = scan();
  // 1 rank x 4 threads misses the whole node by a tenth; 4 ranks of 1 thread miss their quarters by far
  const double need = plan::estimate_layout(p.plan, p.work, node(4, 64 * GiB), 4).bytes_per_rank;
  const auto [key, message] = error_of(p, node(4, 0.9 * need));
  EXPECT_EQ(key, "--mem-per-node");
  EXPECT_NE(message.find("the largest bundle (8 tasks with T = 256, d = 512, 4 layers) needs about"), std::string::npos)
      << message;
  EXPECT_NE(message.find("with 1 rank x 4 threads per node"), std::string::npos) << message;  // the closest
  EXPECT_NE(message.find("give the job nodes with more memory (--mem-per-node)"), std::string::npos) << message;

  auto per_rank = node(4, 64 * GiB);  // --mem-per-rank is every rank's budget, whatever the layout
  per_rank.mem_per_rank = 10.0 * 1024 * 1024;
  per_rank.memory_source = "--mem-per-rank 10M";
  const auto [rkey, rmessage] = error_of(p, per_rank);
  EXPECT_EQ(rkey, "--mem-per-rank");
  EXPECT_NE(rmessage.find("per rank, more than the budget of 10.0 MiB (--mem-per-rank 10M); give each rank more"),
            std::string::npos)
      << rmessage;
}

TEST(Layout, ForcedThreadsAreEstimatedAlone) {
  const auto p = many_small();
  auto r = node(4, 64 * GiB);
  r.threads = 2;
  const auto l = plan::choose_layout(p.plan, p.work, r);
  EXPECT_EQ(l.chosen.threads, 2);
  EXPECT_EQ(l.chosen.ranks, 2);
  ASSERT_EQ(l.candidates.size(), 1u);
  EXPECT_EQ(l.reason.rfind("set by --threads 2; the largest bundle needs", 0), 0u) << l.reason;
  r.threads = 5;  // more than the cores
  EXPECT_EQ(error_of(p, r).first, "--threads");
  r.threads = -1;
  EXPECT_EQ(error_of(p, r).first, "--threads");
  EXPECT_EQ(error_of(p, node(0, GiB)).first, "--cores");
  auto none = node(2, GiB);
  none.nodes = 0;
  EXPECT_EQ(error_of(p, none).first, "--nodes");
  // forced, but not fitting: the memory option
  auto tight = node(2, 1024.0 * 1024);
  tight.threads = 2;
  EXPECT_EQ(error_of(p, tight).first, "--mem-per-node");
}

TEST(Layout, OneThreadScheduleIsMakeSchedule) {
  const auto p = many_small();
  for (const int ranks : {1, 2, 7}) {
    const auto a = plan::make_schedule(p.work, ranks);
    const auto b = plan::schedule_on_threads(p.plan, p.work, ranks, 1);
    EXPECT_EQ(a.makespan_s, b.makespan_s);  // bitwise
    EXPECT_EQ(a.work_s, b.work_s);
    ASSERT_EQ(a.units.size(), b.units.size());
    for (std::size_t u = 0; u < a.units.size(); ++u) {
      EXPECT_EQ(a.units[u].tasks, b.units[u].tasks);
      EXPECT_EQ(a.units[u].seconds, b.units[u].seconds);
    }
  }
}

TEST(Layout, UnitsArePricedOnTheThreads) {
  // layer mode: every unit takes 1/threads of its time
  const auto b = big(3);
  const auto one = plan::schedule_on_threads(b.plan, b.work, 1, 1);
  const auto four = plan::schedule_on_threads(b.plan, b.work, 1, 4);
  EXPECT_NEAR(four.makespan_s, one.makespan_s / 4, 1e-12 * one.makespan_s);
  // tasks mode: one rank, one bundle of 8 small tasks, handed out to 2 threads; the shared work once
  const auto s = priced(
      "[sweep]\nname = \"s\"\nreplicates = 1\n[model]\nT = 16\nd = 16\ndepth = 3\n[axes]\nlambda = [0, 0.25, "
      "0.5, 0.75, 1, 1.25, 1.5, 1.75]\n");
  ASSERT_EQ(s.work.size(), 1u);
  const auto& w = s.work[0];
  const auto two = plan::schedule_on_threads(s.plan, s.work, 1, 2);
  ASSERT_EQ(two.units.size(), 1u);
  EXPECT_EQ(plan::thread_mode(s.plan, w.tasks, 2), plan::ThreadMode::tasks);
  EXPECT_DOUBLE_EQ(two.makespan_s, plan::unit_seconds(plan::ThreadMode::tasks, w.task_s, w.shared_s, 2));
  EXPECT_LT(two.makespan_s, w.seconds());
  EXPECT_GT(two.makespan_s, w.seconds() / 2);
  // layer mode of a lone small task: nothing to split, its one-thread time
  const auto single = plan::schedule_on_threads(s.plan, s.work, 8, 2);
  ASSERT_EQ(single.units.size(), 8u);
  for (const auto& u : single.units) {
    EXPECT_EQ(plan::thread_mode(s.plan, u.tasks, 2), plan::ThreadMode::layer);
    EXPECT_DOUBLE_EQ(u.seconds, plan::unit_seconds(plan::ThreadMode::layer, {w.task_s.at(0)}, w.shared_s, 1));
  }
}

TEST(Layout, LongestTaskIsSplitOnlyWhenItsLayersAre) {
  const auto b = big(1);
  const double whole = b.work[0].task_s[0] + b.work[0].shared_s;
  EXPECT_EQ(plan::longest_task_seconds(b.plan, b.work, 1), whole);
  EXPECT_DOUBLE_EQ(plan::longest_task_seconds(b.plan, b.work, 4), whole / 4);
  const auto s = many_small();  // bundles of 6 small tasks: run concurrently, each on one thread
  double longest = 0.0;
  for (const auto& w : s.work)
    for (const double t : w.task_s) longest = std::max(longest, t + w.shared_s);
  EXPECT_EQ(plan::longest_task_seconds(s.plan, s.work, 1), longest);
  EXPECT_EQ(plan::longest_task_seconds(s.plan, s.work, 2), longest);
  const auto one = priced("[sweep]\nname = \"one\"\nreplicates = 1\n[model]\nT = 16\nd = 16\ndepth = 3\n");
  EXPECT_EQ(plan::longest_task_seconds(one.plan, one.work, 4), one.work[0].task_s[0] + one.work[0].shared_s);
}

TEST(Layout, Describe) {
  plan::LayoutEstimate e;
  e.ranks_per_node = 2;
  e.threads = 1;
  EXPECT_EQ(plan::describe(e), "2 ranks x 1 thread");
  e.ranks_per_node = 1;
  e.threads = 4;
  EXPECT_EQ(plan::describe(e), "1 rank x 4 threads");
}

TEST(Layout, OversubscriptionNamesTheThreadsTheCoresAndEachThreadsShare) {
  EXPECT_EQ(plan::oversubscription(2, 2, 2),
            "2 ranks x 2 threads = 4 threads on 2 cores: oversubscribed, each thread gets half a core");
  EXPECT_EQ(plan::oversubscription(1, 4, 2),
            "1 rank x 4 threads = 4 threads on 2 cores: oversubscribed, each thread gets half a core");
  EXPECT_EQ(plan::oversubscription(3, 1, 2),
            "3 ranks x 1 thread = 3 threads on 2 cores: oversubscribed, each thread gets 2/3 of a core");
  EXPECT_EQ(plan::oversubscription(1, 3, 1),
            "1 rank x 3 threads = 3 threads on 1 core: oversubscribed, each thread gets 1/3 of a core");
  // A share of many parts as a whole percentage, rounded down.
  EXPECT_EQ(plan::oversubscription(65, 2, 128),
            "65 ranks x 2 threads = 130 threads on 128 cores: oversubscribed, each thread gets about 98% of a core");
}

TEST(Layout, NoOversubscriptionWhenTheThreadsFitTheCores) {
  EXPECT_EQ(plan::oversubscription(2, 1, 2), "");
  EXPECT_EQ(plan::oversubscription(1, 2, 2), "");
  EXPECT_EQ(plan::oversubscription(4, 8, 32), "");
  EXPECT_EQ(plan::oversubscription(1, 1, 1), "");
  EXPECT_EQ(plan::oversubscription(1, 4, 0), "");  // cores unknown: nothing to say
  // No overflow: the product is taken in 64 bits.
  EXPECT_NE(plan::oversubscription(1 << 20, 4096, 64), "");
}

}  // namespace
}  // namespace rcsweep
