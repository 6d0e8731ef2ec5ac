// What a sweep reads before any work: its input file, and an encoder's or a Mamba-2 model's folder
// and token file, each checked against the grid.
#include "store/sweep_input.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/error.hpp"
#include "checkpoint/model_folder.hpp"
#include "checkpoint/token_file.hpp"
#include "config/params.hpp"
#include "models/encoder/model_cache.hpp"
#include "models/mamba2/model_cache.hpp"
#include "store/matrix_file.hpp"

namespace rcsweep::store {
namespace {

namespace fs = std::filesystem;

/// Examples listed for a check that many excerpts or ids fail (then a count).
constexpr std::size_t max_examples = 3;

/// "1 excerpt", "3 excerpts".
std::string count_of(std::size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

/// Whether the choice parameter `name` takes the value `choice` at some grid point.
bool may_be(const config::SweepSpec& spec, std::string_view name, std::string_view choice) {
  const auto is = [&](const config::ParamValue& v) {
    const auto* s = std::get_if<std::string>(&v);
    return s && *s == choice;
  };
  bool swept = false, found = false;
  for (const auto& dim : spec.dims)
    for (std::size_t c = 0; c < dim.params.size(); ++c)
      if (dim.params[c] == name) {
        swept = true;
        found = found || std::any_of(dim.columns[c].begin(), dim.columns[c].end(), is);
      }
  return swept ? found : is(config::param_value(spec.base, name));
}

/// The key path of parameter `name` as the sweep file gives it: "axes.T", "zip[1].T" (the k-th
/// [[zip]] table), "axes.depth" for a depth axis, else "model.T".
std::string key_of(const config::SweepSpec& spec, const std::string& name) {
  if (name == "depth") return spec.depth_axis.empty() ? "model.depth" : "axes.depth";
  int zip = 0;
  for (const auto& dim : spec.dims) {
    for (const auto& p : dim.params)
      if (p == name) return dim.is_axis() ? "axes." + name : "zip[" + std::to_string(zip) + "]." + name;
    if (!dim.is_axis()) ++zip;
  }
  return "model." + name;
}

/// `path` relative to the sweep file's folder unless absolute.
fs::path beside(const fs::path& sweep_file, const std::string& path) {
  const fs::path p = path;
  return p.is_relative() ? sweep_file.parent_path() / p : p;
}

/// "point 3 (T = 600, d = 512)": a grid point and its swept values.
std::string describe_point(const config::SweepSpec& spec, std::size_t p) {
  const auto index = spec.point_index(p);
  std::string values;
  for (std::size_t k = 0; k < spec.dims.size(); ++k)
    for (std::size_t c = 0; c < spec.dims[k].params.size(); ++c)
      values += (values.empty() ? "" : ", ") + spec.dims[k].params[c] + " = " +
                config::to_text(spec.dims[k].columns[c][index[k]]);
  return "point " + std::to_string(p) + (values.empty() ? std::string() : " (" + values + ")");
}

/// The grid checks of one key: the first failing point's problem, and how many points fail.
class GridProblems {
 public:
  explicit GridProblems(const config::SweepSpec& spec) : spec_(spec) {}
  /// Point `p` fails the check of `key`; `problem` is made only for the first failure of a key.
  template <class F>
  void fail(const std::string& key, std::size_t p, F&& problem) {
    auto [it, inserted] = by_key_.emplace(key, order_.size());
    if (inserted) order_.push_back({key, problem(), p, 0});
    ++order_[it->second].count;
  }
  void append_to(std::vector<ConfigIssue>& issues) const {
    const std::size_t n = spec_.n_points();
    for (const auto& f : order_)
      issues.push_back({f.key, f.problem + (n > 1 ? " (at " + std::to_string(f.count) + " of " + std::to_string(n) +
                                                        " grid points, e.g. " + describe_point(spec_, f.first) + ")"
                                                  : std::string())});
  }

 private:
  struct Failure {
    std::string key, problem;
    std::size_t first = 0, count = 0;
  };
  const config::SweepSpec& spec_;
  std::map<std::string, std::size_t> by_key_;
  std::vector<Failure> order_;
};

/// Examples of a check that many items fail: the first max_examples, then a count.
class Examples {
 public:
  void add(const std::string& example) {
    if (count_++ < max_examples) text_ += (text_.empty() ? "" : "; ") + example;
  }
  std::size_t count() const noexcept { return count_; }
  std::string text() const {
    return text_ + (count_ > max_examples ? "; and " + std::to_string(count_ - max_examples) + " more" : std::string());
  }

 private:
  std::size_t count_ = 0;
  std::string text_;
};

/// FNV-1a 64 (as config::SweepSpec::plan_hash).
class Fnv1a {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= c[i];
      h_ *= 1099511628211ULL;
    }
  }
  void text(std::string_view s) {
    number(s.size());  // length first: ("ab", "c") and ("a", "bc") differ
    bytes(s.data(), s.size());
  }
  void number(std::uint64_t x) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(x >> (8 * i));  // little-endian on every host
    bytes(b, sizeof b);
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  std::uint64_t h_ = 14695981039346656037ULL;
};

/// The token file's checks against the model and the grid (load_encoder_inputs).
void check_tokens(const config::SweepSpec& spec, const checkpoint::TokenFile& tokens, std::size_t longest_T,
                  std::int64_t vocab, const std::string& config_file, std::vector<ConfigIssue>& issues) {
  const auto replicates = static_cast<std::size_t>(spec.replicates);
  const std::string file = "'" + tokens.file + "'";
  if (replicates > tokens.size())
    issues.push_back({spec.adaptive.enabled() ? "sweep.replicates.max" : "sweep.replicates",
                      "is " + std::to_string(replicates) + " but the token file " + file + " has " +
                          count_of(tokens.size(), "excerpt") +
                          ": replicate r reads excerpt r, so a point runs at most as many replicates as "
                          "the file has excerpts"});
  const std::size_t used = std::min(replicates, tokens.size());
  Examples short_excerpts, outside;
  for (std::size_t r = 0; r < used; ++r) {
    const auto& ids = tokens.excerpts[r];
    if (ids.size() < longest_T)
      short_excerpts.add("excerpt " + std::to_string(r) + " (line " + std::to_string(tokens.lines[r]) + ") has " +
                         std::to_string(ids.size()));
    for (std::size_t i = 0; i < std::min(ids.size(), longest_T); ++i)
      if (ids[i] >= vocab)
        outside.add("id " + std::to_string(ids[i]) + " (excerpt " + std::to_string(r) + ", line " +
                    std::to_string(tokens.lines[r]) + ", token " + std::to_string(i + 1) + ")");
  }
  if (short_excerpts.count())
    issues.push_back({"model.input_path", "the token file " + file + " has " +
                                              count_of(short_excerpts.count(), "excerpt") +
                                              " shorter than T = " + std::to_string(longest_T) +
                                              " tokens (the largest T that reads tokens; each replicate reads the "
                                              "first T tokens of its excerpt, never padding): " +
                                              short_excerpts.text()});
  if (outside.count())
    issues.push_back({"model.input_path", "the token file " + file + " has " + count_of(outside.count(), "token id") +
                                              " not below the model's vocab_size = " + std::to_string(vocab) + " (" +
                                              config_file + "), among the tokens read: " + outside.text()});
}

/// The digest of what an encoder sweep read: config.json's bytes, the excerpts, and the weight
/// files' sizes and headers (not their data: a checkpoint is not read through at every start).
/// "FNV-1a <all> (config.json <h>; tokens 32 excerpts <h>; checkpoint 1 file, <n> bytes, headers <h>)":
/// the hash of the parts first, so that a difference shows in the first characters of a message.
std::string model_digest(const fs::path& folder, const checkpoint::ModelFolder* checkpoint,
                         const checkpoint::TokenFile* tokens) {
  Fnv1a config;
  config.text(checkpoint::read_small_file(folder / checkpoint::config_file_name));
  std::string parts = "config.json " + config.hex();
  if (tokens) {
    Fnv1a h;
    h.number(tokens->size());
    for (const auto& ids : tokens->excerpts) {
      h.number(ids.size());
      for (const std::int64_t id : ids) h.number(static_cast<std::uint64_t>(id));
    }
    parts += "; tokens " + count_of(tokens->size(), "excerpt") + " " + h.hex();
  }
  if (checkpoint) {
    Fnv1a h;
    std::size_t bytes = 0;
    const auto& files = checkpoint->files();
    for (const auto& f : files) {
      h.text(fs::path(f.file()).filename().string());
      h.number(f.file_bytes());
      bytes += f.file_bytes();
      for (const auto& t : f.tensors()) {
        h.text(t.name);
        h.text(checkpoint::dtype_name(t.dtype));
        h.number(t.shape.size());
        for (const std::size_t s : t.shape) h.number(s);
        h.number(t.begin);
        h.number(t.end);
      }
      for (const auto& [key, value] : f.metadata()) {
        h.text(key);
        h.text(value);
      }
    }
    parts += "; checkpoint " + count_of(files.size(), "file") + ", " + std::to_string(bytes) + " bytes, headers " +
             h.hex();
  }
  Fnv1a all;
  all.text(parts);
  return "FNV-1a " + all.hex() + " (" + parts + ")";
}

}  // namespace

void load_input_file(config::SweepSpec& spec, const std::filesystem::path& sweep_file) {
  // parse_sweep requires input_path whenever input can be "file"; with input = "tokens" it is the
  // token file (load_encoder_inputs).
  if (spec.input_path.empty() || !may_be(spec, "input", "file")) return;
  const fs::path path = beside(sweep_file, spec.input_path);
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

namespace {

/// The model folder of `spec` made absolute; ConfigError on model.model_folder when it is not a
/// folder.
fs::path model_folder_of(const config::SweepSpec& spec, const fs::path& sweep_file, const char* block) {
  const fs::path folder = fs::absolute(beside(sweep_file, spec.model_folder)).lexically_normal();
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw ConfigError(std::vector<ConfigIssue>{
        {"model.model_folder", "'" + folder.string() + "' is not a folder" +
                                   (fs::exists(folder, ec) ? std::string() : std::string(" (no such file or folder)")) +
                                   ": block = \"" + block +
                                   "\" needs a model folder holding config.json (relative paths are relative to the "
                                   "sweep file's folder)"}});
  return folder;
}

/// load_encoder_inputs for block = "mamba2": the mamba_ssm folder (models::mamba2::open_model),
/// d = d_model, with init = "checkpoint" the largest depth <= n_layer, and the token file.
void load_mamba2_inputs(config::SweepSpec& spec, const fs::path& sweep_file) {
  const bool checkpoint = may_be(spec, "init", "checkpoint"), reads_tokens = may_be(spec, "input", "tokens");
  const fs::path folder = model_folder_of(spec, sweep_file, "mamba2");
  const auto model = models::mamba2::open_model(folder, checkpoint);  // its ConfigErrors pass through
  const models::mamba2::Mamba2Shape& shape = model->shape;
  std::optional<checkpoint::TokenFile> tokens;
  if (reads_tokens) tokens = checkpoint::read_token_file(beside(sweep_file, spec.input_path));

  const std::string config_file = "'" + (folder / checkpoint::config_file_name).string() + "'";
  GridProblems grid(spec);
  std::size_t longest_T = 0;  // over the points that read tokens
  const int depth = spec.max_depth();
  for (std::size_t p = 0; p < spec.n_points(); ++p) {
    const config::ModelParams m = config::resolve(spec.point(p));
    if (m.block != config::Block::mamba2) continue;
    if (m.d != shape.d_model)
      grid.fail(key_of(spec, "d"), p, [&] {
        return "is " + std::to_string(m.d) + " but the model's d_model is " + std::to_string(shape.d_model) + " (" +
               config_file + "): a Mamba-2 block is as wide as its model";
      });
    if (m.init == config::Init::checkpoint && depth > shape.layers)
      grid.fail(key_of(spec, "depth"), p, [&] {
        return "is " + std::to_string(depth) + " but the checkpoint has n_layer = " + std::to_string(shape.layers) +
               " (" + config_file + "): init = \"checkpoint\" runs at most its " + std::to_string(shape.layers) +
               " trained blocks (init = \"random\" draws any depth)";
      });
    if (m.input == config::InputKind::tokens) longest_T = std::max(longest_T, static_cast<std::size_t>(m.T));
  }
  std::vector<ConfigIssue> issues;
  grid.append_to(issues);
  if (tokens) check_tokens(spec, *tokens, longest_T, shape.vocab, config_file, issues);
  if (!issues.empty()) throw ConfigError(std::move(issues));

  std::string digest = model_digest(folder, checkpoint ? model->folder.get() : nullptr, tokens ? &*tokens : nullptr);
  std::shared_ptr<const std::vector<std::vector<std::int64_t>>> excerpts;
  if (tokens) excerpts = std::make_shared<const std::vector<std::vector<std::int64_t>>>(std::move(tokens->excerpts));
  spec.set_encoder_inputs(folder.string(), std::move(excerpts), std::move(digest));
}

}  // namespace

void load_encoder_inputs(config::SweepSpec& spec, const std::filesystem::path& sweep_file) {
  if (may_be(spec, "block", "mamba2")) return load_mamba2_inputs(spec, sweep_file);
  if (!may_be(spec, "block", "encoder")) return;
  const bool checkpoint = may_be(spec, "init", "checkpoint"), reads_tokens = may_be(spec, "input", "tokens");
  const fs::path folder = model_folder_of(spec, sweep_file, "encoder");
  const auto model = models::encoder::open_model(folder, checkpoint);  // its ConfigErrors pass through
  const models::encoder::EncoderShape& shape = model->shape;
  std::optional<checkpoint::TokenFile> tokens;
  if (reads_tokens) tokens = checkpoint::read_token_file(beside(sweep_file, spec.input_path));

  const std::string config_file = "'" + (folder / checkpoint::config_file_name).string() + "'";
  GridProblems grid(spec);
  std::size_t longest_T = 0;  // over the points that read tokens
  const int depth = spec.max_depth();
  for (std::size_t p = 0; p < spec.n_points(); ++p) {
    const config::ModelParams m = config::resolve(spec.point(p));
    if (m.block != config::Block::encoder) continue;
    if (m.d != shape.d)
      grid.fail(key_of(spec, "d"), p, [&] {
        return "is " + std::to_string(m.d) + " but the model's hidden_size is " + std::to_string(shape.d) + " (" +
               config_file + "): an encoder block is as wide as its model";
      });
    if (m.heads != shape.heads)
      grid.fail(key_of(spec, "heads"), p, [&] {
        return "is " + std::to_string(m.heads) + " but the model's num_attention_heads is " +
               std::to_string(shape.heads) + " (" + config_file + "): an encoder block has its model's heads";
      });
    if (m.init == config::Init::checkpoint && depth > shape.layers)
      grid.fail(key_of(spec, "depth"), p, [&] {
        return "is " + std::to_string(depth) +
               " but the checkpoint has num_hidden_layers = " + std::to_string(shape.layers) + " (" + config_file +
               "): init = \"checkpoint\" runs at most its " + std::to_string(shape.layers) +
               " trained blocks (init = \"random\" draws any depth)";
      });
    if (m.input != config::InputKind::tokens) continue;
    longest_T = std::max(longest_T, static_cast<std::size_t>(m.T));
    const int offset = shape.position_offset();
    if (static_cast<std::int64_t>(m.T) + offset > shape.max_positions)
      grid.fail(key_of(spec, "T"), p, [&] {
        return "is " + std::to_string(m.T) +
               " but the model's max_position_embeddings = " + std::to_string(shape.max_positions) + " (" +
               config_file + ") holds positions up to " + std::to_string(shape.max_positions - 1) +
               ", and the tokens take positions " + std::to_string(offset) + ".." + std::to_string(offset + m.T - 1) +
               ": T may be at most " + std::to_string(shape.max_positions - offset);
      });
  }
  std::vector<ConfigIssue> issues;
  grid.append_to(issues);
  if (tokens) check_tokens(spec, *tokens, longest_T, shape.vocab, config_file, issues);
  if (!issues.empty()) throw ConfigError(std::move(issues));

  std::string digest = model_digest(folder, checkpoint ? model->folder.get() : nullptr, tokens ? &*tokens : nullptr);
  std::shared_ptr<const std::vector<std::vector<std::int64_t>>> excerpts;
  if (tokens) excerpts = std::make_shared<const std::vector<std::vector<std::int64_t>>>(std::move(tokens->excerpts));
  spec.set_encoder_inputs(folder.string(), std::move(excerpts), std::move(digest));
}

namespace {
/// The comment line `# <what>: <text>` of a canonical text, or nullopt.
std::optional<std::string> comment_of(const std::string& text, std::string_view what) {
  const auto at = text.find(what);
  if (at == std::string::npos) return std::nullopt;
  return text.substr(at + what.size(), text.find('\n', at) - at - what.size());
}
}  // namespace

config::SweepSpec stored_sweep(const std::string& config_text, const std::string& source) {
  config::SweepSpec spec = config::parse_sweep(config_text, source);
  if (const auto digest = comment_of(config_text, "# input file content: ")) spec.input_file_digest = *digest;
  if (const auto digest = comment_of(config_text, "# model content: ")) spec.set_encoder_inputs({}, nullptr, *digest);
  return spec;
}

config::SweepSpec load_sweep_with_input(const std::filesystem::path& sweep_file,
                                        const std::vector<std::string>& overrides) {
  config::SweepSpec spec = config::load_sweep(sweep_file, overrides);
  load_input_file(spec, sweep_file);
  load_encoder_inputs(spec, sweep_file);
  return spec;
}

}  // namespace rcsweep::store
