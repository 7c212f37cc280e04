# Text encoder (the Qwen3-VL conditioner): config, M-RoPE tables, weights/loader, and parity with transformers
# 5.24 on a tiny random model (fixtures made by tests/text_encoder/make_text_encoder_fixtures.py, committed;
# CI needs no torch). text_encoder_parity_gpu_test runs the same checks on CUDA.
set(VORTEX_TE_DIR "${CMAKE_SOURCE_DIR}/tests/text_encoder/fixtures")
vortex_test(NAME text_encoder_test SOURCES ${CMAKE_SOURCE_DIR}/tests/text_encoder/text_encoder_test.cpp
            LIBS vortex)
target_compile_definitions(text_encoder_test PRIVATE VORTEX_TE_FIXTURES="${VORTEX_TE_DIR}")
vortex_test(NAME text_encoder_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/text_encoder/text_encoder_parity_test.cpp
            LIBS vortex)
target_compile_definitions(text_encoder_parity_test PRIVATE VORTEX_TE_FIXTURES="${VORTEX_TE_DIR}"
                                                            VORTEX_TE_PARITY_BACKEND="cpu" VORTEX_TE_PARITY_PREFIX=Cpu)
vortex_test(NAME text_encoder_parity_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/text_encoder/text_encoder_parity_test.cpp
            LIBS vortex GPU)
target_compile_definitions(text_encoder_parity_gpu_test PRIVATE VORTEX_TE_FIXTURES="${VORTEX_TE_DIR}"
                                                                VORTEX_TE_PARITY_BACKEND="cuda" VORTEX_TE_PARITY_PREFIX=Cuda)
if(TARGET vortex_cli)
  vortex_test(NAME encode_text_cli_test SOURCES ${CMAKE_SOURCE_DIR}/tests/text_encoder/encode_text_cli_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(encode_text_cli_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                                                          VORTEX_TE_FIXTURES="${VORTEX_TE_DIR}")
  add_dependencies(encode_text_cli_test vortex_cli)
endif()
# text_encoder_bench (GPU): 500-token prefill of the 50-layer Qwen3-VL-32B conditioner on synthetic weights,
# compared with bench/text_encoder_transformers.py run in the same session.
if(TARGET vortex_cuda)
  add_executable(text_encoder_bench ${CMAKE_SOURCE_DIR}/bench/text_encoder_bench.cpp)
  target_link_libraries(text_encoder_bench PRIVATE vortex vortex_profiling nlohmann_json::nlohmann_json)
  target_compile_options(text_encoder_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# text_encoder_load_bench (GPU): conditioner load GB/s from local disk vs the disk's O_DIRECT read of the same file.
if(TARGET vortex_cuda)
  add_executable(text_encoder_load_bench ${CMAKE_SOURCE_DIR}/bench/text_encoder_load_bench.cpp)
  target_link_libraries(text_encoder_load_bench PRIVATE vortex vortex_profiling nlohmann_json::nlohmann_json)
  target_compile_options(text_encoder_load_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
