# Media writers (WAV, MP4 through FFmpeg's libraries), checked by reading the files back.
vortex_test(NAME media_test SOURCES ${CMAKE_SOURCE_DIR}/tests/media/media_test.cpp LIBS vortex_media)
# decode_to_mp4: the MP4 written while the fixture decoders decode (CPU backend).
vortex_test(NAME stream_mux_test SOURCES ${CMAKE_SOURCE_DIR}/tests/media/stream_mux_test.cpp
            LIBS vortex_engine vortex_vae vortex_media)
target_compile_definitions(stream_mux_test PRIVATE VORTEX_VAE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vae/fixtures")
# Keyframe images: decode, EXIF orientation, refusals and canvas placement against Pillow / diffusers
# (fixtures made by tests/media/make_image_fixtures.py and committed).
vortex_test(NAME image_test SOURCES ${CMAKE_SOURCE_DIR}/tests/media/image_test.cpp
            LIBS vortex_media nlohmann_json::nlohmann_json OpenSSL::Crypto)
target_compile_definitions(image_test PRIVATE VORTEX_IMAGE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/images")
# ref2va reference media: probes, limits, 24 fps frame selection, soundtrack resampling against diffusers and
# torchaudio (fixtures made by tests/media/make_reference_fixtures.py and committed).
vortex_test(NAME reference_media_test SOURCES ${CMAKE_SOURCE_DIR}/tests/media/reference_media_test.cpp
            LIBS vortex_media vortex_engine vortex_io nlohmann_json::nlohmann_json)
target_compile_definitions(reference_media_test
                           PRIVATE VORTEX_REFERENCE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/reference")
# The decode's frame conversion (f32 -> RGB8 -> I420) against video_to_rgb8 and a per-pixel BT.709 program; an MP4
# of converted frames decoded back with FFmpeg.
vortex_test(NAME decode_frames_test SOURCES ${CMAKE_SOURCE_DIR}/tests/media/decode_frames_test.cpp
            LIBS vortex_engine vortex_vae vortex_media)
