# engine: precision modes at load (CPU backend; tests/engine/precision_test.cpp) and the nvfp4 mode on the
# cuda backend, with the fused NVFP4 producers (GPU label, skips visibly without a device; tests/engine/nvfp4_mode_test.cpp).
vortex_test(NAME precision_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/precision_test.cpp LIBS vortex_engine)
# The canvas of an fl2va request without width and height (keyframe_canvas), against diffusers' resolve_canvas_size.
vortex_test(NAME keyframe_canvas_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/keyframe_canvas_test.cpp LIBS vortex_engine)
target_compile_definitions(keyframe_canvas_test PRIVATE
                           VORTEX_IMAGE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/images")
# Overlapped loading: weights arriving per block from a loader thread, the same latents as the sequential order,
# errors and thread lifetime, generate on a ComfyUI checkpoint and on the tiny snapshot (tests/engine/load_overlap_test.cpp).
vortex_test(NAME load_overlap_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/load_overlap_test.cpp LIBS vortex)
target_compile_definitions(load_overlap_test PRIVATE VORTEX_LORA_FIXTURES="${CMAKE_SOURCE_DIR}/tests/lora/fixtures"
                                                    VORTEX_PARITY_FIXTURES="${CMAKE_SOURCE_DIR}/tests/parity/fixtures")
# The residency plan: component sizes, places, the --max-vram check before loading, option checks.
vortex_test(NAME residency_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/residency_test.cpp LIBS vortex_engine)
# memory / FLOP estimates that refuse or warn about a request before weights are loaded.
vortex_test(NAME memory_estimate_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/memory_estimate_test.cpp LIBS vortex_engine)
# fused_nvfp4_producers: switch parsing, CPU backend unsupported, where the model takes the fused path (CPU).
vortex_test(NAME fused_producers_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/fused_producers_test.cpp LIBS vortex_engine)
if(TARGET vortex_cuda)
  vortex_test(NAME nvfp4_mode_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/nvfp4_mode_test.cpp
              LIBS vortex_measure GPU)
  # Device quantization at load vs the host quantizers (E0), and AdaLN tables ahead with the projections in host
  # memory vs the per-step path (latent bytes), on the cuda backend.
  vortex_test(NAME device_residency_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/device_residency_test.cpp
              LIBS vortex_engine GPU)
endif()
# nvfp4_deviation: per-op / per-block E2 deviation of the NVFP4 modes from the BF16 program
# (bench/nvfp4_deviation.cpp; run by scripts/gpu-check.sh --part deviation).
add_executable(nvfp4_deviation ${CMAKE_SOURCE_DIR}/bench/nvfp4_deviation.cpp)
target_link_libraries(nvfp4_deviation PRIVATE vortex_measure)
target_compile_options(nvfp4_deviation PRIVATE ${VORTEX_CXX_FLAGS})
# The model folder as one argument and the prompt path: layout detection (model_folder_test), the t2va prompt
# presentation against diffusers with the conditioner cache on a Pipeline (prompt_encoder_test; fixtures made by
# tests/engine/make_prompt_fixtures.py), and the CLI on a tiny synthetic snapshot (model_folder_cli_test).
vortex_test(NAME model_folder_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/model_folder_test.cpp LIBS vortex)
# ref2va request checks and run.json's reference record on the committed reference media (engine/references.h).
vortex_test(NAME references_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/references_test.cpp LIBS vortex)
target_compile_definitions(references_test
                           PRIVATE VORTEX_REFERENCE_MEDIA="${CMAKE_SOURCE_DIR}/tests/media/fixtures/reference/media"
                                   VORTEX_IMAGE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/images")
# Every config file of the MiniMax-H3 release (tests/fixtures/release, verbatim) through every config reader.
vortex_test(NAME release_configs_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/release_configs_test.cpp
            LIBS vortex OpenSSL::Crypto)
target_compile_definitions(release_configs_test PRIVATE
                           VORTEX_RELEASE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures/release")
vortex_test(NAME prompt_encoder_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/prompt_encoder_test.cpp LIBS vortex)
target_compile_definitions(prompt_encoder_test PRIVATE VORTEX_ENGINE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/engine/fixtures"
                                                       VORTEX_TEXT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/text/fixtures")
if(TARGET vortex_cli)
  vortex_test(NAME model_folder_cli_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/model_folder_cli_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(model_folder_cli_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                                                           VORTEX_TEXT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/text/fixtures"
                                                           VORTEX_VAE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vae/fixtures")
  add_dependencies(model_folder_cli_test vortex_cli)
endif()
# The request contract: every field's limits and error field in the CLI and JSON dialects, the planner's refusals,
# the plan's bytes for serve followers (src/engine/request.h, planner.h, plan_codec.h).
vortex_test(NAME request_contract_test SOURCES ${CMAKE_SOURCE_DIR}/tests/engine/request_contract_test.cpp
            LIBS vortex_serve)
