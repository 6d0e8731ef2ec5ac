// A validated sweep file: what to run, before any grid expansion into tasks.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/params.hpp"
#include "metrics/metric_names.hpp"

namespace rcsweep::config {

/// One dimension of the grid. A plain [axes] entry is a dimension with one parameter (named
/// after it); a [[zip]] table is one dimension named "zip<k>" (k = 0,1,.. in file order) whose
/// parameters move together.
struct Dim {
  std::string name;
  std::vector<std::string> params;               ///< parameter names, in file order
  std::vector<std::vector<ParamValue>> columns;  ///< columns[p][i]: value of params[p] at index i
  std::size_t size() const { return columns.empty() ? 0 : columns.front().size(); }
  /// A plain [axes] entry (one parameter, named after it), not a [[zip]] table.
  bool is_axis() const { return params.size() == 1 && name == params.front(); }
};

enum class Spectra { none, last, all };

/// How gradient norms are computed: exact (Kronecker) where the stack is linear, else Hutchinson.
enum class GradMethod { automatic, exact, hutchinson };

struct OutputOptions {
  Spectra spectra = Spectra::none;  ///< singular values of X_l: none, last layer only, all layers
  /// Singular values and eigenvalues of head 0's mixer M (after gap_fix) of layers >= 1: none,
  /// last layer only, all layers.
  Spectra mixer_spectra = Spectra::none;
  /// Gradient norms g_{L,l} = ||dX_L/dW_{V,l}||_F^2: none, for the output depth L = L_max only
  /// ("last"), or for every output depth L = 1..L_max ("all").
  Spectra gradients = Spectra::none;
  GradMethod grad_method = GradMethod::automatic;
  int grad_probes = 8;  ///< Hutchinson probes per task and output depth (>= 2)
  /// The per-layer metrics computed and stored (the others are NaN): always holds
  /// metrics::always_computed().
  metrics::MetricSet metrics = metrics::default_metrics();
};

/// One condition of an adaptive replicate rule: the standard error of the mean of a per-layer
/// metric over a point's replicates, SE = sd / sqrt(n) (sd with n - 1), must be at most
/// abs_se, and at most rel_se * |mean| (each when > 0; at least one is).
struct ReplicateTarget {
  std::string metric;  ///< a per-layer metric (metrics::layer_metric_names), e.g. "sr_cov"
  int layer = -1;      ///< 0..L_max; -1: the last layer L_max
  double rel_se = 0.0;
  double abs_se = 0.0;
  friend bool operator==(const ReplicateTarget&, const ReplicateTarget&) = default;
};

/// [sweep.replicates] min/step/targets (max is SweepSpec::replicates): every point first runs
/// `min` replicates; after its first k replicates (k = min, min + step, ...) it runs the next
/// `step` only while some target is not met by those k. Off when `step` is 0.
struct AdaptiveReplicates {
  int min = 0, step = 0;
  std::vector<ReplicateTarget> targets;
  bool enabled() const { return step > 0; }
  friend bool operator==(const AdaptiveReplicates&, const AdaptiveReplicates&) = default;
};

struct SweepSpec {
  std::string name;
  std::uint64_t seed = 0;
  /// Replicates per point; with an adaptive rule the most a point may get (its `max`). Task ids
  /// are point * replicates + replicate either way.
  int replicates = 1;
  AdaptiveReplicates adaptive;
  /// Every parameter of model_params(), in registry order: the [model] value, else the default.
  /// For a swept parameter this holds the default and is overridden per point.
  std::vector<ParamValue> base;
  /// Grid dimensions: [axes] entries in file order, then [[zip]] tables in file order.
  /// `depth` is never a dimension: a task runs to the largest depth and records every layer.
  std::vector<Dim> dims;
  /// When depth is given under [axes]: the listed depths (sorted, unique); else empty.
  std::vector<std::int64_t> depth_axis;
  OutputOptions output;
  /// The X_0 of input = "matrix" (the [model] input_matrix), or of input = "file" once the CLI has
  /// read the dataset (set_input_file); null otherwise. Shared with every resolved model.
  std::shared_ptr<const Matrix> input_matrix;
  /// The [model] mixer_matrix of mixer = "matrix" (T x T), else null.
  std::shared_ptr<const Matrix> mixer_matrix;
  /// input = "file": the HDF5 file as written (relative paths are relative to the sweep file's
  /// folder) and the dataset in it. Empty path when not given.
  std::string input_path;
  std::string input_dataset = "X";
  /// input = "file": shape and content digest of the loaded dataset (a comment line of the
  /// canonical text, so the plan hash changes when the file's content does); empty before.
  std::string input_file_digest;
  /// block = "encoder" or "mamba2": the [model] model_folder as written (relative paths are relative to the
  /// sweep file's folder); empty when not given.
  std::string model_folder;
  /// The model folder made absolute when the sweep's inputs are loaded (set_encoder_inputs);
  /// empty before (and in a sweep read back from a store). SweepSpec::model() attaches it.
  std::string model_folder_path;
  /// input = "tokens": the token file's excerpts once loaded (set_encoder_inputs); null before.
  /// Shared with every resolved model.
  std::shared_ptr<const std::vector<std::vector<std::int64_t>>> tokens;
  /// block = "encoder" or "mamba2": digest of config.json, the token file and (init = "checkpoint") the
  /// safetensors headers and sizes (a comment line of the canonical text, so the plan hash changes
  /// when they do); empty before they are loaded.
  std::string model_digest;
  /// block = "encoder" or "mamba2": the [model] lambda_layers, lambda_l of layer l = 1..L_max at index l - 1
  /// (exactly L_max values; lambda itself is then not given); null when not given. Shared with
  /// every resolved model.
  std::shared_ptr<const std::vector<double>> lambda_layers;
  /// The command-line overrides (config/overrides.hpp) as given, in order; already applied to
  /// everything above. Not part of the canonical text, which holds their effect.
  std::vector<std::string> overrides;

  /// Largest depth L_max: every task runs to it.
  int max_depth() const;
  /// Number of grid points (product of dimension sizes; 1 with no dimensions).
  std::size_t n_points() const;
  /// Index along each dimension of point `p` (row-major: the last dimension varies fastest).
  std::vector<std::size_t> point_index(std::size_t p) const;
  /// Full value vector (registry order) of point `p`; depth is max_depth().
  std::vector<ParamValue> point(std::size_t p) const;
  /// Canonical TOML text: same meaning => same text, whatever the formatting of the input.
  /// parse_sweep(canonical_toml()) gives back an equal spec.
  std::string canonical_toml() const;
  /// Stable 64-bit hash of canonical_toml() (FNV-1a), as 16 hex digits.
  std::string plan_hash() const;
  /// resolve(values) with the spec's matrices attached (input_matrix for input "matrix" and "file",
  /// mixer_matrix for mixer "matrix"), and for block "encoder" or "mamba2" the loaded model folder
  /// (model_folder_path: empty before loading), for input "tokens" the excerpts, and lambda_layers
  /// when given (at every point: check_model() refuses it at a stack point). Every resolved model
  /// of a plan must come from here.
  ModelParams model(const std::vector<ParamValue>& values) const;
  /// Attach the dataset read for input = "file" (shape not checked here).
  void set_input_file(Matrix X);
  /// Attach what an encoder sweep loads before any work (store::load_sweep_with_input): the model
  /// folder made absolute, the token file's excerpts (null when no point reads tokens) and the
  /// digest of what was read (nothing checked here).
  void set_encoder_inputs(std::string folder_path,
                          std::shared_ptr<const std::vector<std::vector<std::int64_t>>> excerpts, std::string digest);
};

/// Parse and validate a sweep file's text. Every problem is collected (unknown keys, wrong
/// types, empty axes, zip lists of unequal length, a parameter given twice, values out of range,
/// non-finite numbers, models that check_model() rejects at any grid point, ...) and thrown
/// together as one ConfigError whose issues name the key path (e.g. "axes.lambda[2]").
/// `source_name` is used in messages (usually the file path).
/// `overrides` (KEY=VALUE, config/overrides.hpp) are applied to the document before it is
/// validated; a malformed one is a ConfigError naming it, and an issue on a key an override set
/// says so.
SweepSpec parse_sweep(std::string_view toml_text, std::string_view source_name = "sweep",
                      const std::vector<std::string>& overrides = {});

/// Largest sweep file read (16 MiB): a larger one is refused before it is read.
inline constexpr std::uintmax_t max_sweep_file_bytes = std::uintmax_t{16} << 20;

/// Why `path` cannot be a sweep file, or "" when it can: it must name (after symbolic links) an
/// existing regular file of at most max_sweep_file_bytes. Looks at the file only (stat), never
/// opens it: "no such file", "too many levels of symbolic links", "a FIFO (named pipe), not a
/// regular file", "3 GiB, more than the 16 MiB a sweep file may have", ...
std::string sweep_file_problem(const std::filesystem::path& path);

/// The text of a sweep file, read only when it is a regular file of at most max_sweep_file_bytes
/// (a FIFO, a device, a directory is never read from, so nothing blocks). Anything else is a
/// ConfigError on key "" naming the path and the problem.
std::string read_sweep_file(const std::filesystem::path& path);

/// Read (read_sweep_file) and parse a sweep file.
SweepSpec load_sweep(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});

}  // namespace rcsweep::config
