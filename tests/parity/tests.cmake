# Parity with diffusers 0.42.1 (fixtures made by tests/parity/make_diffusers_fixtures.py and committed;
# CI needs no torch): schedules and packing bit for bit, and the tiny model's blocks, velocities and
# 12-step trajectory on the CPU backend; diffusers_parity_gpu_test runs the same model checks on CUDA.
set(VORTEX_PARITY_DIR "${CMAKE_SOURCE_DIR}/tests/parity/fixtures")
vortex_test(NAME schedule_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/schedule_parity_test.cpp
            LIBS vortex_sampler nlohmann_json::nlohmann_json)
target_compile_definitions(schedule_parity_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}")
vortex_test(NAME packing_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/packing_parity_test.cpp
            LIBS vortex_model vortex_engine nlohmann_json::nlohmann_json)
target_compile_definitions(packing_parity_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}")
target_link_libraries(schedule_parity_test PRIVATE vortex_io)
vortex_test(NAME diffusers_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/diffusers_parity_test.cpp
            LIBS vortex nlohmann_json::nlohmann_json)
target_compile_definitions(diffusers_parity_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}"
                                                         VORTEX_PARITY_BACKEND="cpu" VORTEX_PARITY_PREFIX=Cpu)
vortex_test(NAME diffusers_parity_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/diffusers_parity_test.cpp
            LIBS vortex nlohmann_json::nlohmann_json GPU)
target_compile_definitions(diffusers_parity_gpu_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}"
                                                             VORTEX_PARITY_BACKEND="cuda" VORTEX_PARITY_PREFIX=Cuda)
# fl2va packing (tests/parity/make_fl2va_fixtures.py): keyframe rows, positions, tags, row timesteps, condition rows.
vortex_test(NAME fl2va_packing_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/fl2va_packing_parity_test.cpp
            LIBS vortex_model vortex_io vortex_engine nlohmann_json::nlohmann_json)
target_compile_definitions(fl2va_packing_parity_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}")
# ref2va packing (tests/parity/make_ref2va_fixtures.py): reference blocks, positions, tags, row timesteps.
vortex_test(NAME ref2va_packing_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/ref2va_packing_parity_test.cpp
            LIBS vortex_model vortex_io vortex_engine nlohmann_json::nlohmann_json)
target_compile_definitions(ref2va_packing_parity_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}")
# fl2va through the model (tests/parity/make_fl2va_model_fixtures.py): keyframe rows, velocities, 6-step latents.
vortex_test(NAME fl2va_model_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/fl2va_model_parity_test.cpp
            LIBS vortex nlohmann_json::nlohmann_json)
target_compile_definitions(fl2va_model_parity_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}"
                                                           VORTEX_PARITY_BACKEND="cpu" VORTEX_PARITY_PREFIX=Cpu)
vortex_test(NAME fl2va_model_parity_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/fl2va_model_parity_test.cpp
            LIBS vortex nlohmann_json::nlohmann_json GPU)
target_compile_definitions(fl2va_model_parity_gpu_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}"
                                                               VORTEX_PARITY_BACKEND="cuda" VORTEX_PARITY_PREFIX=Cuda)
# ref2va through the model (tests/parity/make_ref2va_model_fixtures.py): layout, row timesteps, reference rows,
# velocities, 6-step latents.
vortex_test(NAME ref2va_model_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/ref2va_model_parity_test.cpp
            LIBS vortex nlohmann_json::nlohmann_json)
target_compile_definitions(ref2va_model_parity_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}"
                                                            VORTEX_PARITY_BACKEND="cpu" VORTEX_PARITY_PREFIX=Cpu)
vortex_test(NAME ref2va_model_parity_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/parity/ref2va_model_parity_test.cpp
            LIBS vortex nlohmann_json::nlohmann_json GPU)
target_compile_definitions(ref2va_model_parity_gpu_test PRIVATE VORTEX_PARITY_FIXTURES="${VORTEX_PARITY_DIR}"
                                                                VORTEX_PARITY_BACKEND="cuda" VORTEX_PARITY_PREFIX=Cuda)
