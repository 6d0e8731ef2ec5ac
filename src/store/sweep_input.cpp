// The input file of a sweep, read and checked against the grid.
#include "store/sweep_input.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "base/error.hpp"
#include "config/params.hpp"
#include "store/matrix_file.hpp"

namespace rcsweep::store {

void load_input_file(config::SweepSpec& spec, const std::filesystem::path& sweep_file) {
  if (spec.input_path.empty()) return;  // parse_sweep requires it whenever input can be "file"
  std::filesystem::path path = spec.input_path;
  if (path.is_relative()) path = sweep_file.parent_path() / path;
  Matrix X;
  try {
    X = read_matrix(path, spec.input_dataset);
  } catch (const StoreError& e) {
    throw ConfigError(std::vector<ConfigIssue>{{"model.input_path", std::string(e.what())}});
  }
  const auto T = static_cast<std::int64_t>(X.rows()), d = static_cast<std::int64_t>(X.cols());
  std::size_t bad = 0, first = 0;
  std::int64_t want_T = 0, want_d = 0;
  for (std::size_t p = 0; p < spec.n_points(); ++p) {
    const auto values = spec.point(p);
    if (std::get<std::string>(config::param_value(values, "input")) != "file") continue;
    const auto t = std::get<std::int64_t>(config::param_value(values, "T"));
    const auto w = std::get<std::int64_t>(config::param_value(values, "d"));
    if (t == T && w == d) continue;
    if (bad++ == 0) {
      first = p;
      want_T = t;
      want_d = w;
    }
  }
  if (bad)
    throw ConfigError(
        {{"model.input_path",
          "dataset '" + spec.input_dataset + "' of '" + path.string() + "' is " + std::to_string(T) + " x " +
              std::to_string(d) + " (rows x columns) but must be T x d = " + std::to_string(want_T) + " x " +
              std::to_string(want_d) +
              (spec.n_points() > 1 ? " (at " + std::to_string(bad) + " of " + std::to_string(spec.n_points()) +
                                         " grid points, e.g. point " + std::to_string(first) + ")"
                                   : std::string())}});
  spec.set_input_file(std::move(X));
}

config::SweepSpec load_sweep_with_input(const std::filesystem::path& sweep_file,
                                        const std::vector<std::string>& overrides) {
  config::SweepSpec spec = config::load_sweep(sweep_file, overrides);
  load_input_file(spec, sweep_file);
  return spec;
}

}  // namespace rcsweep::store
