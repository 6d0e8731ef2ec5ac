// [model] of a sweep document: one value per parameter, and the extra keys (input_matrix and
// mixer_matrix as lists of rows, input_path, input_dataset, model_folder, and lambda_layers as a
// list of numbers) (sweep_tables.hpp).
#include "config/sweep_tables.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/toml_nodes.hpp"

namespace rcsweep::config::parsing {
namespace {

/// A matrix given as a non-empty list of equally long, non-empty rows of finite numbers.
std::shared_ptr<const Matrix> parse_matrix(ParseState& st, const toml::node& node, const std::string& path) {
  const auto* arr = node.as_array();
  if (!arr || arr->empty()) {
    st.issue(path, "must be a non-empty list of rows, e.g. [[1.0, 0.0], [0.0, 1.0]], got " +
                       (arr ? std::string("an empty list") : describe(node)));
    return nullptr;
  }
  bool ok = true;
  std::size_t cols = 0, first = 0;  // length of the first well-formed row, and its index
  std::vector<std::vector<double>> rows;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const std::string row_path = path + "[" + std::to_string(i) + "]";
    const auto* row = arr->get(i)->as_array();
    if (!row || row->empty()) {
      st.issue(row_path, "must be a non-empty list of numbers (row " + std::to_string(i) + "), got " +
                             (row ? std::string("an empty list") : describe(*arr->get(i))));
      ok = false;
      continue;
    }
    std::vector<double> values;
    for (std::size_t j = 0; j < row->size(); ++j) {
      const toml::node& x = *row->get(j);
      const std::string x_path = row_path + "[" + std::to_string(j) + "]";
      double v = 0.0;
      if (const auto* in = x.as_integer()) {
        v = static_cast<double>(in->get());
      } else if (const auto* f = x.as_floating_point()) {
        v = f->get();
      } else {
        st.issue(x_path, "must be a number, got " + describe(x));
        ok = false;
        continue;
      }
      if (!std::isfinite(v)) {
        st.issue(x_path, "must be a finite number, got " + to_toml(v));
        ok = false;
      }
      values.push_back(v);
    }
    if (rows.empty()) {
      cols = row->size();
      first = i;
    }
    if (row->size() != cols) {
      st.issue(row_path, "row " + std::to_string(i) + " has " + std::to_string(row->size()) + " numbers but row " +
                             std::to_string(first) + " has " + std::to_string(cols) +
                             ": every row needs the same length");
      ok = false;
    }
    rows.push_back(std::move(values));
  }
  if (!ok) return nullptr;
  auto A = std::make_shared<Matrix>(rows.size(), cols);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols; ++j) (*A)(i, j) = rows[i][j];
  return A;
}

/// lambda_layers: a list of finite numbers, lambda_1 first (its length is checked against the
/// depth once the whole sweep is read: check_lambda_layers).
std::shared_ptr<const std::vector<double>> parse_lambdas(ParseState& st, const toml::node& node,
                                                         const std::string& path) {
  const auto* arr = node.as_array();
  if (!arr) {
    st.issue(path, "must be a list of numbers, one lambda per layer (lambda_1 of layer 1 first), e.g. [1.0, 0.5], "
                   "got " +
                       describe(node));
    return nullptr;
  }
  bool ok = true;
  std::vector<double> values;
  for (std::size_t l = 0; l < arr->size(); ++l) {
    const toml::node& x = *arr->get(l);
    const std::string x_path = path + "[" + std::to_string(l) + "]";
    double v = 0.0;
    if (const auto* in = x.as_integer()) {
      v = static_cast<double>(in->get());
    } else if (const auto* f = x.as_floating_point()) {
      v = f->get();
    } else {
      st.issue(x_path, "must be a number (the lambda of layer " + std::to_string(l + 1) + "), got " + describe(x));
      ok = false;
      continue;
    }
    if (!std::isfinite(v)) {
      st.issue(x_path, "must be a finite number, got " + to_toml(v));
      ok = false;
    }
    values.push_back(v);
  }
  if (!ok) return nullptr;
  return std::make_shared<const std::vector<double>>(std::move(values));
}

void parse_model_extra(ParseState& st, const std::string& key, const toml::node& node, const std::string& path) {
  st.extra_given.insert(key);
  if (key == "lambda_layers") {
    st.spec.lambda_layers = parse_lambdas(st, node, path);
  } else if (key == "input_matrix") {
    st.spec.input_matrix = parse_matrix(st, node, path);
  } else if (key == "mixer_matrix") {
    st.spec.mixer_matrix = parse_matrix(st, node, path);
  } else {
    const auto* s = node.as_string();
    if (!s || s->get().empty()) {
      const char* what = key == "input_path" ? "an HDF5 file or a token file, relative to the sweep file's folder"
                         : key == "model_folder"
                             ? "a model folder with config.json, relative to the sweep file's folder"
                             : "the name of a T x d float64 dataset in input_path";
      st.issue(path, std::string("must be a non-empty string (") + what + "), got " +
                         (s ? std::string("an empty string") : describe(node)));
      return;
    }
    if (s->get().find('\0') != std::string::npos) {  // a C path or HDF5 name would end there
      st.issue(path, "must not hold a NUL character, got " + toml_string(s->get()));
      return;
    }
    (key == "input_path"     ? st.spec.input_path
     : key == "model_folder" ? st.spec.model_folder
                             : st.spec.input_dataset) = s->get();
  }
}

}  // namespace

void parse_model(ParseState& st, const toml::table& table) {
  for (const auto& [key, node] : file_order(table)) {
    const std::string path = "model." + key;
    if (is_model_extra(key)) {
      parse_model_extra(st, key, *node, path);
      continue;
    }
    const auto idx = param_index(key);
    if (!idx) {
      st.unknown_param(path, key);
      continue;
    }
    if (!st.claim(key, "model")) continue;
    if (node->is_array()) {
      st.issue(path, "[model] takes one value; to sweep '" + key + "' list its values under [axes]");
      continue;
    }
    if (auto v = parse_value(*node, model_params()[*idx], path, st.issues)) st.spec.base[*idx] = std::move(*v);
  }
}

}  // namespace rcsweep::config::parsing
