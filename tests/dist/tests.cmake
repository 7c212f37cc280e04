# dist: communicators (in-process world, rendezvous) and Ulysses sequence parallelism on the CPU backend.
vortex_test(NAME communicator_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/communicator_test.cpp LIBS vortex_dist)
vortex_test(NAME ulysses_test SOURCES ${CMAKE_SOURCE_DIR}/tests/dist/ulysses_test.cpp)
