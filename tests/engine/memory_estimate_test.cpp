// estimate_memory / forward_flops (src/engine/memory_estimate.h): h3's weights come out at the spec's
// ~66 GB, activations grow with the request, the CPU attention term only on the CPU, the FLOP formula
// matches a hand count, and available_host_memory() reads a plausible number on Linux.
#include <gtest/gtest.h>

#include "engine/memory_estimate.h"
#include "model/h3_spec.h"

namespace vortex {
namespace {

RequestGeometry geometry(const ModelConfig& cfg, int w, int h, int frames) {
  Result<RequestGeometry> g = make_geometry(cfg, w, h, frames, 16);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : RequestGeometry{};
}

TEST(MemoryEstimate, H3WeightsDominateAndMatchTheSpec) {
  const ModelConfig h3 = ModelConfig::h3();
  const MemoryEstimate e = estimate_memory(h3, geometry(h3, 448, 256, 22), {});
  ASSERT_FALSE(e.items.empty());
  EXPECT_EQ(e.items.front().what, "weights");
  EXPECT_EQ(e.items.front().bytes, static_cast<uint64_t>(h3_total_bytes(h3)));
  EXPECT_GT(e.items.front().bytes, 60'000'000'000ull);  // 33B parameters, mostly BF16
  EXPECT_GT(e.total(), e.items.front().bytes);
  EXPECT_EQ(e.largest(1).rfind("weights 6", 0), 0u) << e.largest(1);
}

TEST(MemoryEstimate, ActivationsGrowWithTheRequestAndCpuAttentionOnlyOnTheCpu) {
  const ModelConfig tiny = ModelConfig::h3_tiny();
  MemoryEstimateOptions cpu;
  const uint64_t small = estimate_memory(tiny, geometry(tiny, 64, 64, 5), cpu).total();
  const uint64_t large = estimate_memory(tiny, geometry(tiny, 1024, 1024, 22), cpu).total();
  EXPECT_GT(large, 10 * small);
  MemoryEstimateOptions gpu;
  gpu.cpu_backend = false;
  const RequestGeometry g = geometry(tiny, 448, 256, 22);
  EXPECT_LT(estimate_memory(tiny, g, gpu).total(), estimate_memory(tiny, g, cpu).total());
  MemoryEstimateOptions given = cpu;
  given.weights_bytes = 123;
  const MemoryEstimate e = estimate_memory(tiny, g, given);
  for (const auto& item : e.items) {
    if (item.what == "weights") {
      EXPECT_EQ(item.bytes, 123u);
    }
  }
}

TEST(MemoryEstimate, ForwardFlopsHandCount) {
  const ModelConfig tiny = ModelConfig::h3_tiny();  // D 256, I 256, F 512, 2 layers
  const RequestGeometry g = geometry(tiny, 64, 64, 5);
  const double s = static_cast<double>(g.total_rows());
  const double per_block = 2 * s * 256 * (3 * 256 + 256) + 2 * s * 256 * 1024 + 2 * s * 512 * 256 + 4 * s * s * 256;
  EXPECT_DOUBLE_EQ(forward_flops(tiny, g), 2 * per_block);
  EXPECT_DOUBLE_EQ(estimate_cpu_seconds(tiny, g, 3, 2), 3 * 2 * per_block / (2 * kCpuFlopsPerThread));
}

TEST(MemoryEstimate, HostMemoryIsReadable) {
  const std::optional<uint64_t> avail = available_host_memory();
  ASSERT_TRUE(avail.has_value()) << "/proc/meminfo MemAvailable unreadable";
  EXPECT_GT(*avail, 16ull << 20);
  EXPECT_EQ(format_gb(66'100'000'000ull), "66.1 GB");
}

}  // namespace
}  // namespace vortex
