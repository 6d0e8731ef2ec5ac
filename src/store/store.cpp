// The store: results written in batches (rows, flush, statuses, flush), read back, and task
// statuses (schema version 1, docs/SCHEMA.md). Creation: schema.cpp; opening: open.cpp.
#include "store/store_impl.hpp"

namespace rcsweep::store {

const char* to_string(TaskStatus s) {
  switch (s) {
    case TaskStatus::pending: return "pending";
    case TaskStatus::done: return "done";
    case TaskStatus::failed: return "failed";
    case TaskStatus::diverged: return "diverged";
    case TaskStatus::not_needed: return "not needed";
    case TaskStatus::vanished: return "vanished";
  }
  return "unknown";
}

std::string hdf5_library_version() {
  h5::init();
  return h5::library_version();
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

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
  for (const auto& d : s.layers)  // a metric the store lacks (made before it): NaN
    layers.push_back(d ? read(d) : std::vector<double>(s.n_tasks * L1, nan));
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

std::vector<bool> finished(const std::vector<TaskStatus>& status) {
  std::vector<bool> out(status.size());
  for (std::size_t t = 0; t < status.size(); ++t)
    out[t] = status[t] != TaskStatus::pending && status[t] != TaskStatus::not_needed;
  return out;
}

std::vector<std::pair<Platform, std::uint64_t>> Store::finished_by_platform() const {
  h5::init();
  return impl_->platforms.count(finished(task_status()));
}

namespace {

/// Which results a batch writes: the last result of each task, in ascending task order (a
/// hyperslab selection is written in file order).
std::vector<std::size_t> last_of_each_task(std::span<const TaskResult> results) {
  std::vector<std::size_t> order(results.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return results[a].task < results[b].task; });
  std::vector<std::size_t> sel;
  for (std::size_t i = 0; i < order.size(); ++i)
    if (i + 1 == order.size() || results[order[i + 1]].task != results[order[i]].task) sel.push_back(order[i]);
  return sel;
}

/// The runs of consecutive task rows that the selected results fill.
std::vector<h5::RowRun> task_runs(std::span<const TaskResult> results, const std::vector<std::size_t>& sel) {
  std::vector<h5::RowRun> runs;
  for (std::size_t i : sel) {
    const hsize_t t = results[i].task;
    if (!runs.empty() && runs.back().start + runs.back().count == t)
      ++runs.back().count;
    else
      runs.push_back({t, 1});
  }
  return runs;
}

}  // namespace

void Store::Impl::check_result(const TaskResult& r) const {
  const std::size_t L1 = n_layers;
  if (r.task >= n_tasks)
    throw StoreError("result for task " + std::to_string(r.task) + ", but the store has " + std::to_string(n_tasks) +
                     " tasks");
  if (r.layers.size() > L1 || r.spectra.size() > L1 || r.mixer_sv.size() > L1 || r.mixer_eig_re.size() > L1 ||
      r.mixer_eig_im.size() > L1)
    throw StoreError("result for task " + std::to_string(r.task) + " has more than " + std::to_string(L1) + " layers");
  for (std::size_t l = 0; l < r.spectra.size(); ++l) {
    if (r.spectra[l].empty()) continue;
    const std::int64_t off = sv_offset[r.task * L1 + l];
    if (off < 0 || static_cast<std::int64_t>(r.spectra[l].size()) != sv_length[r.task])
      throw StoreError("result for task " + std::to_string(r.task) + ": layer " + std::to_string(l) + " spectrum has " +
                       std::to_string(r.spectra[l].size()) + " values, the store expects " +
                       (off < 0 ? std::string("none") : std::to_string(sv_length[r.task])));
  }
  const auto at = [](const std::vector<std::vector<double>>& v, std::size_t l) {
    return l < v.size() ? v[l].size() : 0;
  };
  for (std::size_t l = 0; l < L1; ++l) {
    const std::size_t n = at(r.mixer_sv, l);
    if (n == 0 && at(r.mixer_eig_re, l) == 0 && at(r.mixer_eig_im, l) == 0) continue;
    const std::int64_t off = m_offset[r.task * L1 + l];
    const auto want = static_cast<std::size_t>(m_length[r.task]);
    if (off < 0 || n != want || at(r.mixer_eig_re, l) != want || at(r.mixer_eig_im, l) != want)
      throw StoreError("result for task " + std::to_string(r.task) + ": layer " + std::to_string(l) +
                       " mixer spectrum has " + std::to_string(n) + " singular values and " +
                       std::to_string(at(r.mixer_eig_re, l)) + "/" + std::to_string(at(r.mixer_eig_im, l)) +
                       " eigenvalue parts, the store expects " +
                       (off < 0 ? std::string("none") : std::to_string(want)));
  }
}

void Store::Impl::write_metric_rows(const WriteBatch& b) {
  const std::size_t L1 = n_layers;
  const auto& results = b.results;
  const auto& sel = b.sel;
  // Layer rows, one H5Dwrite per metric.
  std::vector<double> buf(sel.size() * L1);
  for (std::size_t k = 0; k < layers.size(); ++k) {
    std::fill(buf.begin(), buf.end(), nan);
    for (std::size_t j = 0; j < sel.size(); ++j) {
      const auto& task_layers = results[sel[j]].layers;
      for (std::size_t l = 0; l < task_layers.size(); ++l) buf[j * L1 + l] = task_layers[l][k];
    }
    h5::write_rows(layers[k].id(), H5T_NATIVE_DOUBLE, b.runs, buf.data());
  }
  // Theory values, one H5Dwrite per quantity.
  std::vector<double> tbuf(sel.size());
  for (std::size_t k = 0; k < theory.size(); ++k) {
    for (std::size_t j = 0; j < sel.size(); ++j) tbuf[j] = results[sel[j]].theory[k];
    h5::write_rows(theory[k].id(), H5T_NATIVE_DOUBLE, b.runs, tbuf.data());
  }
}

void Store::Impl::write_gradients(const WriteBatch& b) {
  if (n_grad_depths == 0) return;
  const std::size_t L = n_layers - 1, block = n_grad_depths * L;
  std::vector<double> gbuf;
  const auto write_grad = [&](const h5::Handle& dset, std::vector<double> TaskResult::*field, bool all) {
    if (!dset) return;
    const std::size_t row = all ? block : L;
    gbuf.assign(b.sel.size() * row, nan);
    for (std::size_t j = 0; j < b.sel.size(); ++j) {
      const auto& v = b.results[b.sel[j]].*field;
      if (v.size() != block) continue;  // none computed (failed task): NaN
      std::copy(v.end() - static_cast<std::ptrdiff_t>(row), v.end(),
                gbuf.begin() + static_cast<std::ptrdiff_t>(j * row));
    }
    h5::write_rows(dset.id(), H5T_NATIVE_DOUBLE, b.runs, gbuf.data());
  };
  write_grad(grad_log10, &TaskResult::grad_log10, false);
  write_grad(grad_stderr, &TaskResult::grad_stderr, false);
  write_grad(grad_log10_all, &TaskResult::grad_log10, true);
  write_grad(grad_stderr_all, &TaskResult::grad_stderr, true);
}

void Store::Impl::write_spectra(const WriteBatch& b, hid_t dset, const std::vector<std::int64_t>& offsets,
                                std::vector<std::vector<double>> TaskResult::*field) const {
  struct Segment {
    std::int64_t offset;
    const std::vector<double>* values;
  };
  std::vector<Segment> segs;
  for (std::size_t i : b.sel) {
    const TaskResult& r = b.results[i];
    const auto& per_layer = r.*field;
    for (std::size_t l = 0; l < per_layer.size(); ++l)
      if (!per_layer[l].empty()) segs.push_back({offsets[r.task * n_layers + l], &per_layer[l]});
  }
  if (segs.empty()) return;
  std::sort(segs.begin(), segs.end(), [](const Segment& x, const Segment& y) { return x.offset < y.offset; });
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
}

void Store::Impl::write_statuses(const WriteBatch& b) {
  std::vector<TaskRow> rows(b.sel.size());
  for (std::size_t j = 0; j < b.sel.size(); ++j) {
    const TaskResult& r = b.results[b.sel[j]];
    TaskRow& row = rows[j];
    std::memset(&row, 0, sizeof row);
    row.id = r.task;
    row.point = task_point[r.task];
    row.replicate = task_replicate[r.task];
    row.status = static_cast<std::int8_t>(r.status);
    row.wall_s = r.wall_s;
    row.rank = r.rank;
    copy_message(row.message, r.message);
  }
  h5::write_rows(tasks.id(), types.mem.id(), b.runs, rows.data());
}

void Store::write(std::span<const TaskResult> results) {
  if (results.empty()) return;
  h5::init();
  Impl& s = *impl_;

  // Validate everything before writing anything.
  for (const TaskResult& r : results) s.check_result(r);

  // A task given twice keeps its last result.
  Impl::WriteBatch b{results, last_of_each_task(results), {}};
  b.runs = task_runs(results, b.sel);
  // The values go to the tasks that have some: a not-needed task has none (its rows read as the
  // fill value, NaN), so a store allocated by task takes no space for it.
  Impl::WriteBatch v{results, {}, {}};
  for (const std::size_t i : b.sel)
    if (results[i].status != TaskStatus::not_needed) v.sel.push_back(i);
  v.runs = task_runs(results, v.sel);

  if (!v.sel.empty()) {
    // 1. Layer rows and theory values; gradient norms: the last output depth into log10_g, all of
    // them into log10_g_all.
    s.write_metric_rows(v);
    s.write_gradients(v);

    // 2. Spectra: per dataset, segments sorted by offset, adjacent ones merged, one H5Dwrite.
    s.write_spectra(v, s.x_sv.id(), s.sv_offset, &TaskResult::spectra);
    s.write_spectra(v, s.m_sv.id(), s.m_offset, &TaskResult::mixer_sv);
    s.write_spectra(v, s.m_eig_re.id(), s.m_offset, &TaskResult::mixer_eig_re);
    s.write_spectra(v, s.m_eig_im.id(), s.m_offset, &TaskResult::mixer_eig_im);
    std::vector<const Platform*> platforms;
    for (std::size_t i : v.sel) platforms.push_back(&results[i].platform);
    s.platforms.write(v.runs, platforms);
    h5::flush(s.file.id());
  }

  // 3. Only now the statuses: a task marked done always has its rows on disk.
  s.write_statuses(b);
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

void Store::note_stopping() const noexcept {
  if (impl_->lock) impl_->lock->note_stopping();
}

void Store::sync() {
  h5::init();
  h5::fsync_file(impl_->file.id());
}

}  // namespace rcsweep::store
