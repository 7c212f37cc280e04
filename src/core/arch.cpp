// Architecture facts and the build's CUDA targets; see arch.h. Tested in tests/cuda/device_test.cpp.
#include "core/arch.h"

#include "vortex/cuda_targets.h"

namespace vortex {

ArchFacts arch_facts(GpuArch arch) {
  switch (arch) {
    case GpuArch::kSm90:
      return arch_facts(9, 0);
    case GpuArch::kSm100:
      return arch_facts(10, 0);
    case GpuArch::kSm120:
      return arch_facts(12, 0);
    case GpuArch::kSm121:
      return arch_facts(12, 1);
    case GpuArch::kUnknown:
      break;
  }
  return {};
}

Result<GpuArch> parse_gpu_arch(std::string_view name) {
  for (GpuArch a : {GpuArch::kSm90, GpuArch::kSm100, GpuArch::kSm120, GpuArch::kSm121})
    if (name == gpu_arch_name(a)) return a;
  return invalid_argument("unknown architecture policy '" + std::string(name) + "' (valid: sm90, sm100, sm120, sm121)");
}

const char* gpu_arch_name(GpuArch arch) { return arch_facts(arch).name; }

bool build_has_sass_for(int cc_major, int cc_minor) {
  const int cc = cc_major * 10 + cc_minor;
  for (const int* t = cuda_targets::kSass; *t != 0; ++t)
    if (*t == cc) return true;
  return false;
}

bool build_can_jit_for(int cc_major, int cc_minor) {
  return cuda_targets::kPtx != 0 && cc_major * 10 + cc_minor >= cuda_targets::kPtx;
}

bool build_has_sm90_kernels() { return cuda_targets::kHasSm90Kernels; }

const char* build_cuda_targets() { return cuda_targets::kDescription; }

Status check_build_runs_on(const std::string& device_name, int cc_major, int cc_minor) {
  if (build_has_sass_for(cc_major, cc_minor) || build_can_jit_for(cc_major, cc_minor)) return Status::Ok();
  const std::string sm = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  return unsupported("device " + device_name + " is " + sm + " but this build contains " + build_cuda_targets() +
                     ", none of which runs on it; rebuild with -DVORTEX_CUDA_ARCHS=<...;" + std::to_string(cc_major) +
                     std::to_string(cc_minor) + "a> (or a VORTEX_CUDA_PTX at or below " + std::to_string(cc_major) +
                     std::to_string(cc_minor) + "), or use --backend cpu");
}

}  // namespace vortex
