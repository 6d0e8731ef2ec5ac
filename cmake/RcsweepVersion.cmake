# Generated header with version and git commit, written into the build tree.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                OUTPUT_VARIABLE RCSWEEP_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                OUTPUT_VARIABLE RCSWEEP_GIT_DIRTY OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT RCSWEEP_GIT_COMMIT)
  set(RCSWEEP_GIT_COMMIT "unknown")
elseif(RCSWEEP_GIT_DIRTY)
  set(RCSWEEP_GIT_COMMIT "${RCSWEEP_GIT_COMMIT}-dirty")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/version.hpp.in ${CMAKE_BINARY_DIR}/generated/rcsweep/version.hpp @ONLY)
