# IO tests (CPU only): safetensors reader/writer/shards, H3 checkpoint layouts and loading.
vortex_test(NAME safetensors_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/safetensors_test.cpp LIBS vortex_io)
vortex_test(NAME checkpoint_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/checkpoint_test.cpp LIBS vortex_io)
# diffusers-layout and folder checkpoints, one-wrong-tensor messages.
vortex_test(NAME diffusers_checkpoint_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/diffusers_checkpoint_test.cpp
            LIBS vortex_io)
# Quantized checkpoints: ComfyUI nvfp4 / fp8_scaled layer reader, `vortex quantize` round trips.
vortex_test(NAME quantize_layers_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/quantize_layers_test.cpp LIBS vortex_io)
vortex_test(NAME quantize_roundtrip_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/quantize_roundtrip_test.cpp
            LIBS vortex_io vortex_ref)
# synthesize_weights on a real backend == `vortex synth` file loaded onto it (cpu here, cuda on a GPU).
vortex_test(NAME synth_backend_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/synth_backend_test.cpp LIBS vortex)
vortex_test(NAME synth_backend_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/synth_backend_test.cpp LIBS vortex GPU)
target_compile_definitions(synth_backend_gpu_test PRIVATE VORTEX_TEST_BACKEND_CUDA=1)
# Staging paths: the registry an interrupt empties, the sweep of dead processes' staging (io/staging.h).
vortex_test(NAME staging_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/staging_test.cpp LIBS vortex_io)
# Streaming from disk: direct reads (io/direct_reader.h), deferred checkpoint weights, disk-streamed trajectories.
vortex_test(NAME disk_stream_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/disk_stream_test.cpp LIBS vortex)
# The direct-read loader (io/direct_upload.h): bytes equal the mapping's, fallbacks named, per-tensor hooks and a cancel.
vortex_test(NAME direct_upload_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/direct_upload_test.cpp LIBS vortex)
# The output publish policy (io/publish.h): staged folders, foreign files kept, interrupts, links at the target.
vortex_test(NAME publish_test SOURCES ${CMAKE_SOURCE_DIR}/tests/io/publish_test.cpp LIBS vortex_io)
