# Model component tests (CPU only).
vortex_test(NAME packing_test SOURCES ${CMAKE_SOURCE_DIR}/tests/model/packing_test.cpp LIBS vortex_model)
vortex_test(NAME config_test SOURCES ${CMAKE_SOURCE_DIR}/tests/model/config_test.cpp LIBS vortex_model vortex_io)
# H3Model forward on the CPU reference backend (h3-tiny, synthetic weights).
vortex_test(NAME h3_model_test SOURCES ${CMAKE_SOURCE_DIR}/tests/model/h3_model_test.cpp
            LIBS vortex_ref vortex_model)
# Step graphs, host side: the planner, the cuda_graph switch, forward() through the step workspace (CPU).
vortex_test(NAME step_graph_test SOURCES ${CMAKE_SOURCE_DIR}/tests/model/step_graph_test.cpp LIBS vortex_engine)
# AdaLN tables ahead of sampling (H3Model::precompute_adaln): trajectory bytes vs per-step tables, LoRA, reuse.
vortex_test(NAME adaln_ahead_test SOURCES ${CMAKE_SOURCE_DIR}/tests/model/adaln_ahead_test.cpp
            LIBS vortex_ref vortex_model vortex_sampler)
# The load-time NaN / Inf scan of the weights (model/weights_finite.h).
vortex_test(NAME weights_finite_test SOURCES ${CMAKE_SOURCE_DIR}/tests/model/weights_finite_test.cpp
            LIBS vortex_ref vortex_model)
