#include "plan/cost_model.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>

#include "base/error.hpp"
#include "metrics/best_residual.hpp"
#include "metrics/metrics.hpp"
#include "models/block_kind.hpp"
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::plan {
namespace {
using config::ModelParams;

struct Pricer final : models::LayerPrices {
  Pricer(const Calibration& calibration, bool wanted, bool best = false)
      : c(calibration), mixer_spectrum(wanted), best_residual(best) {}
  const Calibration& c;
  bool mixer_spectrum = true;  // s_1, s_2 of the mixer wanted ([output] metrics): else only its norm
  bool best_residual = false;  // res_best selected: metrics::best_residual_passes passes over X per layer
  double exp_rate() const override { return c.exp_rate; }
  double pass_rate() const override { return c.pass_rate; }
  double conv_rate() const override { return c.conv_rate; }
  // An m x k times k x n product at the dgemm rate measured for a cube of the same volume.
  double gemm(double m, double n, double k) const override {
    return 2.0 * m * n * k / interpolate(c.gemm_rate, std::max(std::cbrt(m * n * k), 1.0));
  }
  double signal_metrics(double T, double d) const {
    const double k = std::min(T, d), n = std::max(T, d);
    // signal_s(k) was measured on k x k; a k x n signal adds the Gram product's extra k^2 (n - k)
    return interpolate(c.signal_s, k) + (n > k ? gemm(k, k, (n - k) / 2) : 0.0) +
           (best_residual ? metrics::best_residual_passes * T * d / c.pass_rate : 0.0);
  }
  // The mixer metrics of a T x T mixer (mixer_metrics), measured up to the calibration's largest T.
  // Beyond it (from mixer_lanczos_min_order on, Lanczos) a step costs T^2 (a product with M and
  // one with M^T, bound by memory once M is out of cache) and the steps do not grow with T
  // (plan::mixer_lanczos_steps): the last measurement times (T / T_last)^2, not the last segment's
  // power law (which between an in-cache and an out-of-cache size is steeper than T^3).
  double mixer_metrics(double T) const override {
    if (!mixer_spectrum || c.mixer_s.empty()) return 0.0;
    const auto [last_T, last_s] = c.mixer_s.back();
    if (T > last_T && last_T >= static_cast<double>(metrics::mixer_lanczos_min_order))
      return last_s * (T / last_T) * (T / last_T);
    return interpolate(c.mixer_s, T);
  }
  double svd(double T, double d) const {
    const double k = std::min(T, d), n = std::max(T, d);
    return interpolate(c.svd_s, k) + (n > k ? gemm(k, k, 2.0 * (n - k)) : 0.0);  // R of a QR first when n >> k
  }
};

// The weights of a block other than the stack: one set per (block, init, draw) in a bundle (a
// checkpoint has no draw).
std::tuple<int, int, int> block_weights_key(const ModelParams& m) {
  return {static_cast<int>(m.block), static_cast<int>(m.init), m.init == config::Init::checkpoint ? -2 : m.init_draw};
}

// Which tasks start from the same X_0 (their layer-0 metrics shared): the input kind, and for an
// encoder's tokens the weights that embed them.
std::tuple<int, int, int> input_key(const ModelParams& m) {
  if (m.input != config::InputKind::tokens) return {static_cast<int>(m.input), -1, -1};
  return {static_cast<int>(m.input), std::get<1>(block_weights_key(m)), std::get<2>(block_weights_key(m))};
}

// Seconds of one layer of one task, without what its bundle shares (see shared_layer_seconds).
double task_layer_seconds(const ModelParams& m, const Pricer& p) {
  const double T = m.T, d = m.d, H = m.heads;
  if (const auto block = models::block_kind(m.block).task_seconds)  // another block: its descriptor's
    return block(m, p) + p.signal_metrics(T, d) + p.c.task_layer_s;
  double s = models::mixer_kind(m.mixer).task_seconds(m, p);  // the mixer's own work (models/mixers/)
  if (m.gap_fix == config::GapFix::outliers && m.input_dependent_mixer()) s += H * 3.0 * p.svd(T, T);
  if (m.gap_fix == config::GapFix::perp && m.input_dependent_mixer()) s += H * T * T / p.c.pass_rate;  // M - 1/T
  if (m.gate == config::Gate::silu) s += p.gemm(T, d, d) + T * d / p.c.exp_rate;
  if (m.mlp == config::Mlp::relu) s += 2 * p.gemm(T, m.mlp_ratio * d, d) + 2 * T * m.mlp_ratio * d / p.c.pass_rate;
  s += 4 * T * d / p.c.pass_rate;  // skip, norm, scale
  s += p.signal_metrics(T, d) + p.c.task_layer_s;
  return s;
}

// Seconds per layer of what the bundle's tasks share: the random tensors (drawn once), the
// input-independent mixers with their metrics (once per mixer and gap_fix), the W_Q W_K^T product.
double shared_layer_seconds(const std::vector<const ModelParams*>& models, const Pricer& p) {
  std::set<std::tuple<int, int, int>> tensors;  // (kind, heads, size) drawn once
  std::set<std::tuple<int, int, int>> fixed_mixers;
  double s = 0.0;
  bool qk_product = false;
  std::set<std::tuple<int, int, int>> block_weights;
  for (const ModelParams* m : models) {
    const int T = m->T, d = m->d, H = m->heads;
    if (const auto weights = models::block_kind(m->block).weights) {  // another block: its weights per layer
      if (block_weights.insert(block_weights_key(*m)).second) {
        const models::BlockWeightValues w = weights(*m);
        // a converted value: read from the mapping and converted, then written where it goes (an
        // nn.Linear transposed): two passes
        s += w.drawn / p.c.normal_rate + 2.0 * w.converted / p.c.pass_rate;
      }
      continue;
    }
    if (!m->ssm() && m->value_init != config::ValueInit::identity) tensors.insert({0, H, d * d});
    if (m->attention()) {
      tensors.insert({1, H, 2 * d * m->d_qk});
      qk_product = qk_product || m->qk_product;
    }
    const models::MixerKind& kind = models::mixer_kind(m->mixer);
    const models::MixerDraws draws = kind.draws(*m);
    if (draws.square > 0) tensors.insert({2, H, static_cast<int>(draws.square)});
    if (draws.ssm > 0) tensors.insert({3, H, static_cast<int>(draws.ssm)});
    if (m->gate == config::Gate::silu) tensors.insert({4, 1, d * d});
    if (m->mlp == config::Mlp::relu) tensors.insert({5, 1, 2 * d * m->mlp_ratio * d});
    if (kind.memory(*m).fixed_mixer &&
        fixed_mixers.insert({static_cast<int>(m->mixer), static_cast<int>(m->gap_fix), H}).second) {
      const double TT = static_cast<double>(T) * T;
      s += TT / p.c.exp_rate + p.mixer_metrics(T);
      if (m->gap_fix == config::GapFix::outliers) s += 3.0 * p.svd(T, T);
    }
    s += kind.shared_seconds(*m, p);  // work on the draws (S4D's kernels: models/mixers/s4d.cpp)
  }
  double normals = 0.0;
  for (const auto& [kind, heads, size] : tensors) normals += static_cast<double>(heads) * size;
  s += normals / p.c.normal_rate;
  if (qk_product && !models.empty()) {
    const double d = models.front()->d;
    s += p.gemm(d, d, d);  // per head, d_qk = d in practice where it is chosen
  }
  return s;
}

}  // namespace

double interpolate(const std::vector<std::pair<double, double>>& t, double x) {
  if (t.empty()) return 0.0;
  if (t.size() == 1) return t.front().second;
  std::size_t i = 1;
  while (i + 1 < t.size() && t[i].first < x) ++i;
  const auto [x0, y0] = t[i - 1];
  const auto [x1, y1] = t[i];
  const double slope = std::log(y1 / y0) / std::log(x1 / x0);
  return y0 * std::exp(slope * std::log(x / x0));
}

namespace {
// Seconds of the layer-1 work of `m` on X_0 that tasks sharing X_0 share (models::ProductCache),
// by what it is cached under: X_0 W_V per head (per value weight), X_0 W_Q W_K^T (per d_qk, with
// qk_product), and an input-dependent mixer M(X_0) with its metrics (per mixer and every parameter
// of it, gap_fix included: models' mixer_key).
struct InputProducts {
  double values = 0.0, qk = 0.0, mixer = 0.0;
};
InputProducts input_product_seconds(const ModelParams& m, const Pricer& p) {
  const double T = m.T, d = m.d, H = m.heads;
  InputProducts s;
  if (!m.ssm() && m.value_init != config::ValueInit::identity) s.values = H * p.gemm(T, d, d);
  if (m.attention() && m.qk_product) s.qk = H * p.gemm(T, d, d);
  s.mixer = models::mixer_kind(m.mixer).input_mixer_seconds(m, p);  // 0 for an input-independent mixer
  return s;
}
}  // namespace

BundleWork bundle_work(const Plan& plan, const std::vector<std::uint64_t>& tasks, const Calibration& c) {
  const Pricer p{c, metrics::mixer_needs(plan.spec.output.metrics).top,
                 metrics::signal_needs(plan.spec.output.metrics).best_residual};
  BundleWork w;
  w.tasks = tasks;
  std::vector<const ModelParams*> models;
  const std::vector<int> depths = plan.gradient_depths();
  // What tasks computed on the same X_0 share: layer 0's metrics (per input kind) and layer 1's
  // products with X_0 (per input kind and mixer or value weight). Tasks with a scaled input have their own.
  std::set<std::tuple<int, int, int>> inputs;     // input_key
  std::set<std::tuple<int, int, double>> values;  // (input, value_init, sigma_v)
  std::set<std::pair<int, int>> qk;               // (input, d_qk)
  std::set<std::tuple<int, int, int, int, double, double, int, int, double, int>> mixers;  // input, mixer_key
  for (std::uint64_t id : tasks) {
    const ModelParams& m = plan.models[plan.tasks[id].point];
    models.push_back(&m);
    double s = m.depth * task_layer_seconds(m, p) + p.signal_metrics(m.T, m.d);  // layers 1..L, then layer 0
    for (int l = 0; l <= m.depth; ++l) {
      if (plan.spectrum_at(l)) s += p.svd(m.T, m.d);
      if (plan.mixer_spectrum_at(l)) s += 3.0 * p.svd(m.T, m.T);  // dgesdd and dgeev
    }
    if (!depths.empty()) {  // products of the taped forward and reverse passes at the dgemm rate
      const double flops = gradient_flops(m, plan.max_depth, depths, plan.exact_gradients(m),
                                          plan.spec.output.grad_probes);
      s += p.gemm(flops / 2.0 / m.T / m.d, m.T, m.d);
    }
    if (m.input_scale == 1.0) {  // priced once per unit below
      const int input = static_cast<int>(m.input);
      s -= p.signal_metrics(m.T, m.d);
      if (inputs.insert(input_key(m)).second) w.shared_s += p.signal_metrics(m.T, m.d);
      if (m.depth >= 1 && m.block == config::Block::stack) {  // another block shares no layer-1 products
        const InputProducts first = input_product_seconds(m, p);
        s -= first.values + first.qk + first.mixer;
        if (values.insert({input, static_cast<int>(m.value_init), m.sigma_v}).second) w.shared_s += first.values;
        if (qk.insert({input, m.d_qk}).second) w.shared_s += first.qk;
        if (mixers
                .insert({input, static_cast<int>(m.mixer), static_cast<int>(m.gap_fix), m.outliers_r, m.sigma_A,
                         m.sigma_qk, m.d_qk, m.state_dim, m.alpha, static_cast<int>(m.bc_init)})
                .second)
          w.shared_s += first.mixer;
      }
    }
    w.task_s.push_back(s);
  }
  w.shared_s += plan.max_depth * shared_layer_seconds(models, p);
  return w;
}

double bundle_seconds(const Plan& plan, const Bundle& bundle, const Calibration& c) {
  return bundle_work(plan, bundle.tasks, c).seconds();
}

double plan_seconds(const Plan& plan, const Calibration& c) {
  double s = 0.0;
  for (const auto& b : plan.bundles) s += bundle_seconds(plan, b, c);
  return s;
}

Calibration default_calibration() {
  Calibration c;
  c.machine = "default (not measured)";
  c.gemm_rate = {{16, 4e9}, {32, 10e9}, {64, 20e9}, {128, 30e9}, {256, 36e9}, {512, 40e9}, {1024, 42e9}};
  c.signal_s = {{16, 1.2e-5}, {64, 8e-5}, {150, 5e-4}, {512, 4.2e-3}, {1024, 3.0e-2}};
  c.mixer_s = {{16, 1.1e-5}, {64, 7.5e-5}, {150, 4.8e-4}, {512, 2.1e-3}, {1024, 2.1e-2}, {2048, 1.3e-1}};
  c.svd_s = {{16, 3e-5}, {64, 2e-4}, {150, 1.3e-3}, {512, 4e-2}, {1024, 2.5e-1}};
  return c;
}

namespace {
void put_table(std::ostringstream& o, const char* name, const std::vector<std::pair<double, double>>& t) {
  o << name << " = [";
  for (std::size_t i = 0; i < t.size(); ++i) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "%s[%.17g, %.17g]", i ? ", " : "", t[i].first, t[i].second);
    o << buf;
  }
  o << "]\n";
}

std::vector<std::pair<double, double>> get_table(const toml::table& t, const char* name) {
  const auto* a = t[name].as_array();
  if (!a) throw Error(std::string("calibration: missing table '") + name + "'");
  std::vector<std::pair<double, double>> out;
  for (const auto& row : *a) {
    const auto* r = row.as_array();
    if (!r || r->size() != 2) throw Error(std::string("calibration: '") + name + "' needs [size, value] pairs");
    const auto x = (*r)[0].value<double>(), y = (*r)[1].value<double>();
    if (!x || !y || !(*x > 0) || !(*y > 0))
      throw Error(std::string("calibration: '") + name + "' has a non-positive entry");
    if (!out.empty() && *x <= out.back().first)
      throw Error(std::string("calibration: '") + name + "' sizes must increase");
    out.emplace_back(*x, *y);
  }
  if (out.empty()) throw Error(std::string("calibration: '") + name + "' is empty");
  return out;
}

double get_rate(const toml::table& t, const char* name, bool positive = true) {
  const auto v = t[name].value<double>();
  if (!v || !(positive ? *v > 0 : *v >= 0))
    throw Error(std::string("calibration: '") + name + "' is missing or invalid");
  return *v;
}
}  // namespace

std::string to_toml(const Calibration& c) {
  std::ostringstream o;
  o << "# rcsweep calibration: measured rates of this machine (rcsweep calibrate)\n";
  o << "machine = " << toml::value<std::string>(c.machine) << "\n";
  put_table(o, "gemm_rate", c.gemm_rate);
  put_table(o, "signal_s", c.signal_s);
  put_table(o, "mixer_s", c.mixer_s);
  put_table(o, "svd_s", c.svd_s);
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "normal_rate = %.17g\nexp_rate = %.17g\npass_rate = %.17g\nconv_rate = %.17g\ntask_layer_s = %.17g\n",
                c.normal_rate, c.exp_rate, c.pass_rate, c.conv_rate, c.task_layer_s);
  o << buf;
  if (!c.blis_plain_ratio.empty()) put_table(o, "blis_plain_ratio", c.blis_plain_ratio);
  if (!c.blis_transposed_ratio.empty()) put_table(o, "blis_transposed_ratio", c.blis_transposed_ratio);
  for (const auto& [name, range] :
       {std::pair{"blis_plain", c.blis_plain}, std::pair{"blis_transposed", c.blis_transposed}})
    if (range.second > range.first) {
      std::snprintf(buf, sizeof buf, "%s = [%.17g, %.17g]\n", name, range.first, range.second);
      o << buf;
    }
  return o.str();
}

Calibration parse_calibration(const std::string& text) {
  toml::table t;
  try {
    t = toml::parse(text);
  } catch (const toml::parse_error& e) {
    throw Error(std::string("calibration: not TOML: ") + std::string(e.description()));
  }
  Calibration c;
  c.machine = t["machine"].value_or<std::string>("");
  c.gemm_rate = get_table(t, "gemm_rate");
  c.signal_s = get_table(t, "signal_s");
  c.mixer_s = get_table(t, "mixer_s");
  c.svd_s = get_table(t, "svd_s");
  if (t.contains("blis_plain_ratio")) c.blis_plain_ratio = get_table(t, "blis_plain_ratio");
  if (t.contains("blis_transposed_ratio")) c.blis_transposed_ratio = get_table(t, "blis_transposed_ratio");
  c.normal_rate = get_rate(t, "normal_rate");
  c.exp_rate = get_rate(t, "exp_rate");
  c.pass_rate = get_rate(t, "pass_rate");
  c.conv_rate = get_rate(t, "conv_rate");
  c.task_layer_s = get_rate(t, "task_layer_s", false);
  for (auto [name, range] : {std::pair{"blis_plain", &c.blis_plain}, std::pair{"blis_transposed", &c.blis_transposed}})
    if (const auto* array = t[name].as_array()) {
      const auto above = array->size() == 2 ? (*array)[0].value<double>() : std::nullopt;
      const auto up_to = array->size() == 2 ? (*array)[1].value<double>() : std::nullopt;
      if (!above || !up_to || !(*above >= 0) || !(*up_to > *above))
        throw Error(std::string("calibration: '") + name + "' must be [above, up_to] with 0 <= above < up_to");
      *range = {*above, *up_to};
    }
  return c;
}

}  // namespace rcsweep::plan
