// make_backend: the one place that maps a backend name to an implementation ("cpu" -> CpuBackend,
// "cuda" -> make_cuda_backend when this build has the CUDA backend). Model code never names a backend.
// Thread counts above kMaxThreadsPerCore x cores are refused, and a thread the OS will not start becomes a
// Status, never an exception. Tested in tests/ref/backend_registry_test.cpp (cpu works, cuda is kUnsupported
// without CUDA, bad names, thread limits).
#include <algorithm>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include "backend/backend.h"
#include "ref/cpu_backend.h"
#if defined(VORTEX_WITH_CUDA)
#include "cuda/cuda_backend.h"
#define VORTEX_REGISTRY_HAS_CUDA 1
#endif

namespace vortex {

int max_cpu_threads() {
  return kMaxThreadsPerCore * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, int threads, int device) {
  if (threads < 0) return invalid_argument("--threads must be >= 0 (0 = all cores), got " + std::to_string(threads));
  if (threads > max_cpu_threads()) {
    return invalid_argument("--threads " + std::to_string(threads) + " is more than " +
                            std::to_string(kMaxThreadsPerCore) + "x this machine's " +
                            std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " cores; use at most " +
                            std::to_string(max_cpu_threads()) + " (0 = all cores)");
  }
  if (name == "cpu") {
    if (device != 0)
      return invalid_argument("--device " + std::to_string(device) + " names a GPU; the cpu backend has none");
    try {
      return make_cpu_backend(threads);
    } catch (const std::system_error& e) {
      return Status(ErrorCode::kInternal, "cannot start " + std::to_string(threads) + " CPU worker threads (" +
                                              e.what() + "); use fewer --threads");
    }
  }
  if (device < 0)
    return invalid_argument("--device must be >= 0 (a CUDA device ordinal), got " + std::to_string(device));
  if (name == "cuda") {
#if defined(VORTEX_REGISTRY_HAS_CUDA)
    return make_cuda_backend(device);
#elif defined(VORTEX_WITH_CUDA)
    return unsupported(
        "this build has the CUDA toolchain but no CUDA backend yet (src/cuda/cuda_backend.h is missing); use --backend "
        "cpu");
#else
    return unsupported("this build has no CUDA backend (rebuild with nvcc present); use --backend cpu");
#endif
  }
  return invalid_argument("unknown backend '" + std::string(name) + "'; valid backends: cpu, cuda");
}

}  // namespace vortex
