// make_backend: the one place that maps a backend name to an implementation ("cpu" -> CpuBackend,
// "cuda" -> make_cuda_backend when this build has the CUDA backend). Model code never names a backend.
// Tested in tests/ref/backend_registry_test.cpp (cpu works, cuda is kUnsupported without CUDA, bad names).
#include <memory>
#include <string>

#include "model/backend.h"
#include "ref/cpu_backend.h"
#if defined(VORTEX_WITH_CUDA) && __has_include("cuda/cuda_backend.h")
#include "cuda/cuda_backend.h"
#define VORTEX_REGISTRY_HAS_CUDA 1
#endif

namespace vortex {

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, int threads) {
  if (threads < 0) return invalid_argument("backend threads must be >= 0 (0 = all cores), got " + std::to_string(threads));
  if (name == "cpu") return make_cpu_backend(threads);
  if (name == "cuda") {
#if defined(VORTEX_REGISTRY_HAS_CUDA)
    return make_cuda_backend();
#elif defined(VORTEX_WITH_CUDA)
    return unsupported("this build has the CUDA toolchain but no CUDA backend yet (src/cuda/cuda_backend.h is missing); use --backend cpu");
#else
    return unsupported("this build has no CUDA backend (rebuild with nvcc present); use --backend cpu");
#endif
  }
  return invalid_argument("unknown backend '" + std::string(name) + "'; valid backends: cpu, cuda");
}

}  // namespace vortex
