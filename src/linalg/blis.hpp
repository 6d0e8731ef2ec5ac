// BLIS (libblis, Debian's libblis-dev), opened at run time beside OpenBLAS for the products it
// multiplies faster on this CPU: its "sup" path multiplies small and skinny products without
// packing on every x86-64 kernel it has (OpenBLAS has such a path only on its AVX-512 cores).
// Opened with dlopen and RTLD_LOCAL, so that its BLAS symbols (dgemm_, cblas_dgemm) never replace
// OpenBLAS's for LAPACK or for the rest of the program; only its typed API bli_dgemm is called.
#pragma once
#include <cstddef>
#include <string>

namespace rcsweep::linalg::blis {

/// Whether BLIS is in use on this machine: the library the build found (RCSWEEP_BLIS_LIBRARY)
/// opened and its symbols resolved. Opened once per process, on the first call of any function
/// here; BLIS's own threads are then set to 1 (rcsweep's threads take the parts of a product).
bool available();

/// The BLIS library the build found and opens (a path), "" when built without BLIS.
std::string library_path();

/// "BLIS <version> <configuration>", e.g. "BLIS 0.9.0 zen3" (the sub-configuration BLIS picked
/// for this CPU, or the one BLIS_ARCH_TYPE asked for); "" when not available.
std::string kernel();

/// C = alpha op(A) op(B) + beta C, row-major with leading dimensions lda, ldb, ldc, on the calling
/// thread: op(A) is m x k, op(B) k x n. BLIS reads C only when beta != 0. Throws rcsweep::Error
/// when BLIS is not available.
void dgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
           std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc);

}  // namespace rcsweep::linalg::blis
