# vortex_component(name SOURCES a.cpp ... [CUDA_SOURCES k.cu ...] [DEPS vortex_core ...] [LIBS ...])
# One static library per component (src/<name>/CMakeLists.txt), position-independent: src/CMakeLists.txt
# joins them whole into the shared libvortex.so that the CLI, tests and benchmarks link (one copy of the
# kernels for every executable). CUDA_SOURCES are compiled only when the CUDA backend is enabled.
# The CUDA runtime is the shared libcudart, so that libvortex.so and executables calling the runtime
# directly (GPU tests) share one runtime.
function(vortex_component name)
  cmake_parse_arguments(VC "" "" "SOURCES;CUDA_SOURCES;DEPS;LIBS;CUDA_LIBS" ${ARGN})
  set(srcs ${VC_SOURCES})
  if(VORTEX_HAVE_CUDA)
    list(APPEND srcs ${VC_CUDA_SOURCES})
  endif()
  add_library(vortex_${name} STATIC ${srcs})
  # Each component exports only its own headers: build/exports/<name>/<name> is a link to src/<name>, so
  # "<name>/x.h" resolves for the component and for whatever links it, and another component's headers only
  # through DEPS (tools/check_layering.py checks that DEPS and includes follow VORTEX_COMPONENT_ORDER).
  set(export_dir ${CMAKE_BINARY_DIR}/exports/${name})
  file(MAKE_DIRECTORY ${export_dir})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${export_dir}/${name} SYMBOLIC)
  target_include_directories(vortex_${name} PUBLIC ${CMAKE_SOURCE_DIR}/include ${export_dir}
                                                   ${CMAKE_BINARY_DIR}/generated)
  target_compile_options(vortex_${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${VORTEX_CXX_FLAGS}>
                                                $<$<COMPILE_LANGUAGE:CUDA>:${VORTEX_CUDA_FLAGS}>)
  list(TRANSFORM VC_CUDA_LIBS REPLACE "^CUDA::cudart_static$" "CUDA::cudart")
  target_link_libraries(vortex_${name} PUBLIC ${VC_DEPS} ${VC_LIBS})
  set_property(GLOBAL APPEND PROPERTY VORTEX_THIRD_PARTY_LIBS ${VC_LIBS})
  if(VORTEX_HAVE_CUDA)
    target_link_libraries(vortex_${name} PUBLIC ${VC_CUDA_LIBS})
    set_property(GLOBAL APPEND PROPERTY VORTEX_THIRD_PARTY_LIBS ${VC_CUDA_LIBS})
    target_compile_definitions(vortex_${name} PUBLIC VORTEX_WITH_CUDA=1)
  endif()
  add_dependencies(vortex_${name} vortex_build_info)
  set_property(GLOBAL APPEND PROPERTY VORTEX_COMPONENTS vortex_${name})
endfunction()
