# Text tests (CPU only): UTF-8 validation, the tokenizer against HF tokenizers + tiktoken ids, the fuzz
# target replayed over its seed corpus, `vortex tokenize`, and the tokenizer throughput benchmark binary.
# The real Qwen vocabulary fixture is committed xz-compressed and extracted into the build tree here.
set(VORTEX_TEXT_FIXTURES ${CMAKE_SOURCE_DIR}/tests/text/fixtures)
set(VORTEX_TEXT_QWEN_DIR ${CMAKE_BINARY_DIR}/tests/text/qwen)
add_custom_command(
  OUTPUT ${VORTEX_TEXT_QWEN_DIR}/qwen_tokenizer.json ${VORTEX_TEXT_QWEN_DIR}/qwen_long_corpus.json
  COMMAND ${CMAKE_COMMAND} -E make_directory ${VORTEX_TEXT_QWEN_DIR}
  COMMAND ${CMAKE_COMMAND} -E chdir ${VORTEX_TEXT_QWEN_DIR} ${CMAKE_COMMAND} -E tar xf ${VORTEX_TEXT_FIXTURES}/qwen_tokenizer.tar.xz
  # The archive stores mtime 0: touch so the outputs are newer than their input.
  COMMAND ${CMAKE_COMMAND} -E touch ${VORTEX_TEXT_QWEN_DIR}/qwen_tokenizer.json ${VORTEX_TEXT_QWEN_DIR}/qwen_long_corpus.json
  DEPENDS ${VORTEX_TEXT_FIXTURES}/qwen_tokenizer.tar.xz
  COMMENT "Extracting the Qwen tokenizer fixture")
add_custom_target(qwen_tokenizer_fixture ALL
  DEPENDS ${VORTEX_TEXT_QWEN_DIR}/qwen_tokenizer.json ${VORTEX_TEXT_QWEN_DIR}/qwen_long_corpus.json)

vortex_test(NAME utf8_test SOURCES ${CMAKE_SOURCE_DIR}/tests/text/utf8_test.cpp LIBS vortex_text)
vortex_test(NAME tokenizer_test SOURCES ${CMAKE_SOURCE_DIR}/tests/text/tokenizer_test.cpp
            LIBS vortex_text nlohmann_json::nlohmann_json)
target_compile_definitions(tokenizer_test PRIVATE VORTEX_TEXT_FIXTURES="${VORTEX_TEXT_FIXTURES}"
                                                  VORTEX_TEXT_QWEN_DIR="${VORTEX_TEXT_QWEN_DIR}")
add_dependencies(tokenizer_test qwen_tokenizer_fixture)

# fuzz/tokenizer_fuzz.cpp built without libFuzzer and run over tests/text/fuzz_corpus (every seed must
# keep the fuzz invariants), so CI compiles and exercises the target on every build.
add_executable(tokenizer_fuzz_replay ${CMAKE_SOURCE_DIR}/fuzz/tokenizer_fuzz.cpp ${CMAKE_SOURCE_DIR}/fuzz/replay_main.cpp)
target_link_libraries(tokenizer_fuzz_replay PRIVATE vortex_text)
target_compile_options(tokenizer_fuzz_replay PRIVATE ${VORTEX_CXX_FLAGS})
target_compile_definitions(tokenizer_fuzz_replay PRIVATE VORTEX_FUZZ_TOKENIZER="${VORTEX_TEXT_FIXTURES}/tiny_tokenizer.json")
add_test(NAME tokenizer_fuzz_replay
         COMMAND tokenizer_fuzz_replay ${CMAKE_SOURCE_DIR}/tests/text/fuzz_corpus)
add_test(NAME tokenizer_fuzz_replay_qwen
         COMMAND ${CMAKE_COMMAND} -E env VORTEX_FUZZ_TOKENIZER=${VORTEX_TEXT_QWEN_DIR}/qwen_tokenizer.json
                 $<TARGET_FILE:tokenizer_fuzz_replay> ${CMAKE_SOURCE_DIR}/tests/text/fuzz_corpus)
set_tests_properties(tokenizer_fuzz_replay tokenizer_fuzz_replay_qwen PROPERTIES LABELS cpu TIMEOUT 120)

# tokenizer_bench: single-core MB/s on the corpus and the 100 KB prompt, one evidence JSON line.
add_executable(tokenizer_bench ${CMAKE_SOURCE_DIR}/bench/tokenizer_bench.cpp)
target_link_libraries(tokenizer_bench PRIVATE vortex_text vortex_profiling nlohmann_json::nlohmann_json)
target_compile_definitions(tokenizer_bench PRIVATE VORTEX_TEXT_FIXTURES="${VORTEX_TEXT_FIXTURES}"
                                                   VORTEX_TEXT_QWEN_DIR="${VORTEX_TEXT_QWEN_DIR}")
target_compile_options(tokenizer_bench PRIVATE ${VORTEX_CXX_FLAGS})
add_dependencies(tokenizer_bench qwen_tokenizer_fixture)

if(TARGET vortex_cli)
  vortex_test(NAME tokenize_cli_test SOURCES ${CMAKE_SOURCE_DIR}/tests/text/tokenize_cli_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(tokenize_cli_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                                                       VORTEX_TEXT_FIXTURES="${VORTEX_TEXT_FIXTURES}"
                                                       VORTEX_TEXT_QWEN_DIR="${VORTEX_TEXT_QWEN_DIR}")
  add_dependencies(tokenize_cli_test vortex_cli qwen_tokenizer_fixture)
endif()
