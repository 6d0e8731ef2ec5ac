// Measuring this machine's rates, and the file they are kept in.
#include "plan/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "linalg/blis.hpp"
#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "models/layer.hpp"
#include "models/random_source.hpp"
#include "rng/philox.hpp"

namespace rcsweep::plan {
namespace {

// CPU seconds of this thread: unlike wall time, not inflated when other processes share the core.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The timing method: the fastest of `timings` timings, each of calls repeated until they have used
// `min_timing_cpu_s` of the thread's CPU time (short calls are timed in bulk; other load inflates
// CPU time less than wall time).
constexpr int timings = 3;
constexpr double min_timing_cpu_s = 0.02;

// CPU seconds per call of `f` by the timing method (1 BLAS thread, so the thread's CPU time is the
// call's).
double time_call(const std::function<void()>& f) {
  double best = 1e300;
  for (int rep = 0; rep < timings; ++rep) {
    int calls = 0;
    const double start = thread_cpu_seconds();
    double elapsed = 0.0;
    do {
      f();
      ++calls;
      elapsed = thread_cpu_seconds() - start;
    } while (elapsed < min_timing_cpu_s);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

Matrix gaussian(std::size_t m, std::size_t n, std::uint32_t salt) {
  Matrix a(m, n);
  rng::fill_normal(
      {.seed = 77, .replicate = salt, .T = static_cast<std::uint32_t>(m), .d = static_cast<std::uint32_t>(n)},
      a.values());
  return a;
}

std::string read_first_line(const char* path, const char* key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown";
}
}  // namespace

std::string machine_id() {
  const std::string blis = linalg::blis::kernel();
  return read_first_line("/proc/cpuinfo", "model name") + ", " + std::to_string(std::thread::hardware_concurrency()) +
         " cores, " + linalg::blas_info() + (blis.empty() ? "" : ", " + blis);
}

namespace {
// The longest run of true in `faster`, as an m n k range of the cubes of `sizes` (see
// measure_blis_range).
std::pair<double, double> longest_run(const std::vector<double>& sizes, const std::vector<bool>& faster) {
  std::size_t best_first = 0, best_count = 0;
  for (std::size_t i = 0; i < sizes.size();) {
    if (!faster[i]) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < sizes.size() && faster[j]) ++j;
    if (j - i > best_count) best_first = i, best_count = j - i;
    i = j;
  }
  if (best_count < blis_min_sizes) return {0.0, 0.0};  // one size alone may be a timing's luck
  const auto cube = [](double v) { return v * v * v; };
  const std::size_t last = best_first + best_count - 1;
  const double above = best_first == 0 ? 0.0 : std::round(cube(std::sqrt(sizes[best_first - 1] * sizes[best_first])));
  const double up_to = last + 1 == sizes.size() ? 1e300 : std::round(cube(std::sqrt(sizes[last] * sizes[last + 1])));
  return {above, up_to};
}
}  // namespace

linalg::BlisRange blis_range(const Calibration& c) {
  return {{c.blis_plain.first, c.blis_plain.second}, {c.blis_transposed.first, c.blis_transposed.second}};
}

void measure_blis_range(Calibration& c) {
  c.blis_plain = c.blis_transposed = {0.0, 0.0};
  c.blis_plain_ratio.clear();
  c.blis_transposed_ratio.clear();
  if (!linalg::blis::available()) return;
  const linalg::BlisRange previous = linalg::blis_range();
  // Cubes n^3 through the sizes of the parts gemm cuts products into (gemm_part_size rows);
  // each library times the same call through linalg::gemm (its parts and pieces included).
  const std::vector<double> sizes{16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};
  std::vector<bool> plain_faster, transposed_faster;
  for (const double size : sizes) {
    const auto n = static_cast<std::size_t>(size);
    const Matrix a = gaussian(n, n, 1), b = gaussian(n, n, 2);
    Matrix out(n, n);
    for (const linalg::Op op : {linalg::Op::none, linalg::Op::trans}) {
      const auto product = [&] { linalg::gemm(1.0, a, linalg::Op::none, b, op, 0.0, out); };
      linalg::set_blis_range({});
      const double openblas_s = time_call(product);
      linalg::set_blis_range(linalg::blis_everywhere);
      const double blis_s = time_call(product);
      (op == linalg::Op::none ? plain_faster : transposed_faster).push_back(blis_s < blis_min_gain * openblas_s);
      (op == linalg::Op::none ? c.blis_plain_ratio : c.blis_transposed_ratio).emplace_back(size, blis_s / openblas_s);
    }
  }
  linalg::set_blis_range(previous);
  c.blis_plain = longest_run(sizes, plain_faster);
  c.blis_transposed = longest_run(sizes, transposed_faster);
}

Calibration measure_calibration() {
  const int previous = linalg::set_blas_threads(1);
  Calibration c;
  c.machine = machine_id();
  // The library choice first: the rates below are then those of the products as sweeps run them.
  measure_blis_range(c);
  const linalg::BlisRange previous_range = linalg::set_blis_range(blis_range(c));
  for (std::size_t n : {16, 32, 64, 128, 256, 512, 1024}) {
    const Matrix a = gaussian(n, n, 1), b = gaussian(n, n, 2);
    Matrix out(n, n);
    const double s = time_call([&] { linalg::gemm(1.0, a, linalg::Op::none, b, linalg::Op::none, 0.0, out); });
    c.gemm_rate.emplace_back(static_cast<double>(n), 2.0 * static_cast<double>(n * n * n) / s);
  }
  for (std::size_t k : {16, 64, 150, 512, 1024}) {
    // A signal as layers leave it: singular values decaying like 1/i (a Gaussian matrix, whose
    // flat spectrum is the slowest case for Lanczos, made the estimates too high).
    Matrix x = gaussian(k, k, 3);
    {
      const Matrix q1 = linalg::thin_q(x), q2 = linalg::thin_q(gaussian(k, k, 7));
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < k; ++j) x(i, j) = q1(i, j) / static_cast<double>(j + 1);
      x = linalg::matmul(x, q2, linalg::Op::none, linalg::Op::trans);
    }
    Matrix m = gaussian(k, k, 4);
    models::softmax_rows(m);
    c.signal_s.emplace_back(static_cast<double>(k), time_call([&] { (void)metrics::signal_metrics(x, 0.0); }));
    c.mixer_s.emplace_back(static_cast<double>(k), time_call([&] { (void)metrics::mixer_metrics(m); }));
    c.svd_s.emplace_back(static_cast<double>(k), time_call([&] { (void)linalg::singular_values(x); }));
  }
  {  // a mixer beyond the last-level cache: Lanczos there is bound by memory bandwidth
    Matrix m = gaussian(2048, 2048, 4);
    models::softmax_rows(m);
    c.mixer_s.emplace_back(2048.0, time_call([&] { (void)metrics::mixer_metrics(m); }));
  }
  std::vector<double> v(1 << 20);
  c.normal_rate = static_cast<double>(v.size()) / time_call([&] { rng::fill_normal({.seed = 5}, v); });
  Matrix s = gaussian(512, 512, 6);
  const Matrix s0 = s;
  c.exp_rate = static_cast<double>(s.size()) / time_call([&] {
                 s = s0;
                 models::softmax_rows(s);
               });
  c.pass_rate = static_cast<double>(s.size()) / time_call([&] {
                  s = s0;
                  models::apply_norm(config::Norm::rms, s);
                });
  {  // the S4D causal convolution: T (T + 1) / 2 d multiply-adds of a layer whose kernels are cached
    config::ModelParams m;
    m.mixer = config::Mixer::s4d;
    m.input = config::InputKind::sphere;
    m.T = m.d = m.d_qk = 256;
    m.depth = 1;
    m.state_dim = 16;
    m.lambda = 1.0;
    models::RandomSource random(1, 0, m.T, m.d);
    const Matrix x0 = models::make_input(m, random);
    Matrix x = x0;
    models::apply_layer(m, 1, random, x, nullptr);  // builds and caches the layer's kernels
    const double t = time_call([&] {
      x = x0;
      models::apply_layer(m, 1, random, x, nullptr);
    });
    c.conv_rate = 256.0 * 257.0 / 2.0 * 256.0 / t;
  }
  linalg::set_blas_threads(previous);
  linalg::set_blis_range(previous_range);
  return c;
}

std::filesystem::path calibration_path() {
  if (const char* p = std::getenv("RCSWEEP_CALIBRATION"); p && *p) return p;
  std::filesystem::path base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    base = x;
  else if (const char* h = std::getenv("HOME"); h && *h)
    base = std::filesystem::path(h) / ".cache";
  else
    base = std::filesystem::temp_directory_path();
  return base / "rcsweep" / "calibration.toml";
}

std::optional<Calibration> load_calibration(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  try {
    Calibration c = parse_calibration(text.str());
    if (c.machine != machine_id()) return std::nullopt;  // measured elsewhere
    return c;
  } catch (const Error&) {
    return std::nullopt;  // damaged: measured again
  }
}

bool save_calibration(const Calibration& c, const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path);
  out << to_toml(c);
  out.close();
  return static_cast<bool>(out);
}

}  // namespace rcsweep::plan
