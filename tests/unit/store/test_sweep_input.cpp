// A sweep's input file (src/store/sweep_input.cpp): input = "file" read relative to the sweep file's
// folder into the spec, its shape checked against T x d at every grid point that uses it, and
// every refusal a ConfigError on model.input_path. The files are written with the plain HDF5 C API.
#include "store/sweep_input.hpp"

#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using test::H5Id;

namespace {

const std::string head = "[sweep]\nname = \"in\"\n[model]\ndepth = 2\ninput = \"file\"\ninput_path = \"emb.h5\"\n";

class SweepInput : public test::StoreDirTest {
 protected:
  /// A float64 dataset "X" of `rows` x `cols` holding 0, 1, 2, ... row-major, in the file `name`.
  fs::path write_input(const std::string& name, hsize_t rows, hsize_t cols) {
    const fs::path p = path(name);
    fs::create_directories(p.parent_path());
    std::vector<double> values(rows * cols);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) + 0.25;
    H5Id f(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t dims[2] = {rows, cols};
    H5Id space(H5Screate_simple(2, dims, nullptr));
    H5Id d(H5Dcreate2(f.id, "X", H5T_IEEE_F64LE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    EXPECT_GE(H5Dwrite(d.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    return p;
  }
  /// The sweep file `name` with `text`, its path.
  fs::path write_sweep(const std::string& name, const std::string& text) {
    const fs::path p = path(name);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

/// The one issue of the ConfigError `f` throws: "key: problem"; a marker otherwise.
template <class F>
std::string config_issue_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    if (e.issues().size() != 1) return "NOT ONE ISSUE: " + std::string(e.what());
    return e.issues()[0].key + ": " + e.issues()[0].problem;
  } catch (const std::exception& e) {
    return std::string("WRONG EXCEPTION TYPE: ") + e.what();
  }
  return "NO EXCEPTION";
}

TEST_F(SweepInput, FileNextToTheSweepFileIsLoadedAsStored) {
  write_input("sub/emb.h5", 2, 3);
  const fs::path sweep = write_sweep("sub/s.toml", head + "T = 2\nd = 3\n");
  auto spec = config::load_sweep(sweep);
  EXPECT_FALSE(spec.input_matrix);
  const auto before = spec.plan_hash();
  store::load_input_file(spec, sweep);
  ASSERT_TRUE(spec.input_matrix);
  ASSERT_EQ(spec.input_matrix->rows(), 2u);
  ASSERT_EQ(spec.input_matrix->cols(), 3u);
  EXPECT_EQ((*spec.input_matrix)(0, 0), 0.25);
  EXPECT_EQ((*spec.input_matrix)(1, 2), 5.25);  // row-major
  EXPECT_NE(spec.plan_hash(), before);          // the content is part of the plan
  EXPECT_EQ(spec.model(spec.point(0)).input_matrix, spec.input_matrix);
}

TEST_F(SweepInput, NoInputPathLeavesTheSpecAlone) {
  auto spec = config::parse_sweep("[sweep]\nname = \"x\"\n[model]\nT = 2\nd = 3\ndepth = 1\n", "test");
  const auto before = spec.plan_hash();
  store::load_input_file(spec, path("s.toml"));
  EXPECT_FALSE(spec.input_matrix);
  EXPECT_EQ(spec.plan_hash(), before);
}

TEST_F(SweepInput, AbsolutePathIsTakenAsIs) {
  const fs::path input = write_input("elsewhere/emb.h5", 2, 3);
  auto spec = config::parse_sweep("[sweep]\nname = \"in\"\n[model]\ndepth = 2\nT = 2\nd = 3\ninput = \"file\"\n"
                                  "input_path = \"" +
                                      input.string() + "\"\n",
                                  "test");
  store::load_input_file(spec, path("other/s.toml"));
  ASSERT_TRUE(spec.input_matrix);
  EXPECT_EQ(spec.input_matrix->rows(), 2u);
}

TEST_F(SweepInput, WrongShapeNamesBothShapes) {
  const fs::path input = write_input("emb.h5", 2, 3);
  const fs::path sweep = write_sweep("s.toml", head + "T = 3\nd = 2\n");
  EXPECT_EQ(
      config_issue_of([&] { store::load_sweep_with_input(sweep, {}); }),
      "model.input_path: dataset 'X' of '" + input.string() + "' is 2 x 3 (rows x columns) but must be T x d = 3 x 2");
}

TEST_F(SweepInput, GridPointsThatMissAreCountedWithTheFirst) {
  const fs::path input = write_input("emb.h5", 2, 3);
  const fs::path sweep = write_sweep("s.toml", head + "d = 3\n[axes]\nT = [2, 4, 8]\n");
  EXPECT_EQ(config_issue_of([&] { store::load_sweep_with_input(sweep, {}); }),
            "model.input_path: dataset 'X' of '" + input.string() +
                "' is 2 x 3 (rows x columns) but must be T x d = 4 x 3 (at 2 of 3 grid points, e.g. point 1)");
}

TEST_F(SweepInput, OverridesApplyBeforeTheCheck) {
  write_input("emb.h5", 4, 3);
  const fs::path sweep = write_sweep("s.toml", head + "T = 2\nd = 3\n");
  EXPECT_NE(config_issue_of([&] { store::load_sweep_with_input(sweep, {}); }), "NO EXCEPTION");
  const auto spec = store::load_sweep_with_input(sweep, {"model.T=4"});
  ASSERT_TRUE(spec.input_matrix);
  EXPECT_EQ(spec.input_matrix->rows(), 4u);
  EXPECT_EQ(spec.overrides, std::vector<std::string>{"model.T=4"});
}

TEST_F(SweepInput, UnreadableFileIsAConfigErrorOnInputPath) {
  const fs::path sweep = write_sweep("s.toml", head + "T = 2\nd = 3\n");
  const std::string missing = config_issue_of([&] { store::load_sweep_with_input(sweep, {}); });
  EXPECT_EQ(missing.rfind("model.input_path: ", 0), 0u) << missing;
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
  std::ofstream(path("emb.h5")) << "not HDF5";
  const std::string not_hdf5 = config_issue_of([&] { store::load_sweep_with_input(sweep, {}); });
  EXPECT_EQ(not_hdf5.rfind("model.input_path: ", 0), 0u) << not_hdf5;
}

}  // namespace
