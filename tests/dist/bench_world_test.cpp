// `vortex bench block` with ranks on the CPU backend: h3-tiny with U = 2 rank threads (InProcessWorld),
// each loading its own workload and running the same timed loop on its rows. Rank 0's one row has
// world=2 in config, the four sp_* regions with positive times on both ranks, and the all-to-all bytes
// per rank that the geometry gives (computed here from the row and head spans, not read from the bench).
// A world of 1 runs the Ulysses path with no bytes leaving the rank; no world has no sp_* components.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "dist/in_process.h"
#include "engine/workload.h"
#include "measure/bench.h"

namespace vortex {
namespace {

WorkloadSpec tiny_spec() {
  WorkloadSpec s;
  s.config = "h3-tiny";
  s.backend = "cpu";
  s.threads = 1;
  s.width = 256;
  s.height = 128;
  s.frames = 5;
  s.text_rows = 8;
  return s;
}

BenchOptions tiny_bench() {
  BenchOptions o;
  o.block = 1;
  o.reps = 3;
  o.warmup = 1;
  return o;
}

RunEnvironment env() { return collect_environment("cpu", "", ""); }

using BenchFn = Result<std::vector<nlohmann::json>> (*)(Workload&, const BenchOptions&, const RunEnvironment&);

// Runs `fn` (bench_block by default) on `u` rank threads; rows[r] is rank r's return.
std::vector<std::vector<nlohmann::json>> bench_ranks(int u, int64_t* total_rows, ModelConfig* cfg,
                                                     BenchFn fn = bench_block, BenchOptions o = tiny_bench()) {
  std::vector<std::vector<nlohmann::json>> rows(static_cast<size_t>(u));
  std::mutex mu;
  CommOptions opts;
  opts.timeout = std::chrono::seconds(60);
  Status st = run_in_process_ranks(u, opts, [&](Communicator& c) -> Status {
    JoinWorldFn join = [&c](Backend&, std::unique_ptr<Communicator>&) -> Result<Communicator*> { return &c; };
    VORTEX_ASSIGN_OR_RETURN(Workload w, load_workload(tiny_spec(), {}, join));
    VORTEX_ASSIGN_OR_RETURN(std::vector<nlohmann::json> mine, fn(w, o, env()));
    std::lock_guard<std::mutex> lock(mu);
    rows[static_cast<size_t>(c.rank())] = mine;
    if (c.rank() == 0) {
      *total_rows = w.layout.geo.total_rows();
      *cfg = w.cfg;
    }
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.to_string();
  return rows;
}

const nlohmann::json* component(const nlohmann::json& row, const std::string& name) {
  for (const auto& c : row["components"])
    if (c["name"] == name) return &c;
  return nullptr;
}

const char* const kSp[] = {"sp_pack", "sp_all_to_all_qkv", "sp_all_to_all_out", "sp_unpack"};

TEST(BenchWorld, BlockWithTwoRanksGathersSpComponentsAndBytes) {
  int64_t s = 0;
  ModelConfig cfg;
  const auto rows = bench_ranks(2, &s, &cfg);
  ASSERT_EQ(rows[0].size(), 1u);
  EXPECT_TRUE(rows[1].empty()) << "only rank 0 returns the row";
  const nlohmann::json& row = rows[0][0];
  EXPECT_NE(row["config"].get<std::string>().find(",world=2,comm=in-process"), std::string::npos) << row["config"];
  EXPECT_EQ(row["n"].get<int>(), 3);
  EXPECT_GT(row["ms_p50"].get<double>(), 0.0);
  for (const char* name : kSp) {
    const nlohmann::json* c = component(row, name);
    ASSERT_NE(c, nullptr) << name << " missing in " << row["components"].dump();
    ASSERT_EQ((*c)["ms_p50_per_rank"].size(), 2u) << c->dump();
    double mx = 0;
    for (const auto& v : (*c)["ms_p50_per_rank"]) {
      ASSERT_TRUE(v.is_number()) << c->dump();
      EXPECT_GT(v.get<double>(), 0.0) << name;
      mx = std::max(mx, v.get<double>());
    }
    EXPECT_EQ((*c)["ms_p50"].get<double>(), mx) << "the slowest rank's p50: " << c->dump();
  }
  // Every block component is there too, measured on both ranks (h3-tiny: 4 heads, 2 per rank).
  for (const char* name : {"qkv", "attention", "out_proj", "fc2"}) {
    const nlohmann::json* c = component(row, name);
    ASSERT_NE(c, nullptr) << name;
    for (const auto& v : (*c)["ms_p50_per_rank"]) EXPECT_TRUE(v.is_number()) << name;
  }
  // The exchange geometry, computed independently: rank r holds rows [S r / 2, S (r + 1) / 2) and heads
  // [H r / 2, H (r + 1) / 2); per block it sends its rows of the peer's q/k/v columns (3 x head_dim per
  // head, bf16) and the attention output of its heads for the peer's rows.
  ASSERT_GT(s, 1);
  const int64_t h = cfg.num_heads, hd = cfg.head_dim;
  const int64_t rows_of[2] = {s / 2, s - s / 2};
  const int64_t heads_of[2] = {h / 2, h - h / 2};
  const nlohmann::json& world = row["world"];
  EXPECT_EQ(world["size"].get<int>(), 2);
  EXPECT_EQ(world["rows"], nlohmann::json::parse("[[0," + std::to_string(s / 2) + "],[" + std::to_string(s / 2) + "," +
                                                 std::to_string(s) + "]]"));
  EXPECT_EQ(world["heads"], nlohmann::json::parse("[[0," + std::to_string(h / 2) + "],[" + std::to_string(h / 2) + "," +
                                                  std::to_string(h) + "]]"));
  for (int r = 0; r < 2; ++r) {
    const int p = 1 - r;
    EXPECT_EQ(world["qkv_bytes_sent_per_rank"][r].get<int64_t>(), rows_of[r] * 3 * heads_of[p] * hd * 2) << r;
    EXPECT_EQ(world["qkv_bytes_received_per_rank"][r].get<int64_t>(), rows_of[p] * 3 * heads_of[r] * hd * 2) << r;
    EXPECT_EQ(world["out_bytes_sent_per_rank"][r].get<int64_t>(), rows_of[p] * heads_of[r] * hd * 2) << r;
    EXPECT_EQ(world["out_bytes_received_per_rank"][r].get<int64_t>(), rows_of[r] * heads_of[p] * hd * 2) << r;
    // Achieved bandwidth: bytes sent over the rank's p50 of the exchange.
    const double qkv_ms = (*component(row, "sp_all_to_all_qkv"))["ms_p50_per_rank"][r].get<double>();
    EXPECT_NEAR(world["qkv_GBps_per_rank"][r].get<double>(),
                static_cast<double>(rows_of[r] * 3 * heads_of[p] * hd * 2) / (qkv_ms * 1e6),
                1e-9 * world["qkv_GBps_per_rank"][r].get<double>());
  }
  EXPECT_GT(world["block_comm_ms_p50"].get<double>(), 0.0);
  ASSERT_EQ(world["block_ms_p50_per_rank"].size(), 2u);
  EXPECT_EQ(row["memory_peak_bytes_per_rank"].size(), 2u);
}

TEST(BenchWorld, StepAndRunWithTwoRanksGiveOneRowWithEveryRanksTimes) {
  int64_t s = 0;
  ModelConfig cfg;
  BenchOptions o = tiny_bench();
  o.reps = 4;  // bench step times reps / 4 = 1 forward after its warm-up
  auto rows = bench_ranks(2, &s, &cfg, bench_step, o);
  ASSERT_EQ(rows[0].size(), 1u);
  EXPECT_TRUE(rows[1].empty());
  const nlohmann::json& step = rows[0][0];
  EXPECT_NE(step["config"].get<std::string>().find(",world=2,"), std::string::npos) << step["config"];
  ASSERT_EQ(step["blocks"].size(), static_cast<size_t>(cfg.num_layers));
  for (const auto& b : step["blocks"]) {
    ASSERT_EQ(b["ms_p50_per_rank"].size(), 2u) << b.dump();
    for (const auto& v : b["ms_p50_per_rank"]) EXPECT_GT(v.get<double>(), 0.0) << b.dump();
  }
  EXPECT_EQ(step["world"]["size"].get<int>(), 2);
  o.steps = 2;
  rows = bench_ranks(2, &s, &cfg, bench_run, o);
  ASSERT_EQ(rows[0].size(), 1u);
  EXPECT_TRUE(rows[1].empty());
  const nlohmann::json& run = rows[0][0];
  EXPECT_NE(run["config"].get<std::string>().find(",world=2,"), std::string::npos) << run["config"];
  ASSERT_EQ(run["step_ms"].size(), 2u);
  EXPECT_EQ(run["memory_peak_bytes_per_rank"].size(), 2u);
}

TEST(BenchWorld, WorldOfOneRunsTheUlyssesPathWithNoBytesLeavingTheRank) {
  int64_t s = 0;
  ModelConfig cfg;
  const auto rows = bench_ranks(1, &s, &cfg);
  ASSERT_EQ(rows[0].size(), 1u);
  const nlohmann::json& row = rows[0][0];
  EXPECT_NE(row["config"].get<std::string>().find(",world=1,"), std::string::npos) << row["config"];
  for (const char* name : kSp) EXPECT_NE(component(row, name), nullptr) << name;
  EXPECT_EQ(row["world"]["qkv_bytes_sent_per_rank"][0].get<int64_t>(), 0);
  EXPECT_EQ(row["world"]["out_bytes_sent_per_rank"][0].get<int64_t>(), 0);
  EXPECT_TRUE(row["world"]["qkv_GBps"].is_null());
}

TEST(BenchWorld, NoWorldHasNoSpComponents) {
  Result<Workload> w = load_workload(tiny_spec(), {});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  Result<std::vector<nlohmann::json>> rows = bench_block(*w, tiny_bench(), env());
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  ASSERT_EQ(rows->size(), 1u);
  const nlohmann::json& row = (*rows)[0];
  EXPECT_EQ(row["config"].get<std::string>().find("world="), std::string::npos) << row["config"];
  EXPECT_FALSE(row.contains("world"));
  ASSERT_FALSE(row["components"].empty());
  for (const auto& c : row["components"]) EXPECT_NE(c["name"].get<std::string>().rfind("sp_", 0), 0u) << c["name"];
  EXPECT_NE(component(row, "attention"), nullptr);
}

TEST(BenchWorld, WorldLargerThanTheRowsIsRefusedBeforeTheWeightsLoad) {
  bool loaded = false;
  // A joined world of 10,000 ranks (no threads needed: the check runs before any collective).
  class BigWorld : public Communicator {
   public:
    int rank() const override { return 0; }
    int size() const override { return 10000; }
    std::string_view name() const override { return "test"; }
    Status all_to_all(const std::vector<Tensor>&, const std::vector<Tensor>&) override {
      return internal_error("unused");
    }
    Status all_gather(const Tensor&, const std::vector<Tensor>&) override { return internal_error("unused"); }
    Status broadcast(const Tensor&, int) override { return internal_error("unused"); }
    Status barrier() override { return internal_error("unused"); }
    void abort(const std::string&) override {}
  };
  JoinWorldFn join = [&](Backend&, std::unique_ptr<Communicator>& own) -> Result<Communicator*> {
    own = std::make_unique<BigWorld>();
    return own.get();
  };
  Result<Workload> w = load_workload(
      tiny_spec(), [&](const std::string& m) { loaded |= m.find("weights") == 0; }, join);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("needs at least one packed row per rank"), std::string::npos)
      << w.status().to_string();
  EXPECT_FALSE(loaded) << "refused before the weights load";
}

}  // namespace
}  // namespace vortex
