// `vortex bench block|step|run|ab`: loads a workload (default: synthetic h3 on cuda, canonical request)
// and writes evidence rows to benchmarks/<date>-<gpu>-bench-<what>.jsonl plus a short table.
// `--gpus N` (block, step, run) starts N rank processes like `vortex generate --gpus N`; each joins the NCCL
// world before the weights load and runs the same timed loop on its rows; rank 0 writes the one row.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "commands.h"
#include "engine/generate.h"
#include "engine/pipeline.h"
#include "engine/workload.h"
#include "measure/bench.h"
#include "model/packing.h"
#include "rank_options.h"

namespace vortex::cli {

namespace {

struct BenchArgs {
  WorkloadSpec spec;
  BenchOptions opts;
  std::string evidence_dir = "benchmarks";
  std::string gpus;          // --gpus N: one rank process per GPU
  std::string comm_timeout;  // --comm-timeout S
};

int bench_fail(int code, const std::string& message) {
  std::fprintf(stderr, "vortex bench: error: %s\n", message.c_str());
  return code;
}

// A world of `world` ranks needs at least one packed row per rank: checked before any rank starts or any
// weight loads (the config comes from its name or the checkpoint's header).
Status check_world_fits(const WorkloadSpec& spec, int world) {
  PipelineOptions options;
  options.config_name = spec.config;
  options.checkpoint_path = spec.checkpoint;
  options.synthetic_weights = spec.checkpoint.empty();
  VORTEX_ASSIGN_OR_RETURN(ModelConfig cfg, resolve_model_config(options));
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo,
                          make_geometry(cfg, spec.width, spec.height, spec.frames, spec.text_rows));
  return check_sequence_parallel(cfg, world, geo.total_rows());
}

int run_bench(const std::string& what, BenchArgs& args) {
  // ---- multi-GPU: the launcher (--gpus N) or one rank of a world (VORTEX_RANK / RANK in the environment) ----
  Result<std::optional<RankEnv>> rank_env = rank_env_from_environment();
  if (!rank_env.ok()) return bench_fail(2, rank_env.status().message());
  CommOptions comm;
  std::string error;
  if (!args.comm_timeout.empty() && !parse_comm_timeout(args.comm_timeout, comm, error)) return bench_fail(2, error);
  const bool ranked = !args.gpus.empty() || rank_env->has_value();
  if (ranked && what == "ab")
    return bench_fail(2,
                      "bench ab does not run with ranks (--gpus, a rank environment): it alternates switches "
                      "inside one process; run it on one device");
  if (ranked && args.spec.backend != "cuda")
    return bench_fail(2,
                      "--gpus and rank environments need --backend cuda (one rank process per GPU, over NCCL); "
                      "got --backend " +
                          args.spec.backend);
  if (!args.gpus.empty() && !rank_env->has_value()) {
    char* end = nullptr;
    const long n = std::strtol(args.gpus.c_str(), &end, 10);
    if (end == args.gpus.c_str() || *end != '\0' || n < 1 || n > 64)
      return bench_fail(2, "--gpus must be an integer between 1 and 64, got '" + args.gpus + "'");
    if (Status st = check_world_fits(args.spec, static_cast<int>(n)); !st.ok())
      return bench_fail(exit_code_for(st), st.to_string());
    std::fprintf(stderr, "vortex bench %s: starting %ld rank processes, one per GPU\n", what.c_str(), n);
    LaunchOptions lo;
    lo.argv = rank_command_line();
    lo.world = static_cast<int>(n);
    Result<LaunchResult> launched = launch_ranks(lo);
    if (!launched.ok()) return bench_fail(exit_code_for(launched.status()), launched.status().message());
    return launched->exit_code;
  }
  JoinWorldFn join;
  bool rank0 = true;
  if (rank_env->has_value()) {
    const RankEnv e = **rank_env;
    if (std::string e2 = select_local_rank_device(e); !e2.empty()) return bench_fail(2, e2);
    if (Status st = check_world_fits(args.spec, e.world); !st.ok())
      return bench_fail(exit_code_for(st), st.to_string());
    rank0 = e.rank == 0;
    join = [e, comm](Backend& backend, std::unique_ptr<Communicator>& own) -> Result<Communicator*> {
      VORTEX_ASSIGN_OR_RETURN(own, join_world(e, comm, backend));
      return own.get();
    };
  }
  // Ranks other than 0 run silently; rank 0 reports.
  auto log = [rank0](const std::string& m) {
    if (rank0) std::fprintf(stderr, "%s\n", m.c_str());
  };
  auto w = load_workload(args.spec, log, join);
  if (!w.ok()) {
    std::fprintf(stderr, "vortex bench: error: %s\n", w.status().to_string().c_str());
    return exit_code_for(w.status());
  }
  Backend::DeviceInfo dev = w->backend->device_info();
  RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);
  Result<std::vector<nlohmann::json>> rows = invalid_argument("unknown bench " + what);
  if (what == "block") rows = bench_block(*w, args.opts, env);
  else if (what == "step") rows = bench_step(*w, args.opts, env);
  else if (what == "run") rows = bench_run(*w, args.opts, env);
  else if (what == "ab") rows = bench_ab(*w, args.opts, env);
  if (!rows.ok()) {
    if (w->comm != nullptr) w->comm->abort(rows.status().message());  // peers fail at their next collective
    std::fprintf(stderr, "vortex bench %s: error: %s\n", what.c_str(), rows.status().to_string().c_str());
    return exit_code_for(rows.status());
  }
  if (!rank0) return 0;  // rank 0 gathered this rank's timings into its row
  std::string path = evidence_path(args.evidence_dir, env, "bench-" + what);
  Status st = append_jsonl(path, *rows);
  if (!st.ok()) {
    std::fprintf(stderr, "vortex bench: error: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("evidence: %s\n", path.c_str());
  return 0;
}

}  // namespace

void add_workload_options(CLI::App* sub, WorkloadSpec& spec) {
  sub->add_option("--config", spec.config, "h3 | h3-tiny")->capture_default_str();
  sub->add_option("--checkpoint", spec.checkpoint, "checkpoint file (default: synthetic weights on the backend)");
  sub->add_option("--backend", spec.backend, "cuda | cpu")->capture_default_str();
  sub->add_option("--threads", spec.threads, "CPU threads (cpu backend)");
  sub->add_option("--width", spec.width)->capture_default_str();
  sub->add_option("--height", spec.height)->capture_default_str();
  sub->add_option("--frames", spec.frames)->capture_default_str();
  sub->add_option("--text-rows", spec.text_rows, "synthetic refined text rows")->capture_default_str();
  sub->add_option("--weights-seed", spec.weights_seed)->capture_default_str();
  sub->add_option("--seed", spec.noise_seed)->capture_default_str();
  sub->add_option("--precision", spec.precision, "bf16 | fp8 | nvfp4 | nvfp4-weight-only")->capture_default_str();
  sub->add_option("--switches", spec.switches,
                  "over the policy defaults, e.g. fused, eager, attention=sage2, fused_gate_add=0");
}

void register_bench(CLI::App& app, CommandContext& ctx) {
  auto* bench = app.add_subcommand(
      "bench",
      "Benchmarks: block | step | run | ab (evidence JSONL under benchmarks/); block, step, run take --gpus N");
  bench->require_subcommand(1);
  static BenchArgs args;  // lives for the duration of main()
  const std::pair<const char*, const char*> kinds[] = {
      {"block",
       "One block (--block N): per-component device timings and the whole block; with --gpus N on every rank, "
       "the Ulysses sp_* regions and all-to-all bandwidth included"},
      {"step", "One full forward (every block): per-block and total timings"},
      {"run", "The sampling trajectory of --steps steps: per-step timings and peak memory"},
      {"ab", "Switches --a vs --b alternated A,B,A,B in one loaded model: per-pair time ratios"}};
  for (const auto& [what, description] : kinds) {
    auto* sub = bench->add_subcommand(what, description);
    add_workload_options(sub, args.spec);
    sub->add_option("--evidence-dir", args.evidence_dir)->capture_default_str();
    sub->add_option("--reps", args.opts.reps)->capture_default_str();
    sub->add_option("--warmup", args.opts.warmup)->capture_default_str();
    sub->add_option("--steps", args.opts.steps, "sampler steps (run; schedule for block inputs)")
        ->capture_default_str();
    if (std::string(what) == "block" || std::string(what) == "ab")
      sub->add_option("--block", args.opts.block)->capture_default_str();
    sub->add_option("--gpus", args.gpus,
                    std::string(what) == "ab"
                        ? "not with ab (refused: A/B pairs alternate inside one process)"
                        : "N GPUs: one rank process per GPU (Ulysses over NCCL, --backend cuda); every rank times the "
                          "same iterations, rank 0 writes one row with world=N, the slowest rank per component, every "
                          "rank's p50 and the all-to-all bytes and bandwidth (docs/multi_gpu.md)")
        ->type_name("N");
    if (std::string(what) != "ab")
      sub->add_option("--comm-timeout", args.comm_timeout,
                      "Seconds one collective may wait for the other ranks before the run fails (default 300)")
          ->type_name("S");
    if (std::string(what) == "ab") {
      sub->add_option("--a", args.opts.a, "baseline switches, e.g. eager")->required();
      sub->add_option("--b", args.opts.b, "candidate switches, e.g. fused")->required();
    }
    std::string name = what;
    sub->callback([&ctx, name]() {
      args.spec.device = ctx.device;
      ctx.exit_code = run_bench(name, args);
    });
  }
}

}  // namespace vortex::cli
