#include "models/encoder/checkpoint_weights.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "checkpoint/safetensors.hpp"

namespace rcsweep::models::encoder {
namespace {

// --- config.json ---------------------------------------------------------------------------------

// Largest sizes read: far beyond any released encoder, and small enough that every size is an int
// and a table's element count (vocab_size x embedding_size) a size_t with room to spare.
constexpr std::int64_t max_width = 32768;          // hidden_size, embedding_size
constexpr std::int64_t max_intermediate = 262144;  // intermediate_size
constexpr std::int64_t max_layers = 100000;        // num_hidden_layers, num_hidden_groups
constexpr std::int64_t max_vocab = 10'000'000;     // vocab_size
constexpr std::int64_t max_positions = 1'000'000;  // max_position_embeddings
constexpr std::int64_t max_token_types = 10'000;   // type_vocab_size

struct FamilyName {
  std::string_view model_type;
  Family family;
};
constexpr std::array<FamilyName, 3> families{
    {{"bert", Family::bert}, {"roberta", Family::roberta}, {"albert", Family::albert}}};

std::string_view family_name(Family family) {
  for (const FamilyName& f : families)
    if (f.family == family) return f.model_type;
  return "?";
}

constexpr std::string_view families_read =
    "\"bert\" (also BERT-shaped models such as TinyBERT), \"roberta\", \"albert\"";

// Why a model_type that is not read is refused.
std::string unsupported_model_type(const std::string& type) {
  const std::string quoted = checkpoint::quote_name(type);
  if (type == "xlnet")
    return "is " + quoted +
           ": XLNet's two-stream attention over relative positions (with segment recurrence) is not this block, an "
           "encoder of absolute positions; the families read are " +
           std::string(families_read);
  if (type == "distilbert")
    return "is " + quoted +
           ": DistilBERT's block is BERT's, but it has no token-type embedding and names its keys (dim, n_heads, "
           "n_layers, hidden_dim, activation) and tensors (transformer.layer.{i}.attention.q_lin, sa_layer_norm, ...) "
           "otherwise: not read; the families read are " +
           std::string(families_read);
  return "is " + quoted + ": not an encoder family read here; the families read are " + std::string(families_read);
}

struct ActivationName {
  std::string_view name;
  Activation activation;
};
// Hugging Face's ACT2FN names whose function the block computes exactly: "gelu" and "gelu_python"
// are x Phi(x) with erf; "gelu_new", "gelu_pytorch_tanh" and "gelu_accurate" are the tanh form with
// sqrt(2/pi). "gelu_fast" is the tanh form with sqrt(2/pi) rounded to 0.7978845608: refused.
constexpr std::array<ActivationName, 6> activations{{{"gelu", Activation::gelu},
                                                     {"gelu_python", Activation::gelu},
                                                     {"gelu_new", Activation::gelu_tanh},
                                                     {"gelu_pytorch_tanh", Activation::gelu_tanh},
                                                     {"gelu_accurate", Activation::gelu_tanh},
                                                     {"relu", Activation::relu}}};

std::string unsupported_activation(const std::string& name) {
  std::string why;
  if (name == "gelu_fast")
    why = "its tanh approximation rounds sqrt(2/pi) to 0.7978845608, which the block's gelu_tanh does not";
  else if (name == "quick_gelu")
    why = "x sigmoid(1.702 x) is not a GELU the block computes";
  else if (name == "gelu_10")
    why = "a GELU clipped to [-10, 10] is not a GELU the block computes";
  else
    why = "not an activation of this block";
  return "is " + checkpoint::quote_name(name) + ": " + why +
         "; it computes \"gelu\" (also \"gelu_python\"), \"gelu_new\" (also \"gelu_pytorch_tanh\", "
         "\"gelu_accurate\") and \"relu\"";
}

std::string number_text(double v) {
  std::ostringstream out;
  out << v;  // 1e-12, -1, 0.02
  return out.str();
}

// The keys of one config.json, every problem collected before one ConfigError.
class Keys {
 public:
  explicit Keys(const checkpoint::ModelConfig& config) : config_(config) {}

  void refuse(std::string_view key, const std::string& problem) {
    issues_.push_back({config_.file(), "key \"" + std::string(key) + "\" " + problem});
  }
  // The accessor's value, or nothing with its own problem (missing, of another type) kept.
  template <class Get>
  auto get(Get&& get) -> std::optional<decltype(get())> {
    try {
      return get();
    } catch (const ConfigError& e) {
      issues_.insert(issues_.end(), e.issues().begin(), e.issues().end());
      return std::nullopt;
    }
  }
  // A size from 1 to `limit`: the key's value, else `fallback` when the key is missing and a
  // fallback is given; 0 after a problem.
  int size(std::string_view key, std::int64_t limit, std::optional<std::int64_t> fallback = std::nullopt) {
    const auto v = get([&] { return fallback ? config_.integer(key, *fallback) : config_.integer(key); });
    if (!v) return 0;
    if (*v < 1) {
      refuse(key, "is " + std::to_string(*v) + ": a size is at least 1");
      return 0;
    }
    if (*v > limit) {
      refuse(key, "is " + std::to_string(*v) + ", more than the " + std::to_string(limit) +
                      " an encoder may have here (a limit far beyond released models)");
      return 0;
    }
    return static_cast<int>(*v);
  }
  // A finite positive number, else `fallback` when missing.
  double positive(std::string_view key, double fallback) {
    const auto v = get([&] { return config_.number(key, fallback); });
    if (!v) return fallback;
    if (!std::isfinite(*v) || *v <= 0) refuse(key, "is " + number_text(*v) + ": must be finite and positive");
    return *v;
  }
  std::optional<std::string> string(std::string_view key, const std::string& fallback) {
    return get([&] { return config_.string(key, fallback); });
  }
  void throw_if_any() {
    if (!issues_.empty()) throw ConfigError(std::move(issues_));
  }

 private:
  const checkpoint::ModelConfig& config_;
  std::vector<ConfigIssue> issues_;
};

// --- the tables --------------------------------------------------------------------------------

// BERT and RoBERTa (RobertaModel is BertModel with other position ids).
constexpr std::array<TensorEntry, 21> bert_table{{
    {Role::word, "embeddings.word_embeddings.weight"},
    {Role::position, "embeddings.position_embeddings.weight"},
    {Role::token_type, "embeddings.token_type_embeddings.weight"},
    {Role::embedding_norm_gamma, "embeddings.LayerNorm.weight"},
    {Role::embedding_norm_beta, "embeddings.LayerNorm.bias"},
    {Role::query, "encoder.layer.{group}.attention.self.query.weight", true},
    {Role::query_bias, "encoder.layer.{group}.attention.self.query.bias"},
    {Role::key, "encoder.layer.{group}.attention.self.key.weight", true},
    {Role::key_bias, "encoder.layer.{group}.attention.self.key.bias"},
    {Role::value, "encoder.layer.{group}.attention.self.value.weight", true},
    {Role::value_bias, "encoder.layer.{group}.attention.self.value.bias"},
    {Role::attention_output, "encoder.layer.{group}.attention.output.dense.weight", true},
    {Role::attention_output_bias, "encoder.layer.{group}.attention.output.dense.bias"},
    {Role::attention_norm_gamma, "encoder.layer.{group}.attention.output.LayerNorm.weight"},
    {Role::attention_norm_beta, "encoder.layer.{group}.attention.output.LayerNorm.bias"},
    {Role::mlp_in, "encoder.layer.{group}.intermediate.dense.weight", true},
    {Role::mlp_in_bias, "encoder.layer.{group}.intermediate.dense.bias"},
    {Role::mlp_out, "encoder.layer.{group}.output.dense.weight", true},
    {Role::mlp_out_bias, "encoder.layer.{group}.output.dense.bias"},
    {Role::mlp_norm_gamma, "encoder.layer.{group}.output.LayerNorm.weight"},
    {Role::mlp_norm_beta, "encoder.layer.{group}.output.LayerNorm.bias"},
}};

// ALBERT: embedding_size-wide embeddings projected to hidden_size, one layer per group (inner_group_num 1).
constexpr std::array<TensorEntry, 23> albert_table{{
    {Role::word, "embeddings.word_embeddings.weight"},
    {Role::position, "embeddings.position_embeddings.weight"},
    {Role::token_type, "embeddings.token_type_embeddings.weight"},
    {Role::embedding_norm_gamma, "embeddings.LayerNorm.weight"},
    {Role::embedding_norm_beta, "embeddings.LayerNorm.bias"},
    {Role::projection, "encoder.embedding_hidden_mapping_in.weight", true},
    {Role::projection_bias, "encoder.embedding_hidden_mapping_in.bias"},
    {Role::query, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.query.weight", true},
    {Role::query_bias, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.query.bias"},
    {Role::key, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.key.weight", true},
    {Role::key_bias, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.key.bias"},
    {Role::value, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.value.weight", true},
    {Role::value_bias, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.value.bias"},
    {Role::attention_output, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.dense.weight", true},
    {Role::attention_output_bias, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.dense.bias"},
    {Role::attention_norm_gamma, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.LayerNorm.weight"},
    {Role::attention_norm_beta, "encoder.albert_layer_groups.{group}.albert_layers.0.attention.LayerNorm.bias"},
    {Role::mlp_in, "encoder.albert_layer_groups.{group}.albert_layers.0.ffn.weight", true},
    {Role::mlp_in_bias, "encoder.albert_layer_groups.{group}.albert_layers.0.ffn.bias"},
    {Role::mlp_out, "encoder.albert_layer_groups.{group}.albert_layers.0.ffn_output.weight", true},
    {Role::mlp_out_bias, "encoder.albert_layer_groups.{group}.albert_layers.0.ffn_output.bias"},
    {Role::mlp_norm_gamma, "encoder.albert_layer_groups.{group}.albert_layers.0.full_layer_layer_norm.weight"},
    {Role::mlp_norm_beta, "encoder.albert_layer_groups.{group}.albert_layers.0.full_layer_layer_norm.bias"},
}};

constexpr std::array<std::string_view, 2> bert_prefixes{"bert.", ""};
constexpr std::array<std::string_view, 2> roberta_prefixes{"roberta.", ""};
constexpr std::array<std::string_view, 2> albert_prefixes{"albert.", ""};

// Every role once per table, the embeddings' (group-independent) before the blocks'.
constexpr bool per_group(Role role) { return role >= Role::query; }
constexpr bool well_formed(std::span<const TensorEntry> table) {
  std::array<int, role_count> seen{};
  bool blocks = false;
  for (const TensorEntry& e : table) {
    if (++seen[static_cast<std::size_t>(e.role)] > 1) return false;
    if (blocks && !per_group(e.role)) return false;
    blocks = per_group(e.role);
    if (per_group(e.role) != (e.name.find("{group}") != std::string_view::npos)) return false;
  }
  return true;
}
static_assert(well_formed(bert_table) && well_formed(albert_table));
static_assert(static_cast<std::size_t>(Role::mlp_norm_beta) + 1 == role_count);

bool is_norm(Role role) {
  switch (role) {
    case Role::embedding_norm_gamma:
    case Role::embedding_norm_beta:
    case Role::attention_norm_gamma:
    case Role::attention_norm_beta:
    case Role::mlp_norm_gamma:
    case Role::mlp_norm_beta: return true;
    default: return false;
  }
}

// A LayerNorm's older spelling (TensorFlow's gamma and beta), or nothing.
std::optional<std::string> legacy_name(Role role, const std::string& name) {
  if (!is_norm(role)) return std::nullopt;
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 2> spellings{
      {{".weight", ".gamma"}, {".bias", ".beta"}}};
  for (const auto& [now, then] : spellings)
    if (name.ends_with(now)) return name.substr(0, name.size() - now.size()) + std::string(then);
  return std::nullopt;
}

// What a role holds, for messages.
std::string role_text(Role role, int group) {
  static constexpr std::array<std::string_view, role_count> text{"the word embedding",
                                                                 "the position embedding",
                                                                 "the token-type embedding",
                                                                 "the embedding LayerNorm's gamma",
                                                                 "the embedding LayerNorm's beta",
                                                                 "the embedding projection",
                                                                 "the embedding projection's bias",
                                                                 "W_Q",
                                                                 "b_Q",
                                                                 "W_K",
                                                                 "b_K",
                                                                 "W_V",
                                                                 "b_V",
                                                                 "W_O",
                                                                 "b_O",
                                                                 "the attention LayerNorm's gamma",
                                                                 "the attention LayerNorm's beta",
                                                                 "W_1",
                                                                 "b_1",
                                                                 "W_2",
                                                                 "b_2",
                                                                 "the MLP LayerNorm's gamma",
                                                                 "the MLP LayerNorm's beta"};
  std::string out(text[static_cast<std::size_t>(role)]);
  if (per_group(role)) out += " of weight group " + std::to_string(group);
  return out;
}

// The stored shape of a role's tensor, each dimension with the config.json key it comes from.
struct Dim {
  std::size_t size;
  std::string_view key;
};
std::vector<Dim> stored_dims(const EncoderShape& s, Role role) {
  const auto n = [](int v) { return static_cast<std::size_t>(v); };
  const Dim d{n(s.d), "hidden_size"};
  const Dim e{n(s.embedding_size), s.family == Family::albert ? "embedding_size" : "hidden_size"};
  const Dim inner{n(s.intermediate), "intermediate_size"};
  switch (role) {
    case Role::word: return {{n(s.vocab), "vocab_size"}, e};
    case Role::position: return {{n(s.max_positions), "max_position_embeddings"}, e};
    case Role::token_type: return {{n(s.type_vocab), "type_vocab_size"}, e};
    case Role::embedding_norm_gamma:
    case Role::embedding_norm_beta: return {e};
    case Role::projection: return {d, e};
    case Role::query:
    case Role::key:
    case Role::value:
    case Role::attention_output: return {d, d};
    case Role::mlp_in: return {inner, d};
    case Role::mlp_in_bias: return {inner};
    case Role::mlp_out: return {d, inner};
    default: return {d};  // the other biases and the LayerNorms
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


const TensorEntry& entry_of(Family family, Role role) {
  for (const TensorEntry& e : tensor_table(family))
    if (e.role == role) return e;
  throw Error("encoder checkpoint: the " + std::string(family_name(family)) + " table has no " + role_text(role, 0));
}

}  // namespace

EncoderShape encoder_shape(const checkpoint::ModelConfig& config) {
  if (!config.has("model_type"))
    throw ConfigError(
        {{config.file(), "key \"model_type\" is missing: it names the architecture (" + std::string(families_read) +
                             "); a BERT-shaped model without it (TinyBERT's original config.json) needs "
                             "\"model_type\": \"bert\" added"}});
  const std::string type = config.string("model_type");
  const auto family = std::find_if(families.begin(), families.end(),
                                   [&](const FamilyName& f) { return f.model_type == type; });
  if (family == families.end())
    throw ConfigError({{config.file(), "key \"model_type\" " + unsupported_model_type(type)}});

  EncoderShape s;
  s.family = family->family;
  const bool albert = s.family == Family::albert;
  Keys keys(config);
  s.vocab = keys.size("vocab_size", max_vocab);
  s.max_positions = keys.size("max_position_embeddings", max_positions);
  s.type_vocab = keys.size("type_vocab_size", max_token_types);
  s.d = keys.size("hidden_size", max_width);
  s.heads = keys.size("num_attention_heads", max_width);
  s.intermediate = keys.size("intermediate_size", max_intermediate);
  s.layers = keys.size("num_hidden_layers", max_layers);
  s.embedding_size = albert ? keys.size("embedding_size", max_width) : s.d;
  s.hidden_groups = albert ? keys.size("num_hidden_groups", max_layers, 1) : 1;
  s.inner_group_num = albert ? keys.size("inner_group_num", max_layers, 1) : 1;
  s.layer_norm_eps = keys.positive("layer_norm_eps", 1e-12);
  s.initializer_range = keys.positive("initializer_range", 0.02);

  if (s.d > 0 && s.heads > 0 && s.d % s.heads != 0)
    keys.refuse("hidden_size", "is " + std::to_string(s.d) + ", not a multiple of num_attention_heads = " +
                                   std::to_string(s.heads) + " (each head is hidden_size / num_attention_heads wide)");
  if (s.inner_group_num > 1)
    keys.refuse("inner_group_num",
                "is " + std::to_string(s.inner_group_num) +
                    ": a layer of such an ALBERT is inner_group_num blocks in a row, each with weights of its own "
                    "(albert_layers.0 .. " +
                    std::to_string(s.inner_group_num - 1) + "), not one block; only 1 is read (every released ALBERT)");
  // Hugging Face's defaults: BertConfig and AlbertConfig 0, RobertaConfig 1.
  const auto pad = keys.get([&] { return config.integer("pad_token_id", s.family == Family::roberta ? 1 : 0); });
  if (pad && s.vocab > 0) {
    if (*pad < 0 || *pad >= s.vocab) {
      keys.refuse("pad_token_id", "is " + std::to_string(*pad) + ", outside the vocabulary of vocab_size = " +
                                      std::to_string(s.vocab) + " tokens");
    } else {
      s.pad_token_id = static_cast<int>(*pad);
      if (s.family == Family::roberta && s.max_positions > 0 && s.max_positions < s.pad_token_id + 2)
        keys.refuse("max_position_embeddings",
                    "is " + std::to_string(s.max_positions) + ": RoBERTa's positions start at pad_token_id + 1 = " +
                        std::to_string(s.pad_token_id + 1) + ", so it leaves no position for a token");
    }
  }

  if (const auto act = keys.string("hidden_act", albert ? "gelu_new" : "gelu")) {
    const auto a = std::find_if(activations.begin(), activations.end(),
                                [&](const ActivationName& n) { return n.name == *act; });
    if (a == activations.end())
      keys.refuse("hidden_act", unsupported_activation(*act));
    else
      s.activation = a->activation;
  }
  if (const auto positions = keys.string("position_embedding_type", "absolute"); positions && *positions != "absolute")
    keys.refuse("position_embedding_type",
                "is " + checkpoint::quote_name(*positions) +
                    ": relative position embeddings add a learned term of the distance between tokens to every "
                    "attention logit, which this block does not have; only \"absolute\" is read");
  keys.throw_if_any();
  return s;
}

std::span<const TensorEntry> tensor_table(Family family) {
  if (family == Family::albert) return albert_table;
  return bert_table;
}

std::span<const std::string_view> tensor_prefixes(Family family) {
  switch (family) {
    case Family::roberta: return roberta_prefixes;
    case Family::albert: return albert_prefixes;
    default: return bert_prefixes;
  }
}

std::string tensor_name(std::string_view name, int group) {
  static constexpr std::string_view placeholder = "{group}";
  std::string out(name);
  if (const auto at = out.find(placeholder); at != std::string::npos)
    out.replace(at, placeholder.size(), std::to_string(group));
  return out;
}

CheckpointWeights::CheckpointWeights(std::shared_ptr<const checkpoint::ModelFolder> folder)
    : folder_(std::move(folder)) {
  if (!folder_) throw Error("CheckpointWeights: no model folder");
  const checkpoint::ModelFolder& f = *folder_;
  shape_ = encoder_shape(f.config());
  const std::string family(family_name(shape_.family));

  // The prefix: the one under which the word embedding is found.
  const std::string word(entry_of(shape_.family, Role::word).name);
  std::vector<std::string> found;
  std::string tried;
  for (const std::string_view p : tensor_prefixes(shape_.family)) {
    if (f.contains(std::string(p) + word)) found.emplace_back(p);
    tried += (tried.empty() ? "" : ", ") + (p.empty() ? std::string("none") : checkpoint::quote_name(p));
  }
  if (found.empty())
    throw ConfigError(
        {{f.weights_file(), "tensor " + checkpoint::quote_name(word) + " is missing under every prefix a " + family +
                                " checkpoint may have (" + tried + "): not the weights of a " + family +
                                " model (config.json's \"model_type\")"}});
  if (found.size() > 1)
    throw ConfigError({{f.weights_file(), "tensors " + checkpoint::quote_name(found[0] + word) + " and " +
                                              checkpoint::quote_name(found[1] + word) +
                                              " are both present: which model's weights to read is ambiguous"}});
  prefix_ = found.front();

  // Every tensor of every group, before any is converted.
  Problems problems;
  const auto check = [&](const TensorEntry& e, int group) {
    const std::string name = prefix_ + tensor_name(e.name, group);
    const auto legacy = legacy_name(e.role, name);
    const bool has = f.contains(name), has_legacy = legacy && f.contains(*legacy);
    if (has && has_legacy) {
      problems.add(f.file_of(name).file(), "tensors " + checkpoint::quote_name(name) + " and " +
                                               checkpoint::quote_name(*legacy) + " are both present (" +
                                               role_text(e.role, group) + " stored twice)");
      return;
    }
    if (!has && !has_legacy) {
      problems.add(f.weights_file(),
                   "tensor " + checkpoint::quote_name(name) + " is missing (" + role_text(e.role, group) + ")");
      return;
    }
    const std::string& stored = has ? name : *legacy;
    const std::string& file = f.file_of(stored).file();
    const checkpoint::TensorInfo& t = f.tensor(stored);
    const std::vector<Dim> dims = stored_dims(shape_, e.role);
    std::vector<std::size_t> want;
    std::string keys;
    for (const Dim& d : dims) {
      want.push_back(d.size);
      keys += (keys.empty() ? "" : " x ") + std::string(d.key);
    }
    if (t.shape != want)
      problems.add(file, "tensor " + checkpoint::quote_name(stored) + " has shape " + checkpoint::shape_text(t.shape) +
                             ", expected " + checkpoint::shape_text(want) + " (" + keys + " of config.json; " +
                             role_text(e.role, group) + ")");
    if (!checkpoint::is_convertible(t.dtype))
      problems.add(file, "tensor " + checkpoint::quote_name(stored) + " has dtype " +
                             std::string(checkpoint::dtype_name(t.dtype)) + ", not a float (F64, F32, F16 or BF16)");
  };
  const auto table = tensor_table(shape_.family);
  for (const TensorEntry& e : table)
    if (!per_group(e.role)) check(e, 0);
  for (int group = 0; group < shape_.groups(); ++group)
    for (const TensorEntry& e : table)
      if (per_group(e.role)) check(e, group);
  problems.throw_if_any(f.weights_file());
}

std::shared_ptr<const CheckpointWeights> CheckpointWeights::open(const std::filesystem::path& folder) {
  return std::make_shared<const CheckpointWeights>(
      std::make_shared<const checkpoint::ModelFolder>(checkpoint::ModelFolder::open(folder)));
}

std::string CheckpointWeights::stored_name(Role role, int group) const {
  const std::string name = prefix_ + tensor_name(entry_of(shape_.family, role).name, group);
  if (folder_->contains(name)) return name;
  return legacy_name(role, name).value_or(name);  // the constructor found one of the two
}

Matrix CheckpointWeights::linear(Role role, int group) const { return folder_->transposed(stored_name(role, group)); }

std::vector<double> CheckpointWeights::vector(Role role, int group) const {
  return folder_->values(stored_name(role, group));
}

EmbeddingWeights CheckpointWeights::embeddings(const EmbeddingRequest& request) const {
  const auto E = static_cast<std::size_t>(shape_.embedding_size);
  EmbeddingWeights w;
  const std::string word = stored_name(Role::word);
  w.word = Matrix(request.ids.size(), E, Matrix::uninitialized);
  for (std::size_t r = 0; r < request.ids.size(); ++r) {
    const std::int64_t id = request.ids[r];
    if (id < 0 || id >= shape_.vocab)
      throw Error("CheckpointWeights::embeddings: token id " + std::to_string(id) + " outside the vocabulary of " +
                  std::to_string(shape_.vocab) + " tokens");
    folder_->rows(word, static_cast<std::size_t>(id), 1, w.word.row(r));
  }
  if (request.max_position < 0 || request.max_position >= shape_.max_positions)
    throw Error("CheckpointWeights::embeddings: position " + std::to_string(request.max_position) +
                " outside the position embedding of " + std::to_string(shape_.max_positions) + " rows");
  const auto positions = static_cast<std::size_t>(request.max_position) + 1;
  w.position = Matrix(positions, E, Matrix::uninitialized);
  folder_->rows(stored_name(Role::position), 0, positions, w.position.values());
  w.token_type = folder_->matrix(stored_name(Role::token_type));
  w.norm.gamma = vector(Role::embedding_norm_gamma, 0);
  w.norm.beta = vector(Role::embedding_norm_beta, 0);
  if (shape_.family == Family::albert) {
    w.projection = linear(Role::projection, 0);
    w.projection_bias = vector(Role::projection_bias, 0);
  }
  return w;
}

BlockWeights CheckpointWeights::block(int group) const {
  if (group < 0 || group >= shape_.groups())
    throw Error("CheckpointWeights::block: weight group " + std::to_string(group) + " of " +
                std::to_string(shape_.groups()));
  BlockWeights b;
  b.W_Q = linear(Role::query, group);
  b.b_Q = vector(Role::query_bias, group);
  b.W_K = linear(Role::key, group);
  b.b_K = vector(Role::key_bias, group);
  b.W_V = linear(Role::value, group);
  b.b_V = vector(Role::value_bias, group);
  b.W_O = linear(Role::attention_output, group);
  b.b_O = vector(Role::attention_output_bias, group);
  b.norm_attention.gamma = vector(Role::attention_norm_gamma, group);
  b.norm_attention.beta = vector(Role::attention_norm_beta, group);
  b.W_1 = linear(Role::mlp_in, group);
  b.b_1 = vector(Role::mlp_in_bias, group);
  b.W_2 = linear(Role::mlp_out, group);
  b.b_2 = vector(Role::mlp_out_bias, group);
  b.norm_mlp.gamma = vector(Role::mlp_norm_gamma, group);
  b.norm_mlp.beta = vector(Role::mlp_norm_beta, group);
  return b;
}

}  // namespace rcsweep::models::encoder
