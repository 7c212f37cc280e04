# engine: precision modes at load (CPU backend; tests/engine/precision_test.cpp) and the nvfp4 mode on the
# cuda backend, with the fused NVFP4 producers (GPU label, skips visibly without a device; tests/engine/nvfp4_mode_test.cpp).
vortex_test(NAME precision_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/precision_test.cpp LIBS vortex_engine)
# memory / FLOP estimates that refuse or warn about a request before weights are loaded.
vortex_test(NAME memory_estimate_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/memory_estimate_test.cpp LIBS vortex_engine)
# fused_nvfp4_producers: switch parsing, CPU backend unsupported, where the model takes the fused path (CPU).
vortex_test(NAME fused_producers_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/fused_producers_test.cpp LIBS vortex_engine)
if(TARGET vortex_cuda)
  vortex_test(NAME nvfp4_mode_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/nvfp4_mode_test.cpp
              LIBS vortex_engine GPU)
endif()
# nvfp4_deviation: per-op / per-block E2 deviation of the NVFP4 modes from the BF16 program
# (bench/nvfp4_deviation.cpp; run by scripts/gpu-check.sh --part deviation).
add_executable(nvfp4_deviation ${CMAKE_SOURCE_DIR}/bench/nvfp4_deviation.cpp)
target_link_libraries(nvfp4_deviation PRIVATE vortex_engine)
target_compile_options(nvfp4_deviation PRIVATE ${VORTEX_CXX_FLAGS})
