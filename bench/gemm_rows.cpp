// Does OpenBLAS give a row of C = X W the same bits whatever other rows X has? For each (T, d) of
// the Mind the Gap grid and 2, 12 and 25 blocks of T rows (a bundle's variants), C of the blocks
// stacked against C of each block alone, bit for bit. Prints the kernel and how many blocks differ
// (docs/BENCHMARKS.md "Authors' code, NumPy, rcsweep and the GEMM floor"). Run it under each kernel
// the CPU can take: OPENBLAS_CORETYPE=Haswell build/bench/gemm_rows, and so on.
#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

int main() {
  std::mt19937_64 gen(1);
  std::normal_distribution<double> normal;
  long differ = 0, blocks = 0;
  for (const int T : {20, 40, 60, 80, 100, 150})
    for (const int gamma_inverse : {1, 2, 5})
      for (const int stacked : {2, 12, 25}) {
        const int d = T * gamma_inverse;
        std::vector<double> W(static_cast<std::size_t>(d) * d), X(static_cast<std::size_t>(stacked) * T * d);
        for (double& w : W) w = normal(gen);
        for (double& x : X) x = normal(gen);
        std::vector<double> all(X.size()), one(static_cast<std::size_t>(T) * d);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, stacked * T, d, d, 1.0, X.data(), d, W.data(), d, 0.0,
                    all.data(), d);
        for (int b = 0; b < stacked; ++b) {
          const std::size_t at = static_cast<std::size_t>(b) * T * d;
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, d, 1.0, X.data() + at, d, W.data(), d, 0.0,
                      one.data(), d);
          ++blocks;
          if (std::memcmp(one.data(), all.data() + at, one.size() * sizeof(double)) != 0) ++differ;
        }
      }
  std::printf("%s: %ld of %ld blocks differ from the same rows multiplied alone\n", openblas_get_corename(), differ,
              blocks);
  return 0;
}
