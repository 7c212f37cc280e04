# VAE decoders: parity with diffusers 0.42.1 (fixtures made by tests/vae/make_vae_fixtures.py and committed;
# CI needs no torch), loaders and their errors, synthetic weights.
set(VORTEX_VAE_FIXTURE_DIR "${CMAKE_SOURCE_DIR}/tests/vae/fixtures")
vortex_test(NAME vae_parity_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/vae_parity_test.cpp
            LIBS vortex_vae vortex_engine)
target_compile_definitions(vae_parity_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
vortex_test(NAME vae_loader_test SOURCES ${CMAKE_SOURCE_DIR}/tests/vae/vae_loader_test.cpp
            LIBS vortex_vae vortex_engine)
target_compile_definitions(vae_loader_test PRIVATE VORTEX_VAE_FIXTURES="${VORTEX_VAE_FIXTURE_DIR}")
