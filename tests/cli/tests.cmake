# CLI tests: run the built `vortex` binary (tests/cli/cli_test.cpp; cli_gpu_test.cpp with the GPU label)
# and the golden noise check (tests/cli/golden_noise.py against the tests/cli/noise_dump helper, which
# calls the engine's noise functions).
if(TARGET vortex_cli)
  vortex_test(NAME cli_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>")
  add_dependencies(cli_test vortex_cli)

  vortex_test(NAME cli_request_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_request_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_request_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                                                      VORTEX_PARITY_FIXTURES="${CMAKE_SOURCE_DIR}/tests/parity/fixtures")
  add_dependencies(cli_request_test vortex_cli)

  # Latents byte-identical to the code path that recorded tests/cli/fixtures/latents_ab.json.
  vortex_test(NAME cli_latents_ab_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_latents_ab_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_latents_ab_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                                                         VORTEX_CLI_FIXTURES="${CMAKE_SOURCE_DIR}/tests/cli/fixtures")
  add_dependencies(cli_latents_ab_test vortex_cli)

  # --checkpoint DIR: original and diffusers folders end to end.
  vortex_test(NAME cli_checkpoint_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_checkpoint_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_checkpoint_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>")
  add_dependencies(cli_checkpoint_test vortex_cli)

  # The release's layout (verbatim configs of tests/fixtures/release, tiny weights): --checkpoint on each
  # transformer folder, --model on the root and on FL2VA/, Ref2VA and other components refused.
  vortex_test(NAME cli_release_layout_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_release_layout_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_release_layout_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                             VORTEX_RELEASE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures/release"
                             VORTEX_TEXT_FIXTURES="${CMAKE_SOURCE_DIR}/tests/text/fixtures"
                             VORTEX_VAE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/vae/fixtures")
  add_dependencies(cli_release_layout_test vortex_cli)

  vortex_test(NAME bench_gate_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/bench_gate_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(bench_gate_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>")
  add_dependencies(bench_gate_test vortex_cli)

  # vortex serve as a process: SIGTERM (finish or cancel the running job), argument errors.
  vortex_test(NAME cli_serve_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_serve_test.cpp
              LIBS vortex_httplib nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_serve_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>")
  add_dependencies(cli_serve_test vortex_cli)

  vortex_test(NAME cli_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_gpu_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto GPU)
  target_include_directories(cli_gpu_test PRIVATE ${CMAKE_SOURCE_DIR}/include)  # vortex/status.h (tests/gpu_test.h)
  if(VORTEX_HAVE_CUDA)
    set(cli_has_cuda 1)
  else()
    set(cli_has_cuda 0)
  endif()
  if(VORTEX_HAVE_NCCL)
    set(cli_has_nccl 1)
  else()
    set(cli_has_nccl 0)
  endif()
  target_compile_definitions(cli_gpu_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                                                  VORTEX_BUILD_HAS_CUDA=${cli_has_cuda} VORTEX_BUILD_HAS_NCCL=${cli_has_nccl})
  add_dependencies(cli_gpu_test vortex_cli)
else()
  message(WARNING "tests/cli: the vortex CLI target is missing, cli_test not built")
endif()

add_executable(noise_dump ${CMAKE_SOURCE_DIR}/tests/cli/noise_dump.cpp)
target_link_libraries(noise_dump PRIVATE vortex)
target_compile_options(noise_dump PRIVATE ${VORTEX_CXX_FLAGS})
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME golden_noise
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/cli/golden_noise.py $<TARGET_FILE:noise_dump>)
set_tests_properties(golden_noise PROPERTIES LABELS cpu TIMEOUT 120)

# The bad-input table of every subcommand (exit 2, message, nothing written) and the CLI conventions.
if(TARGET vortex_cli)
  vortex_test(NAME cli_errors_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_errors_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_errors_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
      VORTEX_TINY_TOKENIZER="${CMAKE_SOURCE_DIR}/tests/text/fixtures/tiny_tokenizer.json")
  add_dependencies(cli_errors_test vortex_cli)
  # SIGINT / SIGTERM / SIGPIPE during real runs: exit 130 / 143 / 141, "interrupted", no staging left; the sweep.
  vortex_test(NAME cli_interrupt_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_interrupt_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_interrupt_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>")
  add_dependencies(cli_interrupt_test vortex_cli)
endif()

# fl2va through the binary (tests/cli/cli_fl2va_test.cpp): --first-frame / --last-frame on the tiny snapshot, run.json
# inputs with SHA-256, bad keyframes refused before any weight loads, inspect's task list.
if(TARGET vortex_cli)
  vortex_test(NAME cli_fl2va_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_fl2va_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_fl2va_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                             VORTEX_IMAGE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/images")
  add_dependencies(cli_fl2va_test vortex_cli)
endif()
# ref2va through the binary (tests/cli/cli_ref2va_test.cpp): --ref on the tiny snapshot's transformer_ref/, bad
# reference sets refused before any weight loads, the task/transformer rules.
if(TARGET vortex_cli)
  vortex_test(NAME cli_ref2va_test SOURCES ${CMAKE_SOURCE_DIR}/tests/cli/cli_ref2va_test.cpp
              LIBS nlohmann_json::nlohmann_json OpenSSL::Crypto)
  target_compile_definitions(cli_ref2va_test PRIVATE VORTEX_CLI_PATH="$<TARGET_FILE:vortex_cli>"
                             VORTEX_REFERENCE_MEDIA="${CMAKE_SOURCE_DIR}/tests/media/fixtures/reference/media"
                             VORTEX_IMAGE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/images")
  add_dependencies(cli_ref2va_test vortex_cli)
endif()
