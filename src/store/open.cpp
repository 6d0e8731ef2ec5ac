// Opening an existing store: identity and layout checks, resume, and the summary of `info`.
#include "store/store_impl.hpp"
#include "store/validate.hpp"

namespace rcsweep::store {

namespace {
/// Throw StoreError "/PATH is missing" unless a dataset is at `path` (each group on the way
/// checked, so that no HDF5 error stands for a missing object).
void require_dataset(hid_t f, const std::string& path) {
  std::string at;
  for (std::size_t pos = 0; pos <= path.size();) {
    const std::size_t slash = std::min(path.find('/', pos), path.size());
    at += (at.empty() ? "" : "/") + path.substr(pos, slash - pos);
    if (!h5::link_exists(f, at)) throw StoreError("/" + at + " is missing");
    pos = slash + 1;
  }
  H5O_info_t info;
  h5::check(H5Oget_info_by_name2(f, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT), "H5Oget_info " + path);
  if (info.type != H5O_TYPE_DATASET) throw StoreError("/" + path + " is not a dataset");
}
}  // namespace

std::size_t required_metrics() {
  if (const char* v = std::getenv("RCSWEEP_TEST_CORE_METRICS"); v && *v >= '0' && *v <= '9') {  // digits only
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (*end == '\0' && n >= 1 && n <= metrics::n_core_metrics) return n;
  }
  return metrics::n_core_metrics;
}

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
    if (raw[i] < 0 || raw[i] > 5)  // HDF5 turns a value outside the enum into -1
      throw StoreError("task " + std::to_string(i) + " has an invalid status (not one of " + status_values + ")");
    out[i] = static_cast<TaskStatus>(raw[i]);
  }
  return out;
}

void check_task_fields(hid_t tasks) {
  h5::Handle type(H5Dget_type(tasks), "H5Dget_type /tasks");
  if (H5Tget_class(type.id()) != H5T_COMPOUND || H5Tget_member_index(type.id(), "status") < 0) {
    h5::error_text();  // clear the stack of the failed lookup
    throw StoreError("/tasks is not a task table (no 'status' field)");
  }
  struct Field {
    const char* name;
    hid_t type;        // the type it must equal, or -1: checked below (status, message)
    const char* what;  // in the message
  };
  const Field fields[] = {{"id", H5T_STD_U64LE, "uint64"},           {"point", H5T_STD_U64LE, "uint64"},
                          {"replicate", H5T_STD_I32LE, "int32"},     {"status", -1, "an int8 enumeration of statuses"},
                          {"wall_s", H5T_IEEE_F64LE, "float64"},     {"rank", H5T_STD_I32LE, "int32"},
                          {"message", -1, "a fixed 256-byte string"}};
  for (const Field& field : fields) {
    const int index = H5Tget_member_index(type.id(), field.name);
    if (index < 0) {
      h5::error_text();
      throw StoreError("/tasks has no '" + std::string(field.name) + "' field");
    }
    h5::Handle member(H5Tget_member_type(type.id(), static_cast<unsigned>(index)),
                      "H5Tget_member_type " + std::string(field.name));
    bool ok = false;
    if (field.type >= 0) {
      ok = H5Tequal(member.id(), field.type) > 0;
    } else if (std::string_view(field.name) == "message") {
      ok = H5Tget_class(member.id()) == H5T_STRING && H5Tis_variable_str(member.id()) == 0 &&
           H5Tget_size(member.id()) == message_bytes;
    } else if (H5Tget_class(member.id()) == H5T_ENUM && H5Tget_size(member.id()) == 1) {
      // Every member one of the statuses, with its value (stores written before not_needed have
      // the first four only).
      const int n = H5Tget_nmembers(member.id());
      ok = n > 0;
      for (int k = 0; ok && k < n; ++k) {
        char* name = H5Tget_member_name(member.id(), static_cast<unsigned>(k));
        std::int8_t value = -1;
        ok = name != nullptr && H5Tget_member_value(member.id(), static_cast<unsigned>(k), &value) >= 0 &&
             std::any_of(status_members().begin(), status_members().end(),
                         [&](const auto& m) { return m.first == name && m.second == value; });
        if (name) H5free_memory(name);
      }
    }
    h5::error_text();  // clear the stack of any failed lookup above
    if (!ok) throw StoreError("/tasks field '" + std::string(field.name) + "' is not " + field.what);
  }
}

std::vector<TaskStatus> check_structure(hid_t f, std::uint64_t n_tasks, std::int64_t max_depth,
                                        const StatusRule& rule) {
  // check_description (root attributes, the stored sweep, links and storage, /axes, /points)
  // comes first, in read_info and open_checked.
  if (max_depth < 0 || max_depth > std::numeric_limits<int>::max() - 1)
    throw StoreError("max_depth = " + std::to_string(max_depth) + " is out of range");
  require_dataset(f, "tasks");
  h5::Handle tasks = h5::open_dataset(f, "/tasks");
  check_task_fields(tasks.id());
  std::vector<TaskStatus> status = read_status_column(tasks.id(), n_tasks);
  check_task_ids(tasks.id(), n_tasks, static_cast<int>(std::max<std::uint64_t>(rule.replicates, 1)));
  check_statuses_fit(status, rule);

  const hsize_t n = n_tasks, L1 = static_cast<hsize_t>(max_depth) + 1, L = L1 - 1;
  // The core metrics' datasets are required; a later metric's is checked where the store has it
  // (a store made before the metric lacks it: read as NaN, created by a resume).
  const std::size_t required = required_metrics();
  for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k) {
    const std::string name = "layers/" + std::string(metrics::layer_metric_names[k]);
    if (k >= required && !(h5::link_exists(f, "layers") && h5::link_exists(f, name))) continue;
    require_dataset(f, name);
    check_float_dataset(f, "/" + name, {n, L1});
  }
  // Groups and datasets that stores of older rcsweeps, or sweeps without them, do not have: their
  // absence is judged against the plan (open_checked).
  if (h5::link_exists(f, "theory"))
    for (std::string_view name : models::theory_names) check_float_dataset(f, "/theory/" + std::string(name), {n});
  if (h5::link_exists(f, "grad")) {
    for (const char* name : {"log10_g", "stderr"})
      if (h5::link_exists(f, std::string("grad/") + name)) check_float_dataset(f, std::string("/grad/") + name, {n, L});
    for (const char* name : {"log10_g_all", "stderr_all"})
      if (h5::link_exists(f, std::string("grad/") + name))
        check_float_dataset(f, std::string("/grad/") + name, {n, L, L});
  }
  if (h5::link_exists(f, "spectra")) {
    for (const char* name : {"x_sv", "m_sv", "m_eig_re", "m_eig_im"})
      if (h5::link_exists(f, std::string("spectra/") + name))
        check_dataset(f, std::string("/spectra/") + name, H5T_IEEE_F64LE, "float64", {1}, /*any_length=*/true);
    for (const char* name : {"x_sv_offset", "m_offset"})
      if (h5::link_exists(f, std::string("spectra/") + name))
        check_dataset(f, std::string("/spectra/") + name, H5T_STD_I64LE, "int64", {n, L1});
    for (const char* name : {"x_sv_length", "m_length"})
      if (h5::link_exists(f, std::string("spectra/") + name))
        check_dataset(f, std::string("/spectra/") + name, H5T_STD_I64LE, "int64", {n});
  }
  if (h5::link_exists(f, "provenance") && h5::link_exists(f, "provenance/platform"))
    check_dataset(f, "/provenance/platform", H5T_STD_I16LE, "int16", {n});
  return status;
}

Store Store::open_resume(const std::filesystem::path& path, const plan::Plan& plan, const Provenance& prov) {
  return open_resume(WriterLock::acquire(path), plan, prov);
}

Store Store::open_resume(const WriterLock& lock, const plan::Plan& plan, const Provenance& prov) {
  const std::filesystem::path& path = lock.given();
  // Every check first on the file opened read-only, which writes nothing: HDF5 itself writes to a
  // file opened for writing, so a store refused after that would not be left as it was.
  open_checked(path, plan, /*read_write=*/false);
  Store store = open_checked(path, plan, /*read_write=*/true);
  store.impl_->lock = lock;
  const hid_t f = store.impl_->file.id();
  guard_damage(path.string(), [&] {
    // Provenance of the run now writing; `created` stays the first run's.
    h5::set_attr_i32(f, "mpi_ranks", prov.mpi_ranks);
    h5::set_attr_i32(f, "threads", prov.threads);
    h5::set_attr_i32(f, "blas_threads", prov.blas_threads);
    h5::set_attr(f, "finished", "");
    if (!store.impl_->platforms.exists())  // made before /provenance: its finished tasks stay "not recorded"
      store.impl_->platforms = detail::PlatformColumn::create(f, store.impl_->n_tasks);
    h5::flush(f);
    return 0;
  });
  // A store made before a metric of the registry: its dataset, NaN for the tasks finished before,
  // so that the tasks run now record it. A failure here (a full disk) is no damage of the store.
  try {
    store.impl_->create_missing_metrics(plan);
    h5::flush(f);
  } catch (const StoreError& e) {
    throw StoreError(path.string() + ": cannot add the /layers datasets of the metrics it lacks (" + e.what() + ")");
  }
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
    check_description(f);
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
    check_structure(f, impl->n_tasks, plan.max_depth,
                    {plan.spec.adaptive.enabled(), plan.spec.adaptive.min,
                     static_cast<std::uint64_t>(std::max(plan.spec.replicates, 1))});
    if (!h5::link_exists(f, "theory"))
      throw IdentityError(p + " has no /theory: made by an older rcsweep; rerun with --overwrite");
    for (const char* name : {"m_sv", "m_eig_re", "m_eig_im", "m_offset", "m_length"})
      if (!h5::link_exists(f, std::string("spectra/") + name))
        throw IdentityError(p + " has no /spectra/" + name + ": made by an older rcsweep; rerun with --overwrite");
    impl->open_datasets();
    // The gradient datasets this plan writes (check_structure checked /layers, /theory and any
    // /grad present).
    const hsize_t n = impl->n_tasks, L1 = impl->n_layers, L = L1 - 1;
    if (impl->grad_log10) {
      check_float_dataset(f, "/grad/log10_g", {n, L});
      check_float_dataset(f, "/grad/stderr", {n, L});
    }
    if (impl->grad_log10_all) {
      check_float_dataset(f, "/grad/log10_g_all", {n, L, L});
      check_float_dataset(f, "/grad/stderr_all", {n, L, L});
    }
    impl->check_spectra_layout();
    return 0;
  });
  return Store(std::move(impl));
}

StoreInfo read_info(const std::filesystem::path& path) {
  h5::init();
  const std::string p = path.string();
  h5::Handle file = open_existing(path, /*read_write=*/false);
  const hid_t f = file.id();
  return guard_damage(p, [&] {
    check_identity(f, p);
    const StoreLayout layout = check_description(f);
    StoreInfo info;
    info.format = h5::get_attr_string(f, "format");
    info.schema_version = static_cast<int>(h5::get_attr_i64(f, "schema_version"));
    // Every attribute read below was checked (check_description): present where required, of its
    // type and bounded size.
    auto str = [&](const char* name) { return h5::has_attr(f, name) ? h5::get_attr_string(f, name) : std::string(); };
    info.plan_hash = h5::get_attr_string(f, "plan_hash");
    info.config = str("config");
    info.overrides = split_lines(str("overrides"));
    info.created = str("created");
    info.finished = str("finished");
    info.reused = split_lines(str("reused"));
    info.rcsweep_version = str("rcsweep_version");
    info.git_commit = str("git_commit");
    info.host = str("host");
    info.blas = str("blas");
    info.hdf5_version = str("hdf5_version");
    info.mpi_ranks = static_cast<int>(h5::get_attr_i64(f, "mpi_ranks"));
    info.threads = static_cast<int>(h5::get_attr_i64(f, "threads"));
    if (h5::has_attr(f, "blas_threads")) info.blas_threads = static_cast<int>(h5::get_attr_i64(f, "blas_threads"));
    info.n_tasks = layout.n_tasks;
    info.n_points = layout.n_points;
    info.max_depth = layout.max_depth;
    const StatusRule rule{layout.spec.adaptive.enabled(), layout.spec.adaptive.min,
                          static_cast<std::uint64_t>(layout.replicates)};
    const std::vector<TaskStatus> status = check_structure(f, info.n_tasks, info.max_depth, rule);
    info.platforms = detail::PlatformColumn::open(f, info.n_tasks).count(finished(status));
    for (TaskStatus st : status) {
      switch (st) {
        case TaskStatus::pending: ++info.n_pending; break;
        case TaskStatus::done: ++info.n_done; break;
        case TaskStatus::failed: ++info.n_failed; break;
        case TaskStatus::diverged: ++info.n_diverged; break;
        case TaskStatus::not_needed: ++info.n_not_needed; break;
        case TaskStatus::vanished: ++info.n_vanished; break;
      }
    }
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
