// A validated sweep: its grid (points, dimensions), canonical text and plan hash. Parsing and
// validation of the file: sweep_parser.cpp (its tables: sweep_tables.hpp; the checks of the whole
// sweep: sweep_checks.hpp); reading it: sweep_file.cpp.
#include "config/sweep_spec.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <toml++/toml.h>
#include <utility>

#include "base/error.hpp"
#include "config/overrides_toml.hpp"

namespace rcsweep::config {
namespace {

/// TOML text of a matrix: a list of rows, numbers in the shortest round-trip form.
std::string matrix_toml(const Matrix& A) {
  std::string out = "[";
  for (std::size_t i = 0; i < A.rows(); ++i) {
    out += i ? ", [" : "[";
    for (std::size_t j = 0; j < A.cols(); ++j) out += (j ? ", " : "") + to_toml(A(i, j));
    out += "]";
  }
  return out + "]";
}

}  // namespace

int SweepSpec::max_depth() const {
  if (!depth_axis.empty()) return static_cast<int>(depth_axis.back());
  return static_cast<int>(std::get<std::int64_t>(param_value(base, "depth")));
}

std::size_t SweepSpec::n_points() const {
  std::size_t n = 1;
  for (const auto& dim : dims) n *= dim.size();
  return n;
}

std::vector<std::size_t> SweepSpec::point_index(std::size_t p) const {
  if (p >= n_points())
    throw Error("grid point " + std::to_string(p) + " out of range (" + std::to_string(n_points()) + " points)");
  std::vector<std::size_t> index(dims.size());
  for (std::size_t k = dims.size(); k-- > 0;) {
    index[k] = p % dims[k].size();
    p /= dims[k].size();
  }
  return index;
}

std::vector<ParamValue> SweepSpec::point(std::size_t p) const {
  const auto index = point_index(p);
  std::vector<ParamValue> values = base;
  for (std::size_t k = 0; k < dims.size(); ++k)
    for (std::size_t c = 0; c < dims[k].params.size(); ++c) {
      const auto idx = param_index(dims[k].params[c]);
      if (!idx || *idx >= values.size()) throw Error("unknown parameter '" + dims[k].params[c] + "' in a dimension");
      values[*idx] = dims[k].columns[c][index[k]];
    }
  values[*param_index("depth")] = std::int64_t{max_depth()};
  return values;
}

std::string SweepSpec::canonical_toml() const {
  const auto& reg = model_params();
  std::vector<bool> is_swept(reg.size(), false);
  for (const auto& dim : dims)
    for (const auto& param : dim.params)
      if (const auto idx = param_index(param)) is_swept[*idx] = true;
  if (!depth_axis.empty()) is_swept[*param_index("depth")] = true;

  auto list = [](const std::vector<ParamValue>& values) {
    std::string text = "[";
    for (std::size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + to_toml(values[i]);
    return text + "]";
  };

  // input_dataset belongs to input = "file" only (a token file has none).
  bool may_be_file = std::get<std::string>(param_value(base, "input")) == "file";
  for (const auto& dim : dims)
    for (std::size_t c = 0; c < dim.params.size(); ++c)
      if (dim.params[c] == "input")
        for (const auto& v : dim.columns[c]) may_be_file = may_be_file || to_text(v) == "file";

  std::string out = "[sweep]\n";
  out += "name = " + toml_string(name) + "\n";
  out += "seed = " + std::to_string(seed) + "\n";
  if (!adaptive.enabled()) out += "replicates = " + std::to_string(replicates) + "\n";
  out += "\n[model]\n";
  // The model blocks' parameters (block and after, appended to the registry: block, init, init_draw,
  // measure, mask, gated_norm) only when not at their default: the canonical text, and so the plan hash, of a
  // sweep without them stays as before.
  // With lambda_layers, lambda (never given then) is left out too: the text reads back.
  const std::size_t first_encoder_param = *param_index("block");
  const std::size_t lambda_at = *param_index("lambda");
  for (std::size_t i = 0; i < reg.size(); ++i)
    if (!is_swept[i] && (i < first_encoder_param || base.at(i) != reg[i].default_value) &&
        !(lambda_layers && i == lambda_at))
      out += std::string(reg[i].name) + " = " + to_toml(base.at(i)) + "\n";
  if (input_matrix && input_path.empty()) out += "input_matrix = " + matrix_toml(*input_matrix) + "\n";
  if (mixer_matrix) out += "mixer_matrix = " + matrix_toml(*mixer_matrix) + "\n";
  if (!input_path.empty()) {
    out += "input_path = " + toml_string(input_path) + "\n";
    if (may_be_file) out += "input_dataset = " + toml_string(input_dataset) + "\n";  // not of a token file
    if (!input_file_digest.empty()) out += "# input file content: " + input_file_digest + "\n";
  }
  if (!model_folder.empty()) {  // absent otherwise: older plan hashes stay valid
    out += "model_folder = " + toml_string(model_folder) + "\n";
    if (!model_digest.empty()) out += "# model content: " + model_digest + "\n";
  }
  if (lambda_layers) {  // absent otherwise: older plan hashes stay valid
    out += "lambda_layers = [";
    for (std::size_t l = 0; l < lambda_layers->size(); ++l) out += (l ? ", " : "") + to_toml((*lambda_layers)[l]);
    out += "]\n";
  }
  std::vector<ParamValue> depths(depth_axis.begin(), depth_axis.end());
  bool any_axis = !depth_axis.empty();
  for (const auto& dim : dims) any_axis = any_axis || dim.is_axis();
  if (any_axis) {
    out += "\n[axes]\n";
    for (const auto& dim : dims)
      if (dim.is_axis()) out += dim.params.front() + " = " + list(dim.columns.front()) + "\n";
    if (!depth_axis.empty()) out += "depth = " + list(depths) + "\n";
  }
  for (const auto& dim : dims) {
    if (dim.is_axis()) continue;
    out += "\n[[zip]]\n";
    for (std::size_t c = 0; c < dim.params.size(); ++c) out += dim.params[c] + " = " + list(dim.columns[c]) + "\n";
  }
  if (adaptive.enabled()) {  // after [model] etc.: a [sweep.replicates] table must not split [sweep]
    out += "\n[sweep.replicates]\nmin = " + std::to_string(adaptive.min) + "\nmax = " + std::to_string(replicates) +
           "\nstep = " + std::to_string(adaptive.step) + "\ntargets = [";
    for (std::size_t i = 0; i < adaptive.targets.size(); ++i) {
      const auto& t = adaptive.targets[i];
      out += std::string(i ? ", " : "") + "{ metric = " + toml_string(t.metric) +
             ", layer = " + (t.layer < 0 ? std::string("\"last\"") : std::to_string(t.layer));
      if (t.rel_se > 0) out += ", rel_se = " + to_toml(t.rel_se);
      if (t.abs_se > 0) out += ", abs_se = " + to_toml(t.abs_se);
      out += " }";
    }
    out += "]\n";
  }
  static constexpr std::array<const char*, 3> spectra_names = {"none", "last", "all"};
  out += "\n[output]\nspectra = \"" + std::string(spectra_names.at(static_cast<std::size_t>(output.spectra))) + "\"\n";
  out += "mixer_spectra = \"" + std::string(spectra_names.at(static_cast<std::size_t>(output.mixer_spectra))) + "\"\n";
  if (output.gradients != Spectra::none) {  // absent otherwise: older plan hashes stay valid
    static constexpr std::array<const char*, 3> method_names = {"auto", "exact", "hutchinson"};
    out += "gradients = \"" + std::string(spectra_names.at(static_cast<std::size_t>(output.gradients))) + "\"\n";
    out += "grad_method = \"" + std::string(method_names.at(static_cast<std::size_t>(output.grad_method))) + "\"\n";
    out += "grad_probes = " + std::to_string(output.grad_probes) + "\n";
  }
  if (output.metrics != metrics::default_metrics()) {  // absent otherwise: older plan hashes stay valid
    out += "metrics = [";
    for (std::size_t i = 0, n = 0; i < metrics::n_layer_metrics; ++i)
      if (output.metrics[i]) out += std::string(n++ ? ", " : "") + toml_string(metrics::layer_metric_names[i]);
    out += "]\n";
  }
  return out;
}

std::string SweepSpec::plan_hash() const {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 offset basis
  for (const char c : canonical_toml()) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;  // FNV prime
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

ModelParams SweepSpec::model(const std::vector<ParamValue>& values) const {
  ModelParams m = resolve(values);
  if (m.input == InputKind::matrix || m.input == InputKind::file) m.input_matrix = input_matrix;
  if (m.mixer == Mixer::matrix) m.mixer_matrix = mixer_matrix;
  if (m.block != Block::stack) m.model_folder = model_folder_path;
  if (m.input == InputKind::tokens) m.tokens = tokens;
  m.lambda_layers = lambda_layers;
  return m;
}

void SweepSpec::set_encoder_inputs(std::string folder_path,
                                   std::shared_ptr<const std::vector<std::vector<std::int64_t>>> excerpts,
                                   std::string digest) {
  model_folder_path = std::move(folder_path);
  tokens = std::move(excerpts);
  model_digest = std::move(digest);
}

void SweepSpec::set_input_file(Matrix X) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 over the float64 bytes, row-major
  for (const double x : X.values()) {
    unsigned char bytes[sizeof(double)];
    std::memcpy(bytes, &x, sizeof x);
    for (const unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "%zu x %zu float64, FNV-1a %016llx", X.rows(), X.cols(),
                static_cast<unsigned long long>(h));
  input_file_digest = buf;
  input_matrix = std::make_shared<const Matrix>(std::move(X));
}

}  // namespace rcsweep::config
