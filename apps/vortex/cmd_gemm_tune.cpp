// `vortex gemm-tune`: enumerate, check and time cuBLASLt algorithms for the four H3 GEMM shapes at
// M = 37,810 (BF16, FP8 per-tensor, FP8 blockwise), write the evidence JSON under benchmarks/ and the
// pinned table the GemmEngine loads (VORTEX_GEMM_TABLE), used only for the exact shapes proven here.
// `--bench` instead times the shapes with the engine's current choice (bench_gemm, p10/p50/p90).
#include <cstdio>
#include <ctime>
#include <string>

#include "commands.h"
#include "vortex/build_info.h"

#if VORTEX_WITH_CUDA
#include "core/strings.h"
#include "measure/gemm_evidence.h"
#include "measure/gemm_tune.h"

namespace vortex::cli {
namespace {

struct GemmTuneArgs {
  int64_t m = kCanonicalTokens;
  std::string shapes = "qkv,out,fc1,fc2";
  std::string precisions = "bf16,fp8_per_tensor,fp8_blockwise";
  int max_configs = 48;
  int reps = 10;
  int samples = 192;
  uint64_t seed = 1;
  std::string evidence;
  std::string table = "gemm_table.json";
  bool bench = false;
  int bench_reps = 20;
};

void log_line(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

int run(const GemmTuneArgs& a) {
  std::vector<GemmPrecision> precisions;
  for (const auto& name : split_list(a.precisions)) {
    auto p = gemm_precision_from_name(name);
    if (!p.ok()) {
      std::fprintf(stderr, "vortex gemm-tune: error: %s\n", p.status().to_string().c_str());
      return 2;
    }
    precisions.push_back(*p);
  }
  if (a.bench) {
    auto engine = GemmEngine::create();
    if (!engine.ok()) {
      std::fprintf(stderr, "vortex gemm-tune --bench: error: %s\n", engine.status().to_string().c_str());
      return 1;
    }
    GemmBenchOptions opt;
    opt.m = a.m;
    opt.reps = a.bench_reps;
    opt.precisions = precisions;
    opt.seed = a.seed;
    auto rows = bench_gemm(**engine, opt);
    if (!rows.ok()) {
      std::fprintf(stderr, "vortex gemm-tune --bench: error: %s\n", rows.status().to_string().c_str());
      return 1;
    }
    const RunEnvironment env = cuda_run_environment();  // clocks right after the timed GEMMs
    for (const auto& row : gemm_bench_evidence(*rows, env)) std::printf("%s\n", row.dump().c_str());
    return 0;
  }
  GemmTuneRunOptions opt;
  opt.tune.m = a.m;
  opt.tune.max_configs = a.max_configs;
  opt.tune.reps = a.reps;
  opt.tune.samples = a.samples;
  opt.tune.seed = a.seed;
  opt.shapes = split_list(a.shapes);
  opt.precisions = precisions;
  opt.table_path = a.table;
  opt.commit = VORTEX_GIT_COMMIT_STRING;
  opt.dirty = VORTEX_GIT_DIRTY;
  opt.evidence_path = a.evidence;
  if (opt.evidence_path.empty()) {
    char day[16] = {0};
    std::time_t now = std::time(nullptr);
    std::strftime(day, sizeof(day), "%Y-%m-%d", std::gmtime(&now));
    opt.evidence_path = std::string("benchmarks/") + day + "-gemm-tune.json";
  }
  Status st = run_gemm_tune(opt, &log_line);
  if (!st.ok()) {
    std::fprintf(stderr, "vortex gemm-tune: error: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void register_gemm_tune(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<GemmTuneArgs>();
  CLI::App* sub =
      app.add_subcommand("gemm-tune", "Enumerate, check, time and pin cuBLASLt GEMM algorithms (H3 shapes)");
  sub->add_option("--m", args->m, "token rows M")->capture_default_str();
  sub->add_option("--shapes", args->shapes, "comma list of qkv,out,fc1,fc2")->capture_default_str();
  sub->add_option("--precisions", args->precisions,
                  "comma list of bf16,f32,fp8_per_tensor,fp8_blockwise,nvfp4_emulated")
      ->capture_default_str();
  sub->add_option("--max-configs", args->max_configs, "candidates per shape")->capture_default_str();
  sub->add_option("--reps", args->reps, "timed runs per candidate (alternating)")->capture_default_str();
  sub->add_option("--samples", args->samples, "output elements checked vs FP64")->capture_default_str();
  sub->add_option("--seed", args->seed, "input seed")->capture_default_str();
  sub->add_option("--evidence", args->evidence, "evidence JSON (default benchmarks/<date>-gemm-tune.json)");
  sub->add_option("--table", args->table, "pinned table output")->capture_default_str();
  sub->add_flag("--bench", args->bench, "time the shapes with the engine's current choice instead (JSON lines)");
  sub->add_option("--bench-reps", args->bench_reps, "reps for --bench")->capture_default_str();
  sub->callback([args, &ctx]() { ctx.exit_code = run(*args); });
}

}  // namespace vortex::cli

#else  // CPU-only build: the subcommand exists and says why it cannot run.

namespace vortex::cli {

void register_gemm_tune(CLI::App& app, CommandContext& ctx) {
  CLI::App* sub =
      app.add_subcommand("gemm-tune", "Enumerate, check, time and pin cuBLASLt GEMM algorithms (needs CUDA)");
  sub->allow_extras();
  sub->callback([&ctx]() {
    std::fprintf(stderr,
                 "vortex gemm-tune: error: this vortex was built without CUDA (VORTEX_CUDA=OFF); "
                 "rebuild with the CUDA toolkit to tune cuBLASLt GEMMs\n");
    ctx.exit_code = 1;
  });
}

}  // namespace vortex::cli
#endif
