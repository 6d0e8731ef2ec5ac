include(GoogleTest)

# rcsweep_unit_test(NAME SOURCES... LIBS ...): a serial GoogleTest executable.
function(rcsweep_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main rcsweep_warnings)
  gtest_discover_tests(${name} TEST_PREFIX "${name}." DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
endfunction()

# rcsweep_mpi_test(NAME SOURCES... LIBS ... RANKS 1 2 3): one GoogleTest executable run under
# mpiexec at each rank count (oversubscribed: the machine may have fewer cores).
function(rcsweep_mpi_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;RANKS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/common/mpi_gtest_main.cpp)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} rcsweep_sweep GTest::gtest rcsweep_warnings)
  foreach(n IN LISTS ARG_RANKS)
    add_test(NAME ${name}.np${n}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} --oversubscribe
                     --allow-run-as-root $<TARGET_FILE:${name}>)
    set_tests_properties(${name}.np${n} PROPERTIES LABELS mpi TIMEOUT 300 PROCESSORS ${n})
  endforeach()
endfunction()
