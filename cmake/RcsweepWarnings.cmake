# Warnings on every rcsweep target (not globally: third-party code stays untouched).
add_library(rcsweep_warnings INTERFACE)
target_compile_options(rcsweep_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                       -Wno-sign-conversion)
