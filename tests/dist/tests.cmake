# dist: communicators (in-process world, rendezvous) and Ulysses sequence parallelism on the CPU backend.
vortex_test(NAME communicator_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/communicator_test.cpp LIBS vortex_dist)
vortex_test(NAME ulysses_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/ulysses_test.cpp)
# `vortex bench block` with rank threads: sp_* components on every rank, world=U, all-to-all bytes.
vortex_test(NAME bench_world_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/bench_world_test.cpp LIBS vortex_measure)
# Launcher (spawns shell children that succeed, fail, crash and hang).
vortex_test(NAME launcher_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/launcher_test.cpp LIBS vortex_dist)
if(VORTEX_HAVE_CUDA)
  # One GPU, U rank threads with their own CUDA backends (no NCCL): the GPU sequence-parallel program.
  vortex_test(NAME ulysses_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/ulysses_cuda_test.cpp GPU)
endif()
if(VORTEX_HAVE_NCCL)
  # One GPU: an NCCL world of size 1, Ulysses over it vs the plain CUDA path, GEMM row independence.
  vortex_test(NAME nccl_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/nccl_test.cpp GPU)
  vortex_test(NAME gemm_rows_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/gemm_rows_test.cpp LIBS vortex_measure GPU)
endif()
if(VORTEX_HAVE_NCCL)
  # Multi-GPU communication benchmark (bench/ulysses_scaling.py runs it).
  add_executable(ulysses_comm_bench ${CMAKE_SOURCE_DIR}/bench/ulysses_comm_bench.cpp)
  target_link_libraries(ulysses_comm_bench PRIVATE vortex_cuda vortex_dist)
  target_compile_options(ulysses_comm_bench PRIVATE ${VORTEX_CXX_FLAGS})
endif()
