# `cmake --install build --prefix P`: what a site installs (docs/INSTALL.md).
#   P/bin                      rcsweep; rcsweep-plot, rcsweep-summary, rcsweep-recompute, rcsweep-export, rcsweep-ls (Python);
#                              rcsweep-reproduce
#   P/lib/rcsweep/python       the Python package rcsweep_tools (the commands find it there; the
#                              module file puts it on PYTHONPATH)
#   P/share/rcsweep/jobs       Slurm and PBS job scripts, example sweeps (jobs/examples)
#   P/share/rcsweep/python     the package's source with pyproject.toml, for `pip install`
#   P/share/doc/rcsweep        README.md and docs/
#   P/share/man/man1           man pages generated from --help (help2man, when found)
#   P/share/modulefiles        an Lmod module file, rcsweep/<version>.lua
include(GNUInstallDirs)

install(TARGETS rcsweep RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/rcsweep-plot DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/rcsweep_summary.py DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME rcsweep-summary)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/rcsweep_recompute.py DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME rcsweep-recompute)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/rcsweep_export.py DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME rcsweep-export)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/rcsweep_ls.py DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME rcsweep-ls)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/reproduce.sh DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME rcsweep-reproduce)

set(python_files_pattern PATTERN "__pycache__" EXCLUDE PATTERN "*.egg-info" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scripts/rcsweep_tools DESTINATION lib/rcsweep/python ${python_files_pattern})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scripts/rcsweep_tools DESTINATION ${CMAKE_INSTALL_DATADIR}/rcsweep/python
        ${python_files_pattern})
install(FILES ${PROJECT_SOURCE_DIR}/scripts/pyproject.toml DESTINATION ${CMAKE_INSTALL_DATADIR}/rcsweep/python)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/jobs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/rcsweep/jobs USE_SOURCE_PERMISSIONS)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# The module file finds its prefix from its own path, so an installed tree may be moved.
configure_file(${PROJECT_SOURCE_DIR}/cmake/rcsweep.lua.in ${CMAKE_BINARY_DIR}/modulefiles/rcsweep/${PROJECT_VERSION}.lua
               @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/modulefiles/rcsweep/${PROJECT_VERSION}.lua
        DESTINATION ${CMAKE_INSTALL_DATADIR}/modulefiles/rcsweep)

# Man pages from --help of the built commands (help2man: a Debian package, installed by
# scripts/install_deps.sh). Without it the build goes on and installs no man pages.
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(man_dir ${CMAKE_BINARY_DIR}/man)
  set(man_pages)
  # page|command|help option|one-line description
  set(pages
      "rcsweep|$<TARGET_FILE:rcsweep>|--help|sweeps of rank collapse in random attention and state-space stacks"
      "rcsweep-run|$<TARGET_FILE:rcsweep>|run --help|run a sweep into an HDF5 store"
      "rcsweep-plan|$<TARGET_FILE:rcsweep>|plan --help|show what a sweep would compute, its cost and memory"
      "rcsweep-info|$<TARGET_FILE:rcsweep>|info --help|show what an rcsweep store holds"
      "rcsweep-merge|$<TARGET_FILE:rcsweep>|merge --help|join the stores of an array job"
      "rcsweep-calibrate|$<TARGET_FILE:rcsweep>|calibrate --help|measure this machine's rates for time estimates"
      "rcsweep-export|${PROJECT_SOURCE_DIR}/scripts/rcsweep_export.py|--help|write a store as csv, netcdf or parquet"
      "rcsweep-ls|${PROJECT_SOURCE_DIR}/scripts/rcsweep_ls.py|--help|list the stores under folders, filtered by parameter values"
      "rcsweep-plot|${PROJECT_SOURCE_DIR}/scripts/rcsweep-plot|--help|draw the seed papers' figures or any metric from a store"
      "rcsweep-summary|${PROJECT_SOURCE_DIR}/scripts/rcsweep_summary.py|--help|summarise a store as a table and a plot"
      "rcsweep-recompute|${PROJECT_SOURCE_DIR}/scripts/rcsweep_recompute.py|--help|recompute a weights dump with NumPy and check the store")
  foreach(page IN LISTS pages)
    string(REPLACE "|" ";" parts "${page}")
    list(GET parts 0 name)
    list(GET parts 1 command)
    list(GET parts 2 help_option)
    list(GET parts 3 description)
    add_custom_command(
      OUTPUT ${man_dir}/${name}.1
      COMMAND ${CMAKE_COMMAND} -E make_directory ${man_dir}
      COMMAND ${CMAKE_COMMAND} -E env MPLBACKEND=Agg ${HELP2MAN} --no-info --no-discard-stderr
              "--help-option=${help_option}" "--version-string=${PROJECT_VERSION}" "--name=${description}"
              "--output=${man_dir}/${name}.1" ${command}
      COMMAND ${CMAKE_COMMAND} -DPAGE=${man_dir}/${name}.1 -DNAME=${name} -P ${CMAKE_CURRENT_LIST_DIR}/ManPageName.cmake
      DEPENDS rcsweep ${PROJECT_SOURCE_DIR}/scripts/rcsweep_tools/plot_cli.py ${CMAKE_CURRENT_LIST_DIR}/ManPageName.cmake
      COMMENT "man page ${name}.1"
      VERBATIM)
    list(APPEND man_pages ${man_dir}/${name}.1)
  endforeach()
  add_custom_target(man_pages ALL DEPENDS ${man_pages})
  install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man pages (scripts/install_deps.sh installs it)")
endif()
