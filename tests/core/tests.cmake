# Core tests: status, tensor views, dtype conversions (+ ml_dtypes oracle), RNG, synthetic fills.
vortex_test(NAME status_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/status_test.cpp LIBS vortex_core)
vortex_test(NAME tensor_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/tensor_test.cpp LIBS vortex_core)
vortex_test(NAME dtype_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/dtype_test.cpp LIBS vortex_core)
vortex_test(NAME strings_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/strings_test.cpp LIBS vortex_core)
vortex_test(NAME rng_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/rng_test.cpp LIBS vortex_core)
vortex_test(NAME synthetic_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/synthetic_test.cpp LIBS vortex_core)
vortex_test(NAME config_json_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/config_json_test.cpp LIBS vortex_core)
vortex_test(NAME evidence_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/evidence_test.cpp LIBS vortex_profiling)

# Oracle: dtype_dump writes our conversions of a fixed input set; dtype_oracle.py recomputes them
# with ml_dtypes and compares byte for byte (non-zero exit and the first mismatches on failure).
add_executable(dtype_dump ${CMAKE_SOURCE_DIR}/tests/core/dtype_dump.cpp)
target_link_libraries(dtype_dump PRIVATE vortex_core)
target_compile_options(dtype_dump PRIVATE ${VORTEX_CXX_FLAGS})
add_test(NAME dtype_oracle
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/core/dtype_oracle.py --dump $<TARGET_FILE:dtype_dump>)
set_tests_properties(dtype_oracle PROPERTIES LABELS cpu TIMEOUT 600)

# GPU: host conversions vs the cvt instructions they name (all 2^32 FP32 inputs) and device Philox.
if(VORTEX_HAVE_CUDA)
  vortex_test(NAME dtype_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/core/dtype_cuda_test.cu
              LIBS vortex_core CUDA::cudart GPU)
endif()
