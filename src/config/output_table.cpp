// [output] of a sweep document: which per-layer metrics, spectra and gradient norms a store holds,
// and how gradient norms are computed (sweep_tables.hpp).
#include "config/sweep_tables.hpp"

#include <algorithm>

#include "config/toml_nodes.hpp"

namespace rcsweep::config::parsing {
namespace {

/// metrics = "all" or a non-empty list of per-layer metric names (and "all"); fro and log_fro are
/// always added. "all" is the default selection, every metric but the opt-in ones (res_best).
void parse_metrics(ParseState& st, const toml::node& node) {
  const std::vector<std::string_view> names(metrics::layer_metric_names.begin(), metrics::layer_metric_names.end());
  const std::string expected = "must be \"all\" or a non-empty list of per-layer metrics (" + quote_list(names) +
                               ", or \"all\")";
  if (const auto* s = node.as_string(); s && s->get() == "all") {
    st.spec.output.metrics = metrics::default_metrics();
    return;
  }
  const auto* list = node.as_array();
  if (!list || list->empty()) {
    st.issue("output.metrics", expected + ", got " + describe(node));
    return;
  }
  metrics::MetricSet selected = metrics::always_computed();
  for (std::size_t k = 0; k < list->size(); ++k) {
    const auto* s = (*list)[k].as_string();
    if (s && s->get() == "all") {  // the default selection, to which the list adds opt-in metrics
      selected |= metrics::default_metrics();
      continue;
    }
    const std::size_t i = s ? metrics::metric_index(s->get()) : metrics::n_layer_metrics;
    if (i < metrics::n_layer_metrics) {
      selected.set(i);
      continue;
    }
    st.issue("output.metrics[" + std::to_string(k) + "]", "must be a per-layer metric (" + quote_list(names) +
                                                              "), got " + describe((*list)[k]) +
                                                              (s ? suggestion(s->get(), names) : std::string()));
  }
  st.spec.output.metrics = selected;
}

}  // namespace

void parse_output(ParseState& st, const toml::table& table) {
  static const std::vector<std::string_view> known = {"spectra",     "mixer_spectra", "gradients",
                                                      "grad_method", "grad_probes",   "metrics"};
  for (const auto& [key, node] : file_order(table)) {
    const std::string path = "output." + key;
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      st.issue(path, "unknown key '" + key + "' in [output]" + suggestion(key, known) +
                         " (known: spectra, mixer_spectra, gradients, grad_method, grad_probes, metrics)");
      continue;
    }
    if (key == "metrics") {
      parse_metrics(st, *node);
      continue;
    }
    if (key == "grad_probes") {
      const auto* v = node->as_integer();
      if (!v || v->get() < 2 || v->get() > 100000)
        st.issue(path, "must be an integer from 2 to 100000 (Hutchinson probes per task), got " + describe(*node));
      else
        st.spec.output.grad_probes = static_cast<int>(v->get());
      continue;
    }
    const auto* s = node->as_string();
    if (key == "grad_method") {
      if (s && s->get() == "auto")
        st.spec.output.grad_method = GradMethod::automatic;
      else if (s && s->get() == "exact")
        st.spec.output.grad_method = GradMethod::exact;
      else if (s && s->get() == "hutchinson")
        st.spec.output.grad_method = GradMethod::hutchinson;
      else
        st.issue(path, "must be one of \"auto\", \"exact\", \"hutchinson\", got " + describe(*node));
      continue;
    }
    Spectra& target = key == "spectra"         ? st.spec.output.spectra
                      : key == "mixer_spectra" ? st.spec.output.mixer_spectra
                                               : st.spec.output.gradients;
    if (s && s->get() == "none")
      target = Spectra::none;
    else if (s && s->get() == "last")
      target = Spectra::last;
    else if (s && s->get() == "all")
      target = Spectra::all;
    else
      st.issue(path, "must be one of \"none\", \"last\", \"all\", got " + describe(*node));
  }
}

}  // namespace rcsweep::config::parsing
