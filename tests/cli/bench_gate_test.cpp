// `vortex bench` and `vortex gate` end to end on the CPU backend with h3-tiny at a very small request:
// the gate runs every check and passes (the CPU fused ops are the composition of the eager ones), the
// benchmarks write evidence rows with the schema fields and per-component timings, and bad switches
// give a clear error. The GPU versions of these commands run in scripts/gpu-check.sh.
#include "cli/cli_test_util.h"

namespace vortex_cli_test {
namespace {

const char* kTiny = " --config h3-tiny --backend cpu --width 256 --height 128 --frames 5 --text-rows 8 --threads 2";

std::vector<nlohmann::json> read_jsonl(const fs::path& dir, const std::string& suffix) {
  std::vector<nlohmann::json> rows;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::ifstream f(e.path());
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

TEST(CliGate, TinyCpuGatePassesEveryCheckAndWritesTheVerdict) {
  ScratchDir dir;
  const RunResult r = run_vortex(std::string("gate") + kTiny + " --steps 3 --evidence-dir '" + dir.path().string() +
                                 "' --out '" + (dir.path() / "verdict.json").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gate verdict: PASS"), std::string::npos) << r.output;
  const auto rows = read_jsonl(dir.path(), "-gate.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  const auto& v = rows[0];
  EXPECT_TRUE(v["pass"].get<bool>());
  std::vector<std::string> names;
  for (const auto& c : v["checks"]) {
    names.push_back(c["check"].get<std::string>());
    EXPECT_TRUE(c["identical"].get<bool>());
    // Blocks hash one tensor; steps and trajectories hash "video:audio".
    const bool latents = c["check"].get<std::string>().rfind("block", 0) != 0;
    EXPECT_EQ(c["sha256_a"].get<std::string>().size(), latents ? 129u : 64u) << c.dump();
  }
  // Gate blocks 0 and 1 (h3-tiny has two), one step, the 2-step and the 3-step trajectories.
  ASSERT_EQ(names.size(), 5u) << v.dump();
  EXPECT_EQ(names[0], "block 0");
  EXPECT_EQ(names[1], "block 1");
  EXPECT_NE(names[3].find("2-step"), std::string::npos);
  EXPECT_NE(names[4].find("3-step"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir.path() / "verdict.json"));
  EXPECT_EQ(v["a"].get<std::string>().find("fused_norm_modulate=0"), 0u);
}

TEST(CliBench, BlockWritesComponentsAndSchemaFields) {
  ScratchDir dir;
  const RunResult r = run_vortex(std::string("bench block") + kTiny +
                                 " --block 1 --reps 3 --warmup 1 --evidence-dir '" + dir.path().string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = read_jsonl(dir.path(), "-bench-block.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  const auto& row = rows[0];
  for (const char* key : {"schema", "commit", "dirty", "time_utc", "gpu", "sm", "driver", "cuda", "clocks_mhz",
                          "workload", "impl", "ms_p10", "ms_p50", "ms_p90", "ms_p95", "n", "check"})
    EXPECT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
  EXPECT_EQ(row["n"].get<int>(), 3);
  EXPECT_GT(row["ms_p50"].get<double>(), 0.0);
  EXPECT_LE(row["ms_p10"].get<double>(), row["ms_p90"].get<double>());
  std::vector<std::string> comps;
  double sum = 0;
  for (const auto& c : row["components"]) {
    comps.push_back(c["name"].get<std::string>());
    sum += c["ms_p50"].get<double>();
  }
  const std::vector<std::string> expected = {"norm1_modulate", "qkv",      "qk_norm_rope",   "attention",
                                             "out_proj",       "gate_msa", "norm2_modulate", "fc1",
                                             "swiglu",         "fc2",      "gate_mlp"};
  EXPECT_EQ(comps, expected);
  // The components cover the block: their medians add up to roughly the whole block's median.
  EXPECT_GT(sum, 0.5 * row["ms_p50"].get<double>());
  EXPECT_LT(sum, 2.0 * row["ms_p50"].get<double>());
}

TEST(CliBench, AbReportsPerPairRatio) {
  ScratchDir dir;
  const RunResult r =
      run_vortex(std::string("bench ab") + kTiny +
                 " --block 0 --reps 3 --warmup 1 --a eager --b fused --evidence-dir '" + dir.path().string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = read_jsonl(dir.path(), "-bench-ab.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0]["ratio"].get<double>(), 0.0);
  EXPECT_GT(rows[0]["baseline_ms_p50"].get<double>(), 0.0);
  EXPECT_NE(rows[0]["baseline"].get<std::string>().find("fused_norm_modulate=0"), std::string::npos);
}

TEST(CliBench, UnknownSwitchAndBadBlockAreClearErrors) {
  ScratchDir dir;
  RunResult r = run_vortex(std::string("bench block") + kTiny + " --switches warp_speed=1 --evidence-dir '" +
                           dir.path().string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown switch 'warp_speed'"), std::string::npos) << r.output;
  r = run_vortex(std::string("bench block") + kTiny + " --block 7 --evidence-dir '" + dir.path().string() + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("block 7 outside [0, 2)"), std::string::npos) << r.output;
  EXPECT_TRUE(read_jsonl(dir.path(), ".jsonl").empty());
}

// --gpus and rank environments: refused with exit 2 before any rank starts or any weight loads.
TEST(CliBench, GpusArgumentErrors) {
  ScratchDir dir;
  const std::string ev = " --evidence-dir '" + dir.path().string() + "'";
  RunResult r = run_vortex(std::string("bench block") + kTiny + " --gpus 2" + ev);  // --backend cpu
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--gpus and rank environments need --backend cuda"), std::string::npos) << r.output;
  const std::string tiny_cuda = " --config h3-tiny --backend cuda --width 256 --height 128 --frames 5 --text-rows 8";
  r = run_vortex(std::string("bench block") + tiny_cuda + " --gpus 0" + ev);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--gpus must be an integer between 1 and 64"), std::string::npos) << r.output;
  // A 64x64x1 request with one text row has fewer packed rows than 64 ranks.
  r = run_vortex(std::string("bench step") +
                 " --config h3-tiny --backend cuda --width 64 --height 64 --frames 1 --text-rows 1 --gpus 64" + ev);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs at least one packed row per rank"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("starting"), std::string::npos) << "no rank started: " << r.output;
  r = run_vortex(std::string("bench ab") + tiny_cuda + " --a eager --b fused --gpus 2" + ev);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bench ab does not run with ranks"), std::string::npos) << r.output;
  r = run_vortex(std::string("bench run") + tiny_cuda + " --gpus 2 --comm-timeout 0" + ev);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--comm-timeout expects seconds"), std::string::npos) << r.output;
  // One rank of a world (the launcher's or torchrun's environment) on the CPU backend.
  ::setenv("VORTEX_RANK", "1", 1);
  ::setenv("VORTEX_WORLD_SIZE", "2", 1);
  ::setenv("VORTEX_RENDEZVOUS", (dir.path() / "rdv").c_str(), 1);
  r = run_vortex(std::string("bench block") + kTiny + ev);
  ::unsetenv("VORTEX_RANK");
  ::unsetenv("VORTEX_WORLD_SIZE");
  ::unsetenv("VORTEX_RENDEZVOUS");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--gpus and rank environments need --backend cuda"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("weights ready"), std::string::npos) << r.output;
  EXPECT_TRUE(read_jsonl(dir.path(), ".jsonl").empty());
}

}  // namespace
}  // namespace vortex_cli_test
