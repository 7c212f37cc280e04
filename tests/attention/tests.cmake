# Sage2 attention: CPU reference tests (cpu label) and the sm90 kernels vs the references (gpu label);
# bench/sage2_bench.cpp is built here too (it shares the test helpers).
vortex_test(NAME sage2_ref_test SOURCES ${CMAKE_SOURCE_DIR}/tests/attention/sage2_ref_test.cpp
            LIBS vortex_ref)
if(VORTEX_HAVE_CUDA AND TARGET vortex_cuda)
  vortex_test(NAME sage2_sm90_test SOURCES ${CMAKE_SOURCE_DIR}/tests/attention/sage2_sm90_test.cpp
              LIBS vortex_cuda vortex_ref GPU)
  vortex_test(NAME qk_norm_rope_sage2_test SOURCES ${CMAKE_SOURCE_DIR}/tests/attention/qk_norm_rope_sage2_test.cpp
              LIBS vortex_cuda vortex_ref GPU)
  add_executable(qk_norm_rope_sage2_bench ${CMAKE_SOURCE_DIR}/bench/qk_norm_rope_sage2_bench.cpp)
  target_link_libraries(qk_norm_rope_sage2_bench PRIVATE vortex_measure)
  target_include_directories(qk_norm_rope_sage2_bench PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_options(qk_norm_rope_sage2_bench PRIVATE ${VORTEX_CXX_FLAGS})
  add_executable(sage2_bench ${CMAKE_SOURCE_DIR}/bench/sage2_bench.cpp)
  target_link_libraries(sage2_bench PRIVATE vortex_measure)
  target_include_directories(sage2_bench PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_options(sage2_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# cuDNN SDPA baseline (part of the `cuda` component): two-reference rule vs FP64 attention (gpu label).
if(VORTEX_HAVE_CUDA AND TARGET vortex_cuda)
  vortex_test(NAME sdpa_test SOURCES ${CMAKE_SOURCE_DIR}/tests/attention/sdpa_test.cpp LIBS vortex_cuda GPU)
endif()
if(VORTEX_HAVE_CUDA AND TARGET vortex_cuda)
  add_executable(sdpa_bench ${CMAKE_SOURCE_DIR}/bench/sdpa_bench.cpp)
  target_link_libraries(sdpa_bench PRIVATE vortex_measure)
  target_compile_options(sdpa_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# Owned BF16 attention (sm_90a): two-reference rule and cuDNN on the same inputs (gpu label); its benchmark.
if(VORTEX_HAVE_CUDA AND TARGET vortex_cuda)
  vortex_test(NAME bf16_attention_test SOURCES ${CMAKE_SOURCE_DIR}/tests/attention/bf16_attention_test.cpp
              LIBS vortex_cuda vortex_ref GPU)
  add_executable(bf16_attention_bench ${CMAKE_SOURCE_DIR}/bench/bf16_attention_bench.cpp)
  target_link_libraries(bf16_attention_bench PRIVATE vortex_measure)
  target_compile_options(bf16_attention_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
