#include "store/store.hpp"
#include "store/task_status.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "base/error.hpp"
#include "config/overrides.hpp"
#include "metrics/metrics.hpp"
#include "models/theory.hpp"
#include "store/hdf5.hpp"
#include "store/platforms.hpp"

namespace rcsweep::store {

const char* to_string(TaskStatus s) {
  switch (s) {
    case TaskStatus::pending: return "pending";
    case TaskStatus::done: return "done";
    case TaskStatus::failed: return "failed";
    case TaskStatus::diverged: return "diverged";
  }
  return "unknown";
}

std::string hdf5_library_version() {
  h5::init();
  return h5::library_version();
}

namespace {

static_assert(std::tuple_size_v<decltype(TaskResult::layers)::value_type> == metrics::n_layer_metrics,
              "TaskResult::layers rows must hold every layer metric");
static_assert(std::tuple_size_v<decltype(TaskResult::theory)> == models::n_theory,
              "TaskResult::theory must hold every theory quantity");

constexpr std::size_t choice_bytes = 16;    // /points: fixed-length string fields
constexpr std::size_t message_bytes = 256;  // /tasks: message field (255 bytes + NUL)
constexpr const char* status_values = "0=pending,1=done,2=failed,3=diverged";
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// The root attribute `overrides`: one command-line override per line.
std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
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

const std::vector<std::pair<std::string, std::int8_t>>& status_members() {
  static const std::vector<std::pair<std::string, std::int8_t>> m = {
      {"pending", 0}, {"done", 1}, {"failed", 2}, {"diverged", 3}};
  return m;
}

/// The /tasks types: the memory layout of TaskRow, and the same fields packed for the file.
struct TaskTypes {
  h5::Handle status, message, mem, file;
};

TaskTypes task_types() {
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
h5::Handle status_only_type(hid_t status_enum) {
  h5::Handle t(H5Tcreate(H5T_COMPOUND, sizeof(std::int8_t)), "H5Tcreate(status)");
  h5::check(H5Tinsert(t.id(), "status", 0, status_enum), "H5Tinsert status");
  return t;
}

void copy_message(char (&dst)[message_bytes], const std::string& msg) {
  std::size_t n = std::min(msg.size(), message_bytes - 1);
  // Do not cut a UTF-8 sequence in the middle.
  if (n < msg.size())
    while (n > 0 && (static_cast<unsigned char>(msg[n]) & 0xC0) == 0x80) --n;
  std::memset(dst, 0, message_bytes);
  std::memcpy(dst, msg.data(), n);
}

double as_double(const config::ParamValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

std::int64_t as_int(const config::ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return static_cast<std::int64_t>(*d);
  return std::get<std::int64_t>(v);
}

/// Numeric value of a scale parameter: the number, or 1/sqrt(d) for "inv_sqrt_d".
double scale_value(const config::ParamValue& v, int d) {
  if (std::holds_alternative<std::string>(v)) return 1.0 / std::sqrt(static_cast<double>(d));
  return as_double(v);
}

const char* spectra_name(config::Spectra s) {
  switch (s) {
    case config::Spectra::none: return "none";
    case config::Spectra::last: return "last";
    case config::Spectra::all: return "all";
  }
  return "none";
}

std::string metric_description(std::string_view name) {
  static const std::vector<std::pair<std::string_view, std::string_view>> text = {
      {"fro", "||X_l||_F, true scale (may be +inf when it exceeds the double range; see log_fro)"},
      {"log_fro", "ln ||X_l||_F, true scale (finite even when fro overflows)"},
      {"s1", "largest singular value of X_l, true scale"},
      {"s2", "second singular value of X_l, true scale (0 when min(T,d) = 1)"},
      {"sr_cov", "stable rank of X_l X_l^T: sum s_i^4 / s_1^4 (Mind the Gap eq. (5)); scale-free"},
      {"sr_x", "stable rank of X_l: sum s_i^2 / s_1^2; scale-free"},
      {"mu", "||X_l - 1 xbar^T||_F, xbar the token mean (lambda-skip eq. (5)), true scale"},
      {"mu_rel", "mu / ||X_l||_F; scale-free"},
      {"res_rel", "||X_l - 1 xbar^T||_{1,inf} / ||X_l||_{1,inf} (Dong et al. sec. 2); scale-free"},
      {"m_s1", "s_1(M) of the layer's mixer matrix after gap_fix (Mind the Gap Thm 2.1)"},
      {"m_s2", "s_2(M) of the layer's mixer matrix after gap_fix"},
      {"m_gap", "s_1(M) / s_2(M) of the layer's mixer matrix after gap_fix"},
      {"m_fro", "||M||_F of the layer's mixer matrix after gap_fix"},
  };
  for (const auto& [n, d] : text)
    if (n == name) return std::string(d);
  return "layer metric " + std::string(name);
}

std::string theory_description(std::string_view name) {
  static const std::vector<std::pair<std::string_view, std::string_view>> text = {
      {"C_M", "lambda-skip Thm 4.1: C_M = max over layers and heads of ||M||_F"},
      {"S", "lambda-skip Thm 4.1: S = max over layers of ||C_V||_F (W_V; I_d for SSM mixers: sqrt(d))"},
      {"lambda_min", "lambda-skip Thm 4.1: (a + sqrt a) S C_M / (1 - a), the |lambda| above which the "
                     "condition holds (a = collapse_rate)"},
      {"a_star", "lambda-skip Thm 4.1: lambda^2 / (S C_M + |lambda|)^2, the largest rate a the condition admits"},
      {"b", "lambda-skip Thm 4.1: 2 |lambda| N d S C_M / (lambda^2 - a (S C_M + |lambda|)^2) / a^L; NaN when "
            "the condition fails"},
      {"bound_applies", "lambda-skip Thm 4.1: 1 if the condition holds and mu(X_0)^2 >= b, else 0"},
      {"bound_holds", "lambda-skip Thm 4.1: 1 if mu(X_L)^2 >= a^L mu(X_0)^2, else 0"},
  };
  for (const auto& [n, d] : text)
    if (n == name) return std::string(d) + "; NaN for a task not done";
  return "theory quantity " + std::string(name) + "; NaN for a task not done";
}

/// Throw IdentityError unless `file` is an rcsweep store of schema 1.
void check_identity(hid_t file, const std::string& path) {
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

/// Throw StoreError unless dataset `name` of `file` is float64-compatible (an HDF5 float) of shape
/// `dims`: a resume writes rows of exactly that shape, so anything else would be silently garbled.
void check_float_dataset(hid_t file, const std::string& name, const std::vector<hsize_t>& dims) {
  h5::Handle d = h5::open_dataset(file, name);
  const auto have = h5::dataset_dims(d.id());
  const auto text = [](const std::vector<hsize_t>& v) {
    std::string out = v.empty() ? "scalar" : "";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? " x " : "") + std::to_string(v[i]);
    return out;
  };
  if (have != dims) throw StoreError(name + " is " + text(have) + " but must be " + text(dims));
  h5::Handle type(H5Dget_type(d.id()), "H5Dget_type " + name);
  if (H5Tget_class(type.id()) != H5T_FLOAT) throw StoreError(name + " is not a float64 dataset");
}

/// Open an existing file after checking it exists and is HDF5; damage becomes a clear StoreError.
h5::Handle open_existing(const std::filesystem::path& path, bool read_write) {
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
    if (msg.find("unable to lock") != std::string::npos)
      throw StoreError(p + ": cannot open (" + msg + "); is another rcsweep writing it?");
    throw StoreError(p + ": damaged HDF5 file (" + msg + ")");
  }
}

/// Run `fn`; HDF5 failures inside (other than identity problems) are reported as damage.
template <class F>
auto guard_damage(const std::string& path, F&& fn) {
  try {
    return fn();
  } catch (const IdentityError&) {
    throw;
  } catch (const std::exception& e) {
    throw StoreError(path + ": damaged rcsweep store (" + e.what() + ")");
  }
}

}  // namespace

std::vector<TaskStatus> read_status_column(hid_t tasks, std::uint64_t n_tasks) {
  const auto dims = h5::dataset_dims(tasks);
  if (dims.size() != 1 || dims[0] != n_tasks)
    throw StoreError("/tasks has " + std::to_string(dims.empty() ? 0 : dims[0]) + " rows, expected " +
                     std::to_string(n_tasks));
  {
    h5::Handle type(H5Dget_type(tasks), "H5Dget_type /tasks");
    if (H5Tget_class(type.id()) != H5T_COMPOUND || H5Tget_member_index(type.id(), "status") < 0) {
      h5::error_text();  // clear the stack of the failed lookup
      throw StoreError("/tasks is not a task table (no 'status' field)");
    }
  }
  h5::Handle status = h5::enum_int8_type(status_members(), true);
  h5::Handle mem = status_only_type(status.id());
  std::vector<std::int8_t> raw(n_tasks);
  if (n_tasks > 0) h5::read_all(tasks, mem.id(), raw.data());
  std::vector<TaskStatus> out(n_tasks);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 0 || raw[i] > 3)  // HDF5 turns a value outside the enum into -1
      throw StoreError("task " + std::to_string(i) + " has an invalid status (not one of " + status_values + ")");
    out[i] = static_cast<TaskStatus>(raw[i]);
  }
  return out;
}


struct Store::Impl {
  std::filesystem::path path;
  h5::Handle file;  // declared first: closed last
  TaskTypes types;
  h5::Handle tasks, x_sv, m_sv, m_eig_re, m_eig_im;
  std::array<h5::Handle, metrics::n_layer_metrics> layers;
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

  void load_plan(const plan::Plan& plan) {
    n_tasks = plan.tasks.size();
    n_layers = static_cast<std::size_t>(plan.max_depth) + 1;
    n_grad_depths = plan.gradient_depths().size();
    task_point.resize(n_tasks);
    task_replicate.resize(n_tasks);
    sv_offset.assign(n_tasks * n_layers, -1);
    sv_length.assign(n_tasks, 0);
    m_offset.assign(n_tasks * n_layers, -1);
    m_length.assign(n_tasks, 0);
    sv_total = std::max<std::int64_t>(plan.spectrum_total(), 1);
    m_total = std::max<std::int64_t>(plan.mixer_spectrum_total(), 1);
    std::vector<int> stored, m_stored;  // layers with a spectrum (the offsets cost O(L) per call)
    for (std::size_t l = 0; l < n_layers; ++l) {
      if (plan.spectrum_at(static_cast<int>(l))) stored.push_back(static_cast<int>(l));
      if (plan.mixer_spectrum_at(static_cast<int>(l))) m_stored.push_back(static_cast<int>(l));
    }
    for (std::uint64_t t = 0; t < n_tasks; ++t) {
      if (plan.tasks[t].id != t)
        throw StoreError("plan task " + std::to_string(t) + " has id " + std::to_string(plan.tasks[t].id));
      task_point[t] = plan.tasks[t].point;
      task_replicate[t] = plan.tasks[t].replicate;
      sv_length[t] = static_cast<std::int64_t>(plan.spectrum_length(t));
      for (int l : stored) sv_offset[t * n_layers + static_cast<std::size_t>(l)] = plan.spectrum_offset(t, l);
      m_length[t] = static_cast<std::int64_t>(plan.mixer_spectrum_length(t));
      for (int l : m_stored) m_offset[t * n_layers + static_cast<std::size_t>(l)] = plan.mixer_spectrum_offset(t, l);
    }
  }

  void open_datasets() {
    types = task_types();
    tasks = h5::open_dataset(file.id(), "/tasks");
    platforms = detail::PlatformColumn::open(file.id(), n_tasks);
    x_sv = h5::open_dataset(file.id(), "/spectra/x_sv");
    m_sv = h5::open_dataset(file.id(), "/spectra/m_sv");
    m_eig_re = h5::open_dataset(file.id(), "/spectra/m_eig_re");
    m_eig_im = h5::open_dataset(file.id(), "/spectra/m_eig_im");
    for (std::size_t k = 0; k < layers.size(); ++k)
      layers[k] = h5::open_dataset(file.id(), "/layers/" + std::string(metrics::layer_metric_names[k]));
    for (std::size_t k = 0; k < theory.size(); ++k)
      theory[k] = h5::open_dataset(file.id(), "/theory/" + std::string(models::theory_names[k]));
    if (n_grad_depths > 0) {
      grad_log10 = h5::open_dataset(file.id(), "/grad/log10_g");
      grad_stderr = h5::open_dataset(file.id(), "/grad/stderr");
    }
    if (n_grad_depths > 1) {
      grad_log10_all = h5::open_dataset(file.id(), "/grad/log10_g_all");
      grad_stderr_all = h5::open_dataset(file.id(), "/grad/stderr_all");
    }
  }

  /// Resume: the spectra datasets have the plan's lengths and the mixer offsets are the plan's.
  void check_spectra_layout() const {
    const auto n_of = [&](const char* name) {
      h5::Handle d = h5::open_dataset(file.id(), std::string("/spectra/") + name);
      return h5::dataset_dims(d.id());
    };
    if (n_of("x_sv") != std::vector<hsize_t>{static_cast<hsize_t>(sv_total)})
      throw StoreError("/spectra/x_sv has the wrong length");
    for (const char* name : {"m_sv", "m_eig_re", "m_eig_im"})
      if (n_of(name) != std::vector<hsize_t>{static_cast<hsize_t>(m_total)})
        throw StoreError("/spectra/" + std::string(name) + " has the wrong length");
    if (n_of("m_offset") != std::vector<hsize_t>{n_tasks, n_layers} ||
        n_of("m_length") != std::vector<hsize_t>{n_tasks})
      throw StoreError("/spectra/m_offset or m_length has the wrong shape");
    std::vector<std::int64_t> off(m_offset.size()), len(m_length.size());
    h5::Handle o = h5::open_dataset(file.id(), "/spectra/m_offset");
    h5::read_all(o.id(), H5T_NATIVE_INT64, off.data());
    h5::Handle l = h5::open_dataset(file.id(), "/spectra/m_length");
    h5::read_all(l.id(), H5T_NATIVE_INT64, len.data());
    if (off != m_offset || len != m_length) throw StoreError("/spectra/m_offset or m_length differs from the plan");
  }

  void write_axes(const plan::Plan& plan);
  void write_points(const plan::Plan& plan);
  void write_root_attrs(const plan::Plan& plan, const Provenance& prov);
  void create_all(const plan::Plan& plan, const Provenance& prov);
};

void Store::Impl::write_root_attrs(const plan::Plan& plan, const Provenance& prov) {
  const hid_t f = file.id();
  h5::set_attr_i32(f, "schema_version", schema_version);
  h5::set_attr(f, "rcsweep_version", prov.rcsweep_version);
  h5::set_attr(f, "git_commit", prov.git_commit);
  h5::set_attr(f, "config", plan.spec.canonical_toml());
  h5::set_attr(f, "plan_hash", plan.hash);
  h5::set_attr(f, "overrides", join_lines(plan.spec.overrides));
  h5::set_attr(f, "created", prov.created);
  h5::set_attr(f, "finished", "");
  h5::set_attr_i32(f, "mpi_ranks", prov.mpi_ranks);
  h5::set_attr_i32(f, "threads", prov.threads);
  h5::set_attr(f, "blas", prov.blas);
  h5::set_attr(f, "hdf5_version", prov.hdf5_version.empty() ? h5::library_version() : prov.hdf5_version);
  h5::set_attr(f, "host", prov.host);
  h5::set_attr(f, "sweep_name", plan.spec.name);
  h5::set_attr_u64(f, "seed", plan.spec.seed);
  h5::set_attr_i32(f, "replicates", plan.spec.replicates);
  h5::set_attr_i32(f, "max_depth", plan.max_depth);
  h5::set_attr_u64(f, "n_points", plan.points.size());
  h5::set_attr_u64(f, "n_tasks", plan.tasks.size());
}

void Store::Impl::write_axes(const plan::Plan& plan) {
  h5::Handle axes = h5::create_group(file.id(), "axes");
  const auto& reg = config::model_params();
  auto write_strings = [&](const std::string& name, const std::vector<std::string>& values) {
    h5::Handle type = h5::vlen_string_type();
    h5::Handle d = h5::create_dataset(axes.id(), name, type.id(), {values.size()});
    std::vector<const char*> ptrs;
    for (const auto& s : values) ptrs.push_back(s.c_str());
    if (!ptrs.empty()) h5::write_all(d.id(), type.id(), ptrs.data());
    return d;
  };
  auto write_ints = [&](const std::string& name, const std::vector<std::int64_t>& values) {
    h5::Handle d = h5::create_dataset(axes.id(), name, H5T_STD_I64LE, {values.size()});
    if (!values.empty()) h5::write_all(d.id(), H5T_NATIVE_INT64, values.data());
    return d;
  };
  for (const config::Dim& dim : plan.spec.dims) {
    for (std::size_t k = 0; k < dim.params.size(); ++k) {
      const std::string& name = dim.params[k];
      const auto idx = config::param_index(name);
      if (!idx) throw StoreError("axis '" + name + "' is not a model parameter");
      const auto& column = dim.columns.at(k);
      const config::ParamKind kind = reg[*idx].kind;
      const bool numeric = std::none_of(column.begin(), column.end(),
                                        [](const auto& v) { return std::holds_alternative<std::string>(v); });
      h5::Handle d;
      if (kind == config::ParamKind::integer && numeric) {
        std::vector<std::int64_t> v;
        for (const auto& x : column) v.push_back(as_int(x));
        d = write_ints(name, v);
      } else if ((kind == config::ParamKind::real || kind == config::ParamKind::scale) && numeric) {
        std::vector<double> v;
        for (const auto& x : column) v.push_back(as_double(x));
        d = h5::create_dataset(axes.id(), name, H5T_IEEE_F64LE, {v.size()});
        if (!v.empty()) h5::write_all(d.id(), H5T_NATIVE_DOUBLE, v.data());
      } else {
        std::vector<std::string> v;
        for (const auto& x : column) v.push_back(config::to_text(x));
        d = write_strings(name, v);
      }
      h5::set_attr(d.id(), "dim", dim.name);
      if (dim.params.size() == 1) h5::make_scale(d.id(), dim.name);
    }
  }
  std::string order;
  for (const config::Dim& dim : plan.spec.dims)
    for (const std::string& name : dim.params) {
      if (!order.empty()) order += ',';
      order += name;
    }
  if (!plan.spec.depth_axis.empty()) {
    h5::Handle d = write_ints("depth", plan.spec.depth_axis);
    h5::set_attr(d.id(), "dim", "layer");
    if (!order.empty()) order += ',';
    order += "depth";
  }
  h5::set_attr(axes.id(), "order", order);
  std::vector<std::int64_t> layer(n_layers);
  std::iota(layer.begin(), layer.end(), std::int64_t{0});
  h5::Handle d = write_ints("layer", layer);
  h5::set_attr(d.id(), "dim", "layer");
  h5::make_scale(d.id(), "layer");
}

void Store::Impl::write_points(const plan::Plan& plan) {
  const auto& reg = config::model_params();
  const auto& dims = plan.spec.dims;
  h5::Handle choice = h5::fixed_string_type(choice_bytes);
  h5::CompoundLayout layout;
  std::vector<std::size_t> off;
  for (const auto& info : reg) {
    switch (info.kind) {
      case config::ParamKind::integer:
        off.push_back(layout.add(std::string(info.name), H5T_STD_I64LE, H5T_NATIVE_INT64));
        break;
      case config::ParamKind::real:
      case config::ParamKind::scale:
        off.push_back(layout.add(std::string(info.name), H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE));
        break;
      case config::ParamKind::choice:
        off.push_back(layout.add(std::string(info.name), choice.id(), choice.id()));
        break;
    }
  }
  for (const auto& dim : dims) off.push_back(layout.add("idx_" + dim.name, H5T_STD_I64LE, H5T_NATIVE_INT64));

  const std::size_t n_points = plan.points.size();
  const std::size_t row = layout.size();
  std::vector<char> buf(n_points * row, '\0');
  for (std::size_t p = 0; p < n_points; ++p) {
    char* r = buf.data() + p * row;
    const auto& values = plan.points[p];
    if (values.size() != reg.size()) throw StoreError("point " + std::to_string(p) + " has the wrong length");
    const int d = plan.models.at(p).d;
    for (std::size_t i = 0; i < reg.size(); ++i) {
      char* dst = r + off[i];
      switch (reg[i].kind) {
        case config::ParamKind::integer: {
          const std::int64_t v = as_int(values[i]);
          std::memcpy(dst, &v, sizeof v);
          break;
        }
        case config::ParamKind::real: {  // a keyword value is stored resolved (lambda_mlp = "lambda")
          const double v = std::holds_alternative<std::string>(values[i]) && reg[i].name == "lambda_mlp"
                               ? plan.models.at(p).lambda_mlp
                               : as_double(values[i]);
          std::memcpy(dst, &v, sizeof v);
          break;
        }
        case config::ParamKind::scale: {
          const double v = scale_value(values[i], d);
          std::memcpy(dst, &v, sizeof v);
          break;
        }
        case config::ParamKind::choice: {
          const std::string s = config::to_text(values[i]);
          if (s.size() > choice_bytes)
            throw StoreError("value '" + s + "' of " + std::string(reg[i].name) + " is longer than " +
                             std::to_string(choice_bytes) + " bytes");
          std::memcpy(dst, s.data(), s.size());
          break;
        }
      }
    }
    const auto index = plan.spec.point_index(p);
    for (std::size_t k = 0; k < dims.size(); ++k) {
      const auto v = static_cast<std::int64_t>(index.at(k));
      std::memcpy(r + off[reg.size() + k], &v, sizeof v);
    }
  }
  h5::Handle file_type = layout.make(false), mem_type = layout.make(true);
  h5::Handle ds = h5::create_dataset(file.id(), "points", file_type.id(), {n_points});
  if (n_points > 0) h5::write_all(ds.id(), mem_type.id(), buf.data());
  h5::set_attr(ds.id(), "description",
               "one row per grid point: every model parameter (scale parameters as numbers, inv_sqrt_d "
               "resolved to 1/sqrt(d)), and idx_<dim>, the point's index along each grid dimension");
}

void Store::Impl::create_all(const plan::Plan& plan, const Provenance& prov) {
  const hid_t f = file.id();
  const std::size_t L1 = n_layers;
  write_root_attrs(plan, prov);
  write_axes(plan);
  write_points(plan);

  // /tasks, all pending.
  types = task_types();
  {
    std::vector<TaskRow> rows(n_tasks);
    for (std::uint64_t t = 0; t < n_tasks; ++t) {
      TaskRow& r = rows[t];
      std::memset(&r, 0, sizeof r);
      r.id = t;
      r.point = task_point[t];
      r.replicate = task_replicate[t];
      r.status = static_cast<std::int8_t>(TaskStatus::pending);
      r.wall_s = nan;
      r.rank = -1;
    }
    tasks = h5::create_dataset(f, "tasks", types.file.id(), {n_tasks});
    h5::write_all(tasks.id(), types.mem.id(), rows.data());
    h5::set_attr(tasks.id(), "status_values", status_values);
    h5::set_attr(tasks.id(), "description",
                 "one row per task (id = point * replicates + replicate); wall_s in seconds (NaN until "
                 "run), rank = MPI rank that ran it (-1 until run)");
  }
  platforms = detail::PlatformColumn::create(f, n_tasks);

  // /layers/<metric>: NaN-filled by the fill value; chunks of whole rows.
  {
    h5::Handle layers_group = h5::create_group(f, "layers");
    h5::Handle layer_axis = h5::open_dataset(f, "/axes/layer");
    constexpr std::size_t max_chunk_bytes = std::size_t{1} << 20;
    const std::size_t rows = std::max<std::size_t>(
        1, std::min<std::size_t>({n_tasks, 64, max_chunk_bytes / (L1 * sizeof(double))}));
    h5::DatasetOptions opt;
    opt.chunk = {rows, L1};
    opt.fill = &nan;
    opt.fill_type = H5T_NATIVE_DOUBLE;
    for (std::size_t k = 0; k < layers.size(); ++k) {
      const std::string name(metrics::layer_metric_names[k]);
      layers[k] = h5::create_dataset(layers_group.id(), name, H5T_IEEE_F64LE, {n_tasks, L1}, opt);
      h5::set_attr(layers[k].id(), "description", metric_description(name));
      h5::attach_scale(layers[k].id(), layer_axis.id(), 1);
    }
  }

  // /theory/<name>: one NaN-filled value per task.
  {
    h5::Handle theory_group = h5::create_group(f, "theory");
    h5::set_attr(theory_group.id(), "description",
                 "per-task quantities of lambda-skip Theorem 4.1 (MODELS.md \"Per-task theory quantities\")");
    h5::DatasetOptions opt;
    opt.chunk = {std::max<hsize_t>(1, std::min<hsize_t>(n_tasks, 65536))};
    opt.fill = &nan;
    opt.fill_type = H5T_NATIVE_DOUBLE;
    for (std::size_t k = 0; k < theory.size(); ++k) {
      const std::string name(models::theory_names[k]);
      theory[k] = h5::create_dataset(theory_group.id(), name, H5T_IEEE_F64LE, {n_tasks}, opt);
      h5::set_attr(theory[k].id(), "description", theory_description(name));
    }
  }

  // /grad: gradient norms, NaN-filled, only when asked for.
  if (n_grad_depths > 0) {
    const std::size_t L = n_layers - 1;
    h5::Handle g = h5::create_group(f, "grad");
    static constexpr std::array<const char*, 3> methods = {"auto", "exact", "hutchinson"};
    h5::set_attr(g.id(), "stored", spectra_name(plan.spec.output.gradients));
    h5::set_attr(g.id(), "method", methods.at(static_cast<std::size_t>(plan.spec.output.grad_method)));
    h5::set_attr_i32(g.id(), "probes", plan.spec.output.grad_probes);
    h5::set_attr(g.id(), "description",
                 "g_{L,l} = ||dX_L/dW_{V,l}||_F^2 (MODELS.md \"Gradient norms\"): exact (Kronecker) on linear "
                 "stacks when method is auto or exact (stderr 0), else Hutchinson's estimate with `probes` probes");
    const auto make = [&](const std::string& name, std::vector<hsize_t> dims, const std::string& text) {
      h5::DatasetOptions opt;
      opt.chunk = dims;
      opt.chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(n_tasks, std::max<hsize_t>(1, 65536 / (L * dims.size()))));
      opt.fill = &nan;
      opt.fill_type = H5T_NATIVE_DOUBLE;
      h5::Handle d = h5::create_dataset(g.id(), name, H5T_IEEE_F64LE, dims, opt);
      h5::set_attr(d.id(), "description", text);
      return d;
    };
    grad_log10 = make("log10_g", {n_tasks, L},
                      "log10 g_{L,l} at the output depth L = L_max, column l - 1 for layer l = 1..L_max");
    grad_stderr = make("stderr", {n_tasks, L},
                       "standard error of log10_g (Hutchinson: relative standard error of the mean over probes "
                       "/ ln 10; 0 when exact)");
    if (n_grad_depths > 1) {
      grad_log10_all = make("log10_g_all", {n_tasks, L, L},
                            "log10 g_{L,l} for every output depth: [t, L - 1, l - 1]; NaN for l > L");
      grad_stderr_all = make("stderr_all", {n_tasks, L, L}, "standard error of log10_g_all, same layout");
    }
  }

  // /spectra: one flat NaN-filled vector plus where each task's layer spectrum starts.
  {
    h5::Handle g = h5::create_group(f, "spectra");
    h5::set_attr(g.id(), "stored", spectra_name(plan.spec.output.spectra));
    const auto total = static_cast<hsize_t>(sv_total);
    h5::DatasetOptions opt;
    opt.chunk = {std::min<hsize_t>(total, 65536)};
    opt.fill = &nan;
    opt.fill_type = H5T_NATIVE_DOUBLE;
    x_sv = h5::create_dataset(g.id(), "x_sv", H5T_IEEE_F64LE, {total}, opt);
    h5::set_attr(x_sv.id(), "description",
                 "singular values of X_l / ||X_l||_F (unit Frobenius norm), descending; task t's layer l "
                 "spectrum is x_sv[x_sv_offset[t,l] : x_sv_offset[t,l] + x_sv_length[t]]");
    h5::Handle off = h5::create_dataset(g.id(), "x_sv_offset", H5T_STD_I64LE, {n_tasks, L1});
    h5::write_all(off.id(), H5T_NATIVE_INT64, sv_offset.data());
    h5::set_attr(off.id(), "description", "start of task t's layer-l spectrum in x_sv, -1 when not stored");
    h5::Handle layer_axis = h5::open_dataset(f, "/axes/layer");
    h5::attach_scale(off.id(), layer_axis.id(), 1);
    h5::Handle len = h5::create_dataset(g.id(), "x_sv_length", H5T_STD_I64LE, {n_tasks});
    h5::write_all(len.id(), H5T_NATIVE_INT64, sv_length.data());
    h5::set_attr(len.id(), "description", "length of each of task t's stored spectra: min(T, d)");

    // Mixer spectra: head 0's M of layers >= 1, T values each; m_sv, m_eig_re and m_eig_im
    // share m_offset and m_length.
    h5::set_attr(g.id(), "mixer_stored", spectra_name(plan.spec.output.mixer_spectra));
    const auto m_n = static_cast<hsize_t>(m_total);
    h5::DatasetOptions m_opt = opt;
    m_opt.chunk = {std::min<hsize_t>(m_n, 65536)};
    const std::string where = "; task t's layer l values are [m_offset[t,l] : m_offset[t,l] + m_length[t]]";
    m_sv = h5::create_dataset(g.id(), "m_sv", H5T_IEEE_F64LE, {m_n}, m_opt);
    h5::set_attr(m_sv.id(), "description",
                 "all singular values of head 0's mixer matrix M of layer l (after gap_fix), descending" + where);
    m_eig_re = h5::create_dataset(g.id(), "m_eig_re", H5T_IEEE_F64LE, {m_n}, m_opt);
    h5::set_attr(m_eig_re.id(), "description",
                 "real parts of the eigenvalues of head 0's mixer matrix M of layer l (after gap_fix), by "
                 "descending modulus, then real part, then imaginary part" +
                     where);
    m_eig_im = h5::create_dataset(g.id(), "m_eig_im", H5T_IEEE_F64LE, {m_n}, m_opt);
    h5::set_attr(m_eig_im.id(), "description", "imaginary parts of the eigenvalues, same order as m_eig_re" + where);
    h5::Handle moff = h5::create_dataset(g.id(), "m_offset", H5T_STD_I64LE, {n_tasks, L1});
    h5::write_all(moff.id(), H5T_NATIVE_INT64, m_offset.data());
    h5::set_attr(moff.id(), "description",
                 "start of task t's layer-l mixer spectrum in m_sv, m_eig_re and m_eig_im; -1 when not stored "
                 "(always at layer 0, which has no mixer)");
    h5::attach_scale(moff.id(), layer_axis.id(), 1);
    h5::Handle mlen = h5::create_dataset(g.id(), "m_length", H5T_STD_I64LE, {n_tasks});
    h5::write_all(mlen.id(), H5T_NATIVE_INT64, m_length.data());
    h5::set_attr(mlen.id(), "description", "length of each of task t's stored mixer spectra: T");
  }

  // Written last: a file that lacks it (creation interrupted) is not taken for a store.
  h5::set_attr(f, "format", "rcsweep");
  h5::flush(f);
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

bool is_disk_full(const std::string& message) {
  return message.find("No space left on device") != std::string::npos ||
         message.find("errno = 28") != std::string::npos;
}

Store Store::create(const std::filesystem::path& path, const plan::Plan& plan, const Provenance& prov, bool overwrite) {
  h5::init();
  const std::string p = path.string();
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path, ec))
    throw StoreError(p + " exists; pass --resume to continue it or --overwrite to replace it");
  if (std::filesystem::is_directory(path, ec))
    throw StoreError(p + " is a directory, not a store; --overwrite replaces only a file");
  const auto dir = path.parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw StoreError("cannot create " + p + ": directory " + dir.string() + " does not exist");
  if (plan.tasks.empty()) throw StoreError("cannot create " + p + ": the plan has no tasks");

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->load_plan(plan);
  // A new store is built under a temporary name next to it and linked into place only when
  // complete, so that a kill while the datasets are being allocated never leaves a half-made file
  // under the store's name: the same command then simply creates it again (replacing the leftover
  // .partial). --overwrite truncates the old store in place, which HDF5's lock refuses while a
  // writer has it open, and after a kill the same command replaces it again.
  const std::filesystem::path partial = overwrite ? path : std::filesystem::path(p + ".partial");
  // Every dataset's storage is allocated here, so a full disk shows now, before any work.
  const auto disk_full = [&](const StoreError& e) {
    return StoreError("cannot create " + p + ": the disk is full (" + e.what() +
                      "); the store is allocated in full when it is created: free space or write it elsewhere");
  };
  try {
    impl->file = h5::create_file(partial, /*truncate=*/true);
  } catch (const StoreError& e) {
    if (is_disk_full(e.what())) {
      std::filesystem::remove(partial, ec);  // what H5Fcreate began
      throw disk_full(e);
    }
    // Name the store the user asked for, not its temporary name.
    std::string what = e.what();
    const std::string temporary = "cannot create " + partial.string();
    if (what.starts_with(temporary)) what = "cannot create " + p + what.substr(temporary.size());
    throw StoreError(what);
  }
  try {
    impl->create_all(plan, prov);
    h5::flush(impl->file.id());
    if (!overwrite) {  // into place, unless somebody created the store meanwhile (link refuses)
      const std::string exists = p + " exists; pass --resume to continue it or --overwrite to replace it";
      if (::link(partial.c_str(), path.c_str()) == 0) {
        std::filesystem::remove(partial);
      } else if (errno == EEXIST) {
        throw StoreError(exists);
      } else {  // a file system without hard links: rename, which is atomic but replaces
        if (std::filesystem::exists(path, ec)) throw StoreError(exists);
        if (std::rename(partial.c_str(), path.c_str()) != 0)
          throw StoreError("cannot create " + p + ": " + std::strerror(errno));
      }
    }
  } catch (const StoreError& e) {
    impl.reset();  // close every handle, then do not leave a half-made store behind
    std::filesystem::remove(partial, ec);
    if (is_disk_full(e.what())) throw disk_full(e);
    throw;
  } catch (...) {
    impl.reset();
    std::filesystem::remove(partial, ec);
    throw;
  }
  return Store(std::move(impl));
}

Store Store::open_resume(const std::filesystem::path& path, const plan::Plan& plan, const Provenance& prov) {
  Store store = open_checked(path, plan, /*read_write=*/true);
  const hid_t f = store.impl_->file.id();
  guard_damage(path.string(), [&] {
    // Provenance of the run now writing; `created` stays the first run's.
    h5::set_attr_i32(f, "mpi_ranks", prov.mpi_ranks);
    h5::set_attr_i32(f, "threads", prov.threads);
    h5::set_attr(f, "finished", "");
    if (!store.impl_->platforms.exists())  // made before /provenance: its finished tasks stay "not recorded"
      store.impl_->platforms = detail::PlatformColumn::create(f, store.impl_->n_tasks);
    h5::flush(f);
    return 0;
  });
  return store;
}

Store Store::open_read(const std::filesystem::path& path, const plan::Plan& plan) {
  return open_checked(path, plan, /*read_write=*/false);
}

Store Store::open_checked(const std::filesystem::path& path, const plan::Plan& plan, bool read_write) {
  h5::init();
  const std::string p = path.string();
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = open_existing(path, read_write);
  const hid_t f = impl->file.id();
  guard_damage(p, [&] {
    check_identity(f, p);
    const std::string hash = h5::get_attr_string(f, "plan_hash");
    if (hash != plan.hash) {
      std::string name = h5::has_attr(f, "sweep_name") ? h5::get_attr_string(f, "sweep_name") : std::string("?");
      const auto made_with = split_lines(h5::has_attr(f, "overrides") ? h5::get_attr_string(f, "overrides") : "");
      const auto line = [](const std::vector<std::string>& o) {
        return o.empty() ? std::string("none") : config::overrides_line(o);
      };
      const bool overridden = !made_with.empty() || !plan.spec.overrides.empty();
      throw IdentityError(
          p + " (sweep '" + name + "', plan hash " + hash + ") was made from a different sweep file" +
          (overridden ? " or command-line overrides" : "") + " (plan hash " + plan.hash +
          (overridden ? "; the store's overrides: " + line(made_with) + ", this run's: " + line(plan.spec.overrides)
                      : std::string()) +
          "); use a new output file or --overwrite");
    }
    impl->load_plan(plan);
    if (h5::get_attr_u64(f, "n_tasks") != impl->n_tasks ||
        h5::get_attr_i64(f, "max_depth") != static_cast<std::int64_t>(plan.max_depth))
      throw StoreError("n_tasks or max_depth does not match its plan hash");
    if (!h5::link_exists(f, "theory"))
      throw IdentityError(p + " has no /theory: made by an older rcsweep; rerun with --overwrite");
    for (const char* name : {"m_sv", "m_eig_re", "m_eig_im", "m_offset", "m_length"})
      if (!h5::link_exists(f, std::string("spectra/") + name))
        throw IdentityError(p + " has no /spectra/" + name + ": made by an older rcsweep; rerun with --overwrite");
    impl->open_datasets();
    // Every dataset a task writes rows into: shape and type (a wrong one would garble the rows).
    const hsize_t n = impl->n_tasks, L1 = impl->n_layers, L = L1 - 1;
    for (std::string_view name : metrics::layer_metric_names)
      check_float_dataset(f, "/layers/" + std::string(name), {n, L1});
    for (std::string_view name : models::theory_names) check_float_dataset(f, "/theory/" + std::string(name), {n});
    if (impl->grad_log10) {
      check_float_dataset(f, "/grad/log10_g", {n, L});
      check_float_dataset(f, "/grad/stderr", {n, L});
    }
    if (impl->grad_log10_all) {
      check_float_dataset(f, "/grad/log10_g_all", {n, L, L});
      check_float_dataset(f, "/grad/stderr_all", {n, L, L});
    }
    impl->check_spectra_layout();
    read_status_column(impl->tasks.id(), impl->n_tasks);  // readable and valid
    return 0;
  });
  return Store(std::move(impl));
}

std::vector<TaskResult> Store::read_results(std::span<const std::uint64_t> tasks) const {
  h5::init();
  const Impl& s = *impl_;
  const std::size_t L1 = s.n_layers, L = L1 - 1;
  const auto read = [](const h5::Handle& d) {
    std::size_t n = 1;
    for (auto x : h5::dataset_dims(d.id())) n *= static_cast<std::size_t>(x);
    std::vector<double> v(n);
    if (n) h5::read_all(d.id(), H5T_NATIVE_DOUBLE, v.data());
    return v;
  };
  std::vector<std::vector<double>> layers, theory;
  for (const auto& d : s.layers) layers.push_back(read(d));
  for (const auto& d : s.theory) theory.push_back(read(d));
  const bool all = static_cast<bool>(s.grad_log10_all);
  const std::vector<double> g = s.n_grad_depths ? read(all ? s.grad_log10_all : s.grad_log10) : std::vector<double>{};
  const std::vector<double> ge = s.n_grad_depths ? read(all ? s.grad_stderr_all : s.grad_stderr)
                                                 : std::vector<double>{};
  const std::vector<double> x_sv = read(s.x_sv), m_sv = read(s.m_sv), m_re = read(s.m_eig_re), m_im = read(s.m_eig_im);
  std::vector<TaskRow> rows(s.n_tasks);
  if (s.n_tasks) h5::read_all(s.tasks.id(), s.types.mem.id(), rows.data());
  const std::vector<Platform> platform = s.platforms.read_all();

  std::vector<TaskResult> out;
  out.reserve(tasks.size());
  const std::size_t g_row = s.n_grad_depths * L;
  const auto slice = [](const std::vector<double>& v, std::int64_t off, std::int64_t n) {
    return off < 0 ? std::vector<double>{} : std::vector<double>(v.begin() + off, v.begin() + off + n);
  };
  for (const auto t : tasks) {
    if (t >= s.n_tasks) throw StoreError("read_results: task " + std::to_string(t) + " is not in the store");
    TaskResult r;
    r.task = t;
    r.status = static_cast<TaskStatus>(rows[t].status);
    r.wall_s = rows[t].wall_s;
    r.rank = rows[t].rank;
    r.message.assign(rows[t].message, strnlen(rows[t].message, message_bytes));
    r.platform = platform[t];
    r.layers.resize(L1);
    for (std::size_t l = 0; l < L1; ++l)
      for (std::size_t k = 0; k < layers.size(); ++k) r.layers[l][k] = layers[k][t * L1 + l];
    for (std::size_t k = 0; k < theory.size(); ++k) r.theory[k] = theory[k][t];
    if (g_row) {
      r.grad_log10.assign(g.begin() + static_cast<std::ptrdiff_t>(t * g_row),
                          g.begin() + static_cast<std::ptrdiff_t>((t + 1) * g_row));
      r.grad_stderr.assign(ge.begin() + static_cast<std::ptrdiff_t>(t * g_row),
                           ge.begin() + static_cast<std::ptrdiff_t>((t + 1) * g_row));
    }
    for (std::size_t l = 0; l < L1; ++l) {
      r.spectra.push_back(slice(x_sv, s.sv_offset[t * L1 + l], s.sv_length[t]));
      r.mixer_sv.push_back(slice(m_sv, s.m_offset[t * L1 + l], s.m_length[t]));
      r.mixer_eig_re.push_back(slice(m_re, s.m_offset[t * L1 + l], s.m_length[t]));
      r.mixer_eig_im.push_back(slice(m_im, s.m_offset[t * L1 + l], s.m_length[t]));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<TaskStatus> Store::task_status() const {
  h5::init();
  return read_status_column(impl_->tasks.id(), impl_->n_tasks);
}

namespace {
std::vector<bool> finished(const std::vector<TaskStatus>& status) {
  std::vector<bool> out(status.size());
  for (std::size_t t = 0; t < status.size(); ++t) out[t] = status[t] != TaskStatus::pending;
  return out;
}
}  // namespace

std::vector<std::pair<Platform, std::uint64_t>> Store::finished_by_platform() const {
  h5::init();
  return impl_->platforms.count(finished(task_status()));
}

void Store::write(std::span<const TaskResult> results) {
  if (results.empty()) return;
  h5::init();
  Impl& s = *impl_;
  const std::size_t L1 = s.n_layers;

  // Validate everything before writing anything.
  for (const TaskResult& r : results) {
    if (r.task >= s.n_tasks)
      throw StoreError("result for task " + std::to_string(r.task) + ", but the store has " +
                       std::to_string(s.n_tasks) + " tasks");
    if (r.layers.size() > L1 || r.spectra.size() > L1 || r.mixer_sv.size() > L1 || r.mixer_eig_re.size() > L1 ||
        r.mixer_eig_im.size() > L1)
      throw StoreError("result for task " + std::to_string(r.task) + " has more than " + std::to_string(L1) +
                       " layers");
    for (std::size_t l = 0; l < r.spectra.size(); ++l) {
      if (r.spectra[l].empty()) continue;
      const std::int64_t off = s.sv_offset[r.task * L1 + l];
      if (off < 0 || static_cast<std::int64_t>(r.spectra[l].size()) != s.sv_length[r.task])
        throw StoreError("result for task " + std::to_string(r.task) + ": layer " + std::to_string(l) +
                         " spectrum has " + std::to_string(r.spectra[l].size()) + " values, the store expects " +
                         (off < 0 ? std::string("none") : std::to_string(s.sv_length[r.task])));
    }
    const auto at = [](const std::vector<std::vector<double>>& v, std::size_t l) {
      return l < v.size() ? v[l].size() : 0;
    };
    for (std::size_t l = 0; l < L1; ++l) {
      const std::size_t n = at(r.mixer_sv, l);
      if (n == 0 && at(r.mixer_eig_re, l) == 0 && at(r.mixer_eig_im, l) == 0) continue;
      const std::int64_t off = s.m_offset[r.task * L1 + l];
      const auto want = static_cast<std::size_t>(s.m_length[r.task]);
      if (off < 0 || n != want || at(r.mixer_eig_re, l) != want || at(r.mixer_eig_im, l) != want)
        throw StoreError("result for task " + std::to_string(r.task) + ": layer " + std::to_string(l) +
                         " mixer spectrum has " + std::to_string(n) + " singular values and " +
                         std::to_string(at(r.mixer_eig_re, l)) + "/" + std::to_string(at(r.mixer_eig_im, l)) +
                         " eigenvalue parts, the store expects " +
                         (off < 0 ? std::string("none") : std::to_string(want)));
    }
  }

  // Rows in ascending task order (a hyperslab selection is written in file order); a task given
  // twice keeps its last result.
  std::vector<std::size_t> order(results.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return results[a].task < results[b].task; });
  std::vector<std::size_t> sel;
  for (std::size_t i = 0; i < order.size(); ++i)
    if (i + 1 == order.size() || results[order[i + 1]].task != results[order[i]].task) sel.push_back(order[i]);

  std::vector<h5::RowRun> runs;
  for (std::size_t i : sel) {
    const hsize_t t = results[i].task;
    if (!runs.empty() && runs.back().start + runs.back().count == t)
      ++runs.back().count;
    else
      runs.push_back({t, 1});
  }

  // 1. Layer rows, one H5Dwrite per metric.
  std::vector<double> buf(sel.size() * L1);
  for (std::size_t k = 0; k < s.layers.size(); ++k) {
    std::fill(buf.begin(), buf.end(), nan);
    for (std::size_t j = 0; j < sel.size(); ++j) {
      const auto& layers = results[sel[j]].layers;
      for (std::size_t l = 0; l < layers.size(); ++l) buf[j * L1 + l] = layers[l][k];
    }
    h5::write_rows(s.layers[k].id(), H5T_NATIVE_DOUBLE, runs, buf.data());
  }

  // 1b. Theory values, one H5Dwrite per quantity.
  std::vector<double> tbuf(sel.size());
  for (std::size_t k = 0; k < s.theory.size(); ++k) {
    for (std::size_t j = 0; j < sel.size(); ++j) tbuf[j] = results[sel[j]].theory[k];
    h5::write_rows(s.theory[k].id(), H5T_NATIVE_DOUBLE, runs, tbuf.data());
  }

  // 1c. Gradient norms: the last output depth into log10_g, all of them into log10_g_all.
  if (s.n_grad_depths > 0) {
    const std::size_t L = L1 - 1, block = s.n_grad_depths * L;
    std::vector<double> gbuf;
    const auto write_grad = [&](const h5::Handle& dset, std::vector<double> TaskResult::*field, bool all) {
      if (!dset) return;
      const std::size_t row = all ? block : L;
      gbuf.assign(sel.size() * row, nan);
      for (std::size_t j = 0; j < sel.size(); ++j) {
        const auto& v = results[sel[j]].*field;
        if (v.size() != block) continue;  // none computed (failed task): NaN
        std::copy(v.end() - static_cast<std::ptrdiff_t>(row), v.end(),
                  gbuf.begin() + static_cast<std::ptrdiff_t>(j * row));
      }
      h5::write_rows(dset.id(), H5T_NATIVE_DOUBLE, runs, gbuf.data());
    };
    write_grad(s.grad_log10, &TaskResult::grad_log10, false);
    write_grad(s.grad_stderr, &TaskResult::grad_stderr, false);
    write_grad(s.grad_log10_all, &TaskResult::grad_log10, true);
    write_grad(s.grad_stderr_all, &TaskResult::grad_stderr, true);
  }

  // 2. Spectra: per dataset, segments sorted by offset, adjacent ones merged, one H5Dwrite.
  const auto write_spectra = [&](hid_t dset, const std::vector<std::int64_t>& offsets,
                                 std::vector<std::vector<double>> TaskResult::*field) {
    struct Segment {
      std::int64_t offset;
      const std::vector<double>* values;
    };
    std::vector<Segment> segs;
    for (std::size_t i : sel) {
      const TaskResult& r = results[i];
      const auto& per_layer = r.*field;
      for (std::size_t l = 0; l < per_layer.size(); ++l)
        if (!per_layer[l].empty()) segs.push_back({offsets[r.task * L1 + l], &per_layer[l]});
    }
    if (segs.empty()) return;
    std::sort(segs.begin(), segs.end(), [](const Segment& a, const Segment& b) { return a.offset < b.offset; });
    std::vector<h5::RowRun> sv_runs;
    std::vector<double> sv;
    for (const Segment& g : segs) {
      const auto start = static_cast<hsize_t>(g.offset);
      const hsize_t n = g.values->size();
      if (!sv_runs.empty() && sv_runs.back().start + sv_runs.back().count == start)
        sv_runs.back().count += n;
      else
        sv_runs.push_back({start, n});
      sv.insert(sv.end(), g.values->begin(), g.values->end());
    }
    h5::write_rows(dset, H5T_NATIVE_DOUBLE, sv_runs, sv.data());
  };
  write_spectra(s.x_sv.id(), s.sv_offset, &TaskResult::spectra);
  write_spectra(s.m_sv.id(), s.m_offset, &TaskResult::mixer_sv);
  write_spectra(s.m_eig_re.id(), s.m_offset, &TaskResult::mixer_eig_re);
  write_spectra(s.m_eig_im.id(), s.m_offset, &TaskResult::mixer_eig_im);
  std::vector<const Platform*> platforms;
  for (std::size_t i : sel) platforms.push_back(&results[i].platform);
  s.platforms.write(runs, platforms);
  h5::flush(s.file.id());

  // 3. Only now the statuses: a task marked done always has its rows on disk.
  std::vector<TaskRow> rows(sel.size());
  for (std::size_t j = 0; j < sel.size(); ++j) {
    const TaskResult& r = results[sel[j]];
    TaskRow& row = rows[j];
    std::memset(&row, 0, sizeof row);
    row.id = r.task;
    row.point = s.task_point[r.task];
    row.replicate = s.task_replicate[r.task];
    row.status = static_cast<std::int8_t>(r.status);
    row.wall_s = r.wall_s;
    row.rank = r.rank;
    copy_message(row.message, r.message);
  }
  h5::write_rows(s.tasks.id(), s.types.mem.id(), runs, rows.data());
  h5::flush(s.file.id());
}

void Store::note_reused(const std::string& line) {
  h5::init();
  const hid_t f = impl_->file.id();
  const std::string before = h5::has_attr(f, "reused") ? h5::get_attr_string(f, "reused") : std::string();
  h5::set_attr(f, "reused", before + line + "\n");
  h5::flush(f);
}

void Store::mark_finished(const std::string& when) {
  h5::init();
  h5::set_attr(impl_->file.id(), "finished", when);
  h5::flush(impl_->file.id());
}

void Store::sync() {
  h5::init();
  h5::fsync_file(impl_->file.id());
}

StoreInfo read_info(const std::filesystem::path& path) {
  h5::init();
  const std::string p = path.string();
  h5::Handle file = open_existing(path, /*read_write=*/false);
  const hid_t f = file.id();
  return guard_damage(p, [&] {
    check_identity(f, p);
    StoreInfo info;
    info.format = h5::get_attr_string(f, "format");
    info.schema_version = static_cast<int>(h5::get_attr_i64(f, "schema_version"));
    auto str = [&](const char* name) { return h5::has_attr(f, name) ? h5::get_attr_string(f, name) : std::string(); };
    info.plan_hash = h5::get_attr_string(f, "plan_hash");
    info.config = str("config");
    info.overrides = split_lines(str("overrides"));
    info.created = str("created");
    info.finished = str("finished");
    info.reused = str("reused");
    info.rcsweep_version = str("rcsweep_version");
    info.git_commit = str("git_commit");
    info.host = str("host");
    info.blas = str("blas");
    info.hdf5_version = str("hdf5_version");
    info.mpi_ranks = static_cast<int>(h5::get_attr_i64(f, "mpi_ranks"));
    info.threads = static_cast<int>(h5::get_attr_i64(f, "threads"));
    info.n_tasks = h5::get_attr_u64(f, "n_tasks");
    info.n_points = h5::get_attr_u64(f, "n_points");
    info.max_depth = static_cast<int>(h5::get_attr_i64(f, "max_depth"));

    h5::Handle tasks = h5::open_dataset(f, "/tasks");
    const std::vector<TaskStatus> status = read_status_column(tasks.id(), info.n_tasks);
    info.platforms = detail::PlatformColumn::open(f, info.n_tasks).count(finished(status));
    for (TaskStatus st : status) {
      switch (st) {
        case TaskStatus::pending: ++info.n_pending; break;
        case TaskStatus::done: ++info.n_done; break;
        case TaskStatus::failed: ++info.n_failed; break;
        case TaskStatus::diverged: ++info.n_diverged; break;
      }
    }
    const auto n = static_cast<hsize_t>(info.n_tasks), L1 = static_cast<hsize_t>(info.max_depth) + 1;
    for (std::string_view name : metrics::layer_metric_names)
      check_float_dataset(f, "/layers/" + std::string(name), {n, L1});
    info.datasets = h5::dataset_paths(f);
    h5::Handle axes = h5::open_group(f, "/axes");
    const std::string order = h5::get_attr_string(axes.id(), "order");
    for (std::size_t pos = 0; pos < order.size();) {
      const std::size_t comma = std::min(order.find(',', pos), order.size());
      info.axes.push_back(order.substr(pos, comma - pos));
      pos = comma + 1;
    }
    return info;
  });
}

}  // namespace rcsweep::store
