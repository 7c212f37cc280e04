# Explicit source lists, one include per component. Each component owns its sources.cmake.
set(VORTEX_SOURCES)
set(VORTEX_CUDA_SOURCES)
set(VORTEX_CUDA_LIBS)
foreach(component core io model ref sampler profiling cuda gemm)
  if(EXISTS ${CMAKE_SOURCE_DIR}/src/${component}/sources.cmake)
    include(${CMAKE_SOURCE_DIR}/src/${component}/sources.cmake)
  endif()
endforeach()
