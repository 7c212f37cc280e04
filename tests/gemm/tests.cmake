# gemm: host FP8 reference + pinned table (CPU), and the cuBLASLt engine / quantizers / tune (GPU).
if(VORTEX_HAVE_CUDA)
  vortex_test(NAME fp8_reference_test SOURCES ${CMAKE_SOURCE_DIR}/tests/gemm/fp8_reference_test.cpp
              LIBS vortex_gemm)
  target_compile_definitions(fp8_reference_test PRIVATE VORTEX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  vortex_test(NAME gemm_test SOURCES ${CMAKE_SOURCE_DIR}/tests/gemm/gemm_test.cpp LIBS vortex_measure GPU)
  vortex_test(NAME gemm_tune_test SOURCES ${CMAKE_SOURCE_DIR}/tests/gemm/gemm_tune_test.cpp
              LIBS vortex_measure GPU)
  vortex_test(NAME nvfp4_gemm_test SOURCES ${CMAKE_SOURCE_DIR}/tests/gemm/nvfp4_gemm_test.cpp
              LIBS vortex_measure GPU)
endif()
# NVFP4 dequantization reference (CPU): exactness of e2m1 * e4m3 in BF16, layout, weight-only expansion.
vortex_test(NAME nvfp4_dequant_test SOURCES ${CMAKE_SOURCE_DIR}/tests/gemm/nvfp4_dequant_test.cpp
            LIBS vortex_ref vortex_io)
# gemm_bench: gemm-tune / bench_gemm without the CLI (bench/gemm_bench.cpp).
if(VORTEX_HAVE_CUDA)
  add_executable(gemm_bench ${CMAKE_SOURCE_DIR}/bench/gemm_bench.cpp)
  target_link_libraries(gemm_bench PRIVATE vortex_measure)
  target_compile_options(gemm_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# fp8_gemm_bench: the block's FP8 GEMMs with quantization, every cuBLASLt config per shape, pins (bench/).
if(VORTEX_HAVE_CUDA)
  add_executable(fp8_gemm_bench ${CMAKE_SOURCE_DIR}/bench/fp8_gemm_bench.cpp)
  target_link_libraries(fp8_gemm_bench PRIVATE vortex_measure)
  target_compile_options(fp8_gemm_bench PRIVATE ${VORTEX_CXX_FLAGS})
  target_compile_definitions(fp8_gemm_bench PRIVATE VORTEX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
endif()
