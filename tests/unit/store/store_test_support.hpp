// What the store's unit tests share: an owner of plain HDF5 ids and readers written with the HDF5
// C API (the tests read and edit files independently of the store's own layer), a provenance, a
// fresh folder per test, the message of the StoreError a call throws, and the sweep, fake results
// and fixture that the tests of the store's source units (test_<unit>.cpp beside this file) write
// stores with.
#pragma once
#include <hdf5.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/params.hpp"
#include "metrics/metrics.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"

namespace rcsweep::test {

/// An HDF5 id released when it goes out of scope (negative: none).
struct H5Id {
  hid_t id;
  explicit H5Id(hid_t i) : id(i) {}
  ~H5Id() {
    if (id >= 0) H5Idec_ref(id);
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
};

inline store::Provenance test_provenance(int mpi_ranks) {
  store::Provenance p;
  p.rcsweep_version = "0.1.0-test";
  p.git_commit = "abc123";
  p.created = "2026-01-01T00:00:00Z";
  p.host = "testhost";
  p.blas = "OpenBLAS 0.3.21";
  p.mpi_ranks = mpi_ranks;
  p.threads = 1;
  return p;
}

/// A fresh folder per test (kept when the test failed), HDF5's error printing off.
class StoreDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("rcsweep_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }
  std::filesystem::path dir_;
};

/// The message of the StoreError `f` throws; a marker when it throws another type or nothing.
template <class F>
std::string store_error_of(F&& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG EXCEPTION TYPE: ") + e.what();
  }
  return "NO EXCEPTION";
}

// ---- the sweep and fake results of the store tests ------------------------------------------

inline config::ParamValue& base_value(config::SweepSpec& spec, std::string_view name) {
  return spec.base.at(*config::param_index(name));
}

/// 2 (lambda) x 2 (norm) x 2 (zip0: T, d) points, `replicates` replicates, depth 3.
inline config::SweepSpec make_spec(config::Spectra spectra, double lambda1 = 0.5, int replicates = 2, int depth = 3) {
  config::SweepSpec spec;
  spec.name = "store-test";
  spec.seed = 0xfeedbeefcafeULL;
  spec.replicates = replicates;
  for (const auto& info : config::model_params()) spec.base.push_back(info.default_value);
  base_value(spec, "T") = std::int64_t{4};
  base_value(spec, "d") = std::int64_t{6};
  base_value(spec, "depth") = std::int64_t{depth};
  spec.dims.push_back({"lambda", {"lambda"}, {{0.0, lambda1}}});
  spec.dims.push_back({"norm", {"norm"}, {{std::string("none"), std::string("rms")}}});
  spec.dims.push_back({"zip0", {"T", "d"}, {{std::int64_t{4}, std::int64_t{8}}, {std::int64_t{6}, std::int64_t{8}}}});
  spec.output.spectra = spectra;
  return spec;
}

/// make_spec with X spectra `last` and mixer spectra `mixer`.
inline config::SweepSpec mixer_spec(config::Spectra mixer) {
  auto spec = make_spec(config::Spectra::last);
  spec.output.mixer_spectra = mixer;
  return spec;
}

/// The provenance of the store tests (3 ranks).
inline store::Provenance prov() { return test_provenance(3); }

/// A deterministic fake result: every value distinct and exactly representable.
inline store::TaskResult fake_result(const plan::Plan& plan, std::uint64_t t,
                                     store::TaskStatus status = store::TaskStatus::done) {
  store::TaskResult r;
  r.task = t;
  r.status = status;
  r.wall_s = 0.125 * static_cast<double>(t + 1);
  r.rank = static_cast<int>(t % 3);
  r.message = status == store::TaskStatus::done ? ""
                                                : "diverged at layer 2: non-finite X (task " + std::to_string(t) + ")";
  const int L1 = plan.max_depth + 1;
  const int n_layers = status == store::TaskStatus::done ? L1 : 2;  // a diverged task stops early
  for (int l = 0; l < n_layers; ++l) {
    metrics::LayerRow row{};
    for (std::size_t k = 0; k < row.size(); ++k)
      row[k] = static_cast<double>(t) * 1000.0 + l * 10.0 + static_cast<double>(k) + 1.0 / 3.0;
    r.layers.push_back(row);
    std::vector<double> sv;
    if (plan.spectrum_at(l))
      for (std::size_t i = 0; i < plan.spectrum_length(t); ++i)
        sv.push_back(static_cast<double>(t) + 0.01 * l + 1e-4 * static_cast<double>(i) + 1e-9);
    r.spectra.push_back(std::move(sv));
  }
  return r;
}

inline bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

// ---- plain HDF5 C API readers (independent of the store's own layer) ----------------------

inline std::vector<hsize_t> dims_of(hid_t file, const char* path) {
  H5Id d(H5Dopen2(file, path, H5P_DEFAULT));
  H5Id s(H5Dget_space(d.id));
  std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(s.id)));
  H5Sget_simple_extent_dims(s.id, dims.data(), nullptr);
  return dims;
}

template <class T>
std::vector<T> read_dataset(hid_t file, const char* path, hid_t mem_type) {
  H5Id d(H5Dopen2(file, path, H5P_DEFAULT));
  EXPECT_GE(d.id, 0) << path;
  H5Id s(H5Dget_space(d.id));
  std::vector<T> out(static_cast<std::size_t>(H5Sget_simple_extent_npoints(s.id)));
  EXPECT_GE(H5Dread(d.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0) << path;
  return out;
}

/// One field of a compound dataset, read with a one-field memory type.
template <class T>
std::vector<T> read_field(hid_t file, const char* path, const char* field, hid_t field_type) {
  H5Id mem(H5Tcreate(H5T_COMPOUND, sizeof(T)));
  H5Tinsert(mem.id, field, 0, field_type);
  return read_dataset<T>(file, path, mem.id);
}

inline std::string read_str_attr(hid_t obj, const char* name) {
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT));
  if (a.id < 0) return "<missing>";
  H5Id t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.id, H5T_VARIABLE);
  H5Tset_cset(t.id, H5T_CSET_UTF8);
  char* p = nullptr;
  H5Aread(a.id, t.id, &p);
  std::string out = p ? p : "";
  H5free_memory(p);
  return out;
}

inline std::int64_t read_int_attr(hid_t obj, const char* name) {
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT));
  std::int64_t v = -999;
  H5Aread(a.id, H5T_NATIVE_INT64, &v);
  return v;
}

/// The fixture of the tests of a store made by Store::create (one class for every file: GoogleTest
/// wants one fixture type per test suite).
class StoreTest : public StoreDirTest {};

}  // namespace rcsweep::test
