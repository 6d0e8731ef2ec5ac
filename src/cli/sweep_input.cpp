// A sweep file read with its command-line overrides and its input file, and the check of a store path.
#include "cli/cli_internal.hpp"

#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

#include "base/error.hpp"
#include "config/overrides.hpp"
#include "store/matrix_file.hpp"

namespace rcsweep::cli {
namespace {
/// input = "file": read model.input_path (relative to the sweep file's folder) into the spec, and
/// check its shape against T and d at every grid point that uses it. Problems are ConfigErrors on
/// model.input_path (exit 2, before any work).
void load_input_file(config::SweepSpec& spec, const std::filesystem::path& sweep_file) {
  if (spec.input_path.empty()) return;  // parse_sweep requires it whenever input can be "file"
  std::filesystem::path path = spec.input_path;
  if (path.is_relative()) path = sweep_file.parent_path() / path;
  Matrix X;
  try {
    X = store::read_matrix(path, spec.input_dataset);
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

}  // namespace

config::SweepSpec load_spec(const std::filesystem::path& sweep_file, const std::vector<std::string>& overrides) {
  config::SweepSpec spec = config::load_sweep(sweep_file, overrides);
  load_input_file(spec, sweep_file);
  return spec;
}

void check_store_path(const std::filesystem::path& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec && st.type() != std::filesystem::file_type::not_found)
    throw ConfigError({{"--output", config::printable(path.string()) + ": " + ec.message()}});
}

}  // namespace rcsweep::cli
