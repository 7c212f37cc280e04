# Qwen3-VL image processor and vision tower against transformers 5.x (fixtures made by
# tests/vision/make_vision_fixtures.py and committed; CI needs no torch).
vortex_test(NAME vision_tower_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vision/vision_tower_test.cpp
            LIBS vortex_vision vortex_vae vortex_io vortex_ref nlohmann_json::nlohmann_json OpenSSL::Crypto)
target_compile_definitions(vision_tower_test PRIVATE VORTEX_VISION_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vision/fixtures")
# The fl2va presentation (tests/vision/make_presentation_fixtures.py) with the repository's Qwen tokenizer.
vortex_test(NAME presentation_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vision/presentation_test.cpp
            LIBS vortex_vision vortex_text vortex_engine nlohmann_json::nlohmann_json)
target_compile_definitions(presentation_test PRIVATE VORTEX_VISION_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vision/fixtures"
                                                     VORTEX_QWEN_TOKENIZER="${CMAKE_BINARY_DIR}/tests/text/qwen/qwen_tokenizer.json")
add_dependencies(presentation_test qwen_tokenizer_fixture)
# The conditioner with keyframes (tests/vision/make_conditioner_fixtures.py) on the text encoder tests' tiny model.
vortex_test(NAME conditioner_vision_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vision/conditioner_vision_test.cpp
            LIBS vortex)
target_compile_definitions(conditioner_vision_test PRIVATE VORTEX_VISION_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vision/fixtures"
                                                           VORTEX_TE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/text_encoder/fixtures")
# The vision tower's BF16 program on the CUDA backend (label gpu; skips without a device).
if(TARGET vortex_cuda)
  vortex_test(NAME vision_tower_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vision/vision_tower_cuda_test.cpp
              LIBS vortex_vision vortex_vae vortex_io vortex_cuda vortex_ref vortex_text_encoder nlohmann_json::nlohmann_json
                   GPU)
  target_compile_definitions(vision_tower_cuda_test PRIVATE VORTEX_VISION_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vision/fixtures"
                                                            VORTEX_TE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/text_encoder/fixtures")
endif()
# The ref2va presentation (tests/vision/make_ref2va_presentation_fixtures.py) with the repository's Qwen tokenizer.
vortex_test(NAME ref2va_presentation_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vision/ref2va_presentation_test.cpp
            LIBS vortex_vision vortex_text vortex_engine nlohmann_json::nlohmann_json)
target_compile_definitions(ref2va_presentation_test PRIVATE VORTEX_VISION_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vision/fixtures"
                                                            VORTEX_QWEN_TOKENIZER="${CMAKE_BINARY_DIR}/tests/text/qwen/qwen_tokenizer.json")
add_dependencies(ref2va_presentation_test qwen_tokenizer_fixture)
# Video frame pairs and a ref2va presentation's hidden states (tests/vision/make_ref2va_vision_fixtures.py) on the
# text encoder tests' tiny model.
vortex_test(NAME ref2va_vision_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vision/ref2va_vision_test.cpp LIBS vortex)
target_compile_definitions(ref2va_vision_test PRIVATE VORTEX_VISION_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vision/fixtures"
                                                      VORTEX_TE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/text_encoder/fixtures")
# The video frame pairs through the vision tower on the CUDA backend (label gpu; skips without a device).
if(TARGET vortex_cuda)
  vortex_test(NAME ref2va_vision_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vision/ref2va_vision_cuda_test.cpp
              LIBS vortex_vision vortex_vae vortex_io vortex_cuda GPU)
  target_compile_definitions(ref2va_vision_cuda_test PRIVATE VORTEX_VISION_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vision/fixtures"
                                                             VORTEX_TE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/text_encoder/fixtures")
endif()
# bench/fl2va_e2e.sh --tiny: the canonical fl2va script's CPU mode end to end (the tiny snapshot, both keyframes through
# the image processor, the vision tower and the keyframe VAE encoder); passes when it prints keyframe condition rows.
if(TARGET vortex_cli)
  add_test(NAME fl2va_e2e_script_tiny
           COMMAND ${CMAKE_COMMAND} -E env OUT=${CMAKE_BINARY_DIR}/tests/fl2va_e2e_tiny
                   bash ${CMAKE_SOURCE_DIR}/bench/fl2va_e2e.sh --tiny --vortex $<TARGET_FILE:vortex_cli>)
  set_tests_properties(fl2va_e2e_script_tiny PROPERTIES TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "packed rows \\([1-9][0-9]* keyframe condition rows\\)")
endif()
