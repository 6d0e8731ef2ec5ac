// What the store's unit tests share: an owner of plain HDF5 ids (the tests read and edit files with
// the HDF5 C API, independent of the store's own layer), a provenance, a fresh folder per test and
// the message of the StoreError a call throws.
#pragma once
#include <hdf5.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "base/error.hpp"
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

}  // namespace rcsweep::test
