# NVFP4 reference quantizer tests (owned by the NVFP4 engineer; included from tests/ref/tests.cmake).
vortex_test(NAME nvfp4_quantize_test SOURCES ${CMAKE_SOURCE_DIR}/tests/ref/nvfp4_quantize_test.cpp LIBS vortex_ref)
# ml_dtypes oracle: nvfp4_dump writes blocks + FP32 intermediates, tests/core/nvfp4_oracle.py recomputes them.
add_executable(nvfp4_dump ${CMAKE_SOURCE_DIR}/tests/ref/nvfp4_dump.cpp)
target_link_libraries(nvfp4_dump PRIVATE vortex_ref)
target_include_directories(nvfp4_dump PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_options(nvfp4_dump PRIVATE ${VORTEX_CXX_FLAGS})
add_test(NAME nvfp4_oracle
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/core/nvfp4_oracle.py --dump $<TARGET_FILE:nvfp4_dump>)
set_tests_properties(nvfp4_oracle PROPERTIES LABELS cpu TIMEOUT 600)
