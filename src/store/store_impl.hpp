// The store's internals shared by its source files (store.cpp: writes and reads; schema.cpp: a new
// store's datasets and descriptions; open.cpp: identity checks, resume and `info`; store_impl.cpp:
// the plan's layout of rows and spectra, the datasets opened). Private to src/store: HDF5 ids and
// row layouts.
#pragma once
#include <hdf5.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "base/error.hpp"
#include "config/overrides.hpp"
#include "metrics/metrics.hpp"
#include "models/theory.hpp"
#include "plan/store_size.hpp"
#include "store/file_mode.hpp"
#include "store/hdf5.hpp"
#include "store/platforms.hpp"
#include "store/store.hpp"
#include "store/task_status.hpp"

namespace rcsweep::store {
static_assert(std::tuple_size_v<decltype(TaskResult::theory)> == models::n_theory,
              "TaskResult::theory must hold every theory quantity");
static_assert(metrics::core_metrics_schema == schema_version,
              "a new schema version makes every registry metric core: metrics::n_core_metrics and "
              "core_metrics_schema (metrics/registry.hpp) change with it");

inline constexpr std::size_t choice_bytes = 16;    // /points: fixed-length string fields
inline constexpr std::size_t message_bytes = 256;  // /tasks: message field (255 bytes + NUL)
inline constexpr const char* status_values = "0=pending,1=done,2=failed,3=diverged,4=not_needed,5=vanished";
inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// The root attribute `overrides`: one command-line override per line.
inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

/// A store-identity problem (not rcsweep, wrong schema, wrong plan): reported as is, never
/// re-labelled as damage.
class IdentityError : public StoreError {
 public:
  using StoreError::StoreError;
};

/// One row of /tasks in memory.
struct TaskRow {
  std::uint64_t id;
  std::uint64_t point;
  std::int32_t replicate;
  std::int8_t status;
  double wall_s;
  std::int32_t rank;
  char message[message_bytes];
};

inline const std::vector<std::pair<std::string, std::int8_t>>& status_members() {
  static const std::vector<std::pair<std::string, std::int8_t>> m = {
      {"pending", 0}, {"done", 1}, {"failed", 2}, {"diverged", 3}, {"not_needed", 4}, {"vanished", 5}};
  return m;
}

/// The /tasks types: the memory layout of TaskRow, and the same fields packed for the file.
struct TaskTypes {
  h5::Handle status, message, mem, file;
};

inline TaskTypes task_types() {
  TaskTypes t;
  t.status = h5::enum_int8_type(status_members(), true);
  t.message = h5::fixed_string_type(message_bytes);
  t.mem = h5::Handle(H5Tcreate(H5T_COMPOUND, sizeof(TaskRow)), "H5Tcreate(tasks)");
  auto ins = [&](const char* name, std::size_t off, hid_t type) {
    h5::check(H5Tinsert(t.mem.id(), name, off, type), "H5Tinsert tasks");
  };
  ins("id", offsetof(TaskRow, id), H5T_NATIVE_UINT64);
  ins("point", offsetof(TaskRow, point), H5T_NATIVE_UINT64);
  ins("replicate", offsetof(TaskRow, replicate), H5T_NATIVE_INT32);
  ins("status", offsetof(TaskRow, status), t.status.id());
  ins("wall_s", offsetof(TaskRow, wall_s), H5T_NATIVE_DOUBLE);
  ins("rank", offsetof(TaskRow, rank), H5T_NATIVE_INT32);
  ins("message", offsetof(TaskRow, message), t.message.id());
  t.file = h5::Handle(H5Tcopy(t.mem.id()), "H5Tcopy(tasks)");
  h5::check(H5Tpack(t.file.id()), "H5Tpack(tasks)");
  return t;
}

/// Memory type that picks only the status field of /tasks.
inline h5::Handle status_only_type(hid_t status_enum) {
  h5::Handle t(H5Tcreate(H5T_COMPOUND, sizeof(std::int8_t)), "H5Tcreate(status)");
  h5::check(H5Tinsert(t.id(), "status", 0, status_enum), "H5Tinsert status");
  return t;
}

inline void copy_message(char (&dst)[message_bytes], const std::string& msg) {
  std::size_t n = std::min(msg.size(), message_bytes - 1);
  // Do not cut a UTF-8 sequence in the middle.
  if (n < msg.size())
    while (n > 0 && (static_cast<unsigned char>(msg[n]) & 0xC0) == 0x80) --n;
  std::memset(dst, 0, message_bytes);
  std::memcpy(dst, msg.data(), n);
}

inline void check_identity(hid_t file, const std::string& path) {
  if (!h5::has_attr(file, "format")) throw IdentityError(path + " is not an rcsweep store (no 'format' attribute)");
  const std::string format = h5::get_attr_string(file, "format");
  if (format != "rcsweep") throw IdentityError(path + " is not an rcsweep store (format = '" + format + "')");
  if (!h5::has_attr(file, "schema_version"))
    throw IdentityError(path + " is not an rcsweep store (no 'schema_version' attribute)");
  const std::int64_t version = h5::get_attr_i64(file, "schema_version");
  if (version != schema_version)
    throw IdentityError(path + ": schema version " + std::to_string(version) + ", this rcsweep reads " +
                        std::to_string(schema_version));
}

/// "4 x 5" (or "scalar"): the dimensions of a dataset in messages.
inline std::string dims_text(const std::vector<hsize_t>& v) {
  std::string out = v.empty() ? "scalar" : "";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? " x " : "") + std::to_string(v[i]);
  return out;
}

/// Throw StoreError unless dataset `name` of `file` has the file type `want` (described as `what`
/// in the message: "float64") and the dimensions `dims` (with `any_length`, only as many
/// dimensions as `dims` has): a resume writes rows of exactly that shape and type, so anything
/// else would be silently garbled or converted.
inline void check_dataset(hid_t file, const std::string& name, hid_t want, const char* what,
                          const std::vector<hsize_t>& dims, bool any_length = false) {
  h5::Handle d = h5::open_dataset(file, name);
  const auto have = h5::dataset_dims(d.id());
  if (any_length ? have.size() != dims.size() : have != dims)
    throw StoreError(name + " is " + dims_text(have) + " but must be " +
                     (any_length ? std::to_string(dims.size()) + "-dimensional" : dims_text(dims)));
  h5::Handle type(H5Dget_type(d.id()), "H5Dget_type " + name);
  if (H5Tequal(type.id(), want) <= 0) {
    h5::error_text();  // clear the stack of a failed comparison
    throw StoreError(name + " is not " + (what[0] == 'i' ? "an " : "a ") + what + " dataset");
  }
}

/// Throw StoreError unless dataset `name` of `file` is IEEE float64 little-endian (SCHEMA.md
/// "Conventions") of shape `dims`.
inline void check_float_dataset(hid_t file, const std::string& name, const std::vector<hsize_t>& dims) {
  check_dataset(file, name, H5T_IEEE_F64LE, "float64", dims);
}

/// Which task statuses fit the sweep: `not_needed` only with adaptive replicates, and only for a
/// replicate at or above the rule's `min` (those below always run).
struct StatusRule {
  bool adaptive = false;
  int min = 0;
  std::uint64_t replicates = 0;  ///< per point (with adaptive replicates their max); 0: not known
};

/// The rule of a store from its root attributes: the canonical sweep text `config` has a
/// `[sweep.replicates]` table (with its `min = N` line) exactly when the sweep has adaptive
/// replicates; `replicates` is the root attribute of that name.
inline StatusRule status_rule_of_config(const std::string& config, std::uint64_t replicates) {
  StatusRule rule;
  rule.replicates = replicates;
  const std::string table = "[sweep.replicates]\n";
  for (std::size_t at = config.find(table); at != std::string::npos; at = config.find(table, at + 1)) {
    if (at != 0 && config[at - 1] != '\n') continue;  // a table header starts a line
    rule.adaptive = true;
    const std::size_t min_at = config.find("\nmin = ", at);
    const std::size_t next_table = config.find("\n[", at + table.size() - 1);
    if (min_at != std::string::npos && min_at < next_table)
      rule.min = static_cast<int>(std::strtol(config.c_str() + min_at + 7, nullptr, 10));
    break;
  }
  return rule;
}

/// Throw StoreError unless every status fits `rule` (statuses outside the enumeration are refused
/// by read_status_column already).
inline void check_statuses_fit(const std::vector<TaskStatus>& status, const StatusRule& rule) {
  for (std::size_t i = 0; i < status.size(); ++i) {
    if (status[i] != TaskStatus::not_needed) continue;
    if (!rule.adaptive)
      throw StoreError("task " + std::to_string(i) +
                       " is not_needed, but its sweep has no adaptive replicates ([sweep.replicates])");
    if (rule.replicates > 0 && i % rule.replicates < static_cast<std::uint64_t>(rule.min))
      throw StoreError("task " + std::to_string(i) + " is not_needed, but its replicate " +
                       std::to_string(i % rule.replicates) +
                       " is below the adaptive rule's min = " + std::to_string(rule.min) + ", which always runs");
  }
}

/// Throw StoreError unless /tasks is a task table with every field of SCHEMA.md "/tasks": id and
/// point uint64, replicate and rank int32, status an int8 enumeration of (some of) the statuses
/// with their values, wall_s float64, message a fixed 256-byte string.
void check_task_fields(hid_t tasks);

/// The checks of a store that need no plan, for every reader (info, run, merge, --reuse, growth):
/// every object reached by hard links only (no soft or external link), every dataset holding its
/// values in the file (no external storage, no virtual dataset), /tasks a task table of `n_tasks`
/// rows with the documented fields and statuses that fit `rule`, and every dataset a run writes
/// (/layers, and where present /theory, /grad, /spectra, /provenance/platform) of its documented
/// type and, where the root attributes give it, shape. Returns the status column.
std::vector<TaskStatus> check_structure(hid_t file, std::uint64_t n_tasks, std::int64_t max_depth,
                                        const StatusRule& rule);

/// How many of the registry's metrics, from the first, every store must have: the core metrics
/// (metrics::n_core_metrics), whose datasets a store of this schema always has; a later metric's
/// may be missing (read as NaN, created by a resume). The environment variable
/// RCSWEEP_TEST_CORE_METRICS, a number from 1 to n_core_metrics, lowers it for the tests of a store
/// made before a metric (every metric of today is core); any other value is ignored.
std::size_t required_metrics();

/// Open an existing file after checking it exists and is HDF5; damage becomes a clear StoreError.
inline h5::Handle open_existing(const std::filesystem::path& path, bool read_write) {
  const std::string p = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw StoreError(p + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec)) throw StoreError(p + ": not a regular file");
  if (::access(path.c_str(), read_write ? R_OK | W_OK : R_OK) != 0)
    throw StoreError(p + ": cannot open for " + (read_write ? "writing" : "reading") + " (" + std::strerror(errno) +
                     ")");
  const htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0) {
    h5::error_text();  // clear the stack
    throw StoreError(p + ": not an HDF5 file");
  }
  try {
    try {
      // A reader does not lock, so `rcsweep info` works while a run writes the file.
      return h5::open_file(path, read_write, /*locking=*/read_write);
    } catch (const StoreError& e) {
      // HDF5 refuses a second open in the same process with another locking flag.
      if (read_write || std::string(e.what()).find("locking flag") == std::string::npos) throw;
      return h5::open_file(path, false, true);
    }
  } catch (const StoreError& e) {
    std::string msg = e.what();
    const std::string prefix = "cannot open " + p + ": ";
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    // rcsweep's writer lock keeps other rcsweep writers out before this point and its readers
    // take no lock: a lock held here is another program's (h5py, h5dump, HDFView).
    if (msg.find("unable to lock") != std::string::npos) {
      if (msg.find("errno = " + std::to_string(EWOULDBLOCK) + ",") != std::string::npos)
        throw StoreError(open_elsewhere_message(p));
      throw StoreError(p + ": cannot open: HDF5 cannot lock it (" + msg + ")");
    }
    throw StoreError(p + ": damaged HDF5 file (" + msg + ")");
  }
}

/// Run `fn`; HDF5 failures inside (other than identity problems) are reported as damage.
template <class F>
inline auto guard_damage(const std::string& path, F&& fn) {
  try {
    return fn();
  } catch (const IdentityError&) {
    throw;
  } catch (const std::exception& e) {
    throw StoreError(path + ": damaged rcsweep store (" + e.what() + ")");
  }
}

/// Every task status marked finished (done, failed, diverged or vanished).
std::vector<bool> finished(const std::vector<TaskStatus>& status);

/// The file of a store that build() made and publish() has not yet put in place: removed when
/// the store is closed unpublished (declared before the HDF5 file: removed after it is closed).
struct Unpublished {
  std::filesystem::path path;
  Unpublished() = default;
  Unpublished(Unpublished&&) = delete;
  ~Unpublished() {
    if (!path.empty()) remove_temporary(path);
  }
};

struct Store::Impl {
  std::optional<WriterLock> lock;  // a store open for writing holds its claim; declared first: released last
  Unpublished unpublished;
  std::filesystem::path path;
  h5::Handle file;  // closed before the temporary is removed and the lock released
  TaskTypes types;
  h5::Handle tasks, x_sv, m_sv, m_eig_re, m_eig_im;
  std::array<h5::Handle, metrics::n_layer_metrics> layers;  // empty: a metric the store lacks (read as NaN)
  std::array<h5::Handle, models::n_theory> theory;
  h5::Handle grad_log10, grad_stderr, grad_log10_all, grad_stderr_all;  // only with [output] gradients
  detail::PlatformColumn platforms;                                     // /provenance
  std::size_t n_grad_depths = 0;                                        // plan.gradient_depths().size()
  std::uint64_t n_tasks = 0;
  std::size_t n_layers = 0;  // L_max + 1
  std::vector<std::uint64_t> task_point;
  std::vector<std::int32_t> task_replicate;
  std::vector<std::int64_t> sv_offset;     // [n_tasks * n_layers]
  std::vector<std::int64_t> sv_length;     // [n_tasks]
  std::vector<std::int64_t> m_offset;      // [n_tasks * n_layers]: mixer spectra
  std::vector<std::int64_t> m_length;      // [n_tasks]
  std::int64_t sv_total = 0, m_total = 0;  // lengths of x_sv and m_sv (>= 1)
  plan::StoreLayout chunking;              // chunks of the per-task results, and when they are allocated

  /// The plan's tasks and where each task's rows and spectra lie (store_impl.cpp).
  void load_plan(const plan::Plan& plan);
  /// The datasets of an existing store (store_impl.cpp); a registry metric it lacks (not a core
  /// one: check_structure) leaves its handle in `layers` empty.
  void open_datasets();
  /// Resume: create the /layers datasets of the metrics the store lacks (NaN in every row, so in
  /// the rows of the tasks finished before) and set `computed` to the plan's selection when any
  /// was created.
  void create_missing_metrics(const plan::Plan& plan);
  /// Resume: the spectra datasets have the plan's lengths and the mixer offsets are the plan's.
  void check_spectra_layout() const;

  // A new store's objects (schema.cpp), created in this order by create_all.
  void write_axes(const plan::Plan& plan);
  void write_points(const plan::Plan& plan);
  void write_root_attrs(const plan::Plan& plan, const Provenance& prov);
  void create_all(const plan::Plan& plan, const Provenance& prov);
  void create_tasks();
  void create_layers(const plan::Plan& plan);
  /// /layers/<metric k> in `group`: float64 [n_tasks, L_max+1], NaN fill, chunks of whole rows,
  /// the registry's description and units, the layer scale `layer_axis` on dimension 1.
  void create_metric(hid_t group, hid_t layer_axis, std::size_t k);
  void create_theory();
  void create_gradients(const plan::Plan& plan);
  void create_spectra(const plan::Plan& plan);
  /// /spectra/x_sv_offset or m_offset in `group`, holding `offsets` ([n_tasks * n_layers]).
  h5::Handle create_offsets(hid_t group, const std::string& name, const std::vector<std::int64_t>& offsets);

  // Store::write, step by step (store.cpp).
  /// A batch of results: the last result of each task in ascending task order (`sel`, indices into
  /// `results`) and the runs of task rows they fill.
  struct WriteBatch {
    std::span<const TaskResult> results;
    std::vector<std::size_t> sel;
    std::vector<h5::RowRun> runs;
  };
  /// Throws StoreError when a result does not fit the store.
  void check_result(const TaskResult& r) const;
  void write_metric_rows(const WriteBatch& b);
  void write_gradients(const WriteBatch& b);
  void write_spectra(const WriteBatch& b, hid_t dset, const std::vector<std::int64_t>& offsets,
                     std::vector<std::vector<double>> TaskResult::*field) const;
  void write_statuses(const WriteBatch& b);
};

}  // namespace rcsweep::store
