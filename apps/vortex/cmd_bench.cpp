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
#include "request_flags_cli.h"

namespace vortex::cli {

namespace {

struct BenchArgs {
  WorkloadSpec spec;
  FlagValues flags;  // the option table's workload flags (add_workload_options)
  BenchOptions opts;
  std::string evidence_dir = "benchmarks";
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

int run_bench(const std::string& what, BenchArgs& args, const CLI::App& sub) {
  if (Status s = read_workload_flags(sub, args.flags, args.spec); !s.ok()) return bench_fail(2, s.message());
  api::RequestSpec world;  // --gpus, --comm-timeout
  for (const char* flag : {"--gpus", "--comm-timeout"})
    if (Status s = parse_given_flag(sub, args.flags, flag, world); !s.ok()) return bench_fail(2, s.message());
  // ---- multi-GPU: the launcher (--gpus N) or one rank of a world (VORTEX_RANK / RANK in the environment) ----
  Result<std::optional<RankEnv>> rank_env = rank_env_from_environment();
  if (!rank_env.ok()) return bench_fail(2, rank_env.status().message());
  CommOptions comm;
  if (world.comm_timeout_seconds > 0.0)
    comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(world.comm_timeout_seconds * 1000.0));
  const bool ranked = world.gpus > 0 || rank_env->has_value();
  if (ranked && what == "ab")
    return bench_fail(2,
                      "bench ab does not run with ranks (--gpus, a rank environment): it alternates switches "
                      "inside one process; run it on one device");
  if (ranked && args.spec.backend != "cuda")
    return bench_fail(2,
                      "--gpus and rank environments need --backend cuda (one rank process per GPU, over NCCL); "
                      "got --backend " +
                          args.spec.backend);
  if (world.gpus > 0 && !rank_env->has_value()) {
    const int n = world.gpus;
    if (Status st = check_world_fits(args.spec, static_cast<int>(n)); !st.ok())
      return bench_fail(exit_code_for(st), st.to_string());
    std::fprintf(stderr, "vortex bench %s: starting %d rank processes, one per GPU\n", what.c_str(), n);
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

void add_workload_options(CLI::App* sub, FlagValues& flags, WorkloadSpec& spec) {
  add_request_flags(sub, flags,
                    {{"--config", "h3 | h3-tiny (default h3)"},
                     {"--checkpoint", "checkpoint file (default: synthetic weights on the backend)"},
                     {"--backend", "cuda | cpu (default cuda)"},
                     {"--threads", "CPU threads (cpu backend)"},
                     {"--width", "Pixels (default 1344)"},
                     {"--height", "Pixels (default 768)"},
                     {"--frames", "Pixel frames (default 124)"},
                     {"--weights-seed"},
                     {"--seed", "Noise seed (default 42)"},
                     {"--precision", "bf16 | fp8 | nvfp4 | nvfp4-weight-only (default bf16)"},
                     {"--switches", "over the policy defaults, e.g. fused, eager, attention=sage2, fused_gate_add=0"}});
  sub->add_option("--text-rows", spec.text_rows, "synthetic refined text rows")->capture_default_str();
}

Status read_workload_flags(const CLI::App& sub, const FlagValues& flags, WorkloadSpec& spec) {
  api::RequestSpec s;
  VORTEX_RETURN_IF_ERROR(parse_given_flags(sub, flags, s));
  if (s.random_seed)
    return invalid_argument("--seed -1 (a random seed) is for generate; benchmarks take a fixed --seed");
  if (s.has("--config")) spec.config = s.load.config_name;
  if (s.has("--checkpoint")) spec.checkpoint = s.load.checkpoint_path;
  if (s.has("--backend")) spec.backend = backend_kind_name(s.load.backend);
  if (s.has("--threads")) spec.threads = s.load.threads;
  if (s.has("--width")) spec.width = s.run.width;
  if (s.has("--height")) spec.height = s.run.height;
  if (s.has("--frames")) spec.frames = s.run.frames;
  if (s.has("--weights-seed")) spec.weights_seed = s.load.weights_seed;
  if (s.has("--seed")) spec.noise_seed = s.run.seed;
  if (s.has("--precision")) spec.precision = precision_name(s.load.precision);
  if (s.has("--switches")) spec.switches = s.load.switches;
  return Status::Ok();
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
    add_workload_options(sub, args.flags, args.spec);
    sub->add_option("--evidence-dir", args.evidence_dir)->capture_default_str();
    sub->add_option("--reps", args.opts.reps)->capture_default_str();
    sub->add_option("--warmup", args.opts.warmup)->capture_default_str();
    sub->add_option("--steps", args.opts.steps, "sampler steps (run; schedule for block inputs)")
        ->capture_default_str();
    if (std::string(what) == "block" || std::string(what) == "ab")
      sub->add_option("--block", args.opts.block)->capture_default_str();
    add_request_flags(
        sub, args.flags,
        {{"--gpus", std::string(what) == "ab"
                        ? "not with ab (refused: A/B pairs alternate inside one process)"
                        : "N GPUs: one rank process per GPU (Ulysses over NCCL, --backend cuda); every rank times the "
                          "same iterations, rank 0 writes one row with world=N, the slowest rank per component, every "
                          "rank's p50 and the all-to-all bytes and bandwidth (docs/multi_gpu.md)"}});
    if (std::string(what) != "ab") add_request_flags(sub, args.flags, {{"--comm-timeout"}});
    if (std::string(what) == "ab") {
      sub->add_option("--a", args.opts.a, "baseline switches, e.g. eager")->required();
      sub->add_option("--b", args.opts.b, "candidate switches, e.g. fused")->required();
    }
    std::string name = what;
    sub->callback([&ctx, name, sub]() {
      args.spec.device = ctx.device;
      ctx.exit_code = run_bench(name, args, *sub);
    });
  }
}

}  // namespace vortex::cli
