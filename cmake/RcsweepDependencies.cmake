# All dependencies come from Debian packages; nothing is downloaded at configure time.
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(tomlplusplus REQUIRED)
find_package(Threads REQUIRED)

# OpenBLAS directly (not the generic libblas alternative), so that
# openblas_set_num_threads() is available and the BLAS in use is known.
find_library(RCSWEEP_OPENBLAS_LIB NAMES openblas REQUIRED)
find_path(RCSWEEP_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas-pthread openblas REQUIRED
          PATHS /usr/include/x86_64-linux-gnu /usr/include)
find_library(RCSWEEP_LAPACKE_LIB NAMES lapacke REQUIRED)
find_path(RCSWEEP_LAPACKE_INCLUDE lapacke.h REQUIRED)

add_library(rcsweep_blas INTERFACE)
target_include_directories(rcsweep_blas INTERFACE ${RCSWEEP_CBLAS_INCLUDE} ${RCSWEEP_LAPACKE_INCLUDE})
target_link_libraries(rcsweep_blas INTERFACE ${RCSWEEP_LAPACKE_LIB} ${RCSWEEP_OPENBLAS_LIB})

add_library(rcsweep_hdf5 INTERFACE)
target_include_directories(rcsweep_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS})
target_link_libraries(rcsweep_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
target_compile_definitions(rcsweep_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})

if(RCSWEEP_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(RCSWEEP_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
