// The memory roofline of the Lanczos steps of the mixer metrics: GB/s of linalg::gemv (A x and
// A^T x, the products a Golub–Kahan step makes, in rcsweep's fixed parts) against a plain read of
// the same matrix, on 1 and 2 threads (docs/SCALING.md "One big task: each part's serial share").
//   build/bench/gemv_bandwidth [T ...]      (default: 2048 8192; T x T doubles)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/matrix.hpp"
#include "base/parallel.hpp"
#include "linalg/linalg.hpp"

namespace {

using rcsweep::Matrix;
namespace linalg = rcsweep::linalg;
namespace parallel = rcsweep::parallel;

// Best of 5 of f(), in seconds, after one call that is not timed (the threads' first parallel
// region after a change of their number runs several times slower).
template <class F>
double best_seconds(F&& f) {
  f();
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Sum of all entries, in the row parts of gemv and 8 partial sums per part: a read of A.
double read_all(const Matrix& A) {
  const parallel::Parts parts = linalg::gemv_parts(A.rows(), A.cols());
  std::vector<double> sums(parts.count(), 0.0);
  parallel::for_each(parts.count(), [&](std::size_t p) {
    const double* a = A.row(parts.begin(p)).data();
    const std::size_t n = parts.length(p) * A.cols();
    double s[8] = {};
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (std::size_t l = 0; l < 8; ++l) s[l] += a[i + l];
    for (; i < n; ++i) s[0] += a[i];
    sums[p] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  });
  double total = 0.0;
  for (double s : sums) total += s;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> orders;
  for (int i = 1; i < argc; ++i) orders.push_back(static_cast<std::size_t>(std::atol(argv[i])));
  if (orders.empty()) orders = {2048, 8192};
  linalg::set_blas_threads(1);
  std::printf("| T | threads | read of M (GB/s) | M x (GB/s) | M^T x (GB/s) |\n|---|---|---|---|---|\n");
  for (const std::size_t t : orders) {
    Matrix M(t, t, 0.5);
    std::vector<double> x(t, 1.0), y(t);
    const double bytes = static_cast<double>(t) * static_cast<double>(t) * sizeof(double);
    double sink = 0.0;
    for (const int threads : {1, 2}) {
      parallel::set_threads(threads);
      const double read = best_seconds([&] { sink += read_all(M); });
      const double ax = best_seconds([&] { linalg::gemv(M, linalg::Op::none, x.data(), y.data()); });
      const double atx = best_seconds([&] { linalg::gemv(M, linalg::Op::trans, x.data(), y.data()); });
      std::printf("| %zu | %d | %.1f | %.1f | %.1f |\n", t, threads, bytes / read / 1e9, bytes / ax / 1e9,
                  bytes / atx / 1e9);
    }
    if (sink == 42.0) std::printf(" ");  // keeps the reads
  }
  return 0;
}
