// A thin checked RAII layer over the HDF5 C API, in the spirit of HighFive (highfive-devs/highfive): one
// owning handle type, every call checked, HDF5's error stack turned into a StoreError whose text
// is the innermost HDF5 message, HDF5's own error printing silenced. Internal to rcsweep_store.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rcsweep::store::h5 {

/// Silence HDF5's automatic error printing for the calling thread (idempotent, cheap). Every
/// entry point of the store calls it before its first HDF5 call.
void init();

/// The current HDF5 error stack as one line ("innermost message (in H5Xfunc)"), then cleared.
/// Empty when the stack is empty.
std::string error_text();

/// Throw StoreError("<what>: <error_text()>") (or just <what> when the stack is empty).
[[noreturn]] void fail(std::string_view what);

/// Check an HDF5 return value: ids and herr_t are negative on failure.
inline hid_t check(hid_t id, std::string_view what) {
  if (id < 0) fail(what);
  return id;
}
inline herr_t check(herr_t rc, std::string_view what) {
  if (rc < 0) fail(what);
  return rc;
}
/// Check an htri_t (true/false/negative = error).
inline bool check_tri(htri_t rc, std::string_view what) {
  if (rc < 0) fail(what);
  return rc > 0;
}

/// Owns one HDF5 identifier (file, group, dataset, dataspace, datatype, attribute, property
/// list); releases it with H5Idec_ref. Move-only.
class Handle {
 public:
  Handle() = default;
  /// Take ownership of `id`; throws StoreError(what + HDF5 message) when `id` is invalid (< 0).
  Handle(hid_t id, std::string_view what) : id_(check(id, what)) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t id() const noexcept { return id_; }
  explicit operator bool() const noexcept { return id_ >= 0; }
  void reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// ---- files ---------------------------------------------------------------------------------

/// Create a file: H5F_ACC_EXCL (fails when it exists) or H5F_ACC_TRUNC when `truncate`.
/// Uses the 1.8+ file format (checksummed metadata).
Handle create_file(const std::filesystem::path& path, bool truncate);
/// Open an existing file. `locking` = false lets a reader look at a file a writer has open.
Handle open_file(const std::filesystem::path& path, bool read_write, bool locking = true);
/// H5Fflush of the whole file (does not fsync).
void flush(hid_t file);
/// H5Fflush, then fsync the file descriptor of the sec2 driver.
void fsync_file(hid_t file);

// ---- groups, links ---------------------------------------------------------------------------

Handle create_group(hid_t loc, const std::string& name);
Handle open_group(hid_t loc, const std::string& name);
bool link_exists(hid_t loc, const std::string& name);
/// Paths ("/a/b") of every dataset below the root of `file`, in H5Ovisit order (by name).
std::vector<std::string> dataset_paths(hid_t file);

/// A link that is not a hard link: its path ("/a/b"), its kind ("soft", "external" or
/// "user-defined") and where it points ("/x/y" for a soft link, "FILE:/x/y" for an external one).
struct OtherLink {
  std::string path, kind, target;
};
/// The first link below the root of `file`, visited recursively by name (H5Lvisit, which does not
/// follow soft or external links), that is not a hard link; nothing when every object of the file
/// is reached by hard links only.
std::optional<OtherLink> first_non_hard_link(hid_t file);
/// Why dataset `dset` keeps its values outside its own file ("external storage in FILE", "a
/// virtual dataset"), or "" when its values are in the file.
std::string storage_outside_file(hid_t dset);
/// Why the stored values of dataset `dset` do not fit its file, whose end is at byte `end` (the
/// EOA): a contiguous block or a chunk that runs past the end, or (unfiltered) holds another
/// number of bytes than its values need; "" when every allocated block fits. A bit flipped in
/// such metadata (HDF5 does not checksum all of it) would make writes fail halfway through.
std::string storage_mismatch(hid_t dset, haddr_t end);
/// The file's end of allocated space (H5Fget_eoa).
haddr_t end_of_allocation(hid_t file);

// ---- datatypes ---------------------------------------------------------------------------

/// Fixed-length string of `size` bytes, null-padded (numpy "S<size>"), ASCII.
Handle fixed_string_type(std::size_t size);
/// Variable-length UTF-8 string (h5py reads it as str).
Handle vlen_string_type();
/// int8 enumeration with the given (name, value) members, on a native or little-endian base.
Handle enum_int8_type(const std::vector<std::pair<std::string, std::int8_t>>& members, bool native);

/// A compound type described field by field; gives a packed type for the file and the same
/// layout on native atoms for memory (so a row is filled with memcpy at `offset(i)`).
class CompoundLayout {
 public:
  /// Add a field; `file_type` and `mem_type` must have the same size. Returns its offset.
  std::size_t add(std::string name, hid_t file_type, hid_t mem_type);
  std::size_t size() const noexcept { return size_; }
  std::size_t offset(std::size_t field) const { return fields_.at(field).offset; }
  Handle make(bool native) const;

 private:
  struct Field {
    std::string name;
    hid_t file_type, mem_type;  // not owned: the caller keeps them alive until make()
    std::size_t offset;
  };
  std::vector<Field> fields_;
  std::size_t size_ = 0;
};

// ---- dataspaces and datasets ------------------------------------------------------------

Handle simple_space(const std::vector<hsize_t>& dims);
Handle scalar_space();

struct DatasetOptions {
  std::vector<hsize_t> chunk;  ///< empty = contiguous
  const void* fill = nullptr;  ///< fill value (in `fill_type`), or nullptr for HDF5's default
  hid_t fill_type = H5I_INVALID_HID;
  /// All storage allocated (and filled) when the dataset is created; else (chunked only) each
  /// chunk when a value of it is first written, the others read as the fill value.
  bool allocate_early = true;
};

Handle create_dataset(hid_t loc, const std::string& name, hid_t file_type, const std::vector<hsize_t>& dims,
                      const DatasetOptions& options = {});
Handle open_dataset(hid_t loc, const std::string& name);
/// Current dimensions of a dataset.
std::vector<hsize_t> dataset_dims(hid_t dset);
void write_all(hid_t dset, hid_t mem_type, const void* buf);
void read_all(hid_t dset, hid_t mem_type, void* buf);

/// A run of consecutive rows [start, start + count) along dimension 0.
struct RowRun {
  hsize_t start = 0, count = 0;
};
/// Write the rows of `runs` (sorted, disjoint) of a 1-D, 2-D or 3-D dataset in one H5Dwrite: `buf`
/// holds the rows back to back in run order, each row being dims[1] x dims[2] elements (the
/// dimensions a dataset has, 1 for the others).
void write_rows(hid_t dset, hid_t mem_type, const std::vector<RowRun>& runs, const void* buf);

// ---- dimension scales (hdf5_hl) ---------------------------------------------------------

/// Make `dset` an HDF5 dimension scale named `name` (H5DSset_scale).
void make_scale(hid_t dset, const std::string& name);
/// Attach the scale `scale` to dimension `dim` of `dset` (H5DSattach_scale).
void attach_scale(hid_t dset, hid_t scale, unsigned dim);

// ---- attributes -----------------------------------------------------------------------------

bool has_attr(hid_t obj, const std::string& name);
/// Write (replacing any existing attribute of that name) a scalar attribute.
void set_attr(hid_t obj, const std::string& name, std::string_view value);  ///< vlen UTF-8
void set_attr_i32(hid_t obj, const std::string& name, std::int32_t value);
void set_attr_i64(hid_t obj, const std::string& name, std::int64_t value);
void set_attr_u64(hid_t obj, const std::string& name, std::uint64_t value);
/// Read a scalar string attribute (variable or fixed length). Throws when absent or not a string.
std::string get_attr_string(hid_t obj, const std::string& name);
/// Read a scalar string attribute of at most `max_bytes` bytes that is valid UTF-8. The
/// declared size of a fixed-length string is checked before it is read (a variable-length one
/// holds what the file holds). Throws StoreError "<where>attribute 'NAME' is missing", "... is
/// not a scalar", "... is not a string", "... is N bytes long, more than the M it may have" or
/// "... is not valid UTF-8" (`where`: "" for the root group, "/axes " for a group).
std::string get_attr_text(hid_t obj, const std::string& name, std::size_t max_bytes, const std::string& where = "");
/// Whether `text` is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
bool is_utf8(std::string_view text);
/// The values of a 1-D variable-length string dataset of `n` elements (a null string reads as "").
std::vector<std::string> read_strings(hid_t dset, std::size_t n);
/// Read a scalar integer attribute (any integer width) converted to int64 / uint64.
std::int64_t get_attr_i64(hid_t obj, const std::string& name);
std::uint64_t get_attr_u64(hid_t obj, const std::string& name);

/// HDF5 library version "1.10.8".
std::string library_version();

}  // namespace rcsweep::store::h5
