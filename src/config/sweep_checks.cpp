// Checks of a whole sweep document once its tables are read (sweep_checks.hpp): the extra [model]
// keys against the input, mixer and block, the grid's size, check_model() at every grid point, and what a
// store would hold.
#include "config/sweep_checks.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <variant>

namespace rcsweep::config::parsing {
namespace {

/// Whether the choice parameter `name` takes the value `choice` at some grid point.
bool may_be(const ParseState& st, const std::string& name, std::string_view choice) {
  if (!st.swept(name)) return std::get<std::string>(param_value(st.spec.base, name)) == choice;
  const auto has = [&](const Dim& dim) {
    for (std::size_t c = 0; c < dim.params.size(); ++c)
      if (dim.params[c] == name)
        for (const auto& v : dim.columns[c])
          if (std::get<std::string>(v) == choice) return true;
    return false;
  };
  return std::any_of(st.spec.dims.begin(), st.spec.dims.end(), has) ||
         std::any_of(st.zip_dims.begin(), st.zip_dims.end(), has);
}

/// The stored spectra and gradient norms against max_stored_values, from the sums over the grid
/// points of min(T, d) (a spectrum of X) and T (a mixer spectrum).
void check_stored(ParseState& st, std::uint64_t sum_min_Td, std::uint64_t sum_T) {
  const auto reps = static_cast<std::uint64_t>(st.spec.replicates);
  const auto L = static_cast<std::uint64_t>(st.spec.max_depth());
  const std::uint64_t tasks = st.spec.n_points() * reps;
  const auto layers = [&](Spectra s, std::uint64_t first) -> std::uint64_t {
    if (s == Spectra::none || L < first) return 0;
    return s == Spectra::last ? 1 : L + 1 - first;
  };
  const std::string advice = " (docs/CONFIG.md \"Limits\"); store fewer layers (\"last\"), or split the sweep into "
                             "several files";
  const auto check = [&](const char* key, std::uint64_t values, const std::string& what) {
    if (values > max_stored_values)
      st.issue(key, what + " is " + std::to_string(values) + " values, more than the " +
                        std::to_string(max_stored_values) + " a store holds in one dataset" + advice);
  };
  const auto check_spectra = [&](const char* key, std::uint64_t stored, std::uint64_t values, const std::string& what,
                                 const char* length) {
    if (stored > max_stored_spectra)
      st.issue(key, what + ": " + std::to_string(tasks) + " tasks x " +
                        std::to_string(stored / std::max<std::uint64_t>(tasks, 1)) + " layers is " +
                        std::to_string(stored) + " spectra, more than the " + std::to_string(max_stored_spectra) +
                        " a sweep may store" + advice);
    else
      check(key, values,
            what + ": " + std::to_string(tasks) + " tasks x " +
                std::to_string(stored / std::max<std::uint64_t>(tasks, 1)) + " layers x " + length);
  };
  const auto& out = st.spec.output;
  check_spectra("output.spectra", tasks * layers(out.spectra, 0), reps * sum_min_Td * layers(out.spectra, 0),
                "singular values of X", "min(T, d)");
  check_spectra("output.mixer_spectra", tasks * layers(out.mixer_spectra, 1),
                reps * sum_T * layers(out.mixer_spectra, 1), "mixer spectra", "T");
  if (out.gradients != Spectra::none)
    check("output.gradients", tasks * L * (out.gradients == Spectra::all ? L : 1),
          "gradient norms: " + std::to_string(tasks) + " tasks x " + std::to_string(L) + " layers" +
              (out.gradients == Spectra::all ? " x " + std::to_string(L) + " output depths" : std::string()));
}

/// The key to blame for a check_model() problem reported on `key`: the parameter itself when it
/// is swept, else the first swept parameter the check involves (the sweep made the point bad).
std::string blame(const ParseState& st, const std::string& key) {
  static const std::map<std::string, std::vector<std::string>> involved = {{"input", {"input", "T", "d"}}};
  if (key.starts_with("output.")) return key;
  if (st.swept(key) || !param_index(key)) return param_index(key) ? st.location(key) : "model." + key;
  if (const auto it = involved.find(key); it != involved.end())
    for (const auto& name : it->second)
      if (st.swept(name)) return st.location(name);
  return st.location(key);
}

std::string describe_point(const ParseState& st, const std::vector<std::size_t>& index) {
  std::string out;
  for (std::size_t k = 0; k < st.spec.dims.size(); ++k)
    for (std::size_t p = 0; p < st.spec.dims[k].params.size(); ++p)
      out += (out.empty() ? "" : ", ") + st.spec.dims[k].params[p] + " = " +
             to_text(st.spec.dims[k].columns[p][index[k]]);
  return out;
}

}  // namespace

void check_model_extras(ParseState& st) {
  const bool input_matrix = may_be(st, "input", "matrix"), input_file = may_be(st, "input", "file");
  const auto used_with = [&](const char* key, const char* param, const char* choice, bool used) {
    if (st.extra_given.count(key) && !used)
      st.issue(std::string("model.") + key, std::string("is only used with ") + param + " = \"" + choice + "\", but " +
                                                param + " is never \"" + choice + "\" in this sweep");
  };
  used_with("input_matrix", "input", "matrix", input_matrix);
  used_with("mixer_matrix", "mixer", "matrix", may_be(st, "mixer", "matrix"));
  const bool input_tokens = may_be(st, "input", "tokens"), encoder = may_be(st, "block", "encoder"),
             mamba2 = may_be(st, "block", "mamba2");
  if (input_tokens)  // input_path is the token file's
    used_with("input_path", "input", "tokens", true);
  else
    used_with("input_path", "input", "file", input_file);
  used_with("input_dataset", "input", "file", input_file);
  if (st.extra_given.count("model_folder") && !encoder && !mamba2)
    st.issue("model.model_folder", "is only used with block = \"encoder\" or \"mamba2\", but block is never "
                                   "\"encoder\" nor \"mamba2\" in this sweep");
  if (input_file && !st.extra_given.count("input_path"))
    st.issue("model.input_path", "required with input = \"file\": the HDF5 file holding the T x d input");
  if (input_file && input_tokens)
    st.issue(st.location("input"), "is \"file\" at some grid points and \"tokens\" at others, but input_path names "
                                   "one file (an HDF5 file or a token file): sweep them in two sweep files");
  if (input_tokens && !st.extra_given.count("input_path"))
    st.issue("model.input_path", "required with input = \"tokens\": the token file (one excerpt of token ids per "
                                 "line, docs/ENCODERS.md \"Token files\"), relative to the sweep file's folder");
  if (encoder && !st.extra_given.count("model_folder"))
    st.issue("model.model_folder",
             "required with block = \"encoder\": the model folder (config.json; with init = \"checkpoint\" also "
             "its safetensors weights), relative to the sweep file's folder");
  if (mamba2 && !st.extra_given.count("model_folder"))
    st.issue("model.model_folder",
             "required with block = \"mamba2\": the model folder (mamba_ssm's config.json; with init = "
             "\"checkpoint\" also its safetensors weights), relative to the sweep file's folder");
  if (encoder && mamba2)
    st.issue(st.location("block"), "is \"encoder\" at some grid points and \"mamba2\" at others, but model_folder "
                                   "names one model: sweep them in two sweep files");
}

void check_lambda_layers(ParseState& st) {
  if (!st.spec.lambda_layers) return;
  if (st.given_at.count("lambda"))
    st.issue(st.location("lambda"),
             st.swept("lambda")
                 ? "is swept, but lambda_layers gives every layer its own lambda and replaces lambda at every grid "
                   "point, so no point would differ by it: give lambda_layers or the lambda axis (one profile of "
                   "lambda_layers per sweep file)"
                 : "lambda_layers gives every layer its own lambda and replaces lambda: give one or the other");
  const auto n = st.spec.lambda_layers->size();
  const int L = st.spec.max_depth();
  if (n != static_cast<std::size_t>(L))
    st.issue("model.lambda_layers",
             "has " + std::to_string(n) + (n == 1 ? " value" : " values") + " but the depth is " + std::to_string(L) +
                 (st.spec.depth_axis.empty() ? std::string() : " (the depth axis's largest: every task runs to it)") +
                 ": give exactly one lambda per layer, lambda_l of layer l = 1.." + std::to_string(L));
}

void check_size(ParseState& st) {
  std::size_t points = 1;
  bool too_many = false;
  for (const auto& dim : st.spec.dims) {
    if (points > max_grid / std::max<std::size_t>(dim.size(), 1)) too_many = true;
    points = too_many ? max_grid + 1 : points * dim.size();
  }
  if (too_many || points > max_grid) {
    st.issue("axes", "the grid has more than " + std::to_string(max_grid) + " points" +
                         (too_many ? std::string() : " (" + std::to_string(points) + ")") +
                         "; split the sweep into several files");
    return;
  }
  const auto reps = static_cast<std::size_t>(st.spec.replicates);
  if (points > max_grid / reps) {
    st.issue("sweep.replicates", std::to_string(points) + " points x " + std::to_string(reps) +
                                     " replicates is more than " + std::to_string(max_grid) +
                                     " tasks; split the sweep into several files");
    return;
  }
  const std::uint64_t tasks = points * reps, layers = static_cast<std::uint64_t>(st.spec.max_depth()) + 1;
  if (tasks * layers > max_layer_rows)
    st.issue(st.location("depth"), std::to_string(tasks) + " tasks x " + std::to_string(layers) + " layers (0.." +
                                       std::to_string(layers - 1) + ") is " + std::to_string(tasks * layers) +
                                       " rows of per-layer metrics, more than the " + std::to_string(max_layer_rows) +
                                       " a store holds (docs/CONFIG.md \"Limits\"); fewer layers or tasks, or split "
                                       "the sweep into several files");
}

void check_grid(ParseState& st) {
  struct Problem {
    std::string key;
    std::string first_message;
    std::string example;
    std::size_t count = 0;
  };
  std::vector<Problem> problems;
  std::map<std::pair<std::string, std::string>, std::size_t> by_key;
  bool truncated = false;

  const std::size_t n = st.spec.n_points();
  std::vector<ParamValue> values = st.spec.point(0);
  std::vector<std::size_t> index(st.spec.dims.size(), 0);
  std::vector<std::vector<std::size_t>> column_param(st.spec.dims.size());
  for (std::size_t k = 0; k < st.spec.dims.size(); ++k)
    for (const auto& name : st.spec.dims[k].params) column_param[k].push_back(*param_index(name));
  const std::size_t T_at = *param_index("T"), d_at = *param_index("d");
  std::uint64_t sum_min_Td = 0, sum_T = 0;  // over the points: the lengths of their stored spectra

  for (std::size_t p = 0; p < n && !truncated; ++p) {
    if (p > 0) {
      for (std::size_t k = st.spec.dims.size(); k-- > 0;) {
        index[k] = index[k] + 1 == st.spec.dims[k].size() ? 0 : index[k] + 1;
        for (std::size_t c = 0; c < column_param[k].size(); ++c)
          values[column_param[k][c]] = st.spec.dims[k].columns[c][index[k]];
        if (index[k] != 0) break;
      }
    }
    const auto T = static_cast<std::uint64_t>(std::get<std::int64_t>(values[T_at]));
    sum_min_Td += std::min(T, static_cast<std::uint64_t>(std::get<std::int64_t>(values[d_at])));
    sum_T += T;
    const ModelParams model = st.spec.model(values);
    auto model_problems = check_model(model);
    if (st.spec.output.gradients != Spectra::none && st.spec.output.grad_method == GradMethod::exact &&
        model.block == Block::stack && !model.linear_stack())
      model_problems.emplace_back(
          "output.grad_method",
          "\"exact\" needs a linear stack (input-independent mixer other than s4d, one head, lambda = 0, "
          "no norm, gate or MLP); use \"auto\" (exact where it applies, Hutchinson elsewhere)");
    if (st.spec.output.gradients != Spectra::none && model.block == Block::encoder)
      model_problems.emplace_back("output.gradients",
                                  "gradient norms are not implemented for block = \"encoder\" (the encoder block "
                                  "has no reverse pass); leave gradients at \"none\" for encoder points");
    if (st.spec.output.gradients != Spectra::none && model.block == Block::mamba2)
      model_problems.emplace_back("output.gradients",
                                  "gradient norms are not implemented for block = \"mamba2\" (the Mamba-2 block "
                                  "has no reverse pass); leave gradients at \"none\" for mamba2 points");
    for (auto& [param, message] : model_problems) {
      const std::string key = blame(st, param);
      const auto [it, inserted] = by_key.emplace(std::make_pair(key, param), problems.size());
      if (inserted) {
        if (problems.size() == max_grid_problems) {
          truncated = true;
          break;
        }
        problems.push_back({key, message, "point " + std::to_string(p) + " (" + describe_point(st, index) + ")", 0});
      }
      ++problems[it->second].count;
    }
  }
  for (const auto& pr : problems) {
    std::string where;
    if (st.spec.dims.empty())
      where = "";
    else if (truncated)
      where = "; e.g. at " + pr.example;
    else
      where = "; at " + std::to_string(pr.count) + " of " + std::to_string(n) + " grid points, e.g. " + pr.example;
    st.issue(pr.key, pr.first_message + where);
  }
  if (truncated)
    st.issue("", "more grid points fail the model checks; only the first " + std::to_string(max_grid_problems) +
                     " distinct problems are listed");
  else
    check_stored(st, sum_min_Td, sum_T);
}

}  // namespace rcsweep::config::parsing
