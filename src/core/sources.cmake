list(APPEND VORTEX_SOURCES
  src/core/status.cpp
  src/core/tensor.cpp
  src/core/dtype.cpp
)
