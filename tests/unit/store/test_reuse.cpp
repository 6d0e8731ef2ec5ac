// Results reused from another store (src/store/reuse.cpp): compare_with_store reports what an old
// store and a new sweep share without writing; reuse_results copies the finished (done, diverged,
// vanished) results into pending tasks, bitwise, and records where they came from; grow_in_place
// replaces the store by one of the new sweep only when no finished result would be lost, and
// otherwise refuses naming why; describe() lists the differences for the user.
#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../models/encoder/encoder_test_folder.hpp"
#include "base/error.hpp"
#include "config/params.hpp"
#include "plan/plan.hpp"
#include "store/reuse.hpp"
#include "store/store.hpp"
#include "store/sweep_input.hpp"
#include "store/writer_lock.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using store::ReuseReport;
using store::Store;
using store::TaskResult;
using store::TaskStatus;
using test::fake_result;
using test::H5Id;
using test::make_spec;
using test::prov;
using test::same_bits;
using test::store_error_of;

namespace {

/// The old sweep: 8 points x 2 replicates (task = point * 2 + replicate), X spectra `last`.
config::SweepSpec old_spec() { return make_spec(config::Spectra::last); }
/// The same sweep with `replicates` replicates per point (task = point * replicates + replicate).
config::SweepSpec with_replicates(int replicates) { return make_spec(config::Spectra::last, 0.5, replicates); }

const store::Platform zen{"OpenBLAS 0.3.21 Zen", "AMD EPYC (family 25, model 1)", "node1"};

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Replace the root string attribute `name` of the file `p` by `value`.
void set_root_string(const fs::path& p, const char* name, const std::string& value) {
  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  ASSERT_GE(H5Adelete(f.id, name), 0);
  H5Id t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.id, H5T_VARIABLE);
  H5Tset_cset(t.id, H5T_CSET_UTF8);
  H5Id sp(H5Screate(H5S_SCALAR));
  H5Id a(H5Acreate2(f.id, name, t.id, sp.id, H5P_DEFAULT, H5P_DEFAULT));
  const char* s = value.c_str();
  ASSERT_GE(H5Awrite(a.id, t.id, &s), 0);
}

class StoreReuse : public test::StoreDirTest {
 protected:
  /// The old store: tasks 0, 1, 6 done (1 with a platform), 2 diverged, 3 failed, 5 vanished, the
  /// others pending; 5 finished results.
  fs::path make_old(const std::string& name = "old.h5") {
    const auto plan = plan::make_plan(old_spec());
    Store s = Store::create(path(name), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 0),
                                     fake_result(plan, 1),
                                     fake_result(plan, 2, TaskStatus::diverged),
                                     fake_result(plan, 3, TaskStatus::failed),
                                     fake_result(plan, 5, TaskStatus::vanished),
                                     fake_result(plan, 6)};
    batch[1].platform = zen;
    s.write(batch);
    return path(name);
  }
  /// Files of the folder whose name marks a store under construction.
  std::vector<fs::path> temporaries() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".partial-") != std::string::npos) out.push_back(e.path());
    return out;
  }
};

/// Every field of `a` and `b`, floating-point values bitwise (NaN included).
void expect_same_result(const TaskResult& a, const TaskResult& b, const std::string& what) {
  EXPECT_EQ(a.status, b.status) << what;
  EXPECT_TRUE(same_bits(a.wall_s, b.wall_s)) << what;
  EXPECT_EQ(a.rank, b.rank) << what;
  EXPECT_EQ(a.message, b.message) << what;
  EXPECT_EQ(a.platform, b.platform) << what;
  ASSERT_EQ(a.layers.size(), b.layers.size()) << what;
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    for (std::size_t k = 0; k < a.layers[l].size(); ++k)
      EXPECT_TRUE(same_bits(a.layers[l][k], b.layers[l][k])) << what << " layer " << l << " metric " << k;
  ASSERT_EQ(a.spectra.size(), b.spectra.size()) << what;
  for (std::size_t l = 0; l < a.spectra.size(); ++l) {
    ASSERT_EQ(a.spectra[l].size(), b.spectra[l].size()) << what << " layer " << l;
    for (std::size_t i = 0; i < a.spectra[l].size(); ++i)
      EXPECT_TRUE(same_bits(a.spectra[l][i], b.spectra[l][i])) << what << " layer " << l << " value " << i;
  }
}

}  // namespace

TEST_F(StoreReuse, CompareReportsWhatTheStoresShareAndWritesNothing) {
  const fs::path old = make_old();
  const auto old_plan = plan::make_plan(old_spec());
  const std::string before = bytes_of(old);
  const ReuseReport r = store::compare_with_store(old, plan::make_plan(with_replicates(3)));
  EXPECT_EQ(r.from_name, "store-test");
  EXPECT_EQ(r.from_hash, old_plan.hash);
  EXPECT_EQ(r.differences, (std::vector<std::string>{"sweep.replicates: 2 -> 3"}));
  EXPECT_TRUE(r.blockers.empty());
  EXPECT_EQ(r.finished, 5u);  // done 0, 1, 6, diverged 2, vanished 5; failed 3 is not finished
  EXPECT_EQ(r.not_in_sweep, 0u);
  EXPECT_EQ(r.recomputed, 0u);
  EXPECT_EQ(r.other_shards, 0u);
  EXPECT_EQ(r.copied, 0u);
  EXPECT_EQ(bytes_of(old), before);
  // the same sweep: no difference, every finished result fits
  const ReuseReport same = store::compare_with_store(old, old_plan);
  EXPECT_TRUE(same.differences.empty());
  EXPECT_EQ(same.finished, 5u);
  EXPECT_EQ(same.not_in_sweep, 0u);
}

TEST_F(StoreReuse, FinishedResultsAreCopiedBitwiseIntoPendingTasks) {
  const fs::path old = make_old();
  const auto old_plan = plan::make_plan(old_spec());
  const auto plan = plan::make_plan(with_replicates(3));  // old task p * 2 + r is new task p * 3 + r
  Store into = Store::create(path("new.h5"), plan, prov(), false);
  const TaskResult own = fake_result(plan, 9);  // new task 9 (old 6) is done already: kept
  into.write(std::vector<TaskResult>{own});

  const ReuseReport r = store::reuse_results(old, into, plan);
  EXPECT_EQ(r.copied, 4u);  // old 0, 1, 2, 5 -> new 0, 1, 3, 7
  EXPECT_EQ(r.finished, 5u);
  EXPECT_EQ(r.not_in_sweep, 0u);
  EXPECT_EQ(r.differences, (std::vector<std::string>{"sweep.replicates: 2 -> 3"}));

  const auto st = into.task_status();
  ASSERT_EQ(st.size(), 24u);
  for (std::uint64_t t = 0; t < st.size(); ++t) {
    const TaskStatus want = t == 0 || t == 1 || t == 9 ? TaskStatus::done
                            : t == 3                   ? TaskStatus::diverged
                            : t == 7                   ? TaskStatus::vanished
                                                       : TaskStatus::pending;  // 4: old 3 failed, not copied
    EXPECT_EQ(st[t], want) << "task " << t;
  }
  const std::vector<std::uint64_t> old_ids = {0, 1, 2, 5}, new_ids = {0, 1, 3, 7};
  const auto copied = into.read_results(new_ids);
  const auto source = Store::open_read(old, old_plan).read_results(old_ids);
  for (std::size_t i = 0; i < old_ids.size(); ++i) {
    const std::string what = "old task " + std::to_string(old_ids[i]);
    expect_same_result(copied[i], source[i], what);
    EXPECT_EQ(copied[i].task, new_ids[i]) << what;
    // and they are the values written into the old store
    const TaskResult written = fake_result(old_plan, old_ids[i],
                                           old_ids[i] == 2   ? TaskStatus::diverged
                                           : old_ids[i] == 5 ? TaskStatus::vanished
                                                             : TaskStatus::done);
    for (std::size_t l = 0; l < written.layers.size(); ++l)
      EXPECT_TRUE(same_bits(copied[i].layers[l][0], written.layers[l][0])) << what << " layer " << l;
    EXPECT_TRUE(same_bits(copied[i].wall_s, written.wall_s)) << what;
    EXPECT_EQ(copied[i].message, written.message) << what;
  }
  EXPECT_EQ(copied[1].platform, zen);
  EXPECT_TRUE(copied[0].platform.empty());
  const auto kept = into.read_results(std::vector<std::uint64_t>{9});
  expect_same_result(kept[0], own, "new task 9");

  const std::string line = "4 tasks from " + old.string() + " (sweep 'store-test', plan hash " + old_plan.hash + ")";
  EXPECT_EQ(store::read_info(path("new.h5")).reused, (std::vector<std::string>{line}));
  // Again: nothing is pending that a finished result fits, nothing copied, nothing noted.
  const ReuseReport again = store::reuse_results(old, into, plan);
  EXPECT_EQ(again.copied, 0u);
  EXPECT_EQ(store::read_info(path("new.h5")).reused, (std::vector<std::string>{line}));
}

TEST_F(StoreReuse, ShrunkSweepCopiesWhatFitsAndCountsTheRest) {
  const fs::path old = make_old();
  const auto plan = plan::make_plan(with_replicates(1));  // old task p * 2 + r, r = 0 only: new task p
  Store into = Store::create(path("new.h5"), plan, prov(), false);
  const ReuseReport r = store::reuse_results(old, into, plan);
  EXPECT_EQ(r.finished, 5u);
  EXPECT_EQ(r.not_in_sweep, 2u);  // old 1 and 5: replicate 1
  EXPECT_EQ(r.copied, 3u);        // old 0, 2, 6 -> new 0, 1, 3
  const auto st = into.task_status();
  EXPECT_EQ(st, (std::vector<TaskStatus>{TaskStatus::done, TaskStatus::diverged, TaskStatus::pending, TaskStatus::done,
                                         TaskStatus::pending, TaskStatus::pending, TaskStatus::pending,
                                         TaskStatus::pending}));
}

TEST_F(StoreReuse, ASweepThatChangesEveryTaskCopiesNothing) {
  const fs::path old = make_old();
  auto spec = old_spec();
  spec.seed += 1;
  const auto plan = plan::make_plan(spec);
  Store into = Store::create(path("new.h5"), plan, prov(), false);
  const ReuseReport r = store::reuse_results(old, into, plan);
  ASSERT_EQ(r.blockers.size(), 1u);
  EXPECT_EQ(r.blockers[0].rfind("sweep.seed: ", 0), 0u) << r.blockers[0];
  EXPECT_EQ(r.copied, 0u);
  EXPECT_EQ(r.finished, 5u);
  EXPECT_EQ(r.not_in_sweep, 5u);
  const auto st = into.task_status();
  EXPECT_TRUE(std::all_of(st.begin(), st.end(), [](TaskStatus s) { return s == TaskStatus::pending; }));
  EXPECT_TRUE(store::read_info(path("new.h5")).reused.empty());
  EXPECT_NE(store::describe(r).find(r.blockers[0] + "   (changes every task's results)\n"), std::string::npos)
      << store::describe(r);
}

TEST_F(StoreReuse, GrowInPlaceReplacesTheStoreKeepingEveryFinishedResult) {
  const fs::path old = make_old();
  const auto old_plan = plan::make_plan(old_spec());
  const auto plan = plan::make_plan(with_replicates(3));
  {
    const auto lock = store::WriterLock::acquire(old);
    const ReuseReport r = store::grow_in_place(lock, plan, prov());
    EXPECT_EQ(r.copied, 5u);
    EXPECT_EQ(r.finished, 5u);
    EXPECT_EQ(r.from_hash, old_plan.hash);
  }
  EXPECT_TRUE(temporaries().empty());
  const auto info = store::read_info(old);
  EXPECT_EQ(info.plan_hash, plan.hash);
  EXPECT_EQ(info.n_tasks, 24u);
  EXPECT_EQ(info.n_done, 3u);
  EXPECT_EQ(info.n_diverged, 1u);
  EXPECT_EQ(info.n_vanished, 1u);
  EXPECT_EQ(info.n_failed, 0u);  // a failed task is computed again
  EXPECT_EQ(info.n_pending, 19u);
  EXPECT_EQ(info.reused, (std::vector<std::string>{"5 tasks from " + old.string() + " (sweep 'store-test', plan hash " +
                                                   old_plan.hash + ")"}));
  Store grown = Store::open_resume(old, plan, prov());  // a store of the new sweep
  EXPECT_EQ(grown.task_status()[9], TaskStatus::done);
  EXPECT_EQ(grown.read_results(std::vector<std::uint64_t>{1})[0].platform, zen);
}

TEST_F(StoreReuse, GrowInPlaceThatWouldLoseResultsIsRefusedAndTheStoreKept) {
  const fs::path old = make_old();
  const auto old_plan = plan::make_plan(old_spec());
  const std::string before = bytes_of(old);
  const auto lock = store::WriterLock::acquire(old);
  const auto shrunk = plan::make_plan(with_replicates(1));
  const std::string msg = store_error_of([&] { store::grow_in_place(lock, shrunk, prov()); });
  EXPECT_EQ(msg.rfind(old.string() + " (sweep 'store-test', plan hash " + old_plan.hash +
                          ") was made from a different sweep file (plan hash " + shrunk.hash +
                          "), and 2 of its 5 "
                          "finished tasks are not tasks of this sweep, so it is not grown in place:\n",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find("  sweep.replicates: 2 -> 1\n"), std::string::npos) << msg;
  EXPECT_NE(msg.find("write a new store (another -o; add --reuse " + old.string() +
                     " to copy what fits) or pass "
                     "--overwrite"),
            std::string::npos)
      << msg;
  EXPECT_EQ(bytes_of(old), before);
  EXPECT_TRUE(temporaries().empty());

  auto spec = old_spec();
  spec.seed += 1;
  const std::string blocked = store_error_of([&] { store::grow_in_place(lock, plan::make_plan(spec), prov()); });
  EXPECT_NE(blocked.find("and none of its results fits this sweep, so it is not grown in place"), std::string::npos)
      << blocked;
  EXPECT_NE(blocked.find("(changes every task's results)"), std::string::npos) << blocked;
  EXPECT_NE(blocked.find("write a new store (another -o) or pass --overwrite"), std::string::npos) << blocked;
  EXPECT_EQ(blocked.find("--reuse"), std::string::npos) << blocked;
  EXPECT_EQ(bytes_of(old), before);
}

// An encoder sweep's store is rebuilt with its model folder and the digest of what it read (a
// comment of its canonical text): it grows in place with more lambda values, and another token file
// is a difference that changes every task.
TEST_F(StoreReuse, EncoderSweepGrowsWithItsModelAndAnotherTokenFileChangesEveryTask) {
  fs::create_directories(path("models/tiny"));
  models::encoder::test::write_config(path("models/tiny"), models::encoder::test::tiny_bert());
  const auto tokens = [&](const std::string& text) { std::ofstream(path("tokens.txt")) << text; };
  tokens("1 2 3 4 5\n6 7 8 9 10\n");
  const auto sweep = [&](const std::string& name, const std::string& lambdas) {
    std::ofstream(path(name))
        << "[sweep]\nname = \"enc\"\nreplicates = 2\n[model]\nT = 4\nd = 8\nheads = 2\ndepth = 2\n"
           "block = \"encoder\"\nmodel_folder = \"models/tiny\"\ninput = \"tokens\"\n"
           "input_path = \"tokens.txt\"\nmlp = \"model\"\nnorm = \"layernorm\"\n[axes]\nlambda = "
        << lambdas << "\n";
    return plan::make_plan(store::load_sweep_with_input(path(name), {}));
  };
  const auto old_plan = sweep("old.toml", "[0.0, 1.0]");
  {
    Store s = Store::create(path("old.h5"), old_plan, prov(), false);
    s.write(std::vector<TaskResult>{fake_result(old_plan, 0), fake_result(old_plan, 3)});
  }
  {
    const auto lock = store::WriterLock::acquire(path("old.h5"));
    const ReuseReport r = store::grow_in_place(lock, sweep("grown.toml", "[0.0, 0.5, 1.0]"), prov());
    EXPECT_TRUE(r.blockers.empty()) << store::describe(r);
    EXPECT_EQ(r.copied, 2u);
  }
  tokens("1 2 3 4 5\n6 7 8 9 11\n");
  const auto other = sweep("other.toml", "[0.0, 0.5, 1.0]");
  Store into = Store::create(path("new.h5"), other, prov(), false);
  const ReuseReport r = store::reuse_results(path("old.h5"), into, other);
  EXPECT_EQ(r.copied, 0u);
  ASSERT_EQ(r.blockers.size(), 1u) << store::describe(r);
  // The hash of the whole digest first: the difference shows before the message shortens the values.
  EXPECT_EQ(r.blockers[0].rfind("model.model_content: FNV-1a ", 0), 0u) << r.blockers[0];
  const std::string before = r.blockers[0].substr(0, r.blockers[0].find(" -> "));
  EXPECT_NE(before.substr(before.find("FNV-1a "), 23),
            r.blockers[0].substr(r.blockers[0].find(" -> ") + 4).substr(0, 23))
      << r.blockers[0];
}

TEST_F(StoreReuse, RefusalNamesBothRunsOverrides) {
  const fs::path old = make_old();
  auto spec = with_replicates(1);
  spec.overrides = {"sweep.replicates=1"};
  const auto lock = store::WriterLock::acquire(old);
  const std::string msg = store_error_of([&] { store::grow_in_place(lock, plan::make_plan(spec), prov()); });
  EXPECT_NE(msg.find(") was made from a different sweep file or command-line overrides (plan hash "), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("; the store's overrides: none, this run's: sweep.replicates=1), and 2 of its 5"),
            std::string::npos)
      << msg;
}

TEST_F(StoreReuse, ResultsGoOnlyIntoTasksOfThisShard) {
  const fs::path old = make_old();
  const auto plan = plan::make_plan(with_replicates(3), plan::Shard{0, 2});
  std::vector<bool> in_shard(plan.tasks.size(), false);
  for (const auto& b : plan.bundles)
    for (const auto id : b.tasks) in_shard[id] = true;
  const std::vector<std::uint64_t> targets = {0, 1, 3, 7, 9};  // of the finished old 0, 1, 2, 5, 6
  const auto n_in = static_cast<std::uint64_t>(
      std::count_if(targets.begin(), targets.end(), [&](std::uint64_t t) { return in_shard[t]; }));
  ASSERT_GT(n_in, 0u);
  ASSERT_LT(n_in, targets.size());  // the test needs finished tasks on both sides
  {
    Store into = Store::create(path("shard.h5"), plan, prov(), false);
    const ReuseReport r = store::reuse_results(old, into, plan);
    EXPECT_EQ(r.copied, n_in);
    EXPECT_EQ(r.other_shards, targets.size() - n_in);
    EXPECT_EQ(r.not_in_sweep, 0u);
    const auto st = into.task_status();
    for (const auto t : targets) EXPECT_EQ(st[t] != TaskStatus::pending, in_shard[t]) << "task " << t;
  }
  const auto lock = store::WriterLock::acquire(old);
  const std::string msg = store_error_of([&] { store::grow_in_place(lock, plan, prov()); });
  EXPECT_NE(msg.find(std::to_string(targets.size() - n_in) +
                     " of its 5 finished tasks belong to other shards of the grown sweep (merge the shards"),
            std::string::npos)
      << msg;
}

TEST_F(StoreReuse, AStoreThatCannotBeReadIsRefused) {
  const auto plan = plan::make_plan(old_spec());
  EXPECT_NE(store_error_of([&] { store::compare_with_store(path("nope.h5"), plan); }).find("no such file"),
            std::string::npos);
  Store into = Store::create(path("new.h5"), plan, prov(), false);
  EXPECT_NE(store_error_of([&] { store::reuse_results(path("nope.h5"), into, plan); }).find("no such file"),
            std::string::npos);

  // a sweep text that does not parse
  const fs::path bad = make_old("bad.h5");
  set_root_string(bad, "config", "[sweep]\nname = \"broken\"\nthis is not toml\n");
  const std::string unreadable = store_error_of([&] { store::compare_with_store(bad, plan); });
  // The store's own check comes first: a sweep text that is not the one its plan hash names.
  EXPECT_EQ(unreadable.rfind(bad.string() +
                                 ": damaged rcsweep store (attribute 'config' (the stored sweep) does not "
                                 "hash to plan_hash " +
                                 plan.hash,
                             0),
            0u)
      << unreadable;

  // a sweep text that is another sweep than the plan hash says
  const fs::path other = make_old("other.h5");
  auto spec = old_spec();
  spec.seed += 1;
  const auto other_plan = plan::make_plan(spec);
  set_root_string(other, "config", other_plan.spec.canonical_toml());
  const std::string msg = store_error_of([&] { store::compare_with_store(other, plan); });
  EXPECT_EQ(msg.rfind(other.string() +
                          ": damaged rcsweep store (attribute 'config' (the stored sweep) does not hash "
                          "to plan_hash " +
                          plan.hash,
                      0),
            0u)
      << msg;
}

// ---- describe ---------------------------------------------------------------------------------

TEST(StoreReuseDescribe, ListsDifferencesMarksBlockersAndCountsTheRecomputed) {
  ReuseReport r;
  EXPECT_EQ(store::describe(r), "");
  r.differences = {"sweep.replicates: 2 -> 3", "sweep.seed: 5 -> 6", "axes.lambda: [0.0] -> [0.0, 1.0]"};
  r.blockers = {"sweep.seed: 5 -> 6", "largest depth L_max (every task runs to it): 3 -> 4"};
  r.recomputed = 2;
  const std::string blocker_mark = "   (changes every task's results)\n";
  const std::string recomputed =
      "  2 finished tasks are computed again: the grid's number of attention models of their T and d changed the "
      "order of their logits' products (docs/CONFIG.md \"Growing a sweep\")\n";
  EXPECT_EQ(store::describe(r), "  sweep.replicates: 2 -> 3\n  sweep.seed: 5 -> 6" + blocker_mark +
                                    "  axes.lambda: [0.0] -> [0.0, 1.0]\n  largest depth L_max (every task runs to "
                                    "it): 3 -> 4" +
                                    blocker_mark + recomputed);
  EXPECT_EQ(store::describe(r, 2), "  sweep.replicates: 2 -> 3\n  sweep.seed: 5 -> 6" + blocker_mark +
                                       "  ... and 1 more differences\n  largest depth L_max (every task runs to it): "
                                       "3 -> 4" +
                                       blocker_mark + recomputed);
  EXPECT_EQ(store::describe(r, 0),
            "  ... and 3 more differences\n  largest depth L_max (every task runs to it): 3 -> 4" + blocker_mark +
                recomputed);
  r.recomputed = 0;
  r.blockers.clear();
  EXPECT_EQ(store::describe(r, 1), "  sweep.replicates: 2 -> 3\n  ... and 2 more differences\n");
}

TEST(StoreReuseDescribe, ShowsTwelveDifferencesByDefault) {
  ReuseReport r;
  for (int i = 0; i < 13; ++i) r.differences.push_back("key" + std::to_string(i) + ": a -> b");
  std::string want;
  for (int i = 0; i < 12; ++i) want += "  key" + std::to_string(i) + ": a -> b\n";
  EXPECT_EQ(store::describe(r), want + "  ... and 1 more differences\n");
  r.differences.pop_back();
  EXPECT_EQ(store::describe(r), want);
}
