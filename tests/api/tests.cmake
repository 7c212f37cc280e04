# api: the public API (include/vortex/vortex.h) and the option table behind it and the CLI.
# api_test sees include/ alone and links libvortex.so by its file, as a program outside the repository would
# (VORTEX_PUBLIC_API_ONLY keeps the relinking below tests/CMakeLists.txt off it); it makes the tiny snapshot with
# the built `vortex synth`.
if(TARGET vortex_cli)
  add_executable(api_test ${CMAKE_SOURCE_DIR}/tests/api/api_test.cpp)
  add_dependencies(api_test vortex vortex_cli)
  target_include_directories(api_test PRIVATE ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(api_test PRIVATE $<TARGET_FILE:vortex> GTest::gtest GTest::gtest_main Threads::Threads)
  target_compile_options(api_test PRIVATE ${VORTEX_CXX_FLAGS})
  target_compile_definitions(api_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>")
  set_target_properties(api_test PROPERTIES VORTEX_PUBLIC_API_ONLY ON BUILD_RPATH ${CMAKE_BINARY_DIR}/bin)
  gtest_discover_tests(api_test DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 PROPERTIES LABELS cpu TIMEOUT 600)
endif()
# Request contract of the option table: every row's limits and field, in the CLI's and the API's spelling.
vortex_test(NAME request_flags_test SOURCES ${CMAKE_SOURCE_DIR}/tests/api/request_flags_test.cpp LIBS vortex_api)
