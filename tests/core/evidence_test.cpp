// vortex::percentiles / quantile (src/profiling/evidence.h) against values worked out by hand from the definition
// in docs/evidence.md (position q * (n - 1) in the sorted samples, linear between the neighbours; numpy's default
// agrees), and the fields of an evidence row. bench/evidence.py is held to the same values by
// tests/tools/evidence_py_test.py.
#include "profiling/evidence.h"

#include <gtest/gtest.h>

#include <vector>

namespace vortex {
namespace {

TEST(Percentiles, OneToTenShuffled) {
  const Percentiles p = percentiles({7, 3, 10, 1, 5, 9, 2, 8, 6, 4});
  EXPECT_EQ(p.n, 10);
  EXPECT_DOUBLE_EQ(p.p10, 1.9);   // position 0.9: 1 + 0.9 * (2 - 1)
  EXPECT_DOUBLE_EQ(p.p50, 5.5);   // position 4.5
  EXPECT_DOUBLE_EQ(p.p90, 9.1);   // position 8.1
  EXPECT_DOUBLE_EQ(p.p95, 9.55);  // position 8.55
  EXPECT_DOUBLE_EQ(p.min, 1.0);
  EXPECT_DOUBLE_EQ(p.max, 10.0);
  EXPECT_DOUBLE_EQ(p.mean, 5.5);
}

TEST(Percentiles, RepeatedValues) {
  const Percentiles p = percentiles({3, 1, 4, 1, 5});  // sorted 1 1 3 4 5, position q * 4
  EXPECT_DOUBLE_EQ(p.p10, 1.0);
  EXPECT_DOUBLE_EQ(p.p50, 3.0);
  EXPECT_NEAR(p.p90, 4.6, 1e-12);  // position 3.6: 4 + 0.6 * (5 - 4)
}

TEST(Percentiles, SmallSamples) {
  const Percentiles one = percentiles({7.25});
  EXPECT_EQ(one.n, 1);
  EXPECT_DOUBLE_EQ(one.p10, 7.25);
  EXPECT_DOUBLE_EQ(one.p90, 7.25);
  const Percentiles two = percentiles({10.0, 0.0});
  EXPECT_DOUBLE_EQ(two.p10, 1.0);
  EXPECT_DOUBLE_EQ(two.p50, 5.0);
  EXPECT_DOUBLE_EQ(two.p90, 9.0);
  EXPECT_DOUBLE_EQ(quantile({2.0, 4.0}, 0.0), 2.0);
  EXPECT_DOUBLE_EQ(quantile({2.0, 4.0}, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile({4.0, 2.0}, 0.25), 2.5);
}

TEST(Percentiles, EmptyHasNoSamples) {
  const Percentiles p = percentiles({});
  EXPECT_EQ(p.n, 0);
  EXPECT_DOUBLE_EQ(p.p50, 0.0);
}

TEST(EvidenceRow, SchemaFieldsAndBaseline) {
  RunEnvironment env;
  env.commit = "abc";
  env.gpu = "G";
  env.clock_sm_mhz = 1500;
  const Percentiles p = percentiles({4.0, 2.0, 3.0});
  const nlohmann::json none = evidence_row(env, "w", "impl", "cfg", p);
  for (const char* k :
       {"schema",          "commit", "dirty",  "time_utc", "gpu",    "sm",     "driver", "cuda",   "clocks_mhz",
        "workload",        "impl",   "config", "n",        "ms_p10", "ms_p50", "ms_p90", "ms_p95", "baseline",
        "baseline_ms_p50", "ratio"})
    EXPECT_TRUE(none.contains(k)) << k;
  EXPECT_EQ(none["schema"], "vortex-evidence-1");
  EXPECT_EQ(none["config"], "cfg");
  EXPECT_EQ(none["clocks_mhz"]["sm"], 1500);
  EXPECT_TRUE(none["baseline"].is_null());
  EXPECT_TRUE(none["ratio"].is_null());

  const nlohmann::json with = evidence_row(env, "w", "impl", "cfg", p, {"eager", 6.0, 0});
  EXPECT_EQ(with["baseline"], "eager");
  EXPECT_DOUBLE_EQ(with["baseline_ms_p50"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(with["ratio"].get<double>(), 0.5);  // p50 3 ms over 6 ms
  const nlohmann::json pairs = evidence_row(env, "w", "impl", "cfg", p, {"A", 6.0, 0.98}, {{"block", 24}});
  EXPECT_DOUBLE_EQ(pairs["ratio"].get<double>(), 0.98);  // a measured per-pair ratio is kept as given
  EXPECT_EQ(pairs["block"], 24);
}

}  // namespace
}  // namespace vortex
