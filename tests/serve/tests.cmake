# serve: the request parser, its fuzz-corpus replay, the HTTP API contract (in process, 127.0.0.1, an
# ephemeral port; runs the curl examples of docs/serve.md) and the bounded soak (about 2 minutes).
vortex_test(NAME serve_request_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/request_test.cpp LIBS vortex_serve)
# The fl2va part in SGLang's minimax_h3 dialect, against verbatim copies of the cookbook's request bodies.
vortex_test(NAME serve_fl2va_request_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/fl2va_request_test.cpp LIBS vortex_serve)
target_compile_definitions(serve_fl2va_request_test PRIVATE
                           VORTEX_SGLANG_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures/sglang_minimax_h3")
# The ref2va part in SGLang's minimax_h3 dialect, against verbatim copies of the cookbook's ref2va bodies.
vortex_test(NAME serve_ref2va_request_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/ref2va_request_test.cpp LIBS vortex_serve)
target_compile_definitions(serve_ref2va_request_test PRIVATE
                           VORTEX_SGLANG_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures/sglang_minimax_h3")
# fl2va through POST /v1/videos on the tiny snapshot's encoder: keyframes as a data URL and a file:// URI.
vortex_test(NAME serve_fl2va_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/serve_fl2va_test.cpp
            LIBS vortex_serve vortex vortex_httplib OpenSSL::Crypto)
target_compile_definitions(serve_fl2va_test PRIVATE
                           VORTEX_IMAGE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/images")
# ref2va through POST /v1/videos: admission of references (data URLs, --input-dir files) and its refusals.
vortex_test(NAME serve_ref2va_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/serve_ref2va_test.cpp
            LIBS vortex_serve vortex vortex_httplib)
target_compile_definitions(serve_ref2va_test PRIVATE
                           VORTEX_IMAGE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/images"
                           VORTEX_REFERENCE_FIXTURES="${CMAKE_SOURCE_DIR}/tests/media/fixtures/reference/media")
vortex_test(NAME serve_request_fuzz_replay_test
            SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/request_fuzz_replay_test.cpp ${CMAKE_SOURCE_DIR}/fuzz/serve_request_fuzz.cpp
            LIBS vortex_serve)
target_compile_definitions(serve_request_fuzz_replay_test PRIVATE
                           VORTEX_SERVE_FUZZ_CORPUS="${CMAKE_SOURCE_DIR}/fuzz/corpus/serve_request")
vortex_test(NAME serve_server_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/server_test.cpp LIBS vortex_serve vortex_httplib)
target_compile_definitions(serve_server_test PRIVATE VORTEX_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# Hostile bytes (invalid / cut UTF-8) in every part of a request to every route, and a port already in use.
vortex_test(NAME serve_hostile_input_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/hostile_input_test.cpp LIBS vortex_serve vortex_httplib)
vortex_test(NAME serve_soak_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/soak_test.cpp LIBS vortex_serve vortex_httplib)

# Per-request LoRA adapters (--lora-dir) vs separate `generate --lora ... --lora-mode runtime` runs, on the tiny
# checkpoint of tests/parity with the fixtures of tests/lora.
vortex_test(NAME serve_lora_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/serve_lora_test.cpp LIBS vortex_serve vortex vortex_httplib)
target_compile_definitions(serve_lora_test PRIVATE VORTEX_LORA_FIXTURES="${CMAKE_SOURCE_DIR}/tests/lora/fixtures"
                                                   VORTEX_PARITY_FIXTURES="${CMAKE_SOURCE_DIR}/tests/parity/fixtures")
if(TARGET vortex_cuda)
  vortex_test(NAME serve_lora_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/serve_lora_test.cpp
              LIBS vortex_serve vortex vortex_httplib GPU)
  target_compile_definitions(serve_lora_cuda_test PRIVATE VORTEX_SERVE_LORA_BACKEND="cuda"
                             VORTEX_LORA_FIXTURES="${CMAKE_SOURCE_DIR}/tests/lora/fixtures"
                             VORTEX_PARITY_FIXTURES="${CMAKE_SOURCE_DIR}/tests/parity/fixtures")
endif()
# `vortex serve` over a world of ranks: threads as ranks (InProcessWorld) on the CPU backend, rank 0 a real
# server on 127.0.0.1; U = 2, 4 latents == one rank's, a failing follower, cancel, heartbeats, shutdown.
vortex_test(NAME serve_world_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/serve_world_test.cpp LIBS vortex_serve vortex_httplib)
if(TARGET vortex_cuda)
  vortex_test(NAME serve_world_cuda_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/serve_world_test.cpp
              LIBS vortex_serve vortex_httplib GPU)
  target_compile_definitions(serve_world_cuda_test PRIVATE VORTEX_SERVE_WORLD_CUDA=1)
endif()

# The HTTP layer (parser, server) and the hostile-client suite of issue 26 (loopback, bounded): the parser's
# unit tests and fuzz-corpus replay, raw-socket clients against the HTTP server, and against `vortex serve`.
vortex_test(NAME serve_http_parser_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/http_parser_test.cpp LIBS vortex_serve)
vortex_test(NAME serve_http_parser_fuzz_replay_test
            SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/http_parser_fuzz_replay_test.cpp ${CMAKE_SOURCE_DIR}/fuzz/http_parser_fuzz.cpp
            LIBS vortex_serve)
target_compile_definitions(serve_http_parser_fuzz_replay_test PRIVATE
                           VORTEX_HTTP_FUZZ_CORPUS="${CMAKE_SOURCE_DIR}/fuzz/corpus/http_request")
vortex_test(NAME serve_http_server_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/http_server_test.cpp LIBS vortex_serve)
vortex_test(NAME serve_hostile_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/hostile_test.cpp
            LIBS vortex_serve vortex_httplib)
# The job store, the start-up reconciliation and restarts of the server on one data folder.
vortex_test(NAME serve_job_store_test SOURCES ${CMAKE_SOURCE_DIR}/tests/serve/job_store_test.cpp
            LIBS vortex_serve vortex_httplib)
