// libFuzzer harness: the store reader of `rcsweep info` (store::read_info) and the resume path
// (Store::open_resume + task_status) on a hostile HDF5 file (docs/FUZZING.md).
// A StoreError is the normal answer to a damaged or foreign file. Everything else is a bug: a
// crash, a sanitizer report, a hang, another exception (it escapes and aborts), an accepted
// store whose numbers do not add up or that is not what docs/SCHEMA.md says a store must be (a
// soft or external link, float32 /layers, /tasks without a field, not_needed in a fixed sweep),
// a refused store whose bytes changed, or an HDF5 object left open after the call returned.
//
// open_resume needs the plan the store was made from: the plans are the sweep files in
// RCSWEEP_FUZZ_STORE_PLANS (tests/fuzz/store_plans/, the same files the seed stores were made
// from), and the one whose plan hash appears in the input's bytes is used (so mutated seed
// stores get past the hash check into the layout checks); the first one otherwise.
//
// Inputs that hit a known defect of Debian's HDF5 1.10.8 are skipped
// (hdf5_1_10_global_heap_defect): they hang or crash inside HDF5 itself, not in rcsweep
// (docs/FUZZING.md "Found so far").
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "fuzz_check.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"

#ifndef RCSWEEP_FUZZ_STORE_PLANS
#error "RCSWEEP_FUZZ_STORE_PLANS must name the folder of the sweep files the seed stores were made from"
#endif

namespace {

namespace fs = std::filesystem;
using rcsweep::fuzz::fail;

struct Fixture {
  fs::path file;  // the input is written here (one file per process)
  std::vector<rcsweep::plan::Plan> plans;
};

Fixture make_fixture() {
  Fixture fx;
  fx.file = fs::temp_directory_path() / ("rcsweep_fuzz_store_" + std::to_string(::getpid()) + ".h5");
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(RCSWEEP_FUZZ_STORE_PLANS))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) fail("no sweep files in " RCSWEEP_FUZZ_STORE_PLANS);
  for (const fs::path& f : files) fx.plans.push_back(rcsweep::plan::make_plan(rcsweep::config::load_sweep(f)));
  return fx;
}

// Never destroyed, so the atexit handler can still read the path.
Fixture& fixture() {
  static Fixture* fx = [] {
    auto* f = new Fixture(make_fixture());
    std::atexit([] {
      std::error_code ec;
      fs::remove(fixture().file, ec);
    });
    return f;
  }();
  return *fx;
}

void write_input(const fs::path& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) fail("cannot write the input to " + path.string());
}

// Every HDF5 id the store opened must be closed again, also when it threw; a leaked file id would
// also make HDF5 hand the next input's open the previous file's cached state.
void check_nothing_open(const char* after) {
  const ssize_t open = H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL);
  if (open != 0) fail(std::to_string(open) + " HDF5 object(s) left open after " + after);
}

void fuzz_read_info(const fs::path& path) {
  try {
    const rcsweep::store::StoreInfo info = rcsweep::store::read_info(path);
    if (info.format != "rcsweep" || info.schema_version != rcsweep::store::schema_version)
      fail("read_info accepted a store with format '" + info.format + "', schema " +
           std::to_string(info.schema_version));
    if (info.n_pending + info.n_done + info.n_failed + info.n_diverged + info.n_not_needed != info.n_tasks)
      fail("read_info: task counts do not add up to n_tasks = " + std::to_string(info.n_tasks));
  } catch (const rcsweep::StoreError&) {
  }
  check_nothing_open("read_info");
}

herr_t other_link(hid_t, const char*, const H5L_info_t* info, void*) { return info->type != H5L_TYPE_HARD; }

// What docs/SCHEMA.md "What a store must be" asks of a store open_resume accepted, checked with the
// plain HDF5 C API: hard links only, float64 /layers, every /tasks field, statuses that fit the plan.
void check_accepted(const fs::path& path, const rcsweep::plan::Plan& plan,
                    const std::vector<rcsweep::store::TaskStatus>& status) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) fail("open_resume accepted a store the HDF5 library cannot open again");
  std::string problem;
  if (H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, other_link, nullptr) != 0)
    problem = "a soft or external link (or a link walk that fails)";
  for (std::string_view m : {"fro", "log_fro", "s1", "mu", "m_gap"}) {
    const hid_t d = H5Dopen2(f, ("/layers/" + std::string(m)).c_str(), H5P_DEFAULT);
    const hid_t t = d >= 0 ? H5Dget_type(d) : -1;
    if (problem.empty() && (t < 0 || H5Tequal(t, H5T_IEEE_F64LE) <= 0))
      problem = "/layers/" + std::string(m) + " not float64";
    if (t >= 0) H5Tclose(t);
    if (d >= 0) H5Dclose(d);
  }
  const hid_t tasks = H5Dopen2(f, "/tasks", H5P_DEFAULT);
  const hid_t type = tasks >= 0 ? H5Dget_type(tasks) : -1;
  for (const char* field : {"id", "point", "replicate", "status", "wall_s", "rank", "message"})
    if (problem.empty() && (type < 0 || H5Tget_member_index(type, field) < 0))
      problem = "/tasks without its '" + std::string(field) + "' field";
  if (type >= 0) H5Tclose(type);
  if (tasks >= 0) H5Dclose(tasks);
  H5Fclose(f);
  H5Eclear2(H5E_DEFAULT);
  if (!plan.spec.adaptive.enabled() &&
      std::count(status.begin(), status.end(), rcsweep::store::TaskStatus::not_needed) > 0)
    problem = "a not_needed task in a sweep without adaptive replicates";
  if (!problem.empty()) fail("open_resume accepted a store with " + problem);
}

void fuzz_open_resume(const fs::path& path, std::string_view bytes) {
  const Fixture& fx = fixture();
  const rcsweep::plan::Plan* plan = &fx.plans.front();
  for (const rcsweep::plan::Plan& p : fx.plans)
    if (bytes.find(p.hash) != std::string_view::npos) plan = &p;
  rcsweep::store::Provenance prov;
  prov.rcsweep_version = "fuzz";
  prov.git_commit = "fuzz";
  prov.created = "2025-01-01T00:00:00Z";
  try {
    std::vector<rcsweep::store::TaskStatus> status;
    {
      rcsweep::store::Store store = rcsweep::store::Store::open_resume(path, *plan, prov);
      status = store.task_status();
    }
    if (status.size() != plan->tasks.size())
      fail("open_resume accepted a store with " + std::to_string(status.size()) + " task statuses, the plan has " +
           std::to_string(plan->tasks.size()));
    check_accepted(path, *plan, status);
  } catch (const rcsweep::StoreError&) {
    // A refusal writes nothing: the file is byte for byte the input.
    std::ifstream in(path, std::ios::binary);
    const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (after != bytes) fail("open_resume refused the store and changed its bytes");
  }
  check_nothing_open("open_resume");
}

// Bytes past the end of the file read as zeros, as HDF5's POSIX driver returns them.
std::uint64_t little_endian(std::string_view b, std::uint64_t at, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (at + i < b.size()) v |= std::uint64_t{static_cast<unsigned char>(b[at + i])} << (8 * i);
  return v;
}

// HDF5 1.10.8 decodes a global heap collection ("GCOL": where variable-length strings live, with
// no checksum) object by object and trusts each object's size: a free-space object (index 0) of
// size 0 makes it loop forever (`p = begin + need` with need = 0), and an object running past the
// collection makes H5HG_read copy from outside it (SIGSEGV). Both happen inside H5Aread of any
// string attribute; rcsweep cannot prevent them (newer HDF5 refuses such a collection: "ran off
// end of input buffer while decoding", "partially decoded global heap"). This walks every
// collection as HDF5 does (8-byte lengths, 16-byte object headers, 8-byte alignment) and says
// whether one is inconsistent in those ways or numbers its objects other than 1, 2, 3, ... (as
// HDF5 writes them, then the free space with index 0; a renumbered object is another way to
// make H5HG_read fail), so the fuzzer skips the input and goes on looking
// for rcsweep's own bugs. A false alarm ("GCOL" in raw data, a collection too large for HDF5 to
// allocate) only skips that input.
bool hdf5_1_10_global_heap_defect(std::string_view b) {
  constexpr std::size_t header = 16;
  for (std::size_t at = b.find("GCOL"); at != std::string_view::npos; at = b.find("GCOL", at + 1)) {
    const std::uint64_t size = little_endian(b, at + 8, 8);
    if (size < header || size > (std::uint64_t{1} << 40)) continue;  // HDF5 cannot read it: no decode
    const std::uint64_t end = at + size;
    std::uint64_t p = at + header;
    std::uint64_t expected = 1;
    while (p + header <= end) {
      const std::uint64_t idx = little_endian(b, p, 2);
      if (idx != 0 && idx != expected++) return true;  // renumbered object
      const std::uint64_t obj = little_endian(b, p + 8, 8);
      if (obj > end - p) return true;  // runs past the collection
      const std::uint64_t need = idx > 0 ? header + (obj + 7) / 8 * 8 : obj;
      if (need == 0 || need > end - p) return true;  // endless loop, or past the collection
      p += need;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (hdf5_1_10_global_heap_defect(bytes)) return 0;
  const Fixture& fx = fixture();
  write_input(fx.file, data, size);
  fuzz_read_info(fx.file);
  // read_info opened the file read-only; open_resume may write to it, so it goes last.
  fuzz_open_resume(fx.file, bytes);
  return 0;
}
