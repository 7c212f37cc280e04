# CPU reference ops, the CPU backend and the backend registry.
vortex_test(NAME ref_ops_test
  SOURCES
    ${CMAKE_SOURCE_DIR}/tests/ref/linear_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/rms_norm_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/rms_norm_two_rounding_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/modulate_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/qk_norm_rope_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/qk_norm_rope_sage2_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/head_norm_rope_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/attention_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/causal_attention_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/swiglu_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/cast_test.cpp
    ${CMAKE_SOURCE_DIR}/tests/ref/two_reference_test.cpp
  LIBS vortex_ref)
vortex_test(NAME vae_ops_test SOURCES ${CMAKE_SOURCE_DIR}/tests/ref/vae_ops_test.cpp LIBS vortex_ref)
vortex_test(NAME ref_audio_decoder_ops_test SOURCES ${CMAKE_SOURCE_DIR}/tests/ref/audio_decoder_ops_test.cpp LIBS vortex_ref)
vortex_test(NAME audio_encoder_ops_test SOURCES ${CMAKE_SOURCE_DIR}/tests/ref/audio_encoder_ops_test.cpp LIBS vortex_ref)
vortex_test(NAME ref_cpu_backend_test
  SOURCES ${CMAKE_SOURCE_DIR}/tests/ref/cpu_backend_test.cpp
  LIBS vortex_ref)
vortex_test(NAME backend_registry_test
  SOURCES ${CMAKE_SOURCE_DIR}/tests/ref/backend_registry_test.cpp
  LIBS vortex_engine)

# ---- NVFP4 reference quantizer (owned by the NVFP4 engineer) ---------------------------------------
include(${CMAKE_SOURCE_DIR}/tests/ref/nvfp4_tests.cmake)
