// Row independence of the GPU GEMMs under sequence parallelism (label gpu): for each H3 block GEMM at
// the canonical 37,810 rows (and h3-tiny's), the rows of a U-rank shard (U = 2, 4, 7, 8; even_split
// rows copied into a fresh buffer, as each rank holds them) multiplied alone give the same bytes as the
// same rows of the full-M GEMM. This is what makes U GPUs bit-identical to one: it holds when the
// algorithm gemm() selects for M/U rows runs the same per-element K loop as the one for M (no split-K
// reduction, same inner tile order). The selected algorithms are printed for the evidence.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>

#include "dist/communicator.h"
#include "gemm/gemm.h"
#include "gpu_test.h"
#include "measure/gemm_tune.h"
#include "seed.h"

namespace vortex {
namespace {

struct Shape3 {
  const char* name;
  int64_t m, n, k;
};

TEST(GemmRows, ShardRowsEqualTheFullGemmsRows) {
  VORTEX_REQUIRE_GPU();
  auto engine = GemmEngine::create();
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  const uint64_t seed = testing::fresh_seed();
  const Shape3 shapes[] = {
      {"qkv", 37810, 21504, 5376}, {"out_proj", 37810, 5376, 7168}, {"fc1", 37810, 57344, 5376},
      {"fc2", 37810, 5376, 28672}, {"tiny qkv", 1350, 768, 256},    {"tiny fc2", 1350, 256, 512},
  };
  unsigned long long* mismatches = nullptr;
  ASSERT_EQ(cudaMalloc(&mismatches, sizeof(unsigned long long)), cudaSuccess);
  for (const Shape3& sh : shapes) {
    void *x = nullptr, *w = nullptr, *d = nullptr, *xs = nullptr, *ds = nullptr;
    ASSERT_EQ(cudaMalloc(&x, sh.m * sh.k * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&w, sh.n * sh.k * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d, sh.m * sh.n * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&xs, sh.m * sh.k * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ds, sh.m * sh.n * 2), cudaSuccess);
    ASSERT_TRUE(fill_uniform_bf16_device(x, sh.m * sh.k, seed, 1.0f, s).ok());
    ASSERT_TRUE(fill_uniform_bf16_device(w, sh.n * sh.k, seed + 1, 0.05f, s).ok());
    GemmCall full;
    full.precision = GemmPrecision::kBf16;
    full.m = sh.m, full.n = sh.n, full.k = sh.k;
    full.x = x, full.ldx = sh.k, full.w = w, full.ldw = sh.k, full.d = d, full.ldd = sh.n;
    ASSERT_TRUE((*engine)->gemm(full, s).ok());
    bool pinned = false;
    auto algo_full = (*engine)->selected_algo(full, &pinned);
    ASSERT_TRUE(algo_full.ok());
    for (int u : {2, 4, 7, 8}) {
      for (int r = 0; r < u; ++r) {
        const Span rows = even_split(sh.m, u, r);
        ASSERT_TRUE(fill_u16_device(ds, rows.size() * sh.n, 0xFFBF, s).ok());  // poison
        ASSERT_EQ(cudaMemcpyAsync(xs, static_cast<const char*>(x) + rows.begin * sh.k * 2, rows.size() * sh.k * 2,
                                  cudaMemcpyDeviceToDevice, s),
                  cudaSuccess);
        GemmCall part = full;
        part.m = rows.size();
        part.x = xs;
        part.d = ds;
        ASSERT_TRUE((*engine)->gemm(part, s).ok());
        ASSERT_EQ(cudaMemsetAsync(mismatches, 0, sizeof(unsigned long long), s), cudaSuccess);
        ASSERT_TRUE(count_u16_mismatches_device(static_cast<const char*>(d) + rows.begin * sh.n * 2, ds,
                                                rows.size() * sh.n, mismatches, s)
                        .ok());
        unsigned long long bad = 0;
        ASSERT_EQ(cudaMemcpyAsync(&bad, mismatches, sizeof(bad), cudaMemcpyDeviceToHost, s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        auto algo_part = (*engine)->selected_algo(part, nullptr);
        ASSERT_TRUE(algo_part.ok());
        if (r == 0)
          std::printf("%-9s M=%-6lld U=%d: rank 0 M=%-6lld algo %s (full M: %s%s), mismatching elements %llu\n",
                      sh.name, static_cast<long long>(sh.m), u, static_cast<long long>(rows.size()),
                      algo_part->describe().c_str(), algo_full->describe().c_str(), pinned ? ", pinned" : "", bad);
        EXPECT_EQ(bad, 0u) << sh.name << " U=" << u << " rank " << r << " rows [" << rows.begin << ", " << rows.end
                           << "): algo " << algo_part->describe() << " vs full " << algo_full->describe() << ", seed "
                           << seed;
      }
    }
    cudaFree(x), cudaFree(w), cudaFree(d), cudaFree(xs), cudaFree(ds);
  }
  cudaFree(mismatches);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace vortex
