# VAE decoders: parity with diffusers 0.42.1 (fixtures made by tests/vae/make_vae_fixtures.py and committed;
# CI needs no torch), loaders and their errors, synthetic weights.
set(VORTEX_VAE_FIXTURE_DIR "${CMAKE_SOURCE_DIR}/tests/vae/fixtures")
vortex_test(NAME vae_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/vae_parity_test.cpp
            LIBS vortex_vae vortex_engine)
target_compile_definitions(vae_parity_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
vortex_test(NAME video_stitch_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/video_stitch_test.cpp
            LIBS vortex_vae vortex_engine)
target_compile_definitions(video_stitch_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
vortex_test(NAME vae_loader_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/vae_loader_test.cpp
            LIBS vortex_vae vortex_engine)
target_compile_definitions(vae_loader_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
if(TARGET vortex_cli)
  vortex_test(NAME cli_decode_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_decode_test.cpp
              LIBS vortex_vae vortex_media vortex_engine nlohmann_json::nlohmann_json OpenSSL::Crypto PNG::PNG)
  target_compile_definitions(cli_decode_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                                                     VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
  add_dependencies(cli_decode_test vortex_cli)
endif()
# The same fixtures decoded on the CUDA backend (label gpu; skips without a device).
if(TARGET vortex_cuda)
  vortex_test(NAME vae_cuda_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/vae_cuda_parity_test.cpp
              LIBS vortex_vae vortex_engine GPU)
  target_compile_definitions(vae_cuda_parity_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
endif()
# vae_decode_bench: the canonical decode on the CUDA backend with synthetic weights (bench/vae_decode_bench.cpp).
if(TARGET vortex_cuda)
  add_executable(vae_decode_bench ${CMAKE_SOURCE_DIR}/bench/vae_decode_bench.cpp)
  target_link_libraries(vae_decode_bench PRIVATE vortex_vae vortex_engine vortex_media vortex_profiling)
  target_compile_options(vae_decode_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# audio_decode_bench: the canonical audio decode on the CUDA backend, its op breakdown and conv1d layers
# (bench/audio_decode_bench.cpp).
if(TARGET vortex_cuda)
  add_executable(audio_decode_bench ${CMAKE_SOURCE_DIR}/bench/audio_decode_bench.cpp)
  target_link_libraries(audio_decode_bench PRIVATE vortex_vae vortex_cuda vortex_profiling)
  target_compile_options(audio_decode_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# decode_mux_bench: decode + streamed mux to video.mp4 per H.264 encoder against the video decode alone, on the
# cuda or cpu backend (bench/decode_mux_bench.cpp, run by bench/decode_mux_bench.sh).
add_executable(decode_mux_bench ${CMAKE_SOURCE_DIR}/bench/decode_mux_bench.cpp)
target_link_libraries(decode_mux_bench PRIVATE vortex_vae vortex_engine vortex_media vortex_profiling)
target_compile_options(decode_mux_bench PRIVATE ${VORTEX_CXX_FLAGS})
# The video VAE encoder (fl2va keyframes) against diffusers (tests/vae/make_vae_encoder_fixtures.py).
vortex_test(NAME video_vae_encoder_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/video_vae_encoder_test.cpp
            LIBS vortex_vae vortex_ref nlohmann_json::nlohmann_json OpenSSL::Crypto)
target_compile_definitions(video_vae_encoder_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
# The video VAE encoder on the CUDA backend against the same fixtures (label gpu; skips without a device).
if(TARGET vortex_cuda)
  vortex_test(NAME video_vae_encoder_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/video_vae_encoder_cuda_test.cpp
              LIBS vortex_vae vortex_cuda nlohmann_json::nlohmann_json GPU)
  target_compile_definitions(video_vae_encoder_cuda_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
endif()
# fl2va_encoders_bench: the vision tower and the VAE encoder on two 1344x768 keyframes, synthetic released-shape
# weights (bench/fl2va_encoders_bench.cpp; peers in bench/fl2va_encoders_peer.py).
if(TARGET vortex_cuda)
  add_executable(fl2va_encoders_bench ${CMAKE_SOURCE_DIR}/bench/fl2va_encoders_bench.cpp)
  target_link_libraries(fl2va_encoders_bench PRIVATE vortex_vision vortex_vae vortex_text_encoder vortex_cuda vortex_profiling)
  target_compile_options(fl2va_encoders_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# The audio VAE encoder (Ref2VA soundtracks) against diffusers (tests/vae/make_audio_encoder_fixtures.py).
vortex_test(NAME audio_vae_encoder_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/audio_vae_encoder_test.cpp
            LIBS vortex_vae vortex_engine nlohmann_json::nlohmann_json)
target_compile_definitions(audio_vae_encoder_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}"
                                                          VORTEX_RELEASE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures/release")
# The audio VAE encoder on the CUDA backend against diffusers and the CPU reference (label gpu; skips without a device).
if(TARGET vortex_cuda)
  vortex_test(NAME audio_vae_encoder_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/audio_vae_encoder_cuda_test.cpp
              LIBS vortex_vae vortex_cuda GPU)
  target_compile_definitions(audio_vae_encoder_cuda_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
endif()
# ref2va_encoders_bench: the ref2va reference encoders (vision tower on images and video pairs, video VAE encoder,
# audio VAE encoder) on raw decoded references (bench/ref2va_encoders_bench.cpp; peers in
# bench/ref2va_encoders_peer.py), on any backend; its smoke test runs it on the cpu backend with the tiny configs.
add_executable(ref2va_encoders_bench ${CMAKE_SOURCE_DIR}/bench/ref2va_encoders_bench.cpp)
target_link_libraries(ref2va_encoders_bench PRIVATE vortex_engine vortex_profiling nlohmann_json::nlohmann_json)
target_compile_options(ref2va_encoders_bench PRIVATE ${VORTEX_CXX_FLAGS})
vortex_test(NAME ref2va_encoders_bench_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/ref2va_encoders_bench_test.cpp
            LIBS nlohmann_json::nlohmann_json)
add_dependencies(ref2va_encoders_bench_test ref2va_encoders_bench)
target_compile_definitions(ref2va_encoders_bench_test PRIVATE
                           VORTEX_REF2VA_BENCH="$<TARGET_FILE:ref2va_encoders_bench>"
                           VORTEX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
