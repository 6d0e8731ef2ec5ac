// [output] of a sweep document: which spectra and gradient norms a store holds, and how gradient
// norms are computed (sweep_tables.hpp).
#include "config/sweep_tables.hpp"

#include <algorithm>

#include "config/toml_nodes.hpp"

namespace rcsweep::config::parsing {

void parse_output(ParseState& st, const toml::table& table) {
  static const std::vector<std::string_view> known = {"spectra", "mixer_spectra", "gradients", "grad_method",
                                                      "grad_probes"};
  for (const auto& [key, node] : file_order(table)) {
    const std::string path = "output." + key;
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      st.issue(path, "unknown key '" + key + "' in [output]" + suggestion(key, known) +
                         " (known: spectra, mixer_spectra, gradients, grad_method, grad_probes)");
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
