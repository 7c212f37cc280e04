// gemm-tune machinery on small shapes (GPU): device fills equal the host Philox values, enumeration
// yields valid configs including the heuristic's, candidate 0 (the heuristic rebuilt from its config)
// is bit-identical to the default, every run candidate passes the FP64 check, and bench rows are sane.
#include <gtest/gtest.h>

#include <vector>

#include "core/philox.h"
#include "gpu_test.h"
#include "measure/gemm_tune.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

TEST(GemmTune, DeviceFillMatchesHostPhilox) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  testing::DeviceBuffer buf(4099 * 2);
  ASSERT_TRUE(fill_uniform_bf16_device(buf.get(), 4099, seed, 0.5f, nullptr).ok());
  std::vector<uint16_t> got(4099);
  buf.download(got.data(), got.size() * 2);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], bf16_bits_from_f32(synthetic_value(seed, i, 0.5f, 0.0f))) << "i " << i << " seed " << seed;
  EXPECT_TRUE(buf.sentinel_intact());
}

TEST(GemmTune, SmallShapeAllPrecisions) {
  VORTEX_REQUIRE_GPU();
  GemmEngineOptions opt;
  opt.load_pinned_table = false;
  auto engine = GemmEngine::create(opt);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  GemmTuneOptions topt;
  topt.m = 509;
  topt.max_configs = 12;
  topt.reps = 3;
  topt.samples = 64;
  topt.seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(topt.seed));
  for (GemmPrecision p :
       {GemmPrecision::kBf16, GemmPrecision::kF32, GemmPrecision::kFp8PerTensor, GemmPrecision::kFp8Blockwise}) {
    auto r = tune_gemm(**engine, p, GemmShape{"small", 768, 1024}, topt);
    ASSERT_TRUE(r.ok()) << gemm_precision_name(p) << ": " << r.status().to_string();
    std::printf("[tune %s] heuristic %s err %.3e, %zu candidates, best %d\n", gemm_precision_name(p),
                r->heuristic.describe().c_str(), r->heuristic_max_rel_err, r->candidates.size(), r->best);
    ASSERT_FALSE(r->candidates.empty());
    EXPECT_TRUE(r->candidates[0].ran) << r->candidates[0].error;
    EXPECT_EQ(r->candidates[0].mismatches_vs_default, 0) << "heuristic config does not rebuild exactly";
    EXPECT_LT(r->heuristic_max_rel_err, p == GemmPrecision::kF32 ? 1e-5 : 2e-2);
    int ran = 0;
    for (const auto& c : r->candidates) ran += c.ran;
    EXPECT_GE(ran, 1);
    EXPECT_GT(r->candidates[static_cast<size_t>(r->best)].ms.n, 0);
    EXPECT_FALSE(r->json().empty());
  }
}

TEST(GemmBench, RowsAreSane) {
  VORTEX_REQUIRE_GPU();
  auto engine = GemmEngine::create();
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  GemmBenchOptions opt;
  opt.m = 1024;
  opt.reps = 3;
  opt.warmup = 1;
  auto rows = bench_gemm(**engine, opt);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(rows->size(), 4u * opt.precisions.size());
  for (const auto& r : *rows) {
    EXPECT_GT(r.ms.p50, 0.0) << r.json();
    EXPECT_GT(r.tflops_p50, 1.0) << r.json();
  }
}

}  // namespace
}  // namespace vortex
