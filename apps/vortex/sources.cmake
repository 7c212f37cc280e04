# One file per subcommand; main.cpp registers them (commands.h).
list(APPEND VORTEX_APP_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/main.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_generate.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_inspect.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_synth.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_quantize.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_gemm_tune.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_bench.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_gate.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_tokenize.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_decode.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/request_flags_cli.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_serve.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/rank_options.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cmd_encode_text.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_errors.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/interrupt.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/progress.cpp
)
