// The small products of the Mind the Gap stable-rank grid (bench/sweeps/mind_the_gap_stable_rank.toml),
// OpenBLAS against LIBXSMM, one thread, warm caches. Each product is called as rcsweep calls it
// (row-major float64, src/linalg/linalg.cpp gemm and gram_upper) and by LIBXSMM's JIT kernel:
// row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the kernel gets B first. The
// kernels of LIBXSMM 1.17 take alpha = 1, beta in {0, 1} and no transposed first operand: a B^T
// (S, P, the Grams) is transposed into a buffer first, and alpha != 1 is applied in a pass over C.
// Prints a Markdown table (docs/BENCHMARKS.md "Small products: OpenBLAS against LIBXSMM").
//   OPENBLAS_NUM_THREADS=1 ./build/bench/bench_small_gemm      (bench/run_small_gemm_bench.sh)
#include <cblas.h>
#include <libxsmm.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

// One product of a layer: C (m x n) = alpha op(A) op(B) + beta C with op(A) = A (m x k); op(B) = B
// (k x n) or, with trans_b, B^T (B n x k). A Gram is the upper triangle of alpha A A^T by dsyrk.
struct Product {
  std::string name;
  int m, n, k;
  bool trans_b, gram;
  double alpha, beta;
  double calls;  // in the whole grid
  double flops() const { return gram ? double(m) * (m + 1) * k : 2.0 * m * n * k; }
};

// The products of one (T, d) of the grid and their calls: 5 replicates x 10 layers, 25 variants
// (12 softmax, 12 Markov, 1 identity) in one bundle per replicate; d_qk = d, so softmax logits are
// (X P) X^T with P = W_Q W_K^T once per bundle and layer. Layer 1's X W_V and X P are the
// bundle's; so are its softmax mixers (one per gap_fix), and the Markov and identity mixers of
// every layer. Each task's metrics form the Gram of X at layers 1..10 (layer 0: the bundle's), and
// of each mixer formed; the Gram of X has alpha = 1 / ||X||_F^2 (0.5 stands for it), that of M 1.
std::vector<Product> grid_products(int T, int d) {
  const double R = 5, L = 10, scale_qk = 1.0 / (d * std::sqrt(double(d))), skip = 1.0 / std::sqrt(double(d));
  const double x_wv = R * (25 * (L - 1) + 1), x_p = R * (12 * (L - 1) + 1);
  return {
      {"X W_V, X P", T, d, d, false, false, 1.0, 0.0, x_wv + x_p},
      {"P = W_Q W_K^T", d, d, d, true, false, 1.0, 0.0, R * L},
      {"S = c (X P) X^T", T, T, d, true, false, scale_qk, 0.0, R * (12 * (L - 1) + 2)},
      {"M V (a = 1, b = 0)", T, d, T, false, false, 1.0, 0.0, R * 8 * L},
      {"M V (a = 1, b = 1)", T, d, T, false, false, 1.0, 1.0, R * 8 * L},
      {"M V (a = 1/sqrt d, b = 1)", T, d, T, false, false, skip, 1.0, R * 8 * L},
      {"Gram X X^T", T, T, d, true, true, 0.5, 0.0, R * (25 * L + 1)},
      {"Gram M M^T", T, T, T, true, true, 1.0, 0.0, R * (12 * (L - 1) + 2 + 3 * L)},
  };
}

// Operands of a product, filled with uniform [-1, 1) values; c0 is C's value before a call.
struct Operands {
  std::vector<double> a, b, bt, c0, c, tmp;
  explicit Operands(const Product& p) : a(std::size_t(p.m) * p.k), b(std::size_t(p.k) * p.n), bt(b.size()) {
    std::mt19937_64 gen(std::size_t(p.m) * 1000003 + p.n * 1009 + p.k);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (double& x : a) x = u(gen);
    for (double& x : b) x = u(gen);
    if (p.gram) b = a;  // B = A: n = m
    c0.resize(std::size_t(p.m) * p.n);
    for (double& x : c0) x = u(gen);
    c = c0;
    tmp = c0;
  }
};

void call_openblas(const Product& p, Operands& o) {
  if (p.gram)
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, p.m, p.k, p.alpha, o.a.data(), p.k, 0.0, o.c.data(), p.m);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, p.alpha, o.a.data(),
                p.k, o.b.data(), p.trans_b ? p.k : p.n, p.beta, o.c.data(), p.n);
}

// Whether LIBXSMM JIT-compiles the exact call (a transposed B is column-major TRANS_A): when it
// does not, libxsmm_dgemm falls back to the BLAS.
bool exact_call_jitted(const Product& p) {
  if (p.gram) return false;  // no syrk
  const int flags = p.trans_b ? LIBXSMM_GEMM_FLAG_TRANS_A : 0, lda = p.trans_b ? p.k : p.n, ldb = p.k, ldc = p.n;
  return libxsmm_dmmdispatch(p.n, p.m, p.k, &lda, &ldb, &ldc, &p.alpha, &p.beta, &flags, nullptr) != nullptr;
}

// LIBXSMM's route to the same product: B^T into a buffer if needed, then the kernel with alpha = 1
// and the product's beta; with alpha != 1 the kernel's beta is 0, and C is scaled (beta = 0) or
// the product, formed in a temporary, added times alpha (beta = 1).
struct XsmmRoute {
  libxsmm_dmmfunction kernel = nullptr;
  std::string text;
};
XsmmRoute xsmm_route(const Product& p) {
  const double one = 1.0, beta = p.alpha == 1.0 ? p.beta : 0.0;
  const int flags = 0, ld = p.n;
  const libxsmm_dmmfunction kernel = libxsmm_dmmdispatch(p.n, p.m, p.k, &ld, &p.k, &ld, &one, &beta, &flags, nullptr);
  return {kernel, std::string(p.trans_b ? "transpose, " : "") + (kernel ? "JIT" : "no kernel") +
                      (p.alpha == 1.0 ? "" : (p.beta == 0.0 ? ", scale" : ", axpy"))};
}

void call_xsmm(const Product& p, const XsmmRoute& r, Operands& o) {
  const double* b = o.b.data();
  if (p.trans_b) {  // row-major B (n x k) into row-major B^T (k x n)
    libxsmm_otrans(o.bt.data(), o.b.data(), sizeof(double), p.k, p.n, p.k, p.n);
    b = o.bt.data();
  }
  const std::size_t size = o.c.size();
  if (p.alpha != 1.0 && p.beta != 0.0) {
    r.kernel(b, o.a.data(), o.tmp.data());
    for (std::size_t i = 0; i < size; ++i) o.c[i] += p.alpha * o.tmp[i];
    return;
  }
  r.kernel(b, o.a.data(), o.c.data());
  if (p.alpha != 1.0)
    for (std::size_t i = 0; i < size; ++i) o.c[i] *= p.alpha;
}

using Clock = std::chrono::steady_clock;
template <class F>
double seconds_per_call(F&& f, long calls) {
  const auto t0 = Clock::now();
  for (long i = 0; i < calls; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count() / double(calls);
}

// Median seconds per call of f and g over batches of ~2 ms each, the batches alternating.
template <class F, class G>
std::pair<double, double> median_times(F&& f, G&& g, int batches = 15) {
  const double first = seconds_per_call(f, 3);
  const long calls = std::max(1L, long(2e-3 / std::max(first, 1e-9)));
  std::vector<double> tf, tg;
  for (int i = 0; i < batches; ++i) {
    tf.push_back(seconds_per_call(f, calls));
    tg.push_back(seconds_per_call(g, calls));
  }
  std::sort(tf.begin(), tf.end());
  std::sort(tg.begin(), tg.end());
  return {tf[tf.size() / 2], tg[tg.size() / 2]};
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  while (std::getline(in, line)) {
    const auto value = [&] { return line.substr(line.find(':') + 2); };
    if (name.empty() && line.rfind("model name", 0) == 0) name = value();
    if (family.empty() && line.rfind("cpu family", 0) == 0) family = value();
    if (model.empty() && line.rfind("model\t", 0) == 0) model = value();
  }
  return name + " (family " + family + ", model " + model + ")";
}

}  // namespace

int main() {
  libxsmm_init();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("CPU: %s; OpenBLAS: %s, core %s, OPENBLAS_CORETYPE=%s, %d thread(s); LIBXSMM %s, target %s\n\n",
              cpu_model().c_str(), openblas_get_config(), openblas_get_corename(), coretype ? coretype : "unset",
              openblas_get_num_threads(), LIBXSMM_VERSION, libxsmm_get_target_arch());
  std::printf("| T | d | product | m x n x k | calls in the grid | OpenBLAS GFLOP/s | LIBXSMM GFLOP/s | "
              "LIBXSMM / OpenBLAS | exact call JIT-ed | LIBXSMM route | bitwise equal | max rel. diff. |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  // Single-core seconds of the grid's calls (calls x median time), per (T, d) and per product.
  struct Total {
    double flops = 0, blas_s = 0, xsmm_s = 0, best_s = 0;
    int rows = 0, equal = 0;
  };
  std::vector<std::pair<std::string, Total>> shapes, products;
  const auto total = [](std::vector<std::pair<std::string, Total>>& v, const std::string& key) -> Total& {
    for (auto& [k, t] : v)
      if (k == key) return t;
    return v.emplace_back(key, Total{}).second;
  };
  Total all;
  const int Ts[] = {20, 40, 60, 80, 100, 150}, gammas[] = {1, 2, 5};
  for (int g : gammas)
    for (int T : Ts)
      for (const Product& p : grid_products(T, g * T)) {
        Operands ob(p), ox(p);
        const XsmmRoute route = xsmm_route(p);
        if (!route.kernel) {
          std::printf("| %d | %d | %s | | | | | | | no kernel | | |\n", T, g * T, p.name.c_str());
          continue;
        }
        // One call each from the same C: bitwise equal (the upper triangle of a Gram)?
        call_openblas(p, ob);
        call_xsmm(p, route, ox);
        bool equal = true;
        double diff = 0, cmax = 0;
        for (int i = 0; i < p.m; ++i)
          for (int j = p.gram ? i : 0; j < p.n; ++j) {
            const double x = ob.c[std::size_t(i) * p.n + j], y = ox.c[std::size_t(i) * p.n + j];
            equal = equal && x == y;
            diff = std::max(diff, std::abs(x - y));
            cmax = std::max(cmax, std::abs(x));
          }
        const auto [tb, tx] = median_times([&] { call_openblas(p, ob); }, [&] { call_xsmm(p, route, ox); });
        for (Total* t :
             {&total(shapes, std::to_string(T) + " | " + std::to_string(g * T)), &total(products, p.name), &all}) {
          t->flops += p.calls * p.flops();
          t->blas_s += p.calls * tb;
          t->xsmm_s += p.calls * tx;
          t->best_s += p.calls * std::min(tb, tx);
          t->rows += 1;
          t->equal += equal;
        }
        std::printf("| %d | %d | %s | %d x %d x %d | %.0f | %.1f | %.1f | %.2f | %s | %s | %s | %.1e |\n", T, g * T,
                    p.name.c_str(), p.m, p.n, p.k, p.calls, p.flops() / tb * 1e-9, p.flops() / tx * 1e-9, tb / tx,
                    exact_call_jitted(p) ? "yes" : "no", route.text.c_str(), equal ? "yes" : "no", diff / cmax);
      }
  // The grid's calls: single-core seconds (OpenBLAS, LIBXSMM, the faster of the two per product).
  const auto print_totals = [&](const char* head, const char* rule,
                                const std::vector<std::pair<std::string, Total>>& v) {
    std::printf("\n| %s | GFLOP in the grid | OpenBLAS s | LIBXSMM s | OpenBLAS s / LIBXSMM s | faster of the two s | "
                "bitwise equal |\n|%s---|---|---|---|---|---|\n",
                head, rule);
    for (const auto& [k, t] : v)
      std::printf("| %s | %.1f | %.3f | %.3f | %.2f | %.3f | %d of %d |\n", k.c_str(), t.flops * 1e-9, t.blas_s,
                  t.xsmm_s, t.blas_s / t.xsmm_s, t.best_s, t.equal, t.rows);
  };
  print_totals("T | d", "---|---|", shapes);
  products.emplace_back("all", all);
  print_totals("product", "---|", products);
  libxsmm_finalize();
}
