// The products of the Mind the Gap stable-rank grid (bench/sweeps/mind_the_gap_stable_rank.toml)
// and of the big task's softmax layers (T = 2048, 8192; d = 512, 1024): OpenBLAS, BLIS and LIBXSMM,
// one thread, warm caches. OpenBLAS and BLIS are called as rcsweep calls them: linalg::gemm
// (row-major float64, its cut into parts and pieces) with linalg::set_blis_range({}) for OpenBLAS and
// linalg::blis_everywhere for BLIS; a Gram's OpenBLAS route is linalg.cpp's gram_upper for k <
// gram_split_min_order (dsyrk, or unpacked GEMM pieces of gram_piece columns where
// unpacked_gemm_limit() > 0), its BLIS route the full product A A^T through linalg::gemm (BLIS has
// no syrk in linalg/blis.hpp; the same T(T+1)k flops are credited to both). LIBXSMM's JIT kernel:
// row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the kernel gets B first. The
// kernels of LIBXSMM 1.17 take alpha = 1, beta in {0, 1} and no transposed first operand: a B^T
// (S, P, the Grams) is transposed into a buffer first, and alpha != 1 is applied in a pass over C.
// Prints Markdown tables (docs/BENCHMARKS.md "Small products: OpenBLAS, BLIS and LIBXSMM").
//   OPENBLAS_NUM_THREADS=1 ./build/bench/bench_small_gemm [grid] [big] [blis-whole]
// (bench/run_small_gemm_bench.sh; grid, big: which tables, both by default)
#include <cblas.h>
#include <libxsmm.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/matrix.hpp"
#include "base/platform.hpp"
#include "linalg/blis.hpp"
#include "linalg/linalg.hpp"

namespace {

using rcsweep::Matrix;
namespace linalg = rcsweep::linalg;

// One product of a layer: C (m x n) = alpha op(A) op(B) + beta C with op(A) = A (m x k); op(B) = B
// (k x n) or, with trans_b, B^T (B n x k). A Gram is the upper triangle of alpha A A^T.
struct Product {
  std::string name;
  int m, n, k;
  bool trans_b, gram;
  double alpha, beta;
  double calls;  // in the whole grid (the big task: 1)
  double flops() const { return gram ? double(m) * (m + 1) * k : 2.0 * m * n * k; }
  double mnk() const { return double(m) * n * k; }
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

// The big task's products of one softmax layer, one call each (linalg::gemm cuts them into parts
// of gemm_part_size rows or columns, all on the one thread here).
std::vector<Product> big_products(int T, int d) {
  return {
      {"X P", T, d, d, false, false, 1.0, 0.0, 1},
      {"S = c (X P) X^T", T, T, d, true, false, 1.0 / std::sqrt(double(d)), 0.0, 1},
      {"M V", T, d, T, false, false, 1.0, 0.0, 1},
  };
}

// Operands of a product, filled with uniform [-1, 1) values from a seed of the shape (the same in
// every library's copy); C holds its value before the first call.
struct Operands {
  Matrix a, b, bt, c, tmp;
  Operands(const Product& p, bool xsmm)
      : a(p.m, p.k, Matrix::uninitialized),
        b(p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, Matrix::uninitialized),
        c(p.m, p.n, Matrix::uninitialized) {
    std::mt19937_64 gen(std::size_t(p.m) * 1000003 + p.n * 1009 + p.k);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (double& x : a.values()) x = u(gen);
    for (double& x : b.values()) x = u(gen);
    if (p.gram) b = a;  // B = A: n = m
    for (double& x : c.values()) x = u(gen);
    if (xsmm) {
      if (p.trans_b) bt = Matrix(p.k, p.n, Matrix::uninitialized);
      if (p.alpha != 1.0 && p.beta != 0.0) tmp = Matrix(p.m, p.n, Matrix::uninitialized);
    }
  }
};

// The Gram as linalg.cpp's gram_upper forms it below gram_split_min_order (the grid's orders).
void gram_openblas(const Product& p, Operands& o) {
  const double limit = linalg::unpacked_gemm_limit();
  const int k = p.m, inner = p.k;
  if (limit > 0.0 && double(k) * double(linalg::gram_piece) * double(inner) <= limit) {
    Matrix& at = o.bt;  // inner x k
    if (at.rows() != std::size_t(inner)) at = Matrix(inner, k, Matrix::uninitialized);
    cblas_domatcopy(CblasRowMajor, CblasTrans, k, inner, 1.0, o.a.data(), inner, at.data(), k);
    for (int first = 0; first < k; first += int(linalg::gram_piece)) {
      const int count = std::min(int(linalg::gram_piece), k - first), end = first + count;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, end, count, inner, p.alpha, o.a.data(), inner,
                  at.data() + first, k, 0.0, o.c.data() + first, k);
    }
    return;
  }
  cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, k, inner, p.alpha, o.a.data(), inner, 0.0, o.c.data(), k);
}

// With the argument blis-whole, BLIS gets gemm's products without the cut into pieces for
// OpenBLAS's unpacked kernels (unpacked_limit 0: what a BLIS route that skipped that cut would do).
bool blis_whole = false;

// OpenBLAS (range {}) or BLIS (everywhere) through linalg::gemm; the range is set per call, as
// the timed calls of the libraries alternate.
void call_linalg(const Product& p, Operands& o, bool blis) {
  if (p.gram && !blis) return gram_openblas(p, o);
  linalg::set_blis_range(blis ? linalg::blis_everywhere : linalg::BlisRange{});
  linalg::gemm(p.alpha, o.a, linalg::Op::none, o.b, p.trans_b ? linalg::Op::trans : linalg::Op::none,
               p.gram ? 0.0 : p.beta, o.c, blis && blis_whole ? 0.0 : linalg::unpacked_gemm_limit());
  linalg::set_blis_range({});
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
  double* c = o.c.data();
  if (p.alpha != 1.0 && p.beta != 0.0) {
    r.kernel(b, o.a.data(), o.tmp.data());
    const double* t = o.tmp.data();
    for (std::size_t i = 0; i < size; ++i) c[i] += p.alpha * t[i];
    return;
  }
  r.kernel(b, o.a.data(), c);
  if (p.alpha != 1.0)
    for (std::size_t i = 0; i < size; ++i) c[i] *= p.alpha;
}

using Clock = std::chrono::steady_clock;
double seconds_per_call(const std::function<void()>& f, long calls) {
  const auto t0 = Clock::now();
  for (long i = 0; i < calls; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count() / double(calls);
}

// Median seconds per call of each f over batches of ~2 ms each (15 batches), the libraries
// alternating batch by batch; a call of more than 50 ms is timed alone, in 3 batches.
std::vector<double> median_times(const std::vector<std::function<void()>>& fs) {
  double first = 0;
  for (const auto& f : fs) {
    double t = seconds_per_call(f, 1);  // warm-up
    if (t < 1e-2) t = seconds_per_call(f, 3);
    first = std::max(first, t);
  }
  const long calls = std::max(1L, long(2e-3 / std::max(first, 1e-9)));
  const int batches = first > 0.05 ? 3 : 15;
  std::vector<std::vector<double>> t(fs.size());
  for (int i = 0; i < batches; ++i)
    for (std::size_t j = 0; j < fs.size(); ++j) t[j].push_back(seconds_per_call(fs[j], calls));
  std::vector<double> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

// C of two libraries after one call each from the same C: bitwise equal (the upper triangle of a
// Gram), and the largest difference relative to max |C|.
struct Agreement {
  bool equal = true;
  double rel = 0;
};
Agreement compare(const Product& p, const Matrix& x, const Matrix& y) {
  Agreement r;
  double diff = 0, cmax = 0;
  for (int i = 0; i < p.m; ++i)
    for (int j = p.gram ? i : 0; j < p.n; ++j) {
      const double u = x(i, j), v = y(i, j);
      r.equal = r.equal && u == v;
      diff = std::max(diff, std::abs(u - v));
      cmax = std::max(cmax, std::abs(u));
    }
  r.rel = diff / cmax;
  return r;
}

enum { openblas, blis, xsmm, libraries };
const char* const library_name[] = {"OpenBLAS", "BLIS", "LIBXSMM"};

// One timed product: seconds per call of each library (NaN: not timed) and the agreement of BLIS
// and LIBXSMM with OpenBLAS.
struct Timing {
  double s[libraries] = {NAN, NAN, NAN};
  Agreement agree[libraries];
  std::string route;
  bool jitted = false;
  int fastest() const {
    int f = openblas;
    for (int l = blis; l < libraries; ++l)
      if (s[l] < s[f]) f = l;  // NaN never wins
    return f;
  }
};

Timing time_product(const Product& p, bool with_blis, bool with_xsmm) {
  Timing r;
  XsmmRoute route;
  if (with_xsmm) {
    route = xsmm_route(p);
    r.route = route.text;
    r.jitted = exact_call_jitted(p);
    with_xsmm = route.kernel != nullptr;
  }
  Operands ob(p, false);
  std::vector<std::function<void()>> fs{[&] { call_linalg(p, ob, false); }};
  call_linalg(p, ob, false);
  std::vector<Operands> others;
  others.reserve(2);
  int slot[libraries] = {0, -1, -1};
  if (with_blis) {
    Operands& o = others.emplace_back(p, false);
    call_linalg(p, o, true);
    r.agree[blis] = compare(p, ob.c, o.c);
    slot[blis] = int(fs.size());
    fs.emplace_back([&p, &o] { call_linalg(p, o, true); });
  }
  if (with_xsmm) {
    Operands& o = others.emplace_back(p, true);
    call_xsmm(p, route, o);
    r.agree[xsmm] = compare(p, ob.c, o.c);
    slot[xsmm] = int(fs.size());
    fs.emplace_back([&p, &route, &o] { call_xsmm(p, route, o); });
  }
  const std::vector<double> t = median_times(fs);
  for (int l = 0; l < libraries; ++l)
    if (slot[l] >= 0) r.s[l] = t[std::size_t(slot[l])];
  return r;
}

// Single-core seconds of the calls (calls x median time), per group of products.
struct Total {
  double flops = 0, s[libraries] = {0, 0, 0}, best = 0, best_ob = 0;
  int rows = 0, equal[libraries] = {0, 0, 0}, wins[libraries] = {0, 0, 0};
  void add(const Product& p, const Timing& t) {
    flops += p.calls * p.flops();
    for (int l = 0; l < libraries; ++l) {
      s[l] += p.calls * t.s[l];
      equal[l] += !std::isnan(t.s[l]) && t.agree[l].equal;
    }
    best += p.calls * t.s[t.fastest()];
    best_ob += p.calls * std::min(t.s[openblas], std::isnan(t.s[blis]) ? t.s[openblas] : t.s[blis]);
    wins[t.fastest()] += 1;
    rows += 1;
  }
};
using Totals = std::vector<std::pair<std::string, Total>>;
Total& total_of(Totals& v, const std::string& key) {
  for (auto& [k, t] : v)
    if (k == key) return t;
  return v.emplace_back(key, Total{}).second;
}

void print_totals(const char* head, const char* rule, const Totals& v) {
  std::printf("\n| %s | GFLOP | OpenBLAS s | BLIS s | LIBXSMM s | OpenBLAS / BLIS | OpenBLAS / LIBXSMM | "
              "faster of OpenBLAS, BLIS s | fastest of the three s | fastest (OpenBLAS, BLIS, LIBXSMM) | "
              "bitwise equal to OpenBLAS (BLIS; LIBXSMM) |\n|%s---|---|---|---|---|---|---|---|---|---|---|\n",
              head, rule);
  for (const auto& [k, t] : v)
    std::printf("| %s | %.1f | %.3f | %.3f | %.3f | %.2f | %.2f | %.3f | %.3f | %d, %d, %d | %d; %d of %d |\n",
                k.c_str(), t.flops * 1e-9, t.s[openblas], t.s[blis], t.s[xsmm], t.s[openblas] / t.s[blis],
                t.s[openblas] / t.s[xsmm], t.best_ob, t.best, t.wins[openblas], t.wins[blis], t.wins[xsmm],
                t.equal[blis], t.equal[xsmm], t.rows);
}

void print_row(const Product& p, const Timing& t, const char* lead) {
  const auto rate = [&](int l) {
    if (std::isnan(t.s[l])) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", p.flops() / t.s[l] * 1e-9);
    return std::string(buf);
  };
  const auto agree = [&](int l) {
    if (std::isnan(t.s[l])) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s (%.1e)", t.agree[l].equal ? "yes" : "no", t.agree[l].rel);
    return std::string(buf);
  };
  std::printf("| %s | %s | %d x %d x %d | %.0f | %s | %s | %s | %s | %.2f | %.2f | %s | %s | %s | %s |\n", lead,
              p.name.c_str(), p.m, p.n, p.k, p.calls, rate(openblas).c_str(), rate(blis).c_str(), rate(xsmm).c_str(),
              library_name[t.fastest()], t.s[openblas] / t.s[blis], t.s[openblas] / t.s[xsmm],
              t.route.empty() ? "-" : t.route.c_str(), t.route.empty() ? "-" : (t.jitted ? "yes" : "no"),
              agree(blis).c_str(), agree(xsmm).c_str());
}

const char* const row_head =
    "| product | m x n x k | calls | OpenBLAS GFLOP/s | BLIS GFLOP/s | LIBXSMM GFLOP/s | fastest | OpenBLAS s / "
    "BLIS s | OpenBLAS s / LIBXSMM s | LIBXSMM route | exact call JIT-ed | BLIS bitwise equal (max rel. diff.) | "
    "LIBXSMM bitwise equal (max rel. diff.) |\n";

}  // namespace

int main(int argc, char** argv) {
  bool grid = false, big = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "blis-whole"))
      blis_whole = true;
    else if (!std::strcmp(argv[i], "grid"))
      grid = true;
    else if (!std::strcmp(argv[i], "big"))
      big = true;
    else {
      std::fprintf(stderr, "usage: bench_small_gemm [grid] [big] [blis-whole]\n");
      return 2;
    }
  }
  if (!grid && !big) grid = big = true;
  libxsmm_init();
  const bool with_blis = linalg::blis::available();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const char* arch_type = std::getenv("BLIS_ARCH_TYPE");
  std::printf("CPU: %s; OpenBLAS: %s, core %s, OPENBLAS_CORETYPE=%s, %d thread(s), unpacked_gemm_limit %.0f; "
              "BLIS: %s, BLIS_ARCH_TYPE=%s%s; LIBXSMM %s, target %s; rcsweep threads 1\n",
              rcsweep::cpu_model().c_str(), openblas_get_config(), openblas_get_corename(),
              coretype ? coretype : "unset", openblas_get_num_threads(), linalg::unpacked_gemm_limit(),
              with_blis ? linalg::blis::kernel().c_str() : "not available", arch_type ? arch_type : "unset",
              blis_whole ? ", whole products (blis-whole)" : "", LIBXSMM_VERSION, libxsmm_get_target_arch());
  if (grid) {
    std::printf(
        "\nThe grid's products, per call:\n\n| T | d |%s|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        row_head + 1);
    Totals shapes, products;
    Total all;
    std::vector<std::pair<std::string, std::vector<double>>> blis_ratio, xsmm_ratio;  // per (T, d), per product
    const int Ts[] = {20, 40, 60, 80, 100, 150}, gammas[] = {1, 2, 5};
    for (int g : gammas)
      for (int T : Ts) {
        const std::string shape = std::to_string(T) + " | " + std::to_string(g * T);
        auto& br = blis_ratio.emplace_back(shape, std::vector<double>{}).second;
        auto& xr = xsmm_ratio.emplace_back(shape, std::vector<double>{}).second;
        for (const Product& p : grid_products(T, g * T)) {
          const Timing t = time_product(p, with_blis, true);
          for (Total* s : {&total_of(shapes, shape), &total_of(products, p.name), &all}) s->add(p, t);
          br.push_back(t.s[openblas] / t.s[blis]);
          xr.push_back(t.s[openblas] / t.s[xsmm]);
          print_row(p, t, shape.c_str());
          std::fflush(stdout);
        }
      }
    std::printf("\nPer (T, d), the grid's calls (single-core seconds: calls x median time):\n");
    print_totals("T | d", "---|", shapes);
    std::printf("\nPer product, over the grid:\n");
    products.emplace_back("all", all);
    print_totals("product", "", products);
    for (const auto* ratios : {&blis_ratio, &xsmm_ratio}) {
      std::printf("\n%s per product and (T, d) (OpenBLAS s / %s s; > 1: %s faster):\n\n| T | d |",
                  ratios == &blis_ratio ? "BLIS" : "LIBXSMM", ratios == &blis_ratio ? "BLIS" : "LIBXSMM",
                  ratios == &blis_ratio ? "BLIS" : "LIBXSMM");
      for (const Product& p : grid_products(1, 1)) std::printf(" %s |", p.name.c_str());
      std::printf("\n|---|---|---|---|---|---|---|---|---|---|\n");
      for (const auto& [shape, v] : *ratios) {
        std::printf("| %s |", shape.c_str());
        for (double x : v) std::printf(" %.2f |", x);
        std::printf("\n");
      }
    }
  }
  if (big) {
    std::printf("\nThe big task's products (softmax layer), one call each (LIBXSMM at T = 2048 only):\n\n"
                "| T | d |%s|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                row_head + 1);
    Totals shapes;
    Total all;
    for (int T : {2048, 8192})
      for (int d : {512, 1024}) {
        const std::string shape = std::to_string(T) + " | " + std::to_string(d);
        for (const Product& p : big_products(T, d)) {
          const Timing t = time_product(p, with_blis, T <= 2048);
          for (Total* s : {&total_of(shapes, shape), &all}) s->add(p, t);
          print_row(p, t, shape.c_str());
          std::fflush(stdout);
        }
      }
    std::printf("\nPer (T, d), one call of each product (single-core seconds):\n");
    shapes.emplace_back("all | ", all);
    print_totals("T | d", "---|", shapes);
  }
  libxsmm_finalize();
}
