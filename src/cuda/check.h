// CUDA error checking that returns Status (category kCuda) instead of aborting: every runtime call in
// src/cuda goes through VORTEX_CUDA_CHECK, every kernel launch is followed by VORTEX_CUDA_LAUNCH_CHECK.
// Messages carry the failing call, file:line and cudaGetErrorString so a user can act on them.
// Tested in tests/cuda/device_test.cpp (an invalid call produces the expected message).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "vortex/status.h"

namespace vortex {

inline Status cuda_status(cudaError_t err, const char* call, const char* file, int line) {
  return Status(ErrorCode::kCuda, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace vortex

// Evaluates a cudaError_t expression; on failure returns a kCuda Status from the enclosing function.
#define VORTEX_CUDA_CHECK(expr)                                                                                     \
  do {                                                                                                              \
    cudaError_t vortex_cuda_err_ = (expr);                                                                          \
    if (vortex_cuda_err_ != cudaSuccess) return ::vortex::cuda_status(vortex_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports launch-configuration errors (and, with a sticky error, earlier faults).
#define VORTEX_CUDA_LAUNCH_CHECK(kernel_name)                                                       \
  do {                                                                                              \
    cudaError_t vortex_cuda_err_ = cudaGetLastError();                                              \
    if (vortex_cuda_err_ != cudaSuccess)                                                            \
      return ::vortex::cuda_status(vortex_cuda_err_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
