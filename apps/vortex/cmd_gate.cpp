// `vortex gate`: bit-exactness gates of a switch (measure/gate.h); writes the verdict JSON to
// benchmarks/<date>-<gpu>-gate.jsonl (and --out if given). Exit code 0 only when every check is identical.
#include <cstdio>
#include <fstream>
#include <string>

#include "commands.h"
#include "engine/workload.h"
#include "measure/gate.h"
#include "profiling/evidence.h"
#include "request_flags_cli.h"

namespace vortex::cli {

void register_gate(CLI::App& app, CommandContext& ctx) {
  auto* sub =
      app.add_subcommand("gate", "Bit-exact gates: gate blocks, one step, 2-step and N-step trajectories, A vs B");
  static WorkloadSpec spec;
  static GateOptions opts;
  static std::string evidence_dir = "benchmarks", out;
  static FlagValues flags;
  add_workload_options(sub, flags, spec);
  sub->add_option("--a", opts.a, "baseline switches")->capture_default_str();
  sub->add_option("--b", opts.b, "candidate switches")->capture_default_str();
  sub->add_option("--steps", opts.steps, "full trajectory length")->capture_default_str();
  sub->add_flag("--skip-full-trajectory", opts.skip_full_trajectory, "only blocks, one step and the 2-step trajectory");
  sub->add_option("--evidence-dir", evidence_dir)->capture_default_str();
  sub->add_option("--out", out, "also write the verdict JSON here");
  sub->callback([&ctx, sub]() {
    auto log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
    if (Status s = read_workload_flags(*sub, flags, spec); !s.ok()) {
      std::fprintf(stderr, "vortex gate: error: %s\n", s.message().c_str());
      ctx.exit_code = 2;
      return;
    }
    spec.device = ctx.device;
    auto w = load_workload(spec, log);
    if (!w.ok()) {
      std::fprintf(stderr, "vortex gate: error: %s\n", w.status().to_string().c_str());
      ctx.exit_code = exit_code_for(w.status());
      return;
    }
    auto verdict = run_gate(*w, opts);
    if (!verdict.ok()) {
      std::fprintf(stderr, "vortex gate: error: %s\n", verdict.status().to_string().c_str());
      ctx.exit_code = exit_code_for(verdict.status());
      return;
    }
    Backend::DeviceInfo dev = w->backend->device_info();
    RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);
    const auto& g = w->layout.geo;
    nlohmann::json row = *verdict;
    row["schema"] = "vortex-gate-1";
    row["commit"] = env.commit;
    row["dirty"] = env.dirty;
    row["time_utc"] = env.time_utc;
    row["gpu"] = env.gpu;
    row["workload"] = w->cfg.name + " " + std::to_string(g.width) + "x" + std::to_string(g.height) + "x" +
                      std::to_string(g.frames) + "f S=" + std::to_string(g.total_rows()) + " seed " +
                      std::to_string(spec.noise_seed);
    std::string path = evidence_path(evidence_dir, env, "gate");
    Status st = append_jsonl(path, {row});
    if (st.ok() && !out.empty()) {
      std::ofstream f(out);
      f << row.dump(2) << "\n";
      if (!f) st = io_error("cannot write " + out);
    }
    if (!st.ok()) {
      std::fprintf(stderr, "vortex gate: error: %s\n", st.to_string().c_str());
      ctx.exit_code = 1;
      return;
    }
    std::printf("evidence: %s\n", path.c_str());
    ctx.exit_code = row["pass"].get<bool>() ? 0 : 3;
  });
}

}  // namespace vortex::cli
