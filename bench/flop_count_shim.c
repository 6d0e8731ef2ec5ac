/* LD_PRELOAD library that counts the floating-point operations of the BLAS products a process
 * performs (bench/run_baseline_bench.sh: the GEMM floor of a sweep). It wraps the CBLAS routines
 * that src/linalg calls for products (cblas_dgemm, cblas_dsyrk, cblas_dgemv, cblas_dsymv) and the
 * Fortran BLAS products that LAPACK's QR and SVD call inside liblapack (dgemm_, dtrmm_, dgemv_,
 * dger_), forwards each call to the next definition (dlsym RTLD_NEXT), and adds its flops to a
 * per-routine counter (atomic: BLAS may be called from several OpenMP threads). At exit, when
 * RCSWEEP_FLOP_COUNT names a file, it appends one line per routine called, "NAME CALLS FLOPS",
 * with one write (several processes, e.g. MPI ranks, may append to the same file).
 * Flops: gemm 2mnk, syrk n(n+1)k, trmm m^2 n (left) or m n^2 (right), gemv and ger 2mn, symv 2n^2.
 * Level-1 routines and LAPACK's other internal calls are not counted. */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { DGEMM, DSYRK, DGEMV, DSYMV, F_DGEMM, F_DTRMM, F_DGEMV, F_DGER, COUNT };
static const char* const names[COUNT] = {"cblas_dgemm", "cblas_dsyrk", "cblas_dgemv", "cblas_dsymv",
                                         "dgemm_",      "dtrmm_",      "dgemv_",      "dger_"};
static unsigned long long calls[COUNT], flops[COUNT];
static void* reals[COUNT];

/* the next definition of routine r, looked up once */
static void* real(int r) {
  void* f = __atomic_load_n(&reals[r], __ATOMIC_ACQUIRE);
  if (!f) {
    f = dlsym(RTLD_NEXT, names[r]);
    if (!f) {
      fprintf(stderr, "flop_count_shim: no %s to forward to\n", names[r]);
      abort();
    }
    __atomic_store_n(&reals[r], f, __ATOMIC_RELEASE);
  }
  return f;
}

static void add(int r, double m, double n, double k) {
  __atomic_fetch_add(&calls[r], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&flops[r], (unsigned long long)(m * n * k), __ATOMIC_RELAXED);
}

typedef void cblas_dgemm_t(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                           double, const double*, blasint, const double*, blasint, double, double*, blasint);
void cblas_dgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
                 double alpha, const double* a, blasint lda, const double* b, blasint ldb, double beta, double* c,
                 blasint ldc) {
  add(DGEMM, 2.0 * m, n, k);
  ((cblas_dgemm_t*)real(DGEMM))(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

typedef void cblas_dsyrk_t(enum CBLAS_ORDER, enum CBLAS_UPLO, enum CBLAS_TRANSPOSE, blasint, blasint, double,
                           const double*, blasint, double, double*, blasint);
void cblas_dsyrk(enum CBLAS_ORDER o, enum CBLAS_UPLO u, enum CBLAS_TRANSPOSE t, blasint n, blasint k, double alpha,
                 const double* a, blasint lda, double beta, double* c, blasint ldc) {
  add(DSYRK, n, n + 1.0, k);
  ((cblas_dsyrk_t*)real(DSYRK))(o, u, t, n, k, alpha, a, lda, beta, c, ldc);
}

typedef void cblas_dgemv_t(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, blasint, blasint, double, const double*, blasint,
                           const double*, blasint, double, double*, blasint);
void cblas_dgemv(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE t, blasint m, blasint n, double alpha, const double* a,
                 blasint lda, const double* x, blasint incx, double beta, double* y, blasint incy) {
  add(DGEMV, 2.0 * m, n, 1.0);
  ((cblas_dgemv_t*)real(DGEMV))(o, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

typedef void cblas_dsymv_t(enum CBLAS_ORDER, enum CBLAS_UPLO, blasint, double, const double*, blasint, const double*,
                           blasint, double, double*, blasint);
void cblas_dsymv(enum CBLAS_ORDER o, enum CBLAS_UPLO u, blasint n, double alpha, const double* a, blasint lda,
                 const double* x, blasint incx, double beta, double* y, blasint incy) {
  add(DSYMV, 2.0 * n, n, 1.0);
  ((cblas_dsymv_t*)real(DSYMV))(o, u, n, alpha, a, lda, x, incx, beta, y, incy);
}

/* Fortran BLAS, as gfortran-compiled LAPACK calls it: arguments by reference, then the hidden
 * lengths of the character arguments (passed on unchanged). */
typedef void dgemm_t(const char*, const char*, const blasint*, const blasint*, const blasint*, const double*,
                     const double*, const blasint*, const double*, const blasint*, const double*, double*,
                     const blasint*, size_t, size_t);
void dgemm_(const char* ta, const char* tb, const blasint* m, const blasint* n, const blasint* k, const double* alpha,
            const double* a, const blasint* lda, const double* b, const blasint* ldb, const double* beta, double* c,
            const blasint* ldc, size_t l1, size_t l2) {
  add(F_DGEMM, 2.0 * *m, *n, *k);
  ((dgemm_t*)real(F_DGEMM))(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2);
}

typedef void dtrmm_t(const char*, const char*, const char*, const char*, const blasint*, const blasint*, const double*,
                     const double*, const blasint*, double*, const blasint*, size_t, size_t, size_t, size_t);
void dtrmm_(const char* side, const char* uplo, const char* ta, const char* diag, const blasint* m, const blasint* n,
            const double* alpha, const double* a, const blasint* lda, double* b, const blasint* ldb, size_t l1,
            size_t l2, size_t l3, size_t l4) {
  const int left = *side == 'L' || *side == 'l';
  add(F_DTRMM, *m, *n, left ? *m : *n);
  ((dtrmm_t*)real(F_DTRMM))(side, uplo, ta, diag, m, n, alpha, a, lda, b, ldb, l1, l2, l3, l4);
}

typedef void dgemv_t(const char*, const blasint*, const blasint*, const double*, const double*, const blasint*,
                     const double*, const blasint*, const double*, double*, const blasint*, size_t);
void dgemv_(const char* t, const blasint* m, const blasint* n, const double* alpha, const double* a, const blasint* lda,
            const double* x, const blasint* incx, const double* beta, double* y, const blasint* incy, size_t l1) {
  add(F_DGEMV, 2.0 * *m, *n, 1.0);
  ((dgemv_t*)real(F_DGEMV))(t, m, n, alpha, a, lda, x, incx, beta, y, incy, l1);
}

typedef void dger_t(const blasint*, const blasint*, const double*, const double*, const blasint*, const double*,
                    const blasint*, double*, const blasint*);
void dger_(const blasint* m, const blasint* n, const double* alpha, const double* x, const blasint* incx,
           const double* y, const blasint* incy, double* a, const blasint* lda) {
  add(F_DGER, 2.0 * *m, *n, 1.0);
  ((dger_t*)real(F_DGER))(m, n, alpha, x, incx, y, incy, a, lda);
}

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("RCSWEEP_FLOP_COUNT");
  if (!path || !*path) return;
  char text[COUNT * 80];
  size_t used = 0;
  for (int r = 0; r < COUNT; ++r)
    if (calls[r])
      used += (size_t)snprintf(text + used, sizeof text - used, "%s %llu %llu\n", names[r], calls[r], flops[r]);
  if (used == 0) return;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || write(fd, text, used) != (ssize_t)used) perror("flop_count_shim: RCSWEEP_FLOP_COUNT");
  if (fd >= 0) close(fd);
}
