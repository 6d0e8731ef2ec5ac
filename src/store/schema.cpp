// A new store: every dataset with its final shape, descriptions and attributes (docs/SCHEMA.md),
// built under a temporary name and linked into place when complete.
#include "store/store_impl.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>

#include "metrics/registry.hpp"
#include "store/file_mode.hpp"

namespace rcsweep::store {
namespace {

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

std::string theory_description(std::string_view name) {
  static const std::vector<std::pair<std::string_view, std::string_view>> text = {
      {"C_M", "lambda-skip Thm 4.1: C_M = max over layers and heads of ||M||_F"},
      {"S", "lambda-skip Thm 4.1: S = max over layers of ||C_V||_F (W_V; I_d for SSM mixers: sqrt(d))"},
      {"lambda_min", "lambda-skip Thm 4.1: (a + sqrt a) S C_M / (1 - a), the |lambda| above which the "
                     "condition holds (a = collapse_rate)"},
      {"a_star", "lambda-skip Thm 4.1: lambda^2 / (S C_M + |lambda|)^2, the largest rate a the condition admits"},
      {"b", "lambda-skip Thm 4.1: 2 |lambda| N d S C_M / (lambda^2 - a (S C_M + |lambda|)^2) / a^L; NaN when "
            "the condition fails"},
      {"bound_applies", "lambda-skip Thm 4.1: 1 if every hypothesis holds (bound_reason 0: the stack of eq. (6) "
                        "with the rms norm, unit rows in X_0..X_{L-1}, the condition, mu(X_0)^2 >= b), else 0; NaN "
                        "when only mu(X_0)^2 >= b is left and mu_rel is not computed"},
      {"bound_holds", "lambda-skip Thm 4.1: 1 if mu(X_L)^2 >= a^L mu(X_0)^2, else 0 (observed; a guarantee only "
                      "where bound_applies = 1); NaN when mu_rel is not computed"},
      {"bound_reason", "lambda-skip Thm 4.1: why the bound applies or not, the first failing hypothesis: "
                       "0 = applies; 1 = not covered (the stack is not eq. (6): norm other than rms, a gate, an "
                       "MLP, several heads or the s4d mixer); 2 = rows not unit (a row of X_0..X_{L-1}, the input "
                       "included, has norm off 1 by more than 1e-9); 3 = the condition fails; 4 = mu(X_0)^2 < b; "
                       "NaN as bound_applies"},
  };
  for (const auto& [n, d] : text)
    if (n == name) return std::string(d) + "; NaN for a task not done";
  return "theory quantity " + std::string(name) + "; NaN for a task not done";
}

/// Throw IdentityError unless `file` is an rcsweep store of schema 1.

}  // namespace

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
  h5::set_attr_i32(f, "blas_threads", prov.blas_threads);
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

/// /tasks, all pending.
void Store::Impl::create_tasks() {
  const hid_t f = file.id();
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

/// /layers/<metric>, one per entry of the metric registry (metrics/registry.hpp: name,
/// description and units): NaN-filled by the fill value; chunks of whole rows. Group attribute
/// `computed`: the metrics the sweep computes ([output] metrics), space-separated; the others stay NaN.
void Store::Impl::create_layers(const plan::Plan& plan) {
  const hid_t f = file.id();
  h5::Handle layers_group = h5::create_group(f, "layers");
  h5::set_attr(layers_group.id(), "computed", metrics::names_of(plan.spec.output.metrics));
  h5::Handle layer_axis = h5::open_dataset(f, "/axes/layer");
  for (std::size_t k = 0; k < layers.size(); ++k) create_metric(layers_group.id(), layer_axis.id(), k);
}

void Store::Impl::create_metric(hid_t group, hid_t layer_axis, std::size_t k) {
  const std::size_t L1 = n_layers;
  h5::DatasetOptions opt;
  opt.chunk = {chunking.task_rows, L1};
  opt.allocate_early = !chunking.by_task;
  opt.fill = &nan;
  opt.fill_type = H5T_NATIVE_DOUBLE;
  const metrics::MetricInfo& metric = metrics::layer_metrics[k];  // the registry's entry
  layers[k] = h5::create_dataset(group, std::string(metric.name), H5T_IEEE_F64LE, {n_tasks, L1}, opt);
  h5::set_attr(layers[k].id(), "description", std::string(metric.description));
  h5::set_attr(layers[k].id(), "units", std::string(metric.units));
  h5::attach_scale(layers[k].id(), layer_axis, 1);
}

/// /theory/<name>: one NaN-filled value per task.
void Store::Impl::create_theory() {
  const hid_t f = file.id();
  h5::Handle theory_group = h5::create_group(f, "theory");
  h5::set_attr(theory_group.id(), "description",
               "per-task quantities of lambda-skip Theorem 4.1 (MODELS.md \"Per-task theory quantities\")");
  h5::DatasetOptions opt;
  opt.chunk = {chunking.theory_rows};
  opt.allocate_early = !chunking.by_task;
  opt.fill = &nan;
  opt.fill_type = H5T_NATIVE_DOUBLE;
  for (std::size_t k = 0; k < theory.size(); ++k) {
    const std::string name(models::theory_names[k]);
    theory[k] = h5::create_dataset(theory_group.id(), name, H5T_IEEE_F64LE, {n_tasks}, opt);
    h5::set_attr(theory[k].id(), "description", theory_description(name));
  }
}

/// /grad: gradient norms, NaN-filled, only when asked for.
void Store::Impl::create_gradients(const plan::Plan& plan) {
  const hid_t f = file.id();
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
    opt.chunk[0] = plan::grad_chunk_rows(chunking, std::vector<std::uint64_t>(dims.begin(), dims.end()));
    opt.allocate_early = !chunking.by_task;
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

/// /spectra/<name>: where each task's layer spectra start (-1: not stored), written now. In a store
/// allocated by task, chunked with fill value -1 and written only when some spectrum is stored, so
/// a sweep without spectra takes no space for them.
h5::Handle Store::Impl::create_offsets(hid_t group, const std::string& name, const std::vector<std::int64_t>& offsets) {
  h5::DatasetOptions opt;
  const bool any = std::any_of(offsets.begin(), offsets.end(), [](std::int64_t o) { return o >= 0; });
  const std::int64_t none = -1;
  if (chunking.by_task) {
    opt.chunk = {std::max<hsize_t>(1, std::min<hsize_t>(n_tasks, std::max<hsize_t>(1, 65536 / n_layers))), n_layers};
    opt.fill = &none;
    opt.fill_type = H5T_NATIVE_INT64;
    opt.allocate_early = false;
  }
  h5::Handle d = h5::create_dataset(group, name, H5T_STD_I64LE, {n_tasks, n_layers}, opt);
  if (any || !chunking.by_task) h5::write_all(d.id(), H5T_NATIVE_INT64, offsets.data());
  return d;
}

/// /spectra: one flat NaN-filled vector plus where each task's layer spectrum starts.
void Store::Impl::create_spectra(const plan::Plan& plan) {
  const hid_t f = file.id();
  h5::Handle g = h5::create_group(f, "spectra");
  h5::set_attr(g.id(), "stored", spectra_name(plan.spec.output.spectra));
  const auto total = static_cast<hsize_t>(sv_total);
  h5::DatasetOptions opt;
  opt.chunk = {chunking.sv_chunk};
  opt.allocate_early = !chunking.by_task;
  opt.fill = &nan;
  opt.fill_type = H5T_NATIVE_DOUBLE;
  x_sv = h5::create_dataset(g.id(), "x_sv", H5T_IEEE_F64LE, {total}, opt);
  h5::set_attr(x_sv.id(), "description",
               "singular values of X_l / ||X_l||_F (unit Frobenius norm), descending; task t's layer l "
               "spectrum is x_sv[x_sv_offset[t,l] : x_sv_offset[t,l] + x_sv_length[t]]");
  h5::Handle off = create_offsets(g.id(), "x_sv_offset", sv_offset);
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
  m_opt.chunk = {chunking.m_chunk};
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
  h5::Handle moff = create_offsets(g.id(), "m_offset", m_offset);
  h5::set_attr(moff.id(), "description",
               "start of task t's layer-l mixer spectrum in m_sv, m_eig_re and m_eig_im; -1 when not stored "
               "(always at layer 0, which has no mixer)");
  h5::attach_scale(moff.id(), layer_axis.id(), 1);
  h5::Handle mlen = h5::create_dataset(g.id(), "m_length", H5T_STD_I64LE, {n_tasks});
  h5::write_all(mlen.id(), H5T_NATIVE_INT64, m_length.data());
  h5::set_attr(mlen.id(), "description", "length of each of task t's stored mixer spectra: T");
}

void Store::Impl::create_all(const plan::Plan& plan, const Provenance& prov) {
  const hid_t f = file.id();
  write_root_attrs(plan, prov);
  write_axes(plan);
  write_points(plan);
  types = task_types();
  create_tasks();
  platforms = detail::PlatformColumn::create(f, n_tasks);
  create_layers(plan);
  create_theory();
  if (n_grad_depths > 0) create_gradients(plan);
  create_spectra(plan);

  // Written last: a file that lacks it (creation interrupted) is not taken for a store.
  h5::set_attr(f, "format", "rcsweep");
  h5::flush(f);
}

bool is_disk_full(const std::string& message) {
  return message.find("No space left on device") != std::string::npos ||
         message.find("errno = 28") != std::string::npos;
}

void check_output(const WriterLock& lock, bool overwrite) {
  const std::string p = lock.given().string();
  const std::filesystem::path& path = lock.path();
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(path, ec);
  if (std::filesystem::exists(status)) {
    if (!overwrite) throw StoreError(p + " exists; pass --resume to continue it or --overwrite to replace it");
    if (std::filesystem::is_directory(status))
      throw StoreError(p + " is a directory, not a store; --overwrite replaces only a file");
    if (!std::filesystem::is_regular_file(status))
      throw StoreError(p + " is not a regular file; --overwrite replaces only a store");
  }
  const auto dir = path.parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw StoreError("cannot create " + p + ": directory " + dir.string() + " does not exist");
}

namespace {

/// The descriptor HDF5 writes `file` through; -1 with a driver that has none.
int descriptor_of(hid_t file) {
  h5::Handle fapl(H5Fget_access_plist(file), "H5Fget_access_plist");
  if (H5Pget_driver(fapl.id()) != H5FD_SEC2) return -1;
  void* handle = nullptr;
  h5::check(H5Fget_vfd_handle(file, fapl.id(), &handle), "H5Fget_vfd_handle");
  return *static_cast<int*>(handle);
}

/// Whether this process holds an HDF5 file lock on the file `st` describes: a descriptor HDF5
/// has open on it holds an flock, or the process a POSIX lock (/proc/self/fdinfo lists both).
/// rcsweep's readers open without a lock; where /proc cannot tell, an open file counts as locked.
bool locked_through_hdf5_here(const struct stat& st) {
  const ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE);
  if (n <= 0) return false;
  std::vector<hid_t> ids(static_cast<std::size_t>(n));
  const ssize_t got = H5Fget_obj_ids(H5F_OBJ_ALL, H5F_OBJ_FILE, ids.size(), ids.data());
  for (ssize_t i = 0; i < got; ++i) {
    struct stat open {};
    const int fd = descriptor_of(ids[static_cast<std::size_t>(i)]);
    if (fd < 0 || ::fstat(fd, &open) != 0 || open.st_dev != st.st_dev || open.st_ino != st.st_ino) continue;
    std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
    if (!info) return true;
    for (std::string line; std::getline(info, line);)
      if (line.rfind("lock:", 0) == 0 &&
          (line.find("FLOCK") != std::string::npos || line.find("POSIX") != std::string::npos))
        return true;  // POSIX: flock emulated on NFS, which closing the probe's descriptor would drop
  }
  return false;
}

/// Throw StoreError (open_elsewhere_message) when another program holds HDF5's file lock on the
/// store at `target` (`old`: its lstat), which a replacement would pull from under it: a program
/// that reads it would go on reading a file that is no longer the store. rcsweep's own readers take
/// no lock.
void refuse_if_open_elsewhere(const std::filesystem::path& target, const struct stat& old, const std::string& p) {
  if (S_ISREG(old.st_mode) && !locked_through_hdf5_here(old)) refuse_open_elsewhere(target, p);
}

/// Run `fn(fd)` on a descriptor of the file HDF5 writes `file` through: its own, or with a driver
/// that has none, one opened by name for the call.
template <class F>
void with_descriptor(hid_t file, const std::filesystem::path& path, const std::string& name, F&& fn) {
  if (const int fd = descriptor_of(file); fd >= 0) return fn(fd);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw StoreError("cannot open " + name + ": " + std::strerror(errno));
  try {
    fn(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace

Store Store::build(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov) {
  h5::init();
  const std::string p = lock.given().string();
  if (plan.tasks.empty()) throw StoreError("cannot create " + p + ": the plan has no tasks");
  auto impl = std::make_unique<Impl>();
  impl->lock = lock;
  impl->path = lock.given();
  impl->load_plan(plan);
  // A store that will be replaced (--overwrite, growth, merge --overwrite): only by a user who may
  // write it (the replacement keeps its mode), and not while another program has it open;
  // refused before any work (publish() looks again for the latter).
  if (struct stat old{}; ::lstat(lock.path().c_str(), &old) == 0) {
    refuse_unwritable_replacement(lock.path(), p);
    refuse_if_open_elsewhere(lock.path(), old, p);
  }
  // A temporary name that no other process has (O_EXCL), so that a kill while the datasets are
  // being allocated never leaves a half-made file under the store's name; the next writer of the
  // store removes such leftovers (WriterLock::acquire).
  impl->unpublished.path = lock.make_temporary();
  // Every dataset's storage is allocated here (a store allocated by task: its tables), so a full
  // disk shows now, before any work.
  const auto disk_full = [&](const StoreError& e) {
    return StoreError("cannot create " + p + ": the disk is full (" + e.what() + "); " +
                      (impl->chunking.by_task ? "its tables are allocated when it is created, its results as tasks "
                                                "finish"
                                              : "the store is allocated in full when it is created") +
                      ": free space or write it elsewhere");
  };
  try {
    impl->file = h5::create_file(impl->unpublished.path, /*truncate=*/true);
    // The temporary is made private (mode 0600); the store gets the mode of any new file of the
    // user (publish gives a replacement the old store's instead).
    with_descriptor(impl->file.id(), impl->unpublished.path, p,
                    [&](int fd) { give_new_file_mode(fd, lock.path().parent_path(), p); });
    impl->create_all(plan, prov);
    h5::flush(impl->file.id());
  } catch (const StoreError& e) {
    if (is_disk_full(e.what())) throw disk_full(e);
    // Name the store the user asked for, not its temporary name.
    std::string what = e.what();
    const std::string temporary = impl->unpublished.path.string();
    for (std::size_t at; (at = what.find(temporary)) != std::string::npos;) what.replace(at, temporary.size(), p);
    throw StoreError(what);
  }  // on any exception the Impl closes the file, then removes it
  return Store(std::move(impl));
}

void Store::publish(bool replace) {
  Impl& s = *impl_;
  if (s.unpublished.path.empty()) return;
  const std::filesystem::path& temporary = s.unpublished.path;
  const std::filesystem::path& target = s.lock->path();
  const std::string p = s.path.string();
  const std::string exists = p + " exists; pass --resume to continue it or --overwrite to replace it";
  if (replace) {
    struct stat old {};
    const bool had_old = ::lstat(target.c_str(), &old) == 0;
    if (had_old && !S_ISREG(old.st_mode))
      throw StoreError(p + " is not a regular file; --overwrite replaces only a store");
    // The replacement is the old store's for everyone who could use that: its mode, group, owner.
    if (had_old) with_descriptor(s.file.id(), temporary, p, [&](int fd) { keep_mode_and_owner(fd, target, old, p); });
    // Durable before it replaces anything: the old store is lost only once the new one is on disk.
    h5::fsync_file(s.file.id());
    if (had_old) refuse_if_open_elsewhere(target, old, p);
    if (std::rename(temporary.c_str(), target.c_str()) != 0)
      throw StoreError("cannot replace " + p + ": " + std::strerror(errno));
    fsync_directory(target);
  } else if (::link(temporary.c_str(), target.c_str()) == 0) {
    ::unlink(temporary.c_str());
  } else if (errno == EEXIST) {
    throw StoreError(exists);
  } else {  // a file system without hard links: rename, which is atomic but would replace
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(target, ec))) throw StoreError(exists);
    if (std::rename(temporary.c_str(), target.c_str()) != 0)
      throw StoreError("cannot create " + p + ": " + std::strerror(errno));
  }
  s.unpublished.path.clear();
  s.lock->release_unlinked();  // a replaced store's inode: its space is freed now, not at the end of the run
}

Store Store::create(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov, bool overwrite) {
  check_output(lock, overwrite);
  Store store = build(lock, plan, prov);
  store.publish(overwrite);
  return store;
}

Store Store::create(const std::filesystem::path& path, const plan::Plan& plan, const Provenance& prov, bool overwrite) {
  return create(WriterLock::acquire(path), plan, prov, overwrite);
}

}  // namespace rcsweep::store
