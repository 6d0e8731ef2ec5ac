#include "config/params.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "base/error.hpp"

namespace rcsweep::config {
namespace {

// Optimal-string-alignment distance (Levenshtein plus adjacent transposition), so that the
// common typo "lamdba" is one edit away from "lambda".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> dist(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) dist[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) dist[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      dist[i][j] = std::min({dist[i - 1][j] + 1, dist[i][j - 1] + 1, dist[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        dist[i][j] = std::min(dist[i][j], dist[i - 2][j - 2] + 1);
    }
  return dist[a.size()][b.size()];
}

template <class E>
E decode_choice(const ParamValue& value, const ParamInfo& info) {
  const auto& s = std::get<std::string>(value);
  for (std::size_t i = 0; i < info.choices.size(); ++i)
    if (info.choices[i] == s) return static_cast<E>(i);
  throw Error("parameter '" + std::string(info.name) + "' has unknown value '" + s + "'");
}

double decode_scale(const ParamValue& value, int d) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    if (*s == "inv_sqrt_d") return 1.0 / std::sqrt(static_cast<double>(d));
    throw Error("unknown scale keyword '" + *s + "'");
  }
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  return std::get<double>(value);
}

double decode_real(const ParamValue& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  return std::get<double>(value);
}

std::string shape(const Matrix& A) { return std::to_string(A.rows()) + " x " + std::to_string(A.cols()); }

void check_s4d(const ModelParams& m, ModelProblems& problems) {
  if (m.gap_fix != GapFix::none)
    problems.emplace_back("gap_fix", "s4d has one mixer per channel and no gap fix: use gap_fix = \"none\"");
}

void check_matrix(const ModelParams& m, ModelProblems& problems) {
  const auto T = static_cast<std::size_t>(m.T);
  if (!m.mixer_matrix)
    problems.emplace_back("mixer_matrix", "required with mixer = \"matrix\": give the T x T mixer as a list of T rows");
  else if (m.mixer_matrix->rows() != T || m.mixer_matrix->cols() != T)
    problems.emplace_back("mixer_matrix", "is " + shape(*m.mixer_matrix) + " (rows x columns) but must be T x T = " +
                                              std::to_string(m.T) + " x " + std::to_string(m.T));
}

// block = "encoder": the block is the model folder's (softmax attention with its W_Q, W_K, W_V,
// W_O and biases, its MLP, its affine LayerNorms), so the stack's parameters that shape those parts
// have no meaning and must stay at their defaults (docs/CONFIG.md "Encoder blocks").
void check_encoder(const ModelParams& m, ModelProblems& problems) {
  const std::string no_meaning = "has no meaning with block = \"encoder\" (";
  const auto stack_only = [&](bool at_default, const char* key, const char* why, const char* keep) {
    if (!at_default) problems.emplace_back(key, no_meaning + why + "); leave " + key + " at its default " + keep);
  };
  stack_only(m.mixer == Mixer::softmax, "mixer", "the block's attention is softmax attention", "\"softmax\"");
  stack_only(m.d_qk == m.d, "d_qk", "queries and keys are d / heads wide per head, as the model's", "0");
  stack_only(m.sigma_qk == 1.0, "sigma_qk", "W_Q and W_K are the model's", "1.0");
  stack_only(m.sigma_A == 1.0, "sigma_A", "it is Markov attention's", "1.0");
  stack_only(m.gap_fix == GapFix::none, "gap_fix", "the block's attention is the model's", "\"none\"");
  stack_only(m.outliers_r == 0, "outliers_r", "it is gap_fix = \"outliers\"'s", "0");
  stack_only(m.value_init == ValueInit::gaussian, "value_init", "W_V is the model's", "\"gaussian\"");
  stack_only(m.sigma_v == 1.0, "sigma_v", "W_V is the model's; value_scale counts in it", "1.0 (value_scale \"none\")");
  stack_only(m.gate == Gate::none, "gate", "the block has no output gate", "\"none\"");
  stack_only(m.mlp_ratio == 4, "mlp_ratio", "the MLP's width is config.json's intermediate_size", "4");
  stack_only(m.bc_init == BcInit::gaussian, "bc_init", "it is the state-space mixers'", "\"gaussian\"");
  stack_only(m.state_dim == 16, "state_dim", "it is the state-space mixers'", "16");
  stack_only(m.alpha == 1.0, "alpha", "it is the state-space mixers'", "1.0");
  stack_only(m.collapse_rate == 0.9, "collapse_rate", "lambda-skip Theorem 4.1's /theory quantities are NaN for it",
             "0.9");
  if (m.skip_scale != 1.0)
    problems.emplace_back("skip_scale", "must be 1 with block = \"encoder\" (the block adds its attention and MLP "
                                        "branches unscaled; lambda and lambda_mlp scale the skips), got " +
                                            to_text(m.skip_scale));
  if (m.norm == Norm::rms)
    problems.emplace_back("norm", "\"rms\" is not a norm of the encoder block: \"layernorm\" keeps its affine "
                                  "LayerNorms (config.json's eps), \"none\" removes them");
  if (m.mlp == Mlp::relu)
    problems.emplace_back("mlp", "\"relu\" is the stack's MLP: with block = \"encoder\" \"model\" keeps the block's "
                                 "own MLP (config.json's activation), \"none\" removes it");
  if (m.input == InputKind::tokens && m.input_scale != 1.0)
    problems.emplace_back("input_scale", "has no meaning with input = \"tokens\" (X_0 is the model's embedding of the "
                                         "token ids); leave input_scale at its default 1.0");
  if (!m.gated_norm)
    problems.emplace_back("gated_norm", "false (the Mamba-2 block's gated RMSNorm off) is only used with block = "
                                        "\"mamba2\", but block is \"encoder\" here");
}

// block = "mamba2": the block is the model folder's Mamba-2 block (in_proj, convolution, SSD, gated
// RMSNorm, out_proj), so the stack's parameters that shape a mixer, its values or an MLP have no
// meaning and must stay at their defaults; its ablations are lambda (and lambda_layers), norm
// "rms"/"none", gate "silu"/"none" and gated_norm (docs/CONFIG.md "Mamba-2 blocks").
void check_mamba2(const ModelParams& m, ModelProblems& problems) {
  const std::string no_meaning = "has no meaning with block = \"mamba2\" (";
  const auto stack_only = [&](bool at_default, const char* key, const char* why, const char* keep) {
    if (!at_default) problems.emplace_back(key, no_meaning + why + "); leave " + key + " at its default " + keep);
  };
  stack_only(m.mixer == Mixer::softmax, "mixer", "the block's mixer is its SSD", "\"softmax\"");
  stack_only(m.heads == 1, "heads", "the block has config.json's expand d_model / headdim heads", "1");
  stack_only(m.d_qk == m.d, "d_qk", "the block has no queries and keys", "0");
  stack_only(m.sigma_qk == 1.0, "sigma_qk", "the block has no W_Q and W_K", "1.0");
  stack_only(m.sigma_A == 1.0, "sigma_A", "it is Markov attention's", "1.0");
  stack_only(m.gap_fix == GapFix::none, "gap_fix", "the block's mixer is the model's", "\"none\"");
  stack_only(m.outliers_r == 0, "outliers_r", "it is gap_fix = \"outliers\"'s", "0");
  stack_only(m.value_init == ValueInit::gaussian, "value_init", "the block has no W_V", "\"gaussian\"");
  stack_only(m.sigma_v == 1.0, "sigma_v", "the block has no W_V; value_scale counts in it",
             "1.0 (value_scale \"none\")");
  stack_only(m.lambda_mlp_is_lambda, "lambda_mlp", "the block has no MLP", "\"lambda\"");
  stack_only(m.mlp_ratio == 4, "mlp_ratio", "the block has no MLP", "4");
  stack_only(m.bc_init == BcInit::gaussian, "bc_init", "B and C are the block's in_proj columns", "\"gaussian\"");
  stack_only(m.state_dim == 16, "state_dim", "the SSD's state is config.json's d_state", "16");
  stack_only(m.alpha == 1.0, "alpha", "the SSD's decays are the block's exp(Delta A)", "1.0");
  stack_only(m.collapse_rate == 0.9, "collapse_rate", "lambda-skip Theorem 4.1's /theory quantities are NaN for it",
             "0.9");
  stack_only(m.measure == Measure::block, "measure", "\"attention\" is the encoder block's attention branch",
             "\"block\"");
  stack_only(m.mask == Mask::none, "mask", "the SSD is causal already", "\"none\"");
  if (m.skip_scale != 1.0)
    problems.emplace_back("skip_scale", "must be 1 with block = \"mamba2\" (the block adds its mixer's branch "
                                        "unscaled; lambda scales the skip), got " +
                                            to_text(m.skip_scale));
  if (m.norm == Norm::layernorm)
    problems.emplace_back("norm", "\"layernorm\" is not a norm of the Mamba-2 block: \"rms\" keeps its RMSNorms "
                                  "(the blocks' pre-norms, config.json's norm_epsilon), \"none\" removes them");
  if (m.mlp != Mlp::none)
    problems.emplace_back("mlp", "the Mamba-2 block has no MLP (config.json's d_intermediate = 0): leave mlp at its "
                                 "default \"none\"");
  if (m.input == InputKind::tokens && m.input_scale != 1.0)
    problems.emplace_back("input_scale", "has no meaning with input = \"tokens\" (X_0 is the model's embedding of the "
                                         "token ids); leave input_scale at its default 1.0");
}

// The parameters and choices of the model blocks at a point whose block is the stack.
void check_stack(const ModelParams& m, ModelProblems& problems) {
  const auto encoder_only = [&](bool at_default, const char* key, const std::string& what) {
    if (!at_default)
      problems.emplace_back(key, what + " is only used with block = \"encoder\", but block is \"stack\" here");
  };
  const auto block_only = [&](bool at_default, const char* key, const std::string& what) {
    if (!at_default)
      problems.emplace_back(key,
                            what + " is only used with block = \"encoder\" or \"mamba2\", but block is \"stack\" here");
  };
  block_only(m.init == Init::random, "init", "\"checkpoint\" (the model folder's trained weights)");
  block_only(m.init_draw == -1, "init_draw",
             "a draw of the model's random weights (" + std::to_string(m.init_draw) + ")");
  encoder_only(m.measure == Measure::block, "measure", "\"attention\" (the encoder block's attention branch)");
  encoder_only(m.mlp != Mlp::model, "mlp", "\"model\" (the encoder block's own MLP)");
  block_only(m.input != InputKind::tokens, "input", "\"tokens\" (the model's embedding of token ids)");
  encoder_only(m.mask == Mask::none, "mask", "\"causal\" (the encoder block's causal attention mask)");
  if (!m.gated_norm)
    problems.emplace_back("gated_norm",
                          "false (the Mamba-2 block's gated RMSNorm off) is only used with block = \"mamba2\", but "
                          "block is \"stack\" here");
  // The stack's lambda is one number in its reverse pass (gradients.cpp), in lambda-skip Theorem
  // 4.1's quantities (theory.cpp) and in the weights dump's NumPy recomputation.
  if (m.lambda_layers)
    problems.emplace_back("lambda_layers",
                          "one lambda per layer is only implemented for block = \"encoder\" or \"mamba2\" (the "
                          "stack's lambda is one number in its gradients, lambda-skip Theorem 4.1's quantities and the "
                          "weights dump), but block is \"stack\" here; give the stack's lambda instead");
}

// The mixers, one row each, in the order of `enum class Mixer` (MixerChoice).
constexpr MixerChoice mixers[] = {
    {.mixer = Mixer::softmax, .name = "softmax", .attention = true, .input_dependent = true},
    {.mixer = Mixer::markov, .name = "markov"},
    {.mixer = Mixer::identity, .name = "identity"},
    {.mixer = Mixer::uniform, .name = "uniform"},
    {.mixer = Mixer::relu, .name = "relu", .attention = true, .input_dependent = true},
    {.mixer = Mixer::sigmoid, .name = "sigmoid", .attention = true, .input_dependent = true},
    {.mixer = Mixer::ssd, .name = "ssd", .input_dependent = true, .ssm = true},
    {.mixer = Mixer::lti, .name = "lti", .ssm = true},
    {.mixer = Mixer::matrix, .name = "matrix", .check = check_matrix},
    {.mixer = Mixer::s4d, .name = "s4d", .ssm = true, .per_channel = true, .check = check_s4d},
};
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < std::size(mixers); ++i)
    if (static_cast<std::size_t>(mixers[i].mixer) != i || mixers[i].name.size() > 16) return false;
  return true;
}
static_assert(in_enum_order(), "one row per mixer, in the order of enum class Mixer, names of at most 16 characters");

std::vector<std::string_view> mixer_names() {
  std::vector<std::string_view> names;
  for (const MixerChoice& c : mixers) names.push_back(c.name);
  return names;
}
}  // namespace

std::span<const MixerChoice> mixer_choices() noexcept { return mixers; }

const MixerChoice& mixer_choice(Mixer mixer) noexcept {
  static constexpr MixerChoice none{.mixer = Mixer::softmax, .name = ""};
  const auto i = static_cast<std::size_t>(mixer);
  return i < std::size(mixers) ? mixers[i] : none;
}

const std::vector<ParamInfo>& model_params() {
  using K = ParamKind;
  static const std::vector<ParamInfo> registry = {
      {"mixer", K::choice, std::string("softmax"), false, 0, false, mixer_names(),
       "token mixer M(X), MODELS.md 'Mixers'; \"matrix\" is the T x T mixer_matrix of [model]"},
      {"input",
       K::choice,
       std::string("orthonormal"),
       false,
       0,
       false,
       {"orthonormal", "sphere", "gaussian", "matrix", "file", "tokens"},
       "input X_0: orthonormal rows (needs T <= d), unit-norm Gaussian rows, N(0,1/d) entries, the T x d "
       "input_matrix of [model], a T x d float64 HDF5 dataset (input_path, input_dataset), or (encoder) the "
       "embedding of the first T token ids of excerpt `replicate` of a token file (input_path)"},
      {"input_scale", K::real, 1.0, false, 0, true, {}, "factor on X_0 (the input's scale matters without a norm)"},
      {"T", K::integer, std::int64_t{0}, true, 1, false, {}, "context length: tokens, rows of X", max_width},
      {"d", K::integer, std::int64_t{0}, true, 1, false, {}, "width: features, columns of X", max_width},
      {"depth",
       K::integer,
       std::int64_t{0},
       true,
       0,
       false,
       {},
       "number of layers L (layers 0..L recorded)",
       max_depth_layers},
      {"heads", K::integer, std::int64_t{1}, false, 1, false, {}, "attention heads H, O = sum_h M_h X W_V,h", 256},
      {"d_qk", K::integer, std::int64_t{0}, false, 0, false, {}, "query/key width; 0 means d", max_width},
      {"sigma_qk", K::scale, 1.0, false, 0, true, {}, "std of W_Q, W_K entries (number or \"inv_sqrt_d\")"},
      {"sigma_A", K::real, 1.0, false, 0, true, {}, "Markov attention: std/mean of Z (Mind the Gap Def. 3.1)"},
      {"lambda", K::real, 0.0, false, 0, false, {}, "skip strength: Y = lambda X + skip_scale O (0 = no skip)"},
      {"skip_scale", K::scale, 1.0, false, 0, true, {}, "factor on the mixer branch (number or \"inv_sqrt_d\")"},
      {"norm",
       K::choice,
       std::string("none"),
       false,
       0,
       false,
       {"none", "rms", "layernorm"},
       "row normalisation after the skip: none, divide by row norm, or LayerNorm (eps 1e-5, no affine)"},
      {"gap_fix",
       K::choice,
       std::string("none"),
       false,
       0,
       false,
       {"none", "perp", "outliers"},
       "remove the spectral gap: perp is M - (1/T) 1 1^T (Mind the Gap eq. (8)); outliers removes the leading "
       "r singular triplets of M (App. A.5)"},
      {"outliers_r",
       K::integer,
       std::int64_t{0},
       false,
       0,
       false,
       {},
       "gap_fix = outliers: number of triplets removed; 0 means r = argmax_i (s_i - s_(i+1))",
       max_width - 1},
      {"value_init",
       K::choice,
       std::string("gaussian"),
       false,
       0,
       false,
       {"gaussian", "orthogonal", "identity"},
       "W_V: i.i.d. N(0, sigma_v^2), Haar orthogonal x sigma_v, or sigma_v I"},
      {"sigma_v", K::scale, 1.0, false, 0, true, {}, "scale of W_V (number or \"inv_sqrt_d\")"},
      {"value_scale",
       K::choice,
       std::string("none"),
       false,
       0,
       false,
       {"none", "inv_sqrt_d"},
       "extra factor on sigma_v: none or 1/sqrt(d) (He convention)"},
      {"gate",
       K::choice,
       std::string("none"),
       false,
       0,
       false,
       {"none", "silu"},
       "output gate O * SiLU(X W_G), W_G ~ N(0, 1/d) (lambda-skip §3.1)"},
      {"mlp",
       K::choice,
       std::string("none"),
       false,
       0,
       false,
       {"none", "relu", "model"},
       "MLP sub-block norm(lambda X + ReLU(X W_1) W_2), W_1 ~ N(0, 2/d), W_2 ~ N(0, 1/m) (Dong et al. §3.2); "
       "\"model\": the encoder block's own MLP"},
      {"lambda_mlp",
       K::real,
       std::string("lambda"),
       false,
       0,
       false,
       {"lambda"},
       "skip strength of the MLP sub-block; \"lambda\" (default) means the same as lambda"},
      {"mlp_ratio", K::integer, std::int64_t{4}, false, 1, false, {}, "MLP hidden width m = mlp_ratio * d", 64},
      {"state_dim",
       K::integer,
       std::int64_t{16},
       false,
       1,
       false,
       {},
       "SSM state dimension N (ssd, lti, s4d)",
       max_width},
      {"alpha", K::real, 1.0, false, 0, false, {}, "SSM decay: L(alpha)_ji = alpha^(j-i) for j >= i (ssd, lti)"},
      {"bc_init",
       K::choice,
       std::string("gaussian"),
       false,
       0,
       false,
       {"gaussian", "identity"},
       "SSM B, C: i.i.d. N(0, N^-1/2) weights, or identity (W_B = W_C = I with N = d; lti gain g = 1)"},
      {"collapse_rate",
       K::real,
       0.9,
       false,
       0,
       true,
       {},
       "rate a in (0, 1) of lambda-skip Theorem 4.1 for the /theory quantities"},
      // Appended after the stack's parameters: the /points columns of older stores keep their order.
      {"block",
       K::choice,
       std::string("stack"),
       false,
       0,
       false,
       {"stack", "encoder", "mamba2"},
       "the layer: the stack of MODELS.md, the BERT-family encoder block of the model_folder's config.json, or the "
       "Mamba-2 block of the model_folder's mamba_ssm config.json"},
      {"init",
       K::choice,
       std::string("random"),
       false,
       0,
       false,
       {"random", "checkpoint"},
       "encoder and mamba2 weights: the published random initialisation, or the model_folder's checkpoint"},
      {"init_draw",
       K::integer,
       std::int64_t{-1},
       false,
       -1,
       false,
       {},
       "encoder and mamba2, init random: which draw of the weights; -1 = the replicate (a new model each), k >= 0 the same "
       "model for every replicate"},
      {"measure",
       K::choice,
       std::string("block"),
       false,
       0,
       false,
       {"block", "attention"},
       "encoder: the signal recorded per layer, the block's output or its attention branch (Dong et al. Fig. 2)"},
      {"mask",
       K::choice,
       std::string("none"),
       false,
       0,
       false,
       {"none", "causal"},
       "encoder: the attention mask of every block: none, or causal (key j masked for query i < j)"},
      {"gated_norm",
       K::choice,
       std::string("true"),
       false,
       0,
       false,
       {"true", "false"},
       "mamba2: the mixer's gated RMSNorm on (true, the published block) or off (y * SiLU(z) alone)"},
  };
  return registry;
}

std::optional<std::size_t> param_index(std::string_view name) {
  const auto& reg = model_params();
  for (std::size_t i = 0; i < reg.size(); ++i)
    if (reg[i].name == name) return i;
  return std::nullopt;
}

const ParamValue& param_value(const std::vector<ParamValue>& values, std::string_view name) {
  const auto idx = param_index(name);
  if (!idx || *idx >= values.size()) throw Error("no parameter '" + std::string(name) + "'");
  return values[*idx];
}

std::string to_text(const ParamValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", std::get<double>(value));
  std::string out = buf;
  // Shortest round-trip text: try fewer digits first.
  for (int prec = 1; prec < 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, std::get<double>(value));
    if (std::strtod(buf, nullptr) == std::get<double>(value)) {
      out = buf;
      break;
    }
  }
  return out;
}

std::string_view nearest(std::string_view name, const std::vector<std::string_view>& candidates) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::size_t longest = 0;
  for (const auto c : candidates) longest = std::max(longest, c.size());
  if (name.size() > longest + 2) return {};  // more than 2 edits from every candidate
  const std::string lname = lower(name);
  std::size_t best = 3;
  std::string_view best_name;
  for (const auto c : candidates) {
    if (c.size() + 2 < name.size() || name.size() + 2 < c.size()) continue;  // more than 2 edits
    const std::string lc = lower(c);
    const std::size_t dist = edit_distance(lname, lc);
    const bool plausible = dist == 0 || dist < std::min(lname.size(), lc.size());
    if (plausible && dist < best) {
      best = dist;
      best_name = c;
    }
  }
  return best_name;
}

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string to_toml(const ParamValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return toml_string(*s);
  std::string text = to_text(value);
  if (std::holds_alternative<double>(value) && text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

bool ModelParams::homogeneous() const noexcept {
  if (block != Block::stack) return false;  // biases, SiLU, the norms' eps: the scale of X matters
  if (norm != Norm::none) return true;
  if (gate != Gate::none) return false;  // SiLU is not homogeneous; a ReLU MLP is (degree 1)
  return !input_dependent_mixer();       // a fixed mixer is linear in X
}

bool ModelParams::attention() const noexcept { return mixer_choice(mixer).attention; }

bool ModelParams::input_dependent_mixer() const noexcept { return mixer_choice(mixer).input_dependent; }

bool ModelParams::linear_stack() const noexcept {
  return block == Block::stack && !input_dependent_mixer() && !mixer_choice(mixer).per_channel && lambda == 0.0 &&
         norm == Norm::none && gate == Gate::none && mlp == Mlp::none && heads == 1;
}

bool ModelParams::ssm() const noexcept { return mixer_choice(mixer).ssm; }

ModelParams resolve(const std::vector<ParamValue>& values) {
  const auto& reg = model_params();
  if (values.size() != reg.size()) throw Error("parameter vector has the wrong length");
  auto info = [&](std::string_view n) -> const ParamInfo& { return reg[*param_index(n)]; };
  auto get = [&](std::string_view n) -> const ParamValue& { return param_value(values, n); };
  auto get_int = [&](std::string_view n) { return static_cast<int>(std::get<std::int64_t>(get(n))); };

  ModelParams m;
  m.mixer = decode_choice<Mixer>(get("mixer"), info("mixer"));
  m.input = decode_choice<InputKind>(get("input"), info("input"));
  m.T = get_int("T");
  m.d = get_int("d");
  m.depth = get_int("depth");
  m.heads = get_int("heads");
  m.d_qk = get_int("d_qk") == 0 ? m.d : get_int("d_qk");
  m.sigma_qk = decode_scale(get("sigma_qk"), m.d);
  m.sigma_A = decode_real(get("sigma_A"));
  m.lambda = decode_real(get("lambda"));
  m.skip_scale = decode_scale(get("skip_scale"), m.d);
  m.norm = decode_choice<Norm>(get("norm"), info("norm"));
  m.gap_fix = decode_choice<GapFix>(get("gap_fix"), info("gap_fix"));
  m.value_init = decode_choice<ValueInit>(get("value_init"), info("value_init"));
  m.sigma_v = decode_scale(get("sigma_v"), m.d);
  if (std::get<std::string>(get("value_scale")) == "inv_sqrt_d") m.sigma_v /= std::sqrt(static_cast<double>(m.d));
  m.outliers_r = get_int("outliers_r");
  m.gate = decode_choice<Gate>(get("gate"), info("gate"));
  m.mlp = decode_choice<Mlp>(get("mlp"), info("mlp"));
  m.mlp_ratio = get_int("mlp_ratio");
  m.lambda_mlp_is_lambda = std::holds_alternative<std::string>(get("lambda_mlp"));
  m.lambda_mlp = m.lambda_mlp_is_lambda ? m.lambda : decode_real(get("lambda_mlp"));
  m.bc_init = decode_choice<BcInit>(get("bc_init"), info("bc_init"));
  m.state_dim = m.bc_init == BcInit::identity ? m.d : get_int("state_dim");
  m.alpha = decode_real(get("alpha"));
  m.collapse_rate = decode_real(get("collapse_rate"));
  m.input_scale = decode_real(get("input_scale"));
  m.block = decode_choice<Block>(get("block"), info("block"));
  m.init = decode_choice<Init>(get("init"), info("init"));
  m.init_draw = get_int("init_draw");
  m.measure = decode_choice<Measure>(get("measure"), info("measure"));
  m.mask = decode_choice<Mask>(get("mask"), info("mask"));
  m.gated_norm = std::get<std::string>(get("gated_norm")) == "true";
  return m;
}

ModelProblems check_model(const ModelParams& m) {
  ModelProblems problems;
  if (m.input == InputKind::orthonormal && m.T > m.d)
    problems.emplace_back("input", "\"orthonormal\" needs T <= d (orthonormal rows), but T = " + std::to_string(m.T) +
                                       " > d = " + std::to_string(m.d));
  const auto T = static_cast<std::size_t>(m.T), d = static_cast<std::size_t>(m.d);
  if ((m.input == InputKind::matrix || m.input == InputKind::file) && m.input_matrix &&
      (m.input_matrix->rows() != T || m.input_matrix->cols() != d))
    problems.emplace_back(m.input == InputKind::matrix ? "input_matrix" : "input_path",
                          "is " + shape(*m.input_matrix) + " (rows x columns) but must be T x d = " +
                              std::to_string(m.T) + " x " + std::to_string(m.d));
  if (m.input == InputKind::matrix && !m.input_matrix)
    problems.emplace_back("input_matrix", "required with input = \"matrix\": give the T x d input as a list of T rows");
  if (m.block == Block::encoder)
    check_encoder(m, problems);
  else if (m.block == Block::mamba2)
    check_mamba2(m, problems);
  else if (const auto check = mixer_choice(m.mixer).check)
    check(m, problems);  // the mixer's own
  if (m.block == Block::stack) check_stack(m, problems);
  if (!(m.collapse_rate > 0.0 && m.collapse_rate < 1.0))
    problems.emplace_back("collapse_rate", "must be in (0, 1), got " + to_text(m.collapse_rate));
  if (m.gap_fix == GapFix::outliers && m.outliers_r >= m.T)
    problems.emplace_back("outliers_r", "must be < T = " + std::to_string(m.T) + " (0 = argmax gap), got " +
                                            std::to_string(m.outliers_r));
  return problems;
}

}  // namespace rcsweep::config
