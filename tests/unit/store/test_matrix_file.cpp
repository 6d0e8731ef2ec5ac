// Reading the input matrix of a sweep from an HDF5 file (src/store/matrix_file.cpp): the values of a
// 2-D numeric dataset as stored, row-major, converted to float64; and every refusal of
// store::read_matrix with its message (missing file or dataset, not HDF5, not a dataset, wrong
// rank, empty, not numeric, non-finite values). The files are written with the plain HDF5 C API.
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/matrix.hpp"
#include "store/matrix_file.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using test::H5Id;
using test::store_error_of;

namespace {

class MatrixFile : public test::StoreDirTest {
 protected:
  /// A new HDF5 file `name` (replacing any), its path.
  fs::path new_file(const std::string& name) {
    const fs::path p = path(name);
    H5Id f(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    EXPECT_GE(f.id, 0) << p;
    return p;
  }
  /// Dataset `name` of the file `p` with file type `file_type`, shape `dims` and the values of
  /// `data` (of memory type `mem_type`; nullptr: nothing written).
  void add_dataset(const fs::path& p, const char* name, hid_t file_type, const std::vector<hsize_t>& dims,
                   hid_t mem_type = -1, const void* data = nullptr) {
    H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(f.id, 0) << p;
    H5Id lcpl(H5Pcreate(H5P_LINK_CREATE));
    H5Pset_create_intermediate_group(lcpl.id, 1);
    H5Id space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    H5Id d(H5Dcreate2(f.id, name, file_type, space.id, lcpl.id, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(d.id, 0) << name;
    if (data) {
      ASSERT_GE(H5Dwrite(d.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0) << name;
    }
  }
  /// "input file 'P'" as the messages name the file.
  std::string where(const fs::path& p) const { return "input file '" + p.string() + "'"; }
};

}  // namespace

TEST_F(MatrixFile, Float64DatasetReadsBackRowMajorBitwise) {
  const fs::path p = new_file("x.h5");
  const std::vector<double> v = {1.0 / 3.0, -2.5, 1e-300, 4.0, -0.0, 6.125};
  add_dataset(p, "X", H5T_IEEE_F64LE, {2, 3}, H5T_NATIVE_DOUBLE, v.data());
  const Matrix X = store::read_matrix(p, "X");
  ASSERT_EQ(X.rows(), 2u);
  ASSERT_EQ(X.cols(), 3u);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_TRUE(test::same_bits(X(i, j), v[i * 3 + j])) << i << " " << j;
  // a leading slash names the same dataset
  EXPECT_TRUE(test::same_bits(store::read_matrix(p, "/X")(1, 2), 6.125));
}

TEST_F(MatrixFile, IntegerAndFloat32AndBigEndianDatasetsAreConverted) {
  const fs::path p = new_file("conv.h5");
  const std::vector<std::int32_t> ints = {-3, 0, 7, 2147483647};
  add_dataset(p, "ints", H5T_STD_I32LE, {2, 2}, H5T_NATIVE_INT32, ints.data());
  const std::vector<float> floats = {0.5f, -1.25f, 3.0f};
  add_dataset(p, "floats", H5T_IEEE_F32LE, {3, 1}, H5T_NATIVE_FLOAT, floats.data());
  const std::vector<double> be = {1.5, -2.0};
  add_dataset(p, "be", H5T_IEEE_F64BE, {1, 2}, H5T_NATIVE_DOUBLE, be.data());
  const std::vector<std::uint8_t> bytes = {0, 255};
  add_dataset(p, "bytes", H5T_STD_U8LE, {2, 1}, H5T_NATIVE_UINT8, bytes.data());

  const Matrix I = store::read_matrix(p, "ints");
  ASSERT_EQ(I.rows(), 2u);
  ASSERT_EQ(I.cols(), 2u);
  EXPECT_EQ(I(0, 0), -3.0);
  EXPECT_EQ(I(0, 1), 0.0);
  EXPECT_EQ(I(1, 0), 7.0);
  EXPECT_EQ(I(1, 1), 2147483647.0);
  const Matrix F = store::read_matrix(p, "floats");
  ASSERT_EQ(F.rows(), 3u);
  ASSERT_EQ(F.cols(), 1u);
  EXPECT_EQ(F(0, 0), 0.5);
  EXPECT_EQ(F(1, 0), -1.25);
  EXPECT_EQ(F(2, 0), 3.0);
  const Matrix B = store::read_matrix(p, "be");
  EXPECT_EQ(B(0, 0), 1.5);
  EXPECT_EQ(B(0, 1), -2.0);
  const Matrix U = store::read_matrix(p, "bytes");
  EXPECT_EQ(U(0, 0), 0.0);
  EXPECT_EQ(U(1, 0), 255.0);
}

TEST_F(MatrixFile, DatasetInNestedGroupsIsFound) {
  const fs::path p = new_file("nested.h5");
  const std::vector<double> v = {1.0, 2.0};
  add_dataset(p, "inputs/run1/X", H5T_IEEE_F64LE, {1, 2}, H5T_NATIVE_DOUBLE, v.data());
  for (const char* name : {"inputs/run1/X", "/inputs/run1/X"}) {
    const Matrix X = store::read_matrix(p, name);
    ASSERT_EQ(X.rows(), 1u) << name;
    ASSERT_EQ(X.cols(), 2u) << name;
    EXPECT_EQ(X(0, 1), 2.0) << name;
  }
}

TEST_F(MatrixFile, MissingFileDirectoryAndNonHdf5AreRefused) {
  EXPECT_EQ(store_error_of([&] { store::read_matrix(path("nope.h5"), "X"); }),
            where(path("nope.h5")) + " does not exist");
  fs::create_directories(path("dir.h5"));
  EXPECT_EQ(store_error_of([&] { store::read_matrix(path("dir.h5"), "X"); }),
            where(path("dir.h5")) + " is not a regular file");
  {
    std::ofstream out(path("text.h5"));
    out << "1 2 3\n4 5 6\n";
  }
  EXPECT_EQ(store_error_of([&] { store::read_matrix(path("text.h5"), "X"); }),
            where(path("text.h5")) + " is not an HDF5 file");
  { std::ofstream out(path("empty.h5")); }
  EXPECT_EQ(store_error_of([&] { store::read_matrix(path("empty.h5"), "X"); }),
            where(path("empty.h5")) + " is not an HDF5 file");
}

TEST_F(MatrixFile, NoDatasetNameIsRefused) {
  const fs::path p = new_file("x.h5");
  add_dataset(p, "X", H5T_IEEE_F64LE, {1, 1});
  for (const char* name : {"", "/"})
    EXPECT_EQ(store_error_of([&] { store::read_matrix(p, name); }), "no dataset name given for " + where(p))
        << "'" << name << "'";
}

TEST_F(MatrixFile, MissingDatasetNamesTheFirstMissingGroup) {
  const fs::path p = new_file("x.h5");
  add_dataset(p, "g/X", H5T_IEEE_F64LE, {1, 1});
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "Y"); }), where(p) + " has no dataset 'Y'");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "/Y"); }), where(p) + " has no dataset '/Y'");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "g/Y"); }), where(p) + " has no dataset 'g/Y'");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "h/X"); }), where(p) + " has no dataset 'h/X' (no 'h')");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "/h/X"); }), where(p) + " has no dataset '/h/X' (no '/h')");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "g/h/X"); }), where(p) + " has no dataset 'g/h/X' (no 'g/h')");
}

TEST_F(MatrixFile, GroupIsNotADataset) {
  const fs::path p = new_file("x.h5");
  add_dataset(p, "g/X", H5T_IEEE_F64LE, {1, 1});
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "g"); }),
            "'g' in " + where(p) + " is not a dataset (a group or a named type)");
}

TEST_F(MatrixFile, WrongRankIsRefusedWithItsShape) {
  const fs::path p = new_file("x.h5");
  add_dataset(p, "vector", H5T_IEEE_F64LE, {5});
  add_dataset(p, "cube", H5T_IEEE_F64LE, {2, 3, 4});
  add_dataset(p, "scalar", H5T_IEEE_F64LE, {});
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "vector"); }),
            "dataset 'vector' in " + where(p) + " has rank 1 (5), expected a 2-D T x d matrix");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "cube"); }),
            "dataset 'cube' in " + where(p) + " has rank 3 (2 x 3 x 4), expected a 2-D T x d matrix");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "scalar"); }),
            "dataset 'scalar' in " + where(p) + " has rank 0 (a scalar), expected a 2-D T x d matrix");
}

TEST_F(MatrixFile, EmptyDatasetIsRefused) {
  const fs::path p = new_file("x.h5");
  add_dataset(p, "no_rows", H5T_IEEE_F64LE, {0, 3});
  add_dataset(p, "no_cols", H5T_IEEE_F64LE, {4, 0});
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "no_rows"); }),
            "dataset 'no_rows' in " + where(p) + " is empty (0 x 3)");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "no_cols"); }),
            "dataset 'no_cols' in " + where(p) + " is empty (4 x 0)");
}

TEST_F(MatrixFile, NonNumericDatasetIsRefused) {
  const fs::path p = new_file("x.h5");
  H5Id str(H5Tcopy(H5T_C_S1));
  H5Tset_size(str.id, 8);
  add_dataset(p, "strings", str.id, {2, 2});
  H5Id compound(H5Tcreate(H5T_COMPOUND, 16));
  H5Tinsert(compound.id, "a", 0, H5T_IEEE_F64LE);
  H5Tinsert(compound.id, "b", 8, H5T_IEEE_F64LE);
  add_dataset(p, "pairs", compound.id, {2, 2});
  for (const char* name : {"strings", "pairs"})
    EXPECT_EQ(store_error_of([&] { store::read_matrix(p, name); }),
              "dataset '" + std::string(name) + "' in " + where(p) + " is not numeric (expected float64)");
}

TEST_F(MatrixFile, NonFiniteValueIsRefusedWithItsPlace) {
  const fs::path p = new_file("x.h5");
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> with_nan = {1.0, 2.0, 3.0, 4.0, 5.0, std::numeric_limits<double>::quiet_NaN()};
  const std::vector<double> with_inf = {1.0, -inf, 3.0, 4.0, 5.0, 6.0};
  add_dataset(p, "nan", H5T_IEEE_F64LE, {2, 3}, H5T_NATIVE_DOUBLE, with_nan.data());
  add_dataset(p, "inf", H5T_IEEE_F64LE, {3, 2}, H5T_NATIVE_DOUBLE, with_inf.data());
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "nan"); }),
            "dataset 'nan' in " + where(p) + " has a non-finite value at [1, 2]");
  EXPECT_EQ(store_error_of([&] { store::read_matrix(p, "inf"); }),
            "dataset 'inf' in " + where(p) + " has a non-finite value at [0, 1]");
}
