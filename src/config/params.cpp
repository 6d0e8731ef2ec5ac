#include "config/params.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/error.hpp"

namespace rcsweep::config {
namespace {
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
}  // namespace

const std::vector<ParamInfo>& model_params() {
  using K = ParamKind;
  static const std::vector<ParamInfo> registry = {
      {"mixer", K::choice, std::string("softmax"), false, 0, false, {"softmax", "markov", "identity", "uniform"},
       "token mixer M(X), MODELS.md 'Mixers'"},
      {"input", K::choice, std::string("orthonormal"), false, 0, false, {"orthonormal", "sphere", "gaussian"},
       "input X_0: orthonormal rows (needs T <= d), unit-norm Gaussian rows, or N(0,1/d) entries"},
      {"T", K::integer, std::int64_t{0}, true, 1, false, {}, "context length: tokens, rows of X"},
      {"d", K::integer, std::int64_t{0}, true, 1, false, {}, "width: features, columns of X"},
      {"depth", K::integer, std::int64_t{0}, true, 0, false, {}, "number of layers L (layers 0..L recorded)"},
      {"heads", K::integer, std::int64_t{1}, false, 1, false, {}, "attention heads H, O = sum_h M_h X W_V,h"},
      {"d_qk", K::integer, std::int64_t{0}, false, 0, false, {}, "query/key width; 0 means d"},
      {"sigma_qk", K::scale, 1.0, false, 0, true, {}, "std of W_Q, W_K entries (number or \"inv_sqrt_d\")"},
      {"sigma_A", K::real, 1.0, false, 0, true, {}, "Markov attention: std/mean of Z (Mind the Gap Def. 3.1)"},
      {"lambda", K::real, 0.0, false, 0, false, {}, "skip strength: Y = lambda X + skip_scale O (0 = no skip)"},
      {"skip_scale", K::scale, 1.0, false, 0, true, {}, "factor on the mixer branch (number or \"inv_sqrt_d\")"},
      {"norm", K::choice, std::string("none"), false, 0, false, {"none", "rms", "layernorm"},
       "row normalisation after the skip: none, divide by row norm, or LayerNorm (eps 1e-5, no affine)"},
      {"gap_fix", K::choice, std::string("none"), false, 0, false, {"none", "perp"},
       "remove the spectral gap: perp is M - (1/T) 1 1^T (Mind the Gap eq. (8))"},
      {"value_init", K::choice, std::string("gaussian"), false, 0, false, {"gaussian", "orthogonal", "identity"},
       "W_V: i.i.d. N(0, sigma_v^2), Haar orthogonal x sigma_v, or sigma_v I"},
      {"sigma_v", K::scale, 1.0, false, 0, true, {}, "scale of W_V (number or \"inv_sqrt_d\")"},
      {"value_scale", K::choice, std::string("none"), false, 0, false, {"none", "inv_sqrt_d"},
       "extra factor on sigma_v: none or 1/sqrt(d) (He convention)"},
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

std::string to_toml(const ParamValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return "\"" + *s + "\"";
  std::string text = to_text(value);
  if (std::holds_alternative<double>(value) && text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

bool ModelParams::homogeneous() const noexcept {
  if (norm != Norm::none) return true;
  return mixer == Mixer::markov || mixer == Mixer::identity || mixer == Mixer::uniform;
}

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
  return m;
}

std::vector<std::pair<std::string, std::string>> check_model(const ModelParams& m) {
  std::vector<std::pair<std::string, std::string>> problems;
  if (m.input == InputKind::orthonormal && m.T > m.d)
    problems.emplace_back("input", "\"orthonormal\" needs T <= d (orthonormal rows), but T = " + std::to_string(m.T) +
                                       " > d = " + std::to_string(m.d));
  return problems;
}

}  // namespace rcsweep::config
