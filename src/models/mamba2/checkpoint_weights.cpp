#include "models/mamba2/checkpoint_weights.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include "base/error.hpp"
#include "checkpoint/safetensors.hpp"

namespace rcsweep::models::mamba2 {
namespace {

using nlohmann::json;

// --- config.json ---------------------------------------------------------------------------------

// Largest sizes read: far beyond any released Mamba-2, and small enough that every width of the
// block (d_in_proj, conv_dim) is an int and a tensor's element count a size_t with room to spare.
constexpr std::int64_t max_width = 32768;         // d_model, headdim
constexpr std::int64_t max_layers = 100000;       // n_layer
constexpr std::int64_t max_vocab = 10'000'000;    // vocab_size
constexpr std::int64_t max_pad_multiple = 65536;  // pad_vocab_size_multiple
constexpr std::int64_t max_state = 16384;         // d_state
constexpr std::int64_t max_conv = 1024;           // d_conv
constexpr std::int64_t max_expand = 64;           // expand
constexpr std::int64_t max_groups = 32768;        // ngroups
constexpr std::int64_t max_chunk = 1 << 20;       // chunk_size

// Mamba2.__init__'s arguments (ssm_cfg keys): the ones read and the ones known but not read.
constexpr std::array<std::string_view, 20> ssm_keys{
    "layer",         "d_state",      "d_conv",     "conv_init", "expand",           "headdim",         "d_ssm",
    "ngroups",       "A_init_range", "D_has_hdim", "rmsnorm",   "norm_before_gate", "dt_min",          "dt_max",
    "dt_init_floor", "dt_limit",     "bias",       "conv_bias", "chunk_size",       "use_mem_eff_path"};

std::string number_text(double v) {
  std::ostringstream out;
  out << v;  // 1e-05, 16, 0.001
  return out.str();
}

std::string type_problem(const json& v, const char* wanted) {
  return std::string("is a JSON ") + (v.is_number_float() ? "floating-point number" : v.type_name()) + ", not " +
         wanted;
}

// One JSON object of config.json (the whole file, or ssm_cfg) with its keys' prefix in messages.
struct Object {
  const json* value;
  std::string prefix;  // "" or "ssm_cfg."
};

// The keys of one config.json, every problem collected before one ConfigError.
class Keys {
 public:
  explicit Keys(const checkpoint::ModelConfig& config) : file_(config.file()) {}

  void refuse(std::string_view key, const std::string& problem) {
    issues_.push_back({file_, "key \"" + std::string(key) + "\" " + problem});
  }
  // The value at o's `key`, or null when missing or a JSON null (ModelConfig's rule).
  static const json* find(const Object& o, std::string_view key) {
    const auto it = o.value->find(key);
    return it == o.value->end() || it->is_null() ? nullptr : &*it;
  }
  static std::string name(const Object& o, std::string_view key) { return o.prefix + std::string(key); }

  // An integer, `fallback` when missing; nothing after a problem.
  std::optional<std::int64_t> integer(const Object& o, std::string_view key, std::optional<std::int64_t> fallback) {
    const json* v = find(o, key);
    if (v == nullptr) {
      if (!fallback) refuse(name(o, key), o.value->contains(key) ? "is null" : "is missing");
      return fallback;
    }
    if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<std::int64_t>();
    if (v->is_number_unsigned() && v->get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX))
      return static_cast<std::int64_t>(v->get<std::uint64_t>());
    refuse(name(o, key), v->is_number_unsigned() ? "is " + v->dump() + ", too large" : type_problem(*v, "an integer"));
    return std::nullopt;
  }
  // A size from 1 to `limit`; 0 after a problem.
  int size(const Object& o, std::string_view key, std::int64_t limit,
           std::optional<std::int64_t> fallback = std::nullopt) {
    const auto v = integer(o, key, fallback);
    if (!v) return 0;
    if (*v < 1) {
      refuse(name(o, key), "is " + std::to_string(*v) + ": a size is at least 1");
      return 0;
    }
    if (*v > limit) {
      refuse(name(o, key), "is " + std::to_string(*v) + ", more than the " + std::to_string(limit) +
                               " a Mamba-2 model may have here (a limit far beyond released models)");
      return 0;
    }
    return static_cast<int>(*v);
  }
  std::optional<double> number(const Object& o, std::string_view key, std::optional<double> fallback) {
    const json* v = find(o, key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) {
      refuse(name(o, key), type_problem(*v, "a number"));
      return std::nullopt;
    }
    return v->get<double>();
  }
  std::optional<bool> boolean(const Object& o, std::string_view key, bool fallback) {
    const json* v = find(o, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) {
      refuse(name(o, key), type_problem(*v, "true or false"));
      return std::nullopt;
    }
    return v->get<bool>();
  }
  // Two numbers [low, high], `fallback` when missing.
  std::optional<std::pair<double, double>> range(const Object& o, std::string_view key,
                                                 std::pair<double, double> fallback) {
    const json* v = find(o, key);
    if (v == nullptr) return fallback;
    if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number()) {
      refuse(name(o, key), "is " + v->dump() + ", not two numbers [low, high]");
      return std::nullopt;
    }
    return std::pair{(*v)[0].get<double>(), (*v)[1].get<double>()};
  }
  void throw_if_any() {
    if (!issues_.empty()) throw ConfigError(std::move(issues_));
  }

 private:
  std::string file_;
  std::vector<ConfigIssue> issues_;
};

// ssm_cfg's keys into `s`.
void read_ssm_cfg(Keys& keys, const Object& ssm, Mamba2Shape& s) {
  if (const json* layer = Keys::find(ssm, "layer"); layer == nullptr)
    keys.refuse("ssm_cfg.layer", "is missing: mamba_ssm then builds a Mamba-1 layer (Mamba); only \"Mamba2\" is read");
  else if (!layer->is_string())
    keys.refuse("ssm_cfg.layer", type_problem(*layer, "a string"));
  else if (layer->get<std::string>() != "Mamba2")
    keys.refuse("ssm_cfg.layer", "is " + checkpoint::quote_name(layer->get<std::string>()) +
                                     ": only \"Mamba2\" is read (Mamba-1's selective scan is another block)");
  for (const auto& [key, value] : ssm.value->items())
    if (std::find(ssm_keys.begin(), ssm_keys.end(), key) == ssm_keys.end())
      keys.refuse("ssm_cfg." + key, "is not an argument of mamba_ssm's Mamba2 known here: a model built with it is "
                                    "not known to be this block");

  s.d_state = keys.size(ssm, "d_state", max_state, 128);
  s.d_conv = keys.size(ssm, "d_conv", max_conv, 4);
  s.expand = keys.size(ssm, "expand", max_expand, 2);
  s.headdim = keys.size(ssm, "headdim", max_width, 64);
  s.ngroups = keys.size(ssm, "ngroups", max_groups, 1);
  s.chunk_size = keys.size(ssm, "chunk_size", max_chunk, 256);

  if (const auto A = keys.range(ssm, "A_init_range", {1.0, 16.0})) {
    if (!(std::isfinite(A->first) && std::isfinite(A->second) && 0 < A->first && A->first <= A->second))
      keys.refuse("ssm_cfg.A_init_range",
                  "is [" + number_text(A->first) + ", " + number_text(A->second) + "]: needs 0 < low <= high");
    s.A_init_low = A->first;
    s.A_init_high = A->second;
  }
  const auto dt_min = keys.number(ssm, "dt_min", 0.001), dt_max = keys.number(ssm, "dt_max", 0.1);
  if (dt_min && dt_max) {
    if (!(std::isfinite(*dt_max) && 0 < *dt_min && *dt_min <= *dt_max))
      keys.refuse("ssm_cfg.dt_min", "is " + number_text(*dt_min) + " with dt_max " + number_text(*dt_max) +
                                        ": needs 0 < dt_min <= dt_max");
    s.dt_min = *dt_min;
    s.dt_max = *dt_max;
  }
  if (const auto floor = keys.number(ssm, "dt_init_floor", 1e-4)) {
    if (!(*floor >= 0)) keys.refuse("ssm_cfg.dt_init_floor", "is " + number_text(*floor) + ": must be at least 0");
    s.dt_init_floor = *floor;
  }
  if (const auto limit = keys.range(ssm, "dt_limit", {0.0, std::numeric_limits<double>::infinity()})) {
    if (!(0 <= limit->first && limit->first <= limit->second))
      keys.refuse("ssm_cfg.dt_limit",
                  "is [" + number_text(limit->first) + ", " + number_text(limit->second) + "]: needs 0 <= low <= high");
    s.dt_limit_low = limit->first;
    s.dt_limit_high = limit->second;
  }
  if (const auto conv_init = keys.number(ssm, "conv_init", 0.0); conv_init && Keys::find(ssm, "conv_init")) {
    if (!(*conv_init > 0))
      keys.refuse("ssm_cfg.conv_init", "is " + number_text(*conv_init) +
                                           ": the bound of the convolution's initial weights must be positive");
    s.conv_init = *conv_init;
  }
  const auto flag = [&](std::string_view key, bool fallback, bool& out) {
    if (const auto v = keys.boolean(ssm, key, fallback)) out = *v;
  };
  flag("rmsnorm", true, s.rmsnorm);
  flag("norm_before_gate", false, s.norm_before_gate);
  flag("D_has_hdim", false, s.D_has_hdim);
  flag("bias", false, s.bias);
  flag("conv_bias", true, s.conv_bias);
  bool unused = true;
  flag("use_mem_eff_path", true, unused);  // the fused kernel: the same function

  const std::int64_t E = std::int64_t{s.expand} * s.d_model;
  if (const auto d_ssm = keys.integer(ssm, "d_ssm", E); d_ssm && E > 0 && *d_ssm != E)
    keys.refuse("ssm_cfg.d_ssm", "is " + std::to_string(*d_ssm) + ", not d_inner = expand * d_model = " +
                                     std::to_string(E) + ": the gated MLP beside the SSM it implies is not this block");
  if (E > 0 && s.headdim > 0) {
    if (E % s.headdim != 0) {
      keys.refuse("ssm_cfg.headdim", "is " + std::to_string(s.headdim) +
                                         ", which does not divide d_inner = expand * d_model = " + std::to_string(E));
    } else if (s.ngroups > 0 && (E / s.headdim) % s.ngroups != 0) {
      keys.refuse("ssm_cfg.ngroups", "is " + std::to_string(s.ngroups) + ", which does not divide the " +
                                         std::to_string(E / s.headdim) + " heads (d_inner / headdim)");
    }
  }
}

// --- the table -----------------------------------------------------------------------------------

constexpr std::array<TensorEntry, role_count> table{{
    {Role::embedding, "backbone.embedding.weight"},
    {Role::final_norm, "backbone.norm_f.weight"},
    {Role::norm, "backbone.layers.{layer}.norm.weight"},
    {Role::in_proj, "backbone.layers.{layer}.mixer.in_proj.weight"},
    {Role::in_proj_bias, "backbone.layers.{layer}.mixer.in_proj.bias"},
    {Role::conv, "backbone.layers.{layer}.mixer.conv1d.weight"},
    {Role::conv_bias, "backbone.layers.{layer}.mixer.conv1d.bias"},
    {Role::dt_bias, "backbone.layers.{layer}.mixer.dt_bias"},
    {Role::A_log, "backbone.layers.{layer}.mixer.A_log"},
    {Role::D, "backbone.layers.{layer}.mixer.D"},
    {Role::gated_norm, "backbone.layers.{layer}.mixer.norm.weight"},
    {Role::out_proj, "backbone.layers.{layer}.mixer.out_proj.weight"},
    {Role::out_proj_bias, "backbone.layers.{layer}.mixer.out_proj.bias"},
}};

constexpr bool per_layer(Role role) { return role >= Role::norm; }
constexpr bool well_formed() {
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (static_cast<std::size_t>(table[i].role) != i) return false;
    if (per_layer(table[i].role) != (table[i].name.find("{layer}") != std::string_view::npos)) return false;
  }
  return true;
}
static_assert(well_formed());

// What a role holds, for messages.
std::string role_text(Role role, int layer) {
  static constexpr std::array<std::string_view, role_count> text{"the embedding",
                                                                 "the final RMSNorm's weight (norm_f)",
                                                                 "the block's RMSNorm weight",
                                                                 "in_proj (W_in)",
                                                                 "in_proj's bias",
                                                                 "the causal convolution's weight",
                                                                 "the convolution's bias",
                                                                 "dt_bias",
                                                                 "A_log",
                                                                 "D",
                                                                 "the gated RMSNorm's weight",
                                                                 "out_proj (W_out)",
                                                                 "out_proj's bias"};
  std::string out(text[static_cast<std::size_t>(role)]);
  if (per_layer(role)) out += " of layer " + std::to_string(layer);
  return out;
}

// The config.json keys a role's stored shape comes from, for messages.
std::string_view shape_keys(const Mamba2Shape& s, Role role) {
  switch (role) {
    case Role::embedding: return "vocab_size rounded up to pad_vocab_size_multiple x d_model";
    case Role::in_proj: return "2 d_inner + 2 ngroups d_state + nheads x d_model";
    case Role::in_proj_bias: return "2 d_inner + 2 ngroups d_state + nheads";
    case Role::conv: return "d_inner + 2 ngroups d_state x 1 x d_conv";
    case Role::conv_bias: return "d_inner + 2 ngroups d_state";
    case Role::dt_bias:
    case Role::A_log: return "nheads = d_inner / headdim";
    case Role::D: return s.D_has_hdim ? "d_inner, D_has_hdim" : "nheads = d_inner / headdim";
    case Role::gated_norm: return "d_inner = expand d_model";
    case Role::out_proj: return "d_model x d_inner";
    default: return "d_model";  // the norms, out_proj's bias
  }
}

// Why a tensor the config switches off must be absent.
std::string_view switched_off(Role role) {
  switch (role) {
    case Role::in_proj_bias:
    case Role::out_proj_bias: return "ssm_cfg.bias is false";
    case Role::conv_bias: return "ssm_cfg.conv_bias is false";
    default: return "ssm_cfg.rmsnorm is false";  // gated_norm
  }
}

// Problems of a folder's tensors: "file: tensor "name" ...", the first max_listed kept.
class Problems {
 public:
  void add(const std::string& file, const std::string& problem) {
    if (issues_.size() < max_listed) issues_.push_back({file, problem});
    ++count_;
  }
  void throw_if_any(const std::string& file) {
    if (count_ == 0) return;
    if (count_ > issues_.size())
      issues_.push_back({file, "... and " + std::to_string(count_ - issues_.size()) + " more problems"});
    throw ConfigError(std::move(issues_));
  }

 private:
  static constexpr std::size_t max_listed = 20;
  std::vector<ConfigIssue> issues_;
  std::size_t count_ = 0;
};


}  // namespace

Mamba2Shape mamba2_shape(const checkpoint::ModelConfig& config) {
  const json& root = config.json();
  if (config.has("model_type") && !root.contains("d_model"))
    throw ConfigError(
        {{config.file(),
          "key \"model_type\" is " + root["model_type"].dump() +
              " without \"d_model\": Hugging Face transformers' config layout (Mamba2Config: hidden_size, "
              "num_hidden_layers, num_heads, ...) is not read; rcsweep reads mamba_ssm's config.json (d_model, "
              "n_layer, vocab_size, ssm_cfg), as the state-spaces/mamba2-* folders carry it"}});
  Keys keys(config);
  const Object top{&root, ""};
  Mamba2Shape s;
  s.d_model = keys.size(top, "d_model", max_width);
  s.layers = keys.size(top, "n_layer", max_layers);
  s.vocab = keys.size(top, "vocab_size", max_vocab);
  const int pad = keys.size(top, "pad_vocab_size_multiple", max_pad_multiple, 8);
  if (s.vocab > 0 && pad > 0) s.vocab_rows = (s.vocab + pad - 1) / pad * pad;
  if (const auto mlp = keys.integer(top, "d_intermediate", 0); mlp && *mlp != 0)
    keys.refuse("d_intermediate", "is " + std::to_string(*mlp) +
                                      ": blocks with an MLP after the mixer are not this block (only 0 is read)");
  if (const json* attention = Keys::find(top, "attn_layer_idx")) {
    if (!attention->is_array())
      keys.refuse("attn_layer_idx", type_problem(*attention, "an array"));
    else if (!attention->empty())
      keys.refuse("attn_layer_idx",
                  "is " + attention->dump() + ": hybrid models with attention layers are not read (only [] is read)");
  }
  if (const auto rms = keys.boolean(top, "rms_norm", true); rms && !*rms)
    keys.refuse("rms_norm", "is false: LayerNorm models are not this block (Mamba-2 uses RMSNorm)");
  if (const json* ssm = Keys::find(top, "ssm_cfg"); ssm == nullptr)
    keys.refuse("ssm_cfg", "is missing: mamba_ssm then builds Mamba-1 layers; a Mamba-2 model has "
                           "\"ssm_cfg\": {\"layer\": \"Mamba2\", ...}");
  else if (!ssm->is_object())
    keys.refuse("ssm_cfg", type_problem(*ssm, "an object"));
  else
    read_ssm_cfg(keys, Object{ssm, "ssm_cfg."}, s);
  keys.throw_if_any();
  return s;
}

std::span<const TensorEntry> tensor_table() { return table; }

std::string tensor_name(std::string_view name, int layer) {
  static constexpr std::string_view placeholder = "{layer}";
  std::string out(name);
  if (const auto at = out.find(placeholder); at != std::string::npos)
    out.replace(at, placeholder.size(), std::to_string(layer));
  return out;
}

bool has_role(const Mamba2Shape& shape, Role role) {
  switch (role) {
    case Role::in_proj_bias:
    case Role::out_proj_bias: return shape.bias;
    case Role::conv_bias: return shape.conv_bias;
    case Role::gated_norm: return shape.rmsnorm;
    default: return true;
  }
}

std::vector<std::size_t> stored_shape(const Mamba2Shape& s, Role role) {
  const auto n = [](int v) { return static_cast<std::size_t>(v); };
  switch (role) {
    case Role::embedding: return {n(s.vocab_rows), n(s.d_model)};
    case Role::in_proj: return {n(s.d_in_proj()), n(s.d_model)};
    case Role::in_proj_bias: return {n(s.d_in_proj())};
    case Role::conv: return {n(s.conv_dim()), 1, n(s.d_conv)};
    case Role::conv_bias: return {n(s.conv_dim())};
    case Role::dt_bias:
    case Role::A_log: return {n(s.heads())};
    case Role::D: return {n(s.D_has_hdim ? s.d_inner() : s.heads())};
    case Role::gated_norm: return {n(s.d_inner())};
    case Role::out_proj: return {n(s.d_model), n(s.d_inner())};
    default: return {n(s.d_model)};  // the norms, out_proj's bias
  }
}

CheckpointWeights::CheckpointWeights(std::shared_ptr<const checkpoint::ModelFolder> folder)
    : folder_(std::move(folder)) {
  if (!folder_) throw Error("CheckpointWeights: no model folder");
  const checkpoint::ModelFolder& f = *folder_;
  shape_ = mamba2_shape(f.config());

  // Every tensor of every layer, before any is converted.
  Problems problems;
  const auto check = [&](const TensorEntry& e, int layer) {
    const std::string name = tensor_name(e.name, layer);
    if (!has_role(shape_, e.role)) {
      if (f.contains(name))
        problems.add(f.file_of(name).file(), "tensor " + checkpoint::quote_name(name) + " is present, but " +
                                                 std::string(switched_off(e.role)) + " in config.json (" +
                                                 role_text(e.role, layer) + " the model does not have)");
      return;
    }
    if (!f.contains(name)) {
      problems.add(f.weights_file(),
                   "tensor " + checkpoint::quote_name(name) + " is missing (" + role_text(e.role, layer) + ")");
      return;
    }
    const std::string& file = f.file_of(name).file();
    const checkpoint::TensorInfo& t = f.tensor(name);
    const std::vector<std::size_t> want = stored_shape(shape_, e.role);
    if (t.shape != want)
      problems.add(file, "tensor " + checkpoint::quote_name(name) + " has shape " + checkpoint::shape_text(t.shape) +
                             ", expected " + checkpoint::shape_text(want) + " (" +
                             std::string(shape_keys(shape_, e.role)) + " of config.json; " + role_text(e.role, layer) +
                             ")");
    if (!checkpoint::is_convertible(t.dtype))
      problems.add(file, "tensor " + checkpoint::quote_name(name) + " has dtype " +
                             std::string(checkpoint::dtype_name(t.dtype)) + ", not a float (F64, F32, F16 or BF16)");
  };
  for (const TensorEntry& e : table)
    if (!per_layer(e.role)) check(e, 0);
  for (int layer = 0; layer < shape_.layers; ++layer)
    for (const TensorEntry& e : table)
      if (per_layer(e.role)) check(e, layer);
  problems.throw_if_any(f.weights_file());
}

std::shared_ptr<const CheckpointWeights> CheckpointWeights::open(const std::filesystem::path& folder) {
  return std::make_shared<const CheckpointWeights>(
      std::make_shared<const checkpoint::ModelFolder>(checkpoint::ModelFolder::open(folder)));
}

Matrix CheckpointWeights::embedding(std::span<const std::int64_t> ids) const {
  const std::string name(table[static_cast<std::size_t>(Role::embedding)].name);
  Matrix X(ids.size(), static_cast<std::size_t>(shape_.d_model), Matrix::uninitialized);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int64_t id = ids[k];
    if (id < 0 || id >= shape_.vocab_rows)
      throw Error("CheckpointWeights::embedding: token id " + std::to_string(id) + " outside the embedding's " +
                  std::to_string(shape_.vocab_rows) + " rows");
    folder_->rows(name, static_cast<std::size_t>(id), 1, X.row(k));
  }
  return X;
}

std::vector<double> CheckpointWeights::final_norm() const {
  return folder_->values(table[static_cast<std::size_t>(Role::final_norm)].name);
}

LayerWeights CheckpointWeights::layer(int layer) const {
  if (layer < 0 || layer >= shape_.layers)
    throw Error("CheckpointWeights::layer: layer " + std::to_string(layer) + " of a checkpoint of " +
                std::to_string(shape_.layers) + " layers");
  const auto name = [&](Role role) { return tensor_name(table[static_cast<std::size_t>(role)].name, layer); };
  const auto vector = [&](Role role) {
    return has_role(shape_, role) ? folder_->values(name(role)) : std::vector<double>{};
  };
  LayerWeights w;
  w.norm = vector(Role::norm);
  w.W_in = folder_->transposed(name(Role::in_proj));
  w.b_in = vector(Role::in_proj_bias);
  // conv1d.weight [C, 1, K] -> K x C
  const auto C = static_cast<std::size_t>(shape_.conv_dim()), K = static_cast<std::size_t>(shape_.d_conv);
  const std::vector<double> conv = folder_->values(name(Role::conv));
  w.conv = Matrix(K, C, Matrix::uninitialized);
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t k = 0; k < K; ++k) w.conv(k, c) = conv[c * K + k];
  w.conv_bias = vector(Role::conv_bias);
  w.dt_bias = vector(Role::dt_bias);
  w.A_log = vector(Role::A_log);
  w.D = vector(Role::D);
  w.gated_norm = vector(Role::gated_norm);
  w.W_out = folder_->transposed(name(Role::out_proj));
  w.b_out = vector(Role::out_proj_bias);
  return w;
}

}  // namespace rcsweep::models::mamba2
