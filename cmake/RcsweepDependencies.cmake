# All dependencies come from Debian packages; nothing is downloaded at configure time.
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# HDF5 once, with the high-level library: the dimension-scale API (H5DS*) lives in hdf5_hl.
find_package(HDF5 REQUIRED COMPONENTS C HL)
find_package(tomlplusplus REQUIRED)
# nlohmann-json (headers): config.json and the safetensors headers of model folders (src/checkpoint).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)

# OpenBLAS directly (not the generic libblas alternative), so that
# openblas_set_num_threads() is available and the BLAS in use is known. Debian's pthreads build,
# whatever the libopenblas.so.0 alternative points to: rcsweep's OpenMP threads each call a
# one-thread BLAS, and that build was measured faster for it than the OpenMP build
# (docs/BENCHMARKS.md "Threads"). The run path makes the program load it (build and install).
find_library(RCSWEEP_OPENBLAS_LIB NAMES openblas PATHS /usr/lib/x86_64-linux-gnu/openblas-pthread NO_DEFAULT_PATH)
find_library(RCSWEEP_OPENBLAS_LIB NAMES openblas REQUIRED)
get_filename_component(RCSWEEP_OPENBLAS_DIR ${RCSWEEP_OPENBLAS_LIB} DIRECTORY)
if(RCSWEEP_OPENBLAS_DIR MATCHES "openblas-pthread$")
  list(APPEND CMAKE_BUILD_RPATH ${RCSWEEP_OPENBLAS_DIR})
  list(APPEND CMAKE_INSTALL_RPATH ${RCSWEEP_OPENBLAS_DIR})
endif()
find_path(RCSWEEP_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas-pthread openblas REQUIRED
          PATHS /usr/include/x86_64-linux-gnu /usr/include)
find_library(RCSWEEP_LAPACKE_LIB NAMES lapacke REQUIRED)
find_path(RCSWEEP_LAPACKE_INCLUDE lapacke.h REQUIRED)

add_library(rcsweep_blas INTERFACE)
target_include_directories(rcsweep_blas INTERFACE ${RCSWEEP_CBLAS_INCLUDE} ${RCSWEEP_LAPACKE_INCLUDE})
target_link_libraries(rcsweep_blas INTERFACE ${RCSWEEP_LAPACKE_LIB} ${RCSWEEP_OPENBLAS_LIB})

# BLIS (libblis-dev), optional: src/linalg/blis.cpp opens it at run time (dlopen, RTLD_LOCAL, so its
# BLAS symbols never replace OpenBLAS's) for the products it multiplies faster (linalg::blis_range).
# Debian's OpenMP build; rcsweep calls it with one BLIS thread per call. Without it every product
# is OpenBLAS's.
find_path(RCSWEEP_BLIS_INCLUDE blis.h PATH_SUFFIXES blis-openmp blis-pthread blis-serial blis
          PATHS /usr/include/x86_64-linux-gnu /usr/include)
find_library(RCSWEEP_BLIS_LINK NAMES blis PATHS /usr/lib/x86_64-linux-gnu/blis-openmp /usr/lib/x86_64-linux-gnu/blis-pthread
             /usr/lib/x86_64-linux-gnu/blis-serial NO_DEFAULT_PATH)
find_library(RCSWEEP_BLIS_LINK NAMES blis)
add_library(rcsweep_blis_config INTERFACE)
if(RCSWEEP_BLIS_INCLUDE AND RCSWEEP_BLIS_LINK)
  get_filename_component(RCSWEEP_BLIS_LIBRARY ${RCSWEEP_BLIS_LINK} REALPATH)
  target_include_directories(rcsweep_blis_config SYSTEM INTERFACE ${RCSWEEP_BLIS_INCLUDE})
  target_compile_definitions(rcsweep_blis_config INTERFACE RCSWEEP_HAVE_BLIS=1
                             RCSWEEP_BLIS_LIBRARY="${RCSWEEP_BLIS_LIBRARY}")
  target_link_libraries(rcsweep_blis_config INTERFACE ${CMAKE_DL_LIBS})
else()
  set(RCSWEEP_BLIS_LIBRARY "")
  target_compile_definitions(rcsweep_blis_config INTERFACE RCSWEEP_HAVE_BLIS=0)
endif()

# rcsweep_hdf5: the C library (hdf5.h), for src/store and the tests that read stores themselves;
# rcsweep_hdf5_hl: its high-level part (H5DSpublic.h), which only src/store's sources use.
add_library(rcsweep_hdf5 INTERFACE)
target_include_directories(rcsweep_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS})
target_link_libraries(rcsweep_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
target_compile_definitions(rcsweep_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})
add_library(rcsweep_hdf5_hl INTERFACE)
target_link_libraries(rcsweep_hdf5_hl INTERFACE ${HDF5_C_HL_LIBRARIES} rcsweep_hdf5)

if(RCSWEEP_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(RCSWEEP_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
