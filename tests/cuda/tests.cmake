# CUDA component tests: device runtime and op validation (run without a GPU; device parts skip visibly) and the GPU op
# tests against the CPU reference (label gpu; each test skips with the reason when no device exists).
if(TARGET vortex_cuda)
  vortex_test(NAME cuda_device_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/device_test.cpp
    LIBS vortex_cuda)
  target_compile_definitions(cuda_device_test PRIVATE VORTEX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  vortex_test(NAME cuda_ops_validation_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/ops_validation_test.cpp
    LIBS vortex_cuda)
  vortex_test(NAME cuda_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/ops_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
  vortex_test(NAME cuda_lora_merge_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/lora_merge_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
  vortex_test(NAME cuda_text_encoder_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/text_encoder_ops_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
endif()

# ---- NVFP4 producers, instruction probe and benchmark (owned by the NVFP4 engineer) ----------------
include(${CMAKE_SOURCE_DIR}/tests/cuda/nvfp4_tests.cmake)
