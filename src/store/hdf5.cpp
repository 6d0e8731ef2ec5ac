#include "store/hdf5.hpp"

#include <H5DSpublic.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "base/error.hpp"

namespace rcsweep::store::h5 {

void init() {
  // HDF5 prints its error stack to stderr by default; we turn it into exceptions instead. In a
  // thread-safe HDF5 build (Debian's is) the setting is per thread, and the store may be used
  // from a writer thread, so every thread silences it once.
  // No library clean-up at exit: every handle is closed by its owner, and after a failed write
  // (a full disk) HDF5's own clean-up would try to flush the damaged state again (and crashed
  // doing so); the file keeps what the last successful flush wrote.
  static std::once_flag no_atexit;
  std::call_once(no_atexit, [] { H5dont_atexit(); });
  thread_local bool silenced = false;
  if (!silenced) {
    H5open();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

namespace {
struct StackText {
  std::string innermost, outer_func;
  bool any = false;
};

// H5E_WALK_UPWARD starts at the innermost entry (where the error was detected).
herr_t walk_cb(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<StackText*>(data);
  if (n == 0) {
    out->innermost = err->desc ? err->desc : "";
    out->any = true;
  }
  out->outer_func = err->func_name ? err->func_name : "";
  return 0;
}
}  // namespace

std::string error_text() {
  StackText st;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &st);
  H5Eclear2(H5E_DEFAULT);
  if (!st.any) return {};
  std::string text = st.innermost;
  if (!st.outer_func.empty()) text += " (in " + st.outer_func + ")";
  return text;
}

void fail(std::string_view what) {
  const std::string stack = error_text();
  if (stack.empty()) throw StoreError(std::string(what));
  throw StoreError(std::string(what) + ": " + stack);
}

void Handle::reset() noexcept {
  if (id_ >= 0) {
    H5Idec_ref(id_);
    id_ = H5I_INVALID_HID;
  }
}

// ---- files ---------------------------------------------------------------------------------

namespace {
Handle file_access(bool locking) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate(file access)");
  // 1.8+ format: object headers and superblock carry checksums, so damage is detected on read.
  check(H5Pset_libver_bounds(fapl.id(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), "H5Pset_libver_bounds");
  // ignore_when_disabled: file systems without flock (some Lustre/NFS mounts) still work.
  check(H5Pset_file_locking(fapl.id(), locking, true), "H5Pset_file_locking");
  return fapl;
}
}  // namespace

Handle create_file(const std::filesystem::path& path, bool truncate) {
  Handle fapl = file_access(true);
  return Handle(H5Fcreate(path.c_str(), truncate ? H5F_ACC_TRUNC : H5F_ACC_EXCL, H5P_DEFAULT, fapl.id()),
                "cannot create " + path.string());
}

Handle open_file(const std::filesystem::path& path, bool read_write, bool locking) {
  Handle fapl = file_access(locking);
  return Handle(H5Fopen(path.c_str(), read_write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.id()),
                "cannot open " + path.string());
}

void flush(hid_t file) { check(H5Fflush(file, H5F_SCOPE_GLOBAL), "H5Fflush"); }

void fsync_file(hid_t file) {
  flush(file);
  Handle fapl(H5Fget_access_plist(file), "H5Fget_access_plist");
  if (H5Pget_driver(fapl.id()) != H5FD_SEC2) return;  // only the POSIX driver has a descriptor
  void* handle = nullptr;
  check(H5Fget_vfd_handle(file, fapl.id(), &handle), "H5Fget_vfd_handle");
  const int fd = *static_cast<int*>(handle);
  if (::fsync(fd) != 0) throw StoreError(std::string("fsync failed: ") + std::strerror(errno));
}

// ---- groups, links ---------------------------------------------------------------------------

Handle create_group(hid_t loc, const std::string& name) {
  return Handle(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "cannot create group " + name);
}

Handle open_group(hid_t loc, const std::string& name) {
  return Handle(H5Gopen2(loc, name.c_str(), H5P_DEFAULT), "cannot open group " + name);
}

bool link_exists(hid_t loc, const std::string& name) {
  return check_tri(H5Lexists(loc, name.c_str(), H5P_DEFAULT), "H5Lexists " + name);
}

namespace {
herr_t visit_cb(hid_t, const char* name, const H5O_info_t* info, void* data) {
  if (info->type == H5O_TYPE_DATASET) {
    try {
      static_cast<std::vector<std::string>*>(data)->push_back(std::string("/") + name);
    } catch (...) {
      return -1;  // never let an exception cross the C library
    }
  }
  return 0;
}
}  // namespace

std::vector<std::string> dataset_paths(hid_t file) {
  std::vector<std::string> out;
  check(H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit_cb, &out, H5O_INFO_BASIC), "H5Ovisit");
  return out;
}

namespace {
herr_t link_cb(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  if (info->type == H5L_TYPE_HARD) return 0;
  try {
    OtherLink link{std::string("/") + name, "user-defined", ""};
    if (info->type == H5L_TYPE_SOFT || info->type == H5L_TYPE_EXTERNAL) {
      std::vector<char> value(info->u.val_size + 1, '\0');
      if (H5Lget_val(group, name, value.data(), info->u.val_size, H5P_DEFAULT) < 0) return -1;
      if (info->type == H5L_TYPE_SOFT) {
        link.kind = "soft";
        link.target.assign(value.data(), strnlen(value.data(), info->u.val_size));
      } else {
        link.kind = "external";
        const char* file_name = nullptr;
        const char* object = nullptr;
        if (H5Lunpack_elink_val(value.data(), info->u.val_size, nullptr, &file_name, &object) < 0) return -1;
        link.target = std::string(file_name ? file_name : "?") + ":" + (object ? object : "?");
      }
    }
    *static_cast<std::optional<OtherLink>*>(data) = std::move(link);
  } catch (...) {
    return -1;  // never let an exception cross the C library
  }
  return 1;  // found: stop the walk
}
}  // namespace

std::optional<OtherLink> first_non_hard_link(hid_t file) {
  std::optional<OtherLink> found;
  check(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, link_cb, &found), "H5Lvisit");
  return found;
}

std::string storage_outside_file(hid_t dset) {
  Handle dcpl(H5Dget_create_plist(dset), "H5Dget_create_plist");
  const H5D_layout_t layout = H5Pget_layout(dcpl.id());
  if (layout < 0) fail("H5Pget_layout");
  if (layout == H5D_VIRTUAL) return "a virtual dataset (its values are in other datasets)";
  const int external = H5Pget_external_count(dcpl.id());
  if (external < 0) fail("H5Pget_external_count");
  if (external > 0) {
    char name[256] = {};
    off_t offset = 0;
    hsize_t size = 0;
    check(H5Pget_external(dcpl.id(), 0, sizeof name, name, &offset, &size), "H5Pget_external");
    return "external storage in " + std::string(name);
  }
  return "";
}

haddr_t end_of_allocation(hid_t file) {
  haddr_t eoa = 0;
  check(H5Fget_eoa(file, &eoa), "H5Fget_eoa");
  return eoa;
}

std::string storage_mismatch(hid_t dset, haddr_t end) {
  Handle dcpl(H5Dget_create_plist(dset), "H5Dget_create_plist");
  Handle type(H5Dget_type(dset), "H5Dget_type");
  const std::size_t type_size = H5Tget_size(type.id());
  if (type_size == 0) fail("H5Tget_size");
  // Variable-length values are stored by reference (their file size is not the memory size).
  const bool fixed_size = H5Tdetect_class(type.id(), H5T_VLEN) == 0 && H5Tis_variable_str(type.id()) == 0 &&
                          H5Tdetect_class(type.id(), H5T_REFERENCE) == 0;
  error_text();
  const std::vector<hsize_t> dims = dataset_dims(dset);
  const auto past_end = [&](haddr_t addr, hsize_t bytes) { return addr > end || bytes > end - addr; };
  const auto where = [](haddr_t addr, hsize_t bytes) {
    return std::to_string(bytes) + " bytes at byte " + std::to_string(addr);
  };
  const H5D_layout_t layout = H5Pget_layout(dcpl.id());
  if (layout == H5D_CONTIGUOUS) {
    const haddr_t addr = H5Dget_offset(dset);
    error_text();  // HADDR_UNDEF (not allocated) leaves an error on the stack
    if (addr == HADDR_UNDEF) return "";
    hsize_t need = type_size;
    for (hsize_t d : dims) need *= d;
    const hsize_t have = H5Dget_storage_size(dset);
    if (fixed_size && have != need) return "its values take " + where(addr, have) + ", not " + std::to_string(need);
    if (past_end(addr, have)) return "its values, " + where(addr, have) + ", run past the end of the file";
    return "";
  }
  if (layout != H5D_CHUNKED) return "";
  std::vector<hsize_t> chunk(dims.size());
  if (dims.empty() ||
      H5Pget_chunk(dcpl.id(), static_cast<int>(dims.size()), chunk.data()) != static_cast<int>(dims.size()))
    fail("H5Pget_chunk");
  const int filters = H5Pget_nfilters(dcpl.id());
  if (filters < 0) fail("H5Pget_nfilters");
  hsize_t chunk_bytes = type_size, n_chunks = 1;
  std::vector<hsize_t> per_dim(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (chunk[i] == 0) return "a chunk dimension is 0";
    chunk_bytes *= chunk[i];
    per_dim[i] = (dims[i] + chunk[i] - 1) / chunk[i];
    if (per_dim[i] == 0) return "";  // no values, no chunks
    if (per_dim[i] > (hsize_t{1} << 26) / n_chunks) return "it has more chunks than a store makes";
    n_chunks *= per_dim[i];
  }
  std::vector<hsize_t> index(dims.size(), 0), offset(dims.size());
  for (hsize_t k = 0; k < n_chunks; ++k) {
    for (std::size_t i = 0; i < dims.size(); ++i) offset[i] = index[i] * chunk[i];
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    check(H5Dget_chunk_info_by_coord(dset, offset.data(), &mask, &addr, &size), "H5Dget_chunk_info_by_coord");
    if (addr != HADDR_UNDEF) {
      std::string at = "(";
      for (std::size_t i = 0; i < offset.size(); ++i) at += (i ? ", " : "") + std::to_string(offset[i]);
      at += ")";
      if (fixed_size && filters == 0 && size != chunk_bytes)
        return "its chunk at " + at + " takes " + where(addr, size) + ", not " + std::to_string(chunk_bytes);
      if (past_end(addr, size))
        return "its chunk at " + at + ", " + where(addr, size) + ", runs past the end of the file";
    }
    for (std::size_t i = dims.size(); i-- > 0;) {  // the next chunk, last dimension fastest
      if (++index[i] < per_dim[i]) break;
      index[i] = 0;
    }
  }
  return "";
}

// ---- datatypes ---------------------------------------------------------------------------

Handle fixed_string_type(std::size_t size) {
  Handle t(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check(H5Tset_size(t.id(), size), "H5Tset_size");
  check(H5Tset_strpad(t.id(), H5T_STR_NULLPAD), "H5Tset_strpad");
  check(H5Tset_cset(t.id(), H5T_CSET_ASCII), "H5Tset_cset");
  return t;
}

Handle vlen_string_type() {
  Handle t(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check(H5Tset_size(t.id(), H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(t.id(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

Handle enum_int8_type(const std::vector<std::pair<std::string, std::int8_t>>& members, bool native) {
  Handle t(H5Tenum_create(native ? H5T_NATIVE_INT8 : H5T_STD_I8LE), "H5Tenum_create");
  for (const auto& [name, value] : members) {
    const std::int8_t v = value;  // the value is given in the base type's native form
    check(H5Tenum_insert(t.id(), name.c_str(), &v), "H5Tenum_insert " + name);
  }
  return t;
}

std::size_t CompoundLayout::add(std::string name, hid_t file_type, hid_t mem_type) {
  const std::size_t fs = H5Tget_size(file_type), ms = H5Tget_size(mem_type);
  if (fs == 0 || fs != ms) throw StoreError("compound field " + name + ": file and memory types differ in size");
  fields_.push_back({std::move(name), file_type, mem_type, size_});
  size_ += fs;
  return fields_.back().offset;
}

Handle CompoundLayout::make(bool native) const {
  Handle t(H5Tcreate(H5T_COMPOUND, size_), "H5Tcreate(compound)");
  for (const auto& f : fields_)
    check(H5Tinsert(t.id(), f.name.c_str(), f.offset, native ? f.mem_type : f.file_type), "H5Tinsert " + f.name);
  return t;
}

// ---- dataspaces and datasets ------------------------------------------------------------

Handle simple_space(const std::vector<hsize_t>& dims) {
  return Handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple");
}

Handle scalar_space() { return Handle(H5Screate(H5S_SCALAR), "H5Screate(scalar)"); }

Handle create_dataset(hid_t loc, const std::string& name, hid_t file_type, const std::vector<hsize_t>& dims,
                      const DatasetOptions& options) {
  Handle space = simple_space(dims);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate(dataset create)");
  if (!options.chunk.empty())
    check(H5Pset_chunk(dcpl.id(), static_cast<int>(options.chunk.size()), options.chunk.data()),
          "H5Pset_chunk " + name);
  if (options.fill) check(H5Pset_fill_value(dcpl.id(), options.fill_type, options.fill), "H5Pset_fill_value " + name);
  // Early: all storage now, filled, so a store that could be created never needs more disk space
  // for its results (a disk filling up later cannot stop it halfway, docs/GUARANTEES.md).
  // Incremental: a chunk when it is first written (the stores whose tasks do not all run).
  const bool incremental = !options.allocate_early && !options.chunk.empty();
  check(H5Pset_alloc_time(dcpl.id(), incremental ? H5D_ALLOC_TIME_INCR : H5D_ALLOC_TIME_EARLY),
        "H5Pset_alloc_time " + name);
  return Handle(H5Dcreate2(loc, name.c_str(), file_type, space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
                "cannot create dataset " + name);
}

Handle open_dataset(hid_t loc, const std::string& name) {
  return Handle(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "cannot open dataset " + name);
}

std::vector<hsize_t> dataset_dims(hid_t dset) {
  Handle space(H5Dget_space(dset), "H5Dget_space");
  const int nd = check(H5Sget_simple_extent_ndims(space.id()), "H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<std::size_t>(nd));
  if (nd > 0) check(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr), "H5Sget_simple_extent_dims");
  return dims;
}

void write_all(hid_t dset, hid_t mem_type, const void* buf) {
  check(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), "H5Dwrite");
}

void read_all(hid_t dset, hid_t mem_type, void* buf) {
  check(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), "H5Dread");
}

void write_rows(hid_t dset, hid_t mem_type, const std::vector<RowRun>& runs, const void* buf) {
  if (runs.empty()) return;
  Handle fspace(H5Dget_space(dset), "H5Dget_space");
  const int nd = check(H5Sget_simple_extent_ndims(fspace.id()), "H5Sget_simple_extent_ndims");
  if (nd < 1 || nd > 3) throw StoreError("write_rows: dataset must be 1-D, 2-D or 3-D");
  hsize_t dims[3] = {0, 1, 1};
  check(H5Sget_simple_extent_dims(fspace.id(), dims, nullptr), "H5Sget_simple_extent_dims");
  hsize_t total = 0;
  bool first = true;
  for (const RowRun& r : runs) {
    if (r.count == 0) continue;
    const hsize_t start[3] = {r.start, 0, 0};
    const hsize_t count[3] = {r.count, dims[1], dims[2]};
    check(H5Sselect_hyperslab(fspace.id(), first ? H5S_SELECT_SET : H5S_SELECT_OR, start, nullptr, count, nullptr),
          "H5Sselect_hyperslab");
    first = false;
    total += r.count;
  }
  if (total == 0) return;
  const hsize_t mdims[1] = {total * (nd >= 2 ? dims[1] : 1) * (nd == 3 ? dims[2] : 1)};
  Handle mspace(H5Screate_simple(1, mdims, nullptr), "H5Screate_simple");
  check(H5Dwrite(dset, mem_type, mspace.id(), fspace.id(), H5P_DEFAULT, buf), "H5Dwrite");
}

// ---- dimension scales ------------------------------------------------------------------------

void make_scale(hid_t dset, const std::string& name) { check(H5DSset_scale(dset, name.c_str()), "H5DSset_scale"); }

void attach_scale(hid_t dset, hid_t scale, unsigned dim) {
  check(H5DSattach_scale(dset, scale, dim), "H5DSattach_scale");
}

// ---- attributes -----------------------------------------------------------------------------

bool has_attr(hid_t obj, const std::string& name) {
  return check_tri(H5Aexists(obj, name.c_str()), "H5Aexists " + name);
}

namespace {
void write_scalar_attr(hid_t obj, const std::string& name, hid_t file_type, hid_t mem_type, const void* value) {
  if (has_attr(obj, name)) check(H5Adelete(obj, name.c_str()), "H5Adelete " + name);
  Handle space = scalar_space();
  Handle attr(H5Acreate2(obj, name.c_str(), file_type, space.id(), H5P_DEFAULT, H5P_DEFAULT),
              "cannot create attribute " + name);
  check(H5Awrite(attr.id(), mem_type, value), "cannot write attribute " + name);
}

Handle open_scalar_attr(hid_t obj, const std::string& name, Handle& type) {
  if (!has_attr(obj, name)) throw StoreError("attribute '" + name + "' is missing");
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "cannot open attribute " + name);
  Handle space(H5Aget_space(attr.id()), "H5Aget_space");
  if (H5Sget_simple_extent_npoints(space.id()) != 1) throw StoreError("attribute '" + name + "' is not a scalar");
  type = Handle(H5Aget_type(attr.id()), "H5Aget_type");
  return attr;
}
}  // namespace

void set_attr(hid_t obj, const std::string& name, std::string_view value) {
  Handle type = vlen_string_type();
  const std::string copy(value);  // NUL-terminated
  const char* p = copy.c_str();
  write_scalar_attr(obj, name, type.id(), type.id(), &p);
}

void set_attr_i32(hid_t obj, const std::string& name, std::int32_t value) {
  write_scalar_attr(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT32, &value);
}
void set_attr_i64(hid_t obj, const std::string& name, std::int64_t value) {
  write_scalar_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}
void set_attr_u64(hid_t obj, const std::string& name, std::uint64_t value) {
  write_scalar_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}

std::string get_attr_string(hid_t obj, const std::string& name) {
  Handle type;
  Handle attr = open_scalar_attr(obj, name, type);
  if (H5Tget_class(type.id()) != H5T_STRING) throw StoreError("attribute '" + name + "' is not a string");
  if (check_tri(H5Tis_variable_str(type.id()), "H5Tis_variable_str")) {
    Handle mem = vlen_string_type();
    check(H5Tset_cset(mem.id(), H5Tget_cset(type.id())), "H5Tset_cset");
    char* p = nullptr;
    check(H5Aread(attr.id(), mem.id(), &p), "cannot read attribute " + name);
    std::string out = p ? p : "";
    if (p) H5free_memory(p);
    return out;
  }
  const std::size_t size = H5Tget_size(type.id());
  if (size == 0 || size > (std::size_t{1} << 26)) throw StoreError("attribute '" + name + "' has a bad size");
  Handle mem(H5Tcopy(type.id()), "H5Tcopy");
  std::string buf(size, '\0');
  check(H5Aread(attr.id(), mem.id(), buf.data()), "cannot read attribute " + name);
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

bool is_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = s[i];
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
    i += len;
  }
  return true;
}

std::string get_attr_text(hid_t obj, const std::string& name, std::size_t max_bytes, const std::string& where) {
  const std::string label = where + "attribute '" + name + "'";
  if (!has_attr(obj, name)) throw StoreError(label + " is missing");
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "cannot open " + label);
  Handle space(H5Aget_space(attr.id()), "H5Aget_space");
  if (H5Sget_simple_extent_npoints(space.id()) != 1) throw StoreError(label + " is not a scalar");
  Handle type(H5Aget_type(attr.id()), "H5Aget_type");
  if (H5Tget_class(type.id()) != H5T_STRING) throw StoreError(label + " is not a string");
  const auto too_long = [&](std::size_t bytes) {
    return StoreError(label + " is " + std::to_string(bytes) + " bytes long, more than the " +
                      std::to_string(max_bytes) + " it may have");
  };
  std::string out;
  if (check_tri(H5Tis_variable_str(type.id()), "H5Tis_variable_str")) {
    Handle mem = vlen_string_type();
    check(H5Tset_cset(mem.id(), H5Tget_cset(type.id())), "H5Tset_cset");
    char* p = nullptr;
    check(H5Aread(attr.id(), mem.id(), &p), "cannot read " + label);
    try {
      out = p ? p : "";
    } catch (...) {
      H5free_memory(p);
      throw;
    }
    if (p) H5free_memory(p);
    if (out.size() > max_bytes) throw too_long(out.size());
  } else {
    const std::size_t size = H5Tget_size(type.id());
    if (size == 0) fail("H5Tget_size " + name);
    if (size > max_bytes) throw too_long(size);
    Handle mem(H5Tcopy(type.id()), "H5Tcopy");
    std::string buf(size, '\0');
    check(H5Aread(attr.id(), mem.id(), buf.data()), "cannot read " + label);
    buf.resize(std::strlen(buf.c_str()));
    out = std::move(buf);
  }
  if (!is_utf8(out)) throw StoreError(label + " is not valid UTF-8");
  return out;
}

std::vector<std::string> read_strings(hid_t dset, std::size_t n) {
  Handle mem = vlen_string_type();
  std::vector<char*> ptrs(n, nullptr);
  if (n > 0) check(H5Dread(dset, mem.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "H5Dread");
  std::vector<std::string> out;
  try {
    out.reserve(n);
    for (char* p : ptrs) out.emplace_back(p ? p : "");
  } catch (...) {
    for (char* p : ptrs)
      if (p) H5free_memory(p);
    throw;
  }
  for (char* p : ptrs)
    if (p) H5free_memory(p);
  return out;
}

namespace {
// An integer attribute read as the native type `mem_type` (the file may store any integer width).
template <class Int>
Int get_attr_int(hid_t obj, const std::string& name, hid_t mem_type) {
  Handle type;
  Handle attr = open_scalar_attr(obj, name, type);
  if (H5Tget_class(type.id()) != H5T_INTEGER) throw StoreError("attribute '" + name + "' is not an integer");
  Int v = 0;
  check(H5Aread(attr.id(), mem_type, &v), "cannot read attribute " + name);
  return v;
}
}  // namespace

std::int64_t get_attr_i64(hid_t obj, const std::string& name) {
  return get_attr_int<std::int64_t>(obj, name, H5T_NATIVE_INT64);
}

std::uint64_t get_attr_u64(hid_t obj, const std::string& name) {
  return get_attr_int<std::uint64_t>(obj, name, H5T_NATIVE_UINT64);
}

std::string library_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

}  // namespace rcsweep::store::h5
