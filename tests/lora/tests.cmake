# LoRA (src/lora, docs/lora.md): key styles and merge bytes against diffusers/PEFT fixtures
# (tests/lora/make_lora_fixtures.py, committed), run-time branch vs merge, bad files, generate end to end.
vortex_test(NAME lora_test SOURCES ${CMAKE_SOURCE_DIR}/tests/lora/lora_test.cpp LIBS vortex nlohmann_json::nlohmann_json OpenSSL::Crypto)
target_compile_definitions(lora_test PRIVATE VORTEX_LORA_FIXTURES="${CMAKE_SOURCE_DIR}/tests/lora/fixtures"
                                             VORTEX_PARITY_FIXTURES="${CMAKE_SOURCE_DIR}/tests/parity/fixtures")
# lora_merge_bench (GPU): a rank-128 adapter merged into the canonical model's 50 blocks on the device.
if(TARGET vortex_cuda)
  add_executable(lora_merge_bench ${CMAKE_SOURCE_DIR}/bench/lora_merge_bench.cpp)
  target_link_libraries(lora_merge_bench PRIVATE vortex vortex_profiling nlohmann_json::nlohmann_json)
  target_compile_options(lora_merge_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# lora_runtime_bench (GPU): the run-time branch's overhead on the four fused linears and one block, canonical shape.
if(TARGET vortex_cuda)
  add_executable(lora_runtime_bench ${CMAKE_SOURCE_DIR}/bench/lora_runtime_bench.cpp)
  target_link_libraries(lora_runtime_bench PRIVATE vortex_measure nlohmann_json::nlohmann_json)
  target_compile_options(lora_runtime_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
