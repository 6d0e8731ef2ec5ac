// BLIS opened at run time (linalg/blis.hpp).
#include "linalg/blis.hpp"

#include <dlfcn.h>

#include "base/error.hpp"

#if RCSWEEP_HAVE_BLIS
#include <blis.h>
#endif

namespace rcsweep::linalg::blis {
namespace {

#if RCSWEEP_HAVE_BLIS
struct Library {
  decltype(&::bli_dgemm) dgemm = nullptr;
  std::string kernel;
};

Library open_library() {
  Library lib;
  void* handle = dlopen(RCSWEEP_BLIS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return lib;
  const auto dgemm = reinterpret_cast<decltype(&::bli_dgemm)>(dlsym(handle, "bli_dgemm"));
  const auto set_threads = reinterpret_cast<decltype(&::bli_thread_set_num_threads)>(
      dlsym(handle, "bli_thread_set_num_threads"));
  const auto version = reinterpret_cast<decltype(&::bli_info_get_version_str)>(
      dlsym(handle, "bli_info_get_version_str"));
  const auto arch_id = reinterpret_cast<decltype(&::bli_arch_query_id)>(dlsym(handle, "bli_arch_query_id"));
  const auto arch_name = reinterpret_cast<decltype(&::bli_arch_string)>(dlsym(handle, "bli_arch_string"));
  if (!dgemm || !set_threads || !version || !arch_id || !arch_name) return lib;  // not the BLIS this was built for
  set_threads(1);
  lib.dgemm = dgemm;
  lib.kernel = std::string("BLIS ") + version() + " " + arch_name(arch_id());
  return lib;
}
#else
struct Library {
  std::string kernel;
};
Library open_library() { return {}; }
#endif

const Library& library() {
  static const Library lib = open_library();
  return lib;
}

}  // namespace

#if RCSWEEP_HAVE_BLIS
std::string library_path() { return RCSWEEP_BLIS_LIBRARY; }
#else
std::string library_path() { return {}; }
#endif

bool available() { return !library().kernel.empty(); }

std::string kernel() { return library().kernel; }

void dgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
           std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
#if RCSWEEP_HAVE_BLIS
  const Library& lib = library();
  if (lib.dgemm == nullptr) throw Error("linalg::blis::dgemm: BLIS is not available (" RCSWEEP_BLIS_LIBRARY ")");
  // Row-major op(A): row stride lda, column stride 1 (BLIS takes both strides of every operand).
  const auto dim = [](std::size_t v) { return static_cast<dim_t>(v); };
  lib.dgemm(trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, dim(m), dim(n),
            dim(k), &alpha, const_cast<double*>(a), dim(lda), 1, const_cast<double*>(b), dim(ldb), 1, &beta, c,
            dim(ldc), 1);
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb,
      (void)beta, (void)c, (void)ldc;
  throw Error("linalg::blis::dgemm: rcsweep was built without BLIS (install libblis-dev and configure again)");
#endif
}

}  // namespace rcsweep::linalg::blis
