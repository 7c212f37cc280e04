# Media writers (WAV, MP4 through FFmpeg's libraries), checked by reading the files back.
vortex_test(NAME media_test SOURCES ${CMAKE_SOURCE_DIR}/tests/media/media_test.cpp LIBS vortex_media)
