# CUDA component tests: device runtime and op validation (run without a GPU; device parts skip visibly) and the GPU op
# tests against the CPU reference (label gpu; each test skips with the reason when no device exists).
if(TARGET vortex_cuda)
  vortex_test(NAME cuda_device_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/device_test.cpp
    LIBS vortex_cuda)
  target_compile_definitions(cuda_device_test PRIVATE VORTEX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  vortex_test(NAME cuda_ops_validation_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/ops_validation_test.cpp
    LIBS vortex_cuda)
  vortex_test(NAME cuda_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/ops_test.cpp
    LIBS vortex_measure
    GPU)
  # The fp8_gate_epilogue op (gated residual in the FP8 GEMM epilogue) vs FP64 and vs linear + gate_add.
  vortex_test(NAME cuda_gate_epilogue_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/gate_epilogue_test.cpp
    LIBS vortex_cuda vortex_gemm vortex_core
    GPU)
  vortex_test(NAME cuda_lora_merge_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/lora_merge_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
  # The run-time LoRA branch (CudaBackend::linear_lora) vs ref::linear_lora and the merged path (E1).
  vortex_test(NAME cuda_lora_linear_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/lora_linear_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
  vortex_test(NAME cuda_text_encoder_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/text_encoder_ops_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
  # The vision tower's device preparation (src/cuda/ops/vision_prep.h, LayerNorm of BF16 rows) vs the CPU programs.
  vortex_test(NAME cuda_vision_prep_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/vision_prep_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
endif()

# ---- NVFP4 producers, instruction probe and benchmark (owned by the NVFP4 engineer) ----------------
include(${CMAKE_SOURCE_DIR}/tests/cuda/nvfp4_tests.cmake)

# ---- VAE decoder kernels vs the CPU reference (src/cuda/ops/vae_ops.h) -----------------------------
if(TARGET vortex_cuda)
  vortex_test(NAME cuda_vae_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/vae_ops_test.cpp
    LIBS vortex_cuda vortex_ref vortex_vae vortex_core
    GPU)
  vortex_test(NAME cuda_audio_decoder_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/audio_decoder_ops_test.cpp
    LIBS vortex_cuda vortex_ref vortex_vae vortex_core
    GPU)
endif()
# The video VAE clip stitch kernel vs its CPU program (src/cuda/ops/video_stitch.h, E0).
if(TARGET vortex_cuda)
  vortex_test(NAME cuda_video_stitch_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/video_stitch_op_test.cpp
    LIBS vortex_cuda vortex_ref vortex_vae vortex_core
    GPU)
endif()
# ---- vision tower and video VAE encoder kernels vs the CPU programs (src/cuda/ops/encoder_ops.h) ---------------
if(TARGET vortex_cuda)
  vortex_test(NAME cuda_encoder_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/encoder_ops_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
endif()
# Step graphs (ExecOptions::cuda_graph): capture / replay on the backend, and h3-tiny's captured steps E0 vs eager.
if(TARGET vortex_cuda)
  vortex_test(NAME cuda_step_graph_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/step_graph_test.cpp
    LIBS vortex_engine
    GPU)
endif()
# step_graph_bench (GPU): one H3 denoiser step at 512x512 x 22 frames, eager vs the replayed CUDA graph,
# with the GPU idle fraction of each (bench/step_graph_bench.cpp).
if(TARGET vortex_cuda)
  add_executable(step_graph_bench ${CMAKE_SOURCE_DIR}/bench/step_graph_bench.cpp)
  target_link_libraries(step_graph_bench PRIVATE vortex_measure nlohmann_json::nlohmann_json)
  target_compile_options(step_graph_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
# ---- audio VAE encoder kernels vs the CPU programs (src/cuda/ops/audio_encoder_ops.h) ---------------
if(TARGET vortex_cuda)
  vortex_test(NAME cuda_audio_encoder_ops_test
    SOURCES ${CMAKE_SOURCE_DIR}/tests/cuda/audio_encoder_ops_test.cpp
    LIBS vortex_cuda vortex_ref vortex_core
    GPU)
endif()
