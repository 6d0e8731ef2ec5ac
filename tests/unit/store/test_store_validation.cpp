// A store is what docs/SCHEMA.md says or it is refused, unchanged: stores made by Store::create and
// then edited with the plain HDF5 C API (soft and external links, values kept outside the file,
// other types, /tasks without its fields, statuses that do not fit the sweep) must give a
// StoreError naming the problem from read_info (info, merge), Store::open_resume (run) and
// Store::open_read (merge), and leave every file byte for byte as it was.
#include <hdf5.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/params.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using store::Store;
using store::TaskResult;
using store::TaskStatus;
using test::H5Id;
using test::store_error_of;

namespace {


/// 2 lambda points x `replicates` replicates, depth 2, no spectra; with `adaptive_min` > 0 an
/// adaptive rule (min `adaptive_min`, step 1) whose target is never met.
plan::Plan make_test_plan(int replicates = 2, int adaptive_min = 0) {
  config::SweepSpec spec;
  spec.name = "validation";
  spec.seed = 17;
  spec.replicates = replicates;
  for (const auto& info : config::model_params()) spec.base.push_back(info.default_value);
  spec.base.at(*config::param_index("T")) = std::int64_t{4};
  spec.base.at(*config::param_index("d")) = std::int64_t{6};
  spec.base.at(*config::param_index("depth")) = std::int64_t{2};
  spec.dims.push_back({"lambda", {"lambda"}, {{0.0, 0.5}}});
  if (adaptive_min > 0) {
    spec.adaptive.min = adaptive_min;
    spec.adaptive.step = 1;
    spec.adaptive.targets.push_back({"sr_cov", -1, 1e-9, 0.0});
  }
  return plan::make_plan(std::move(spec));
}

store::Provenance prov() { return test::test_provenance(1); }

TaskResult done_result(const plan::Plan& plan, std::uint64_t t) {
  TaskResult r;
  r.task = t;
  r.status = TaskStatus::done;
  r.wall_s = 0.5;
  r.rank = 0;
  for (int l = 0; l <= plan.max_depth; ++l) {
    metrics::LayerRow row{};
    for (std::size_t k = 0; k < row.size(); ++k) row[k] = static_cast<double>(t) + 0.125 * static_cast<double>(k);
    r.layers.push_back(row);
    r.spectra.emplace_back();
  }
  return r;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}


/// The status byte of task `t` set to `value` through a one-field memory type (any value, also
/// one the store's own writer would not write).
void set_status(const fs::path& p, std::uint64_t t, std::int8_t value) {
  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  H5Id d(H5Dopen2(f.id, "tasks", H5P_DEFAULT));
  H5Id e(H5Tenum_create(H5T_NATIVE_INT8));
  const char* names[] = {"pending", "done", "failed", "diverged", "not_needed"};
  for (std::int8_t v = 0; v < 5; ++v) H5Tenum_insert(e.id, names[v], &v);
  H5Id mem(H5Tcreate(H5T_COMPOUND, 1));
  H5Tinsert(mem.id, "status", 0, e.id);
  H5Id space(H5Dget_space(d.id));
  const hsize_t start = t, count = 1;
  H5Sselect_hyperslab(space.id, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  H5Id one(H5Screate_simple(1, &count, nullptr));
  ASSERT_GE(H5Dwrite(d.id, mem.id, one.id, space.id, H5P_DEFAULT, &value), 0);
}

/// Replace dataset `name` by one of `type` and shape `dims` (zeros), made with `dcpl`.
void replace_dataset(hid_t f, const char* name, hid_t type, std::vector<hsize_t> dims, hid_t dcpl = H5P_DEFAULT) {
  ASSERT_GE(H5Ldelete(f, name, H5P_DEFAULT), 0) << name;
  H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Id d(H5Dcreate2(f, name, type, space.id, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  ASSERT_GE(d.id, 0) << name;
}

class StoreValidation : public test::StoreDirTest {
 protected:
  /// A store of `plan` with task 0 done and the others pending.
  fs::path make_store(const std::string& name, const plan::Plan& plan) {
    const fs::path p = path(name);
    Store s = Store::create(p, plan, prov(), false);
    std::vector<TaskResult> batch = {done_result(plan, 0)};
    s.write(batch);
    return p;
  }

  /// read_info, open_resume and open_read all refuse `p` with a StoreError containing `fragment`,
  /// and `p` and every file of `also` keep their bytes.
  void expect_refused_unchanged(const fs::path& p, const plan::Plan& plan, const std::string& fragment,
                                const std::vector<fs::path>& also = {}) {
    std::vector<fs::path> files = also;
    files.insert(files.begin(), p);
    std::vector<std::string> before;
    for (const auto& f : files) before.push_back(bytes_of(f));
    const auto open_before = H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL);
    const std::string info = store_error_of([&] { store::read_info(p); });
    EXPECT_NE(info.find(fragment), std::string::npos) << "read_info: " << info;
    const std::string resume = store_error_of([&] { Store::open_resume(p, plan, prov()); });
    EXPECT_NE(resume.find(fragment), std::string::npos) << "open_resume: " << resume;
    const std::string read = store_error_of([&] { Store::open_read(p, plan); });
    EXPECT_NE(read.find(fragment), std::string::npos) << "open_read: " << read;
    for (std::size_t i = 0; i < files.size(); ++i)
      EXPECT_TRUE(bytes_of(files[i]) == before[i]) << files[i] << " was changed by a refusal";
    EXPECT_EQ(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL), open_before) << "HDF5 objects left open";
  }
};

}  // namespace

TEST_F(StoreValidation, AStoreAsMadeIsAccepted) {
  const auto plan = make_test_plan();
  const fs::path p = make_store("good.h5", plan);
  const auto info = store::read_info(p);
  EXPECT_EQ(info.n_done, 1u);
  EXPECT_EQ(info.n_pending, plan.tasks.size() - 1);
  Store s = Store::open_resume(p, plan, prov());
  EXPECT_EQ(s.task_status()[0], TaskStatus::done);
}

TEST_F(StoreValidation, ExternalLinksToAnotherStoreAreRefusedAndNeitherFileIsWritten) {
  // The victim is a store of the same plan with every task pending: a resume that followed the
  // links would compute its tasks and write them there.
  const auto plan = make_test_plan();
  const fs::path victim = path("victim.h5");
  { Store v = Store::create(victim, plan, prov(), false); }
  const fs::path p = make_store("store.h5", plan);
  {
    H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    for (const char* name : {"/tasks", "/layers/fro"}) {
      ASSERT_GE(H5Ldelete(f.id, name, H5P_DEFAULT), 0);
      ASSERT_GE(H5Lcreate_external(victim.c_str(), name, f.id, name, H5P_DEFAULT, H5P_DEFAULT), 0);
    }
  }
  // Links are visited by name: /layers/fro comes before /tasks.
  expect_refused_unchanged(p, plan,
                           "/layers/fro is an external link to " + victim.string() +
                               ":/layers/fro: every object of a store is its own, reached by hard links only",
                           {victim});
}

TEST_F(StoreValidation, SoftLinksAreRefused) {
  const auto plan = make_test_plan();
  const fs::path p = make_store("store.h5", plan);
  {
    H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Lmove(f.id, "tasks", f.id, "tasks_elsewhere", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_soft("/tasks_elsewhere", f.id, "tasks", H5P_DEFAULT, H5P_DEFAULT), 0);
  }
  expect_refused_unchanged(p, plan, "/tasks is a soft link to /tasks_elsewhere");
}

TEST_F(StoreValidation, ValuesKeptInAnotherFileAreRefused) {
  const auto plan = make_test_plan();
  const fs::path p = make_store("store.h5", plan);
  const fs::path raw = path("values.bin");
  std::ofstream(raw, std::ios::binary) << std::string(plan.tasks.size() * 8, '\0');
  {
    H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
    ASSERT_GE(H5Pset_external(dcpl.id, raw.c_str(), 0, plan.tasks.size() * 8), 0);
    replace_dataset(f.id, "/theory/S", H5T_IEEE_F64LE, {plan.tasks.size()}, dcpl.id);
  }
  expect_refused_unchanged(p, plan, "/theory/S keeps its values outside the store (external storage in " + raw.string(),
                           {raw});
}

TEST_F(StoreValidation, Float32AndBigEndianValuesAreRefused) {
  const auto plan = make_test_plan();
  const hsize_t n = plan.tasks.size(), L1 = static_cast<hsize_t>(plan.max_depth) + 1;
  for (hid_t type : {H5T_IEEE_F32LE, H5T_IEEE_F64BE}) {
    const fs::path p = make_store("store.h5", plan);
    {
      H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      replace_dataset(f.id, "/layers/fro", type, {n, L1});
    }
    expect_refused_unchanged(p, plan, "/layers/fro is not a float64 dataset");
    fs::remove(p);
  }
  const fs::path p = make_store("store.h5", plan);
  {
    H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    replace_dataset(f.id, "/spectra/x_sv_offset", H5T_STD_I32LE, {n, L1});
  }
  expect_refused_unchanged(p, plan, "/spectra/x_sv_offset is not an int64 dataset");
}

namespace {
/// /tasks made again with the fields of the store's own, except `drop`, and `field` of `type`.
void remake_tasks(hid_t f, const char* drop, const char* field = "", hid_t type = -1) {
  H5Id d(H5Dopen2(f, "tasks", H5P_DEFAULT));
  H5Id old(H5Dget_type(d.id));
  H5Id space(H5Dget_space(d.id));
  std::vector<std::pair<std::string, hid_t>> members;
  std::size_t size = 0;
  for (int k = 0; k < H5Tget_nmembers(old.id); ++k) {
    char* name = H5Tget_member_name(old.id, static_cast<unsigned>(k));
    const std::string n = name;
    H5free_memory(name);
    if (n == drop) continue;
    const hid_t t = n == field ? H5Tcopy(type) : H5Tget_member_type(old.id, static_cast<unsigned>(k));
    members.emplace_back(n, t);
    size += H5Tget_size(t);
  }
  H5Id compound(H5Tcreate(H5T_COMPOUND, size));
  std::size_t offset = 0;
  for (auto& [n, t] : members) {
    H5Tinsert(compound.id, n.c_str(), offset, t);
    offset += H5Tget_size(t);
    H5Tclose(t);
  }
  ASSERT_GE(H5Ldelete(f, "tasks", H5P_DEFAULT), 0);
  H5Id fresh(H5Dcreate2(f, "tasks", compound.id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(fresh.id, 0);
}
}  // namespace

TEST_F(StoreValidation, TasksWithoutADocumentedFieldAreRefused) {
  const auto plan = make_test_plan();
  for (const char* field : {"id", "point", "replicate", "wall_s", "rank", "message"}) {
    const fs::path p = make_store("store.h5", plan);
    {
      H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      remake_tasks(f.id, field);
    }
    expect_refused_unchanged(p, plan, "/tasks has no '" + std::string(field) + "' field");
    fs::remove(p);
  }
}

TEST_F(StoreValidation, TaskFieldsOfOtherTypesAreRefused) {
  const auto plan = make_test_plan();
  H5Id short_text(H5Tcopy(H5T_C_S1));
  H5Tset_size(short_text.id, 16);
  H5Id other_enum(H5Tenum_create(H5T_NATIVE_INT8));  // "done" with another value
  for (std::int8_t v : {std::int8_t{0}, std::int8_t{5}}) H5Tenum_insert(other_enum.id, v == 0 ? "pending" : "done", &v);
  const std::vector<std::tuple<const char*, hid_t, std::string>> cases = {
      {"id", H5T_STD_I64LE, "/tasks field 'id' is not uint64"},
      {"replicate", H5T_STD_I64LE, "/tasks field 'replicate' is not int32"},
      {"wall_s", H5T_IEEE_F32LE, "/tasks field 'wall_s' is not float64"},
      {"rank", H5T_IEEE_F64LE, "/tasks field 'rank' is not int32"},
      {"status", H5T_STD_I8LE, "/tasks field 'status' is not an int8 enumeration of statuses"},
      {"status", other_enum.id, "/tasks field 'status' is not an int8 enumeration of statuses"},
      {"message", short_text.id, "/tasks field 'message' is not a fixed 256-byte string"}};
  for (const auto& [field, type, message] : cases) {
    const fs::path p = make_store("store.h5", plan);
    {
      H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      remake_tasks(f.id, "", field, type);
    }
    expect_refused_unchanged(p, plan, message);
    fs::remove(p);
  }
}

TEST_F(StoreValidation, NotNeededInAFixedSweepIsRefused) {
  const auto plan = make_test_plan();
  const fs::path p = make_store("store.h5", plan);
  set_status(p, 3, static_cast<std::int8_t>(TaskStatus::not_needed));
  expect_refused_unchanged(p, plan,
                           "task 3 is not_needed, but its sweep has no adaptive replicates ([sweep.replicates])");
}

TEST_F(StoreValidation, NotNeededFitsAnAdaptiveSweepFromItsMinOnly) {
  const auto plan = make_test_plan(/*replicates=*/3, /*adaptive_min=*/2);
  ASSERT_TRUE(plan.spec.adaptive.enabled());
  const fs::path p = make_store("store.h5", plan);
  set_status(p, 4, static_cast<std::int8_t>(TaskStatus::not_needed));  // point 1, replicate 1
  expect_refused_unchanged(
      p, plan, "task 4 is not_needed, but its replicate 1 is below the adaptive rule's min = 2, which always runs");
  set_status(p, 4, static_cast<std::int8_t>(TaskStatus::pending));
  set_status(p, 5, static_cast<std::int8_t>(TaskStatus::not_needed));  // point 1, replicate 2
  const auto info = store::read_info(p);                               // the rule read from the stored config
  EXPECT_EQ(info.n_not_needed, 1u);
  Store s = Store::open_resume(p, plan, prov());
  EXPECT_EQ(s.task_status()[5], TaskStatus::not_needed);
}

TEST_F(StoreValidation, ResumeOfAStoreWithoutTheoryLeavesItUnchanged) {
  // A refusal that needs the plan (read_info accepts the store) also comes before any write.
  const auto plan = make_test_plan();
  const fs::path p = make_store("store.h5", plan);
  {
    H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Ldelete(f.id, "theory", H5P_DEFAULT), 0);
  }
  const std::string before = bytes_of(p);
  EXPECT_NO_THROW(store::read_info(p));
  const std::string e = store_error_of([&] { Store::open_resume(p, plan, prov()); });
  EXPECT_NE(e.find("has no /theory: made by an older rcsweep"), std::string::npos) << e;
  EXPECT_TRUE(bytes_of(p) == before);
}
