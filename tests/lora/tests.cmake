# LoRA (src/lora, docs/lora.md): key styles and merge bytes against diffusers/PEFT fixtures
# (tests/lora/make_lora_fixtures.py, committed), run-time branch vs merge, bad files, generate end to end.
vortex_test(NAME lora_test SOURCES ${CMAKE_SOURCE_DIR}/tests/lora/lora_test.cpp LIBS vortex nlohmann_json::nlohmann_json OpenSSL::Crypto)
target_compile_definitions(lora_test PRIVATE VORTEX_LORA_FIXTURES="${CMAKE_SOURCE_DIR}/tests/lora/fixtures"
                                             VORTEX_PARITY_FIXTURES="${CMAKE_SOURCE_DIR}/tests/parity/fixtures")
