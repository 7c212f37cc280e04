# NVFP4 on CUDA: the producer/instruction tests (label gpu), the device probes of the approximate instructions
# (tools/nvfp4_probes.cu, a test-only library), the probe tool (tools/approx_probe.cu -> nvfp4_approx_probe, run by
# scripts/nvfp4-probe.sh) and bench/nvfp4_bench.cpp
# (nvfp4_bench, picked up by scripts/gpu-check.sh's *_bench loop). Included from tests/cuda/tests.cmake.
if(TARGET vortex_cuda)
  add_library(vortex_nvfp4_probes STATIC ${CMAKE_SOURCE_DIR}/tools/nvfp4_probes.cu)
  target_include_directories(vortex_nvfp4_probes PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(vortex_nvfp4_probes PUBLIC vortex_cuda vortex_ref vortex_core)
  target_compile_options(vortex_nvfp4_probes PRIVATE ${VORTEX_CUDA_FLAGS})
  vortex_test(NAME nvfp4_cuda_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/nvfp4_quantize_test.cu
    LIBS vortex_nvfp4_probes vortex_cuda vortex_ref vortex_core
    GPU)
  add_executable(nvfp4_approx_probe ${CMAKE_SOURCE_DIR}/tools/approx_probe.cu)
  target_link_libraries(nvfp4_approx_probe PRIVATE vortex_nvfp4_probes vortex_cuda vortex_ref vortex_core)
  target_compile_options(nvfp4_approx_probe PRIVATE ${VORTEX_CUDA_FLAGS})
  add_executable(nvfp4_bench ${CMAKE_SOURCE_DIR}/bench/nvfp4_bench.cpp)
  target_link_libraries(nvfp4_bench PRIVATE vortex_measure)
  target_compile_options(nvfp4_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
