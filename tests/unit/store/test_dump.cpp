// The weights dump of `run --dump-weights` (src/store/dump.cpp): write_dump writes /dump/task_<id>
// for the done tasks only (X_0..X_L bitwise those of the taped forward pass, each layer's weights
// by name and shape), replaces an earlier /dump, and is refused while another writer holds the
// store; dump_bytes is exact in the values written, per model kind (attention with heads, gate and
// MLP, s4d, ssd with Gaussian B and C, gap_fix outliers).
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "models/task_runner.hpp"
#include "plan/bundle_job.hpp"
#include "plan/plan.hpp"
#include "store/dump.hpp"
#include "store/store.hpp"
#include "store/writer_lock.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using store::Store;
using store::TaskResult;
using store::TaskStatus;
using test::fake_result;
using test::H5Id;
using test::prov;
using test::read_dataset;
using test::read_int_attr;
using test::same_bits;
using test::store_error_of;

namespace {

/// A sweep of 2 lambda points x 2 replicates, T = 4, d = 6, depth 2, with `model` (lines of
/// [model]) added.
plan::Plan dump_plan(const std::string& model) {
  return plan::make_plan(config::parse_sweep("[sweep]\nname = \"dump\"\nseed = 11\nreplicates = 2\n[model]\nT = 4\n"
                                             "d = 6\ndepth = 2\n" +
                                                 model + "[axes]\nlambda = [0.0, 0.5]\n",
                                             "dump"));
}

/// Every object (group or dataset) below `group`, by path relative to it, with the dimensions of
/// the datasets (groups: none).
std::map<std::string, std::vector<hsize_t>> objects_below(hid_t group) {
  std::map<std::string, std::vector<hsize_t>> out;
  const auto visit = [](hid_t obj, const char* name, const H5O_info_t* info, void* data) -> herr_t {
    if (std::string(name) == ".") return 0;
    auto& objects = *static_cast<std::map<std::string, std::vector<hsize_t>>*>(data);
    std::vector<hsize_t> dims;
    if (info->type == H5O_TYPE_DATASET) dims = test::dims_of(obj, name);
    objects[name] = dims;
    return 0;
  };
  EXPECT_GE(H5Ovisit2(group, H5_INDEX_NAME, H5_ITER_INC, visit, &out, H5O_INFO_BASIC), 0);
  return out;
}

class StoreDump : public test::StoreDirTest {
 protected:
  /// A store of `plan` with `batch` written.
  fs::path make_store(const std::string& name, const plan::Plan& plan, const std::vector<TaskResult>& batch) {
    const fs::path p = path(name);
    Store s = Store::create(p, plan, prov(), false);
    s.write(batch);
    return p;
  }
  /// A store of `plan` with every task done.
  fs::path all_done(const std::string& name, const plan::Plan& plan) {
    std::vector<TaskResult> batch;
    for (std::uint64_t t = 0; t < plan.tasks.size(); ++t) batch.push_back(fake_result(plan, t));
    return make_store(name, plan, batch);
  }
};

}  // namespace

TEST(StoreDumpLimit, Is256MiB) { EXPECT_EQ(store::dump_limit_bytes, std::uint64_t{268435456}); }

TEST_F(StoreDump, OnlyDoneTasksAreDumpedWithTheTapedForwardPass) {
  const auto plan = dump_plan("mixer = \"softmax\"\n");
  ASSERT_EQ(plan.tasks.size(), 4u);
  const fs::path p = make_store("d.h5", plan,
                                {fake_result(plan, 0), fake_result(plan, 1, TaskStatus::diverged),
                                 fake_result(plan, 2, TaskStatus::failed), fake_result(plan, 3)});
  const auto summary = store::write_dump(p, plan, {0, 1, 2, 3});
  EXPECT_EQ(summary.written, 2u);
  EXPECT_EQ(summary.skipped, 2u);

  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  H5Id dump(H5Gopen2(f.id, "/dump", H5P_DEFAULT));
  ASSERT_GE(dump.id, 0);
  EXPECT_EQ(read_int_attr(dump.id, "tasks"), 2);
  EXPECT_NE(test::read_str_attr(dump.id, "description"), "<missing>");
  const auto objects = objects_below(dump.id);
  EXPECT_EQ(objects.count("task_0"), 1u);
  EXPECT_EQ(objects.count("task_1"), 0u);  // diverged
  EXPECT_EQ(objects.count("task_2"), 0u);  // failed
  EXPECT_EQ(objects.count("task_3"), 1u);

  const int L = plan.max_depth;
  std::uint64_t bytes = 0;
  for (const std::uint64_t id : {0u, 3u}) {
    const std::string g = "/dump/task_" + std::to_string(id);
    H5Id group(H5Gopen2(f.id, g.c_str(), H5P_DEFAULT));
    EXPECT_EQ(read_int_attr(group.id, "task"), static_cast<std::int64_t>(id));
    EXPECT_EQ(read_int_attr(group.id, "point"), static_cast<std::int64_t>(plan.tasks[id].point));
    EXPECT_EQ(read_int_attr(group.id, "replicate"), plan.tasks[id].replicate);
    EXPECT_EQ(read_int_attr(group.id, "layers"), L);
    const models::TaskTape tape = models::record_task(plan::bundle_job(plan, {id}), id);
    ASSERT_EQ(tape.layers.size(), static_cast<std::size_t>(L));
    for (int l = 0; l <= L; ++l) {
      const Matrix& X = l < L ? tape.layers[static_cast<std::size_t>(l)].X : tape.X_out;
      const long scale = l < L ? tape.layers[static_cast<std::size_t>(l)].log2_scale : tape.X_out_log2;
      const std::string name = g + "/X_" + std::to_string(l);
      EXPECT_EQ(test::dims_of(f.id, name.c_str()), (std::vector<hsize_t>{4, 6})) << name;
      const auto v = read_dataset<double>(f.id, name.c_str(), H5T_NATIVE_DOUBLE);
      ASSERT_EQ(v.size(), X.size()) << name;
      for (std::size_t i = 0; i < v.size(); ++i) EXPECT_TRUE(same_bits(v[i], X.data()[i])) << name << " " << i;
      H5Id d(H5Dopen2(f.id, name.c_str(), H5P_DEFAULT));
      EXPECT_EQ(read_int_attr(d.id, "log2_scale"), scale) << name;
    }
    // layer 1's value weight is the one the forward pass used
    const std::string wv = g + "/layer_1/W_V_h0";
    const auto v = read_dataset<double>(f.id, wv.c_str(), H5T_NATIVE_DOUBLE);
    const Matrix& W_V = tape.layers[0].heads[0].W_V;
    ASSERT_EQ(v.size(), W_V.size());
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_TRUE(same_bits(v[i], W_V.data()[i])) << wv << " " << i;
    for (const auto& [name, dims] : objects_below(group.id))
      if (!dims.empty()) bytes += 8 * dims[0] * dims[1];
  }
  EXPECT_EQ(summary.bytes, bytes);
}

TEST_F(StoreDump, LayerWeightsAreNamedAndShapedPerModel) {
  struct Case {
    const char* model;
    std::map<std::string, std::vector<hsize_t>> layer;  ///< every dataset of each layer_<l>
  };
  const std::vector<Case> cases = {
      {"mixer = \"softmax\"\nheads = 2\nd_qk = 3\ngate = \"silu\"\nmlp = \"relu\"\nmlp_ratio = 2\n",
       {{"M_h0", {4, 4}},
        {"M_h1", {4, 4}},
        {"W_G", {6, 6}},
        {"W_K_h0", {6, 3}},
        {"W_K_h1", {6, 3}},
        {"W_Q_h0", {6, 3}},
        {"W_Q_h1", {6, 3}},
        {"W_V_h0", {6, 6}},
        {"W_V_h1", {6, 6}},
        {"W_1", {6, 12}},
        {"W_2", {12, 6}}}},
      {"mixer = \"s4d\"\n", {{"W_V_h0", {6, 6}}, {"s4d_K", {4, 6}}}},
      {"mixer = \"ssd\"\nbc_init = \"gaussian\"\nstate_dim = 3\n",
       {{"M_h0", {4, 4}}, {"W_B_h0", {6, 3}}, {"W_C_h0", {6, 3}}, {"W_V_h0", {6, 6}}}},
      {"mixer = \"softmax\"\ngap_fix = \"outliers\"\n",
       {{"M_h0", {4, 4}}, {"M_raw_h0", {4, 4}}, {"W_K_h0", {6, 6}}, {"W_Q_h0", {6, 6}}, {"W_V_h0", {6, 6}}}},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const auto plan = dump_plan(c.model);
    const std::string name = "m" + std::to_string(n++) + ".h5";
    const fs::path p = all_done(name, plan);
    const std::vector<std::uint64_t> tasks = {1, 2};
    const auto summary = store::write_dump(p, plan, tasks);
    EXPECT_EQ(summary.written, 2u);
    H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_GE(f.id, 0);
    std::uint64_t objects = 0, bytes = 0;
    for (const auto t : tasks) {
      const std::string g = "/dump/task_" + std::to_string(t);
      H5Id group(H5Gopen2(f.id, g.c_str(), H5P_DEFAULT));
      ASSERT_GE(group.id, 0) << g;
      const auto below = objects_below(group.id);
      objects += 1 + below.size();  // the task's group and everything in it
      for (const auto& [path, dims] : below)
        if (!dims.empty()) bytes += 8 * dims[0] * dims[1];
      for (int l = 1; l <= plan.max_depth; ++l) {
        const std::string layer = "layer_" + std::to_string(l);
        H5Id lg(H5Gopen2(group.id, layer.c_str(), H5P_DEFAULT));
        EXPECT_EQ(objects_below(lg.id), c.layer) << g << "/" << layer;
      }
    }
    EXPECT_EQ(summary.bytes, bytes);
    // dump_bytes: the values exactly, plus 1024 bytes for the /dump group and for each object
    EXPECT_EQ(store::dump_bytes(plan, tasks), bytes + 1024 * (1 + objects));
  }
}

TEST_F(StoreDump, EstimateCountsUndoneTasksAsIfTheyFinished) {
  const auto plan = dump_plan("mixer = \"softmax\"\n");
  const fs::path p = make_store("d.h5", plan, {fake_result(plan, 0)});
  const std::uint64_t one = store::dump_bytes(plan, {0});
  EXPECT_EQ(store::dump_bytes(plan, {}), 1024u);  // the /dump group alone
  EXPECT_EQ(store::dump_bytes(plan, {0, 1, 2}), 1024u + 3 * (one - 1024u));
  const auto summary = store::write_dump(p, plan, {0});
  EXPECT_GT(summary.bytes, 0u);
  EXPECT_LT(summary.bytes, one);
}

TEST_F(StoreDump, AnEarlierDumpIsReplacedWhole) {
  const auto plan = dump_plan("mixer = \"softmax\"\n");
  const fs::path p = all_done("d.h5", plan);
  EXPECT_EQ(store::write_dump(p, plan, {0, 1}).written, 2u);
  const auto again = store::write_dump(p, plan, {3});
  EXPECT_EQ(again.written, 1u);
  EXPECT_EQ(again.skipped, 0u);
  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  H5Id dump(H5Gopen2(f.id, "/dump", H5P_DEFAULT));
  EXPECT_EQ(read_int_attr(dump.id, "tasks"), 1);
  std::vector<std::string> groups;
  for (const auto& [name, dims] : objects_below(dump.id))
    if (name.find('/') == std::string::npos) groups.push_back(name);
  EXPECT_EQ(groups, (std::vector<std::string>{"task_3"}));
  // the store itself is untouched
  EXPECT_EQ(store::read_info(p).n_done, plan.tasks.size());
}

TEST_F(StoreDump, NoTasksWritesAnEmptyDump) {
  const auto plan = dump_plan("mixer = \"softmax\"\n");
  const fs::path p = all_done("d.h5", plan);
  const auto summary = store::write_dump(p, plan, {});
  EXPECT_EQ(summary.written, 0u);
  EXPECT_EQ(summary.skipped, 0u);
  EXPECT_EQ(summary.bytes, 0u);
  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  H5Id dump(H5Gopen2(f.id, "/dump", H5P_DEFAULT));
  ASSERT_GE(dump.id, 0);
  EXPECT_EQ(read_int_attr(dump.id, "tasks"), 0);
  EXPECT_TRUE(objects_below(dump.id).empty());
}

TEST_F(StoreDump, PendingTasksAreSkipped) {
  const auto plan = dump_plan("mixer = \"softmax\"\n");
  const fs::path p = make_store("d.h5", plan, {});
  const auto summary = store::write_dump(p, plan, {0, 1, 2, 3});
  EXPECT_EQ(summary.written, 0u);
  EXPECT_EQ(summary.skipped, 4u);
  EXPECT_EQ(summary.bytes, 0u);
}

TEST_F(StoreDump, MissingBusyOrForeignStoresAreRefused) {
  const auto plan = dump_plan("mixer = \"softmax\"\n");
  EXPECT_NE(store_error_of([&] { store::write_dump(path("nope.h5"), plan, {0}); }), "NO EXCEPTION");
  EXPECT_FALSE(fs::exists(path("nope.h5")));

  const fs::path p = all_done("d.h5", plan);
  {
    const auto lock = store::WriterLock::acquire(p);
    EXPECT_THROW(store::write_dump(p, plan, {0}), store::StoreBusy);
  }
  // a plan with another number of tasks than the store
  const auto other = plan::make_plan(config::parse_sweep(
      "[sweep]\nname = \"dump\"\nseed = 11\nreplicates = 3\n[model]\nT = 4\nd = 6\ndepth = 2\nmixer = \"softmax\"\n"
      "[axes]\nlambda = [0.0, 0.5]\n",
      "dump"));
  EXPECT_EQ(store_error_of([&] { store::write_dump(p, other, {0}); }), "/tasks has 4 rows, expected 6");
  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_EQ(H5Lexists(f.id, "/dump", H5P_DEFAULT), 0);  // nothing written by the refused calls
}
