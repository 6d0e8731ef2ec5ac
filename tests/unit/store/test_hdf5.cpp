// The checked layer over the HDF5 C API (src/store/hdf5.cpp): failures become a StoreError naming
// what failed and HDF5's innermost message, with the error stack cleared; links that are not hard
// links, values kept outside the file and stored blocks that do not fit it are found; rows are
// written by runs; attributes read back whatever integer width or string kind the file holds.
#include <hdf5.h>

#include <cstdint>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "store/hdf5.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
namespace h5 = rcsweep::store::h5;
using test::H5Id;
using test::store_error_of;

namespace {

class Hdf5Layer : public test::StoreDirTest {
 protected:
  void SetUp() override {
    StoreDirTest::SetUp();
    h5::init();
    file_ = h5::create_file(path("f.h5"), /*truncate=*/false);
  }
  hid_t file() const { return file_.id(); }
  h5::Handle file_;
};

/// A dataset of `type` and shape `dims` made with `dcpl`, with the plain C API.
hid_t plain_dataset(hid_t loc, const char* name, hid_t type, const std::vector<hsize_t>& dims,
                    hid_t dcpl = H5P_DEFAULT) {
  H5Id space(dims.empty() ? H5Screate(H5S_SCALAR)
                          : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  return H5Dcreate2(loc, name, type, space.id, H5P_DEFAULT, dcpl, H5P_DEFAULT);
}

}  // namespace

TEST_F(Hdf5Layer, FailureNamesWhatAndTheInnermostMessageAndClearsTheStack) {
  const std::string msg = store_error_of([&] { h5::open_dataset(file(), "missing"); });
  EXPECT_EQ(msg.rfind("cannot open dataset missing: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(" (in H5Dopen2)"), std::string::npos) << msg;
  EXPECT_EQ(h5::error_text(), "");  // cleared
  EXPECT_EQ(store_error_of([&] { h5::check(hid_t{-1}, "no HDF5 error"); }), "no HDF5 error");
  EXPECT_EQ(store_error_of([&] { h5::check(herr_t{-1}, "again"); }), "again");
  EXPECT_EQ(store_error_of([&] { h5::check_tri(htri_t{-1}, "tri"); }), "tri");
  EXPECT_TRUE(h5::check_tri(htri_t{1}, "x"));
  EXPECT_FALSE(h5::check_tri(htri_t{0}, "x"));
  EXPECT_EQ(h5::check(hid_t{7}, "x"), 7);
  // error_text walks the stack once: the innermost message, then nothing
  EXPECT_LT(H5Gopen2(file(), "nope", H5P_DEFAULT), 0);
  const std::string text = h5::error_text();
  EXPECT_FALSE(text.empty());
  EXPECT_NE(text.find("(in H5Gopen2)"), std::string::npos) << text;
  EXPECT_EQ(h5::error_text(), "");
}

TEST_F(Hdf5Layer, HandleOwnsOneReferenceAndMoves) {
  h5::Handle g = h5::create_group(file(), "g");
  ASSERT_TRUE(g);
  const hid_t id = g.id();
  EXPECT_EQ(H5Iget_ref(id), 1);
  h5::Handle moved = std::move(g);
  EXPECT_EQ(moved.id(), id);
  EXPECT_FALSE(g);  // a moved-from handle owns nothing
  moved.reset();
  EXPECT_FALSE(moved);
  EXPECT_LE(H5Iis_valid(id), 0);  // released
  h5::error_text();
}

TEST_F(Hdf5Layer, CreateFileRefusesAnExistingFileUnlessTruncating) {
  const std::string msg = store_error_of([&] { h5::create_file(path("f.h5"), false); });
  EXPECT_EQ(msg.rfind("cannot create " + path("f.h5").string() + ": ", 0), 0u) << msg;
  EXPECT_NE(
      store_error_of([&] { h5::open_file(path("nope.h5"), false); }).find("cannot open " + path("nope.h5").string()),
      std::string::npos);
  { h5::Handle other = h5::create_file(path("g.h5"), false); }
  {
    h5::Handle g = h5::open_file(path("g.h5"), true);
    h5::create_group(g.id(), "x");
  }
  { h5::Handle g = h5::create_file(path("g.h5"), true); }  // truncated: empty again
  h5::Handle g = h5::open_file(path("g.h5"), false);
  EXPECT_FALSE(h5::link_exists(g.id(), "x"));
}

TEST_F(Hdf5Layer, GroupsLinksAndDatasetPaths) {
  EXPECT_TRUE(h5::dataset_paths(file()).empty());
  h5::Handle g = h5::create_group(file(), "g");
  h5::Handle gh = h5::create_group(g.id(), "h");
  h5::create_dataset(file(), "b", H5T_IEEE_F64LE, {2});
  h5::create_dataset(gh.id(), "c", H5T_STD_I32LE, {1, 2});
  h5::create_dataset(file(), "a", H5T_IEEE_F64LE, {3});
  EXPECT_EQ(h5::dataset_paths(file()), (std::vector<std::string>{"/a", "/b", "/g/h/c"}));
  EXPECT_TRUE(h5::link_exists(file(), "g/h/c"));
  EXPECT_TRUE(h5::link_exists(file(), "/g"));
  EXPECT_FALSE(h5::link_exists(file(), "g/x"));
  EXPECT_NE(store_error_of([&] { h5::create_group(file(), "g"); }).find("cannot create group g"), std::string::npos);
  EXPECT_NE(store_error_of([&] { h5::open_group(file(), "a/b"); }).find("cannot open group a/b"), std::string::npos);
  EXPECT_EQ(h5::dataset_dims(h5::open_dataset(file(), "/g/h/c").id()), (std::vector<hsize_t>{1, 2}));
  H5Id scalar(plain_dataset(file(), "s", H5T_NATIVE_INT, {}));
  EXPECT_TRUE(h5::dataset_dims(scalar.id).empty());
}

TEST_F(Hdf5Layer, FirstNonHardLinkIsFoundByName) {
  h5::Handle g = h5::create_group(file(), "g");
  h5::create_dataset(g.id(), "x", H5T_IEEE_F64LE, {1});
  EXPECT_FALSE(h5::first_non_hard_link(file()).has_value());
  ASSERT_GE(H5Lcreate_soft("/g/x", g.id(), "soft", H5P_DEFAULT, H5P_DEFAULT), 0);
  ASSERT_GE(H5Lcreate_external("other.h5", "/victim", file(), "z_external", H5P_DEFAULT, H5P_DEFAULT), 0);
  auto link = h5::first_non_hard_link(file());
  ASSERT_TRUE(link.has_value());
  EXPECT_EQ(link->path, "/g/soft");
  EXPECT_EQ(link->kind, "soft");
  EXPECT_EQ(link->target, "/g/x");
  ASSERT_GE(H5Ldelete(g.id(), "soft", H5P_DEFAULT), 0);
  link = h5::first_non_hard_link(file());
  ASSERT_TRUE(link.has_value());
  EXPECT_EQ(link->path, "/z_external");
  EXPECT_EQ(link->kind, "external");
  EXPECT_EQ(link->target, "other.h5:/victim");
}

TEST_F(Hdf5Layer, StorageOutsideTheFileIsNamed) {
  h5::Handle in_file = h5::create_dataset(file(), "in", H5T_IEEE_F64LE, {4});
  EXPECT_EQ(h5::storage_outside_file(in_file.id()), "");
  H5Id chunked_dcpl(H5Pcreate(H5P_DATASET_CREATE));
  const hsize_t chunk = 2;
  H5Pset_chunk(chunked_dcpl.id, 1, &chunk);
  H5Id chunked(plain_dataset(file(), "chunked", H5T_IEEE_F64LE, {4}, chunked_dcpl.id));
  EXPECT_EQ(h5::storage_outside_file(chunked.id), "");

  H5Id ext_dcpl(H5Pcreate(H5P_DATASET_CREATE));
  ASSERT_GE(H5Pset_external(ext_dcpl.id, "values.bin", 0, 32), 0);
  H5Id external(plain_dataset(file(), "external", H5T_IEEE_F64LE, {4}, ext_dcpl.id));
  ASSERT_GE(external.id, 0);
  EXPECT_EQ(h5::storage_outside_file(external.id), "external storage in values.bin");

  H5Id vds_dcpl(H5Pcreate(H5P_DATASET_CREATE));
  const hsize_t n = 4;
  H5Id src_space(H5Screate_simple(1, &n, nullptr));
  H5Id vspace(H5Screate_simple(1, &n, nullptr));
  ASSERT_GE(H5Pset_virtual(vds_dcpl.id, vspace.id, "f.h5", "/in", src_space.id), 0);
  H5Id virt(plain_dataset(file(), "virtual", H5T_IEEE_F64LE, {4}, vds_dcpl.id));
  ASSERT_GE(virt.id, 0);
  EXPECT_EQ(h5::storage_outside_file(virt.id), "a virtual dataset (its values are in other datasets)");
}

TEST_F(Hdf5Layer, StorageMismatchFindsBlocksPastTheEnd) {
  const double fill = 0.0;
  h5::DatasetOptions chunked;
  chunked.chunk = {2};
  chunked.fill = &fill;
  chunked.fill_type = H5T_NATIVE_DOUBLE;
  h5::Handle contiguous = h5::create_dataset(file(), "contiguous", H5T_IEEE_F64LE, {5});
  h5::Handle chunks = h5::create_dataset(file(), "chunks", H5T_IEEE_F64LE, {5}, chunked);
  h5::flush(file());
  const haddr_t end = h5::end_of_allocation(file());
  EXPECT_GT(end, 0u);
  EXPECT_EQ(h5::storage_mismatch(contiguous.id(), end), "");
  EXPECT_EQ(h5::storage_mismatch(chunks.id(), end), "");
  const haddr_t at = H5Dget_offset(contiguous.id());
  const std::string contiguous_past = h5::storage_mismatch(contiguous.id(), at + 39);
  EXPECT_EQ(contiguous_past, "its values, 40 bytes at byte " + std::to_string(at) + ", run past the end of the file");
  const std::string chunk_past = h5::storage_mismatch(chunks.id(), 0);
  EXPECT_EQ(chunk_past.rfind("its chunk at (0), 16 bytes at byte ", 0), 0u) << chunk_past;
  EXPECT_NE(chunk_past.find(", runs past the end of the file"), std::string::npos) << chunk_past;
  // a contiguous dataset whose storage is not allocated yet has nothing to check
  H5Id late(plain_dataset(file(), "late", H5T_IEEE_F64LE, {5}));
  EXPECT_EQ(h5::storage_mismatch(late.id, 0), "");
  EXPECT_EQ(h5::error_text(), "");  // nothing left on the stack
}

TEST_F(Hdf5Layer, WriteRowsWritesEveryRunInOneCall) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  h5::DatasetOptions opt;
  opt.fill = &nan;
  opt.fill_type = H5T_NATIVE_DOUBLE;
  h5::Handle d2 = h5::create_dataset(file(), "d2", H5T_IEEE_F64LE, {6, 2}, opt);
  // rows 1, 2 and 5, back to back; a run of no rows is skipped
  const std::vector<double> rows = {10, 11, 20, 21, 50, 51};
  h5::write_rows(d2.id(), H5T_NATIVE_DOUBLE, {{1, 2}, {4, 0}, {5, 1}}, rows.data());
  std::vector<double> all(12);
  h5::read_all(d2.id(), H5T_NATIVE_DOUBLE, all.data());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::size_t row = i / 2;
    if (row == 1 || row == 2 || row == 5)
      EXPECT_EQ(all[i], static_cast<double>(row * 10 + i % 2)) << i;
    else
      EXPECT_TRUE(std::isnan(all[i])) << i;
  }
  h5::Handle d1 = h5::create_dataset(file(), "d1", H5T_STD_I32LE, {4});
  const std::vector<std::int32_t> one = {7, 9};
  h5::write_rows(d1.id(), H5T_NATIVE_INT32, {{0, 1}, {3, 1}}, one.data());
  std::vector<std::int32_t> back1(4, -1);
  h5::read_all(d1.id(), H5T_NATIVE_INT32, back1.data());
  EXPECT_EQ(back1, (std::vector<std::int32_t>{7, 0, 0, 9}));
  h5::Handle d3 = h5::create_dataset(file(), "d3", H5T_STD_I32LE, {3, 2, 2});
  const std::vector<std::int32_t> three = {1, 2, 3, 4};
  h5::write_rows(d3.id(), H5T_NATIVE_INT32, {{2, 1}}, three.data());
  std::vector<std::int32_t> back3(12, -1);
  h5::read_all(d3.id(), H5T_NATIVE_INT32, back3.data());
  EXPECT_EQ(back3, (std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}));
  // nothing to write: no runs, or runs of no rows
  h5::write_rows(d1.id(), H5T_NATIVE_INT32, {}, nullptr);
  h5::write_rows(d1.id(), H5T_NATIVE_INT32, {{2, 0}}, nullptr);
  h5::read_all(d1.id(), H5T_NATIVE_INT32, back1.data());
  EXPECT_EQ(back1, (std::vector<std::int32_t>{7, 0, 0, 9}));
  h5::Handle d4 = h5::create_dataset(file(), "d4", H5T_STD_I32LE, {1, 1, 1, 1});
  EXPECT_EQ(store_error_of([&] {
              h5::write_rows(d4.id(), H5T_NATIVE_INT32, {{0, 1}}, three.data());
            }),
            "write_rows: dataset must be 1-D, 2-D or 3-D");
}

TEST_F(Hdf5Layer, AttributesReadBackAnyIntegerWidthAndStringKind) {
  h5::set_attr(file(), "text", "first");
  h5::set_attr(file(), "text", "second, replacing it");
  EXPECT_EQ(h5::get_attr_string(file(), "text"), "second, replacing it");
  h5::set_attr(file(), "empty", "");
  EXPECT_EQ(h5::get_attr_string(file(), "empty"), "");
  h5::set_attr(file(), "utf8", "λ = 0.5");
  EXPECT_EQ(h5::get_attr_string(file(), "utf8"), "λ = 0.5");
  h5::set_attr_i32(file(), "i32", -5);
  h5::set_attr_i64(file(), "i64", std::numeric_limits<std::int64_t>::min());
  h5::set_attr_u64(file(), "u64", std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(h5::get_attr_i64(file(), "i32"), -5);
  EXPECT_EQ(h5::get_attr_i64(file(), "i64"), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(h5::get_attr_u64(file(), "u64"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_TRUE(h5::has_attr(file(), "i32"));
  EXPECT_FALSE(h5::has_attr(file(), "nope"));

  // written by another tool: a fixed-length string, a big-endian int16, an array
  const auto plain_attr = [&](const char* name, hid_t type, const std::vector<hsize_t>& dims, const void* value) {
    H5Id space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    H5Id a(H5Acreate2(file(), name, type, space.id, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(a.id, type, value), 0) << name;
  };
  H5Id fixed(H5Tcopy(H5T_C_S1));
  H5Tset_size(fixed.id, 8);
  H5Tset_strpad(fixed.id, H5T_STR_NULLPAD);
  const char abc[8] = {'a', 'b', 'c', 0, 0, 0, 0, 0};
  plain_attr("fixed", fixed.id, {}, abc);
  EXPECT_EQ(h5::get_attr_string(file(), "fixed"), "abc");
  const std::int16_t be = -300;
  H5Id be_type(H5Tcopy(H5T_STD_I16BE));
  {
    H5Id space(H5Screate(H5S_SCALAR));
    H5Id a(H5Acreate2(file(), "be16", be_type.id, space.id, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(a.id, H5T_NATIVE_INT16, &be), 0);
  }
  EXPECT_EQ(h5::get_attr_i64(file(), "be16"), -300);
  const std::int64_t pair[2] = {1, 2};
  plain_attr("pair", H5T_NATIVE_INT64, {2}, pair);

  EXPECT_EQ(store_error_of([&] { h5::get_attr_string(file(), "nope"); }), "attribute 'nope' is missing");
  EXPECT_EQ(store_error_of([&] { h5::get_attr_i64(file(), "nope"); }), "attribute 'nope' is missing");
  EXPECT_EQ(store_error_of([&] { h5::get_attr_string(file(), "i32"); }), "attribute 'i32' is not a string");
  EXPECT_EQ(store_error_of([&] { h5::get_attr_i64(file(), "text"); }), "attribute 'text' is not an integer");
  EXPECT_EQ(store_error_of([&] { h5::get_attr_u64(file(), "fixed"); }), "attribute 'fixed' is not an integer");
  EXPECT_EQ(store_error_of([&] { h5::get_attr_i64(file(), "pair"); }), "attribute 'pair' is not a scalar");
}

TEST_F(Hdf5Layer, Datatypes) {
  const h5::Handle fixed = h5::fixed_string_type(16);
  EXPECT_EQ(H5Tget_size(fixed.id()), 16u);
  EXPECT_EQ(H5Tget_strpad(fixed.id()), H5T_STR_NULLPAD);
  EXPECT_EQ(H5Tget_cset(fixed.id()), H5T_CSET_ASCII);
  EXPECT_EQ(H5Tis_variable_str(fixed.id()), 0);
  const h5::Handle vlen = h5::vlen_string_type();
  EXPECT_GT(H5Tis_variable_str(vlen.id()), 0);
  EXPECT_EQ(H5Tget_cset(vlen.id()), H5T_CSET_UTF8);
  for (const bool native : {true, false}) {
    const h5::Handle e = h5::enum_int8_type({{"pending", 0}, {"done", 1}, {"vanished", 5}}, native);
    EXPECT_EQ(H5Tget_nmembers(e.id()), 3);
    char name[16] = {};
    const std::int8_t five = 5;
    ASSERT_GE(H5Tenum_nameof(e.id(), &five, name, sizeof name), 0);
    EXPECT_STREQ(name, "vanished");
    std::int8_t value = -1;
    ASSERT_GE(H5Tenum_valueof(e.id(), "done", &value), 0);
    EXPECT_EQ(value, 1);
    H5Id base(H5Tget_super(e.id()));
    EXPECT_GT(H5Tequal(base.id, native ? H5T_NATIVE_INT8 : H5T_STD_I8LE), 0);
  }
}

TEST_F(Hdf5Layer, CompoundLayoutPacksFieldsInOrder) {
  h5::CompoundLayout layout;
  EXPECT_EQ(layout.add("id", H5T_STD_U64LE, H5T_NATIVE_UINT64), 0u);
  EXPECT_EQ(layout.add("flag", H5T_STD_I8LE, H5T_NATIVE_INT8), 8u);
  EXPECT_EQ(layout.add("x", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE), 9u);  // packed: no padding
  EXPECT_EQ(layout.size(), 17u);
  EXPECT_EQ(layout.offset(2), 9u);
  EXPECT_THROW(static_cast<void>(layout.offset(3)), std::out_of_range);
  EXPECT_EQ(store_error_of([&] { layout.add("bad", H5T_STD_I32LE, H5T_NATIVE_INT64); }),
            "compound field bad: file and memory types differ in size");
  EXPECT_EQ(layout.size(), 17u);  // the refused field is not added
  for (const bool native : {true, false}) {
    const h5::Handle t = layout.make(native);
    EXPECT_EQ(H5Tget_size(t.id()), 17u);
    ASSERT_EQ(H5Tget_nmembers(t.id()), 3);
    EXPECT_EQ(H5Tget_member_offset(t.id(), 2), 9u);
    H5Id x(H5Tget_member_type(t.id(), 2));
    EXPECT_GT(H5Tequal(x.id, native ? H5T_NATIVE_DOUBLE : H5T_IEEE_F64LE), 0);
  }
  // a row filled at the offsets reads back field by field
  h5::Handle d = h5::create_dataset(file(), "rows", layout.make(false).id(), {1});
  unsigned char row[17] = {};
  const std::uint64_t id = 42;
  const std::int8_t flag = -1;
  const double x = 0.375;
  std::memcpy(row + layout.offset(0), &id, 8);
  std::memcpy(row + layout.offset(1), &flag, 1);
  std::memcpy(row + layout.offset(2), &x, 8);
  h5::write_all(d.id(), layout.make(true).id(), row);
  H5Id one(H5Tcreate(H5T_COMPOUND, sizeof(double)));
  H5Tinsert(one.id, "x", 0, H5T_NATIVE_DOUBLE);
  double back = 0;
  h5::read_all(d.id(), one.id, &back);
  EXPECT_EQ(back, 0.375);
}
