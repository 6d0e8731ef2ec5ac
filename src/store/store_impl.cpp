// The store's internals (store_impl.hpp): where each task's rows and spectra lie, from the plan,
// and the datasets of an existing store.
#include "store/store_impl.hpp"

namespace rcsweep::store {

void Store::Impl::load_plan(const plan::Plan& plan) {
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
  chunking = plan::store_layout(plan);
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

void Store::Impl::open_datasets() {
  types = task_types();
  tasks = h5::open_dataset(file.id(), "/tasks");
  platforms = detail::PlatformColumn::open(file.id(), n_tasks);
  x_sv = h5::open_dataset(file.id(), "/spectra/x_sv");
  m_sv = h5::open_dataset(file.id(), "/spectra/m_sv");
  m_eig_re = h5::open_dataset(file.id(), "/spectra/m_eig_re");
  m_eig_im = h5::open_dataset(file.id(), "/spectra/m_eig_im");
  for (std::size_t k = 0; k < layers.size(); ++k) {  // check_structure required the core metrics
    const std::string name = "layers/" + std::string(metrics::layer_metric_names[k]);
    if (h5::link_exists(file.id(), name)) layers[k] = h5::open_dataset(file.id(), "/" + name);
  }
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

void Store::Impl::create_missing_metrics(const plan::Plan& plan) {
  h5::Handle group, layer_axis;
  for (std::size_t k = 0; k < layers.size(); ++k) {
    if (layers[k]) continue;
    if (!group) {
      group = h5::open_group(file.id(), "/layers");
      layer_axis = h5::open_dataset(file.id(), "/axes/layer");
    }
    create_metric(group.id(), layer_axis.id(), k);
  }
  // The plan's selection is the store's (same plan hash) but for the metrics its rcsweep did not
  // have: a sweep of every metric computes them from now on.
  if (group) h5::set_attr(group.id(), "computed", metrics::names_of(plan.spec.output.metrics));
}

void Store::Impl::check_spectra_layout() const {
  const auto n_of = [&](const char* name) {
    h5::Handle d = h5::open_dataset(file.id(), std::string("/spectra/") + name);
    return h5::dataset_dims(d.id());
  };
  if (n_of("x_sv") != std::vector<hsize_t>{static_cast<hsize_t>(sv_total)})
    throw StoreError("/spectra/x_sv has the wrong length");
  for (const char* name : {"m_sv", "m_eig_re", "m_eig_im"})
    if (n_of(name) != std::vector<hsize_t>{static_cast<hsize_t>(m_total)})
      throw StoreError("/spectra/" + std::string(name) + " has the wrong length");
  if (n_of("m_offset") != std::vector<hsize_t>{n_tasks, n_layers} || n_of("m_length") != std::vector<hsize_t>{n_tasks})
    throw StoreError("/spectra/m_offset or m_length has the wrong shape");
  std::vector<std::int64_t> off(m_offset.size()), len(m_length.size());
  h5::Handle o = h5::open_dataset(file.id(), "/spectra/m_offset");
  h5::read_all(o.id(), H5T_NATIVE_INT64, off.data());
  h5::Handle l = h5::open_dataset(file.id(), "/spectra/m_length");
  h5::read_all(l.id(), H5T_NATIVE_INT64, len.data());
  if (off != m_offset || len != m_length) throw StoreError("/spectra/m_offset or m_length differs from the plan");
}

}  // namespace rcsweep::store
