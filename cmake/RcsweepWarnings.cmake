# Warnings on every rcsweep target (not globally: third-party code stays untouched).
add_library(rcsweep_warnings INTERFACE)
target_compile_options(rcsweep_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                       -Wno-sign-conversion)
# GCC 12 reports -Wrestrict false positives inside std::string's operator+ at -O3 (GCC PR 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(rcsweep_warnings INTERFACE -Wno-restrict)
endif()
