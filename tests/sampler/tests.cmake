# Sampler tests: schedules, res_multistep coefficients, analytic trajectories (CPU only).
vortex_test(NAME sampler_test SOURCES ${CMAKE_SOURCE_DIR}/tests/sampler/sampler_test.cpp LIBS vortex_sampler)
