// Memory and CPU-time estimates of one generate request, from the config and the request geometry
// alone, so a request that cannot fit (or would run for hours) is refused or warned about before any
// weight is allocated. The estimate counts the weights (tensor specs of src/model/h3_spec.h), the block
// scratch of src/model/h3_model.h, the packed activations, RoPE tables, the CPU attention's per-head
// copies and the sampler's latent vectors. Tested in tests/engine/memory_estimate_test.cpp and through
// the CLI (tests/cli/cli_test.cpp: h3 on the CPU is refused with the numbers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/packing.h"
#include "vortex/config.h"

namespace vortex {

struct MemoryEstimate {
  struct Item {
    std::string what;
    uint64_t bytes = 0;
  };
  std::vector<Item> items;  // largest first
  uint64_t total() const;
  // "weights 66.3 GB, ...": the `n` largest contributors (after the first, only those >= 1% of the total).
  std::string largest(size_t n) const;
};

struct MemoryEstimateOptions {
  bool cpu_backend = true;
  int threads = 1;             // CPU workers (attention scores are per worker)
  uint64_t weights_bytes = 0;  // 0: the BF16/F32 spec bytes of the config (synthetic weights)
};

MemoryEstimate estimate_memory(const ModelConfig& cfg, const RequestGeometry& geo, const MemoryEstimateOptions& opt);

// Host memory this process may still allocate: /proc/meminfo MemAvailable, lowered to the cgroup v2
// limit minus current usage (/sys/fs/cgroup/memory.max, memory.current) when one is set. nullopt when
// neither can be read.
std::optional<uint64_t> available_host_memory();

// Floating-point operations of one denoiser evaluation: per block the GEMMs 2*S*D*(3I + I) (QKV, out
// projection) + 2*S*D*2F (fc1) + 2*S*F*D (fc2) and attention 4*S^2*I, times num_layers.
double forward_flops(const ModelConfig& cfg, const RequestGeometry& geo);

// Seconds a CPU run of `steps` evaluations needs on `threads` workers at kCpuFlopsPerThread.
double estimate_cpu_seconds(const ModelConfig& cfg, const RequestGeometry& geo, int steps, int threads);

// Sustained FLOP/s of the CPU reference backend per worker thread (it accumulates in FP64 and rounds
// every op like the BF16 program, so it is far below the CPU's peak). See memory_estimate.cpp.
extern const double kCpuFlopsPerThread;

// "12.3 GB" (decimal gigabytes, one decimal).
std::string format_gb(uint64_t bytes);

}  // namespace vortex
