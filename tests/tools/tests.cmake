# Evidence tooling (docs/evidence.md): the Python percentiles and row writer against hand-computed values, and two
# checks over the committed files: every timing row is in the one schema (tools/convert_evidence.py --check) and
# docs/results.md is what tools/results_md.py generates from them (fails, with a diff, when stale).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME evidence_py_test COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/tools/evidence_py_test.py)
add_test(NAME evidence_files_in_schema
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tools/convert_evidence.py --check ${CMAKE_SOURCE_DIR}/benchmarks)
add_test(NAME results_md_up_to_date
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tools/results_md.py --check --root ${CMAKE_SOURCE_DIR})
set_tests_properties(evidence_py_test evidence_files_in_schema results_md_up_to_date PROPERTIES LABELS cpu TIMEOUT 120)
# Every repository path a comment or doc cites ("Tested in tests/...", evidence files) exists.
add_test(NAME doc_paths_exist COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tools/check_doc_paths.py ${CMAKE_SOURCE_DIR})
add_test(NAME check_doc_paths_test COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/tools/check_doc_paths_test.py)
set_tests_properties(doc_paths_exist check_doc_paths_test PROPERTIES LABELS cpu TIMEOUT 120)
# scripts/gpu-check.sh exits non-zero when a GPU test fails or skips for want of a device (stand-in binaries).
add_test(NAME gpu_check_exit_code COMMAND bash ${CMAKE_SOURCE_DIR}/tests/tools/gpu_check_test.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_check_exit_code PROPERTIES LABELS cpu TIMEOUT 120)
# Layering (tools/check_layering.py): no include or CMake dependency runs up src/CMakeLists.txt's
# VORTEX_COMPONENT_ORDER, and docs/architecture.md's component table is the build's; the checker itself fails
# on violating trees written by its test.
add_test(NAME layering COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tools/check_layering.py --root ${CMAKE_SOURCE_DIR}
                          --doc ${CMAKE_SOURCE_DIR}/docs/architecture.md)
add_test(NAME check_layering_test COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/tools/check_layering_test.py)
set_tests_properties(layering check_layering_test PROPERTIES LABELS cpu TIMEOUT 120)
# Function length (tools/check_function_length.py): no function in src/engine is longer than 120 lines; the checker
# itself fails on long functions written by its test.
add_test(NAME function_length COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tools/check_function_length.py
                                  ${CMAKE_SOURCE_DIR}/src/engine)
add_test(NAME check_function_length_test
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/tools/check_function_length_test.py)
set_tests_properties(function_length check_function_length_test PROPERTIES LABELS cpu TIMEOUT 120)
