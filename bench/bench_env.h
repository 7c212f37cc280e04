// The run environment of a CUDA benchmark binary (device 0's name, sm_XY and the CUDA runtime version from
// the runtime API; commit, driver and clocks from vortex::collect_environment), for evidence rows in the one
// schema (docs/evidence.md). Header-only: bench/*.cpp include it. Call vortex::refresh_clocks(env) right
// after the timed work, so each row records the clocks the work ran at.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "profiling/evidence.h"

namespace vortex::bench {

inline RunEnvironment cuda_environment() {
  std::string name, sm, cuda;
  int dev = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
    name = prop.name;
    sm = "sm_" + std::to_string(prop.major * 10 + prop.minor);
  }
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    cuda = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  return collect_environment(name, sm, cuda);
}

}  // namespace vortex::bench
