# Run at every build (custom target vortex_build_info): writes generated/vortex/build_info.h with the
# current commit and dirty flag; configure_file only touches the file when its contents change.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE VORTEX_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT VORTEX_GIT_COMMIT)
  set(VORTEX_GIT_COMMIT "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE VORTEX_GIT_STATUS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(VORTEX_GIT_STATUS)
  set(VORTEX_GIT_DIRTY 1)
else()
  set(VORTEX_GIT_DIRTY 0)
endif()
configure_file(${SRC}/cmake/build_info.h.in ${OUT} @ONLY)
