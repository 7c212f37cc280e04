// `vortex bench block|step|run|ab`: loads a workload (default: synthetic h3 on cuda, canonical request)
// and writes evidence rows to benchmarks/<date>-<gpu>-bench-<what>.jsonl plus a short table.
#include <cstdio>
#include <string>
#include <utility>

#include "commands.h"
#include "engine/bench.h"
#include "engine/workload.h"

namespace vortex::cli {

namespace {

struct BenchArgs {
  WorkloadSpec spec;
  BenchOptions opts;
  std::string evidence_dir = "benchmarks";
};

int run_bench(const std::string& what, BenchArgs& args) {
  auto log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  auto w = load_workload(args.spec, log);
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
    std::fprintf(stderr, "vortex bench %s: error: %s\n", what.c_str(), rows.status().to_string().c_str());
    return exit_code_for(rows.status());
  }
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
  auto* bench = app.add_subcommand("bench", "Benchmarks: block | step | run | ab (evidence JSONL under benchmarks/)");
  bench->require_subcommand(1);
  static BenchArgs args;  // lives for the duration of main()
  const std::pair<const char*, const char*> kinds[] = {
      {"block", "One block (--block N): per-component device timings and the whole block"},
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
