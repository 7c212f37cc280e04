// `vortex bench` implementations. See bench.h. Timings are device-timeline regions (CUDA events on the
// CUDA backend), medians over reps after warm-up; the block input is copied fresh before every rep.
#include "engine/bench.h"

#include <chrono>
#include <cstdio>
#include <map>

namespace vortex {

namespace {

// Copies `src` into `dst` (same shape) on the backend.
Status restore(Backend& be, const Tensor& src, Tensor& dst) { return be.copy(src, dst); }

std::string workload_name(const Workload& w) {
  const auto& g = w.layout.geo;
  return w.cfg.name + " " + std::to_string(g.width) + "x" + std::to_string(g.height) + "x" + std::to_string(g.frames) +
         "f S=" + std::to_string(g.total_rows());
}

// Runs block `index` once inside an outer (level 0) region named `name`; returns its device ms.
Result<double> timed_block(Workload& w, int index, Tensor& x, const StepTables& tables) {
  Backend& be = *w.backend;
  be.set_region_level(0);
  {
    BackendRegion r(be, "block", 0);
    Status st = w.model->run_block(index, x, tables);
    if (!st.ok()) {
      be.set_region_level(-1);
      return st;
    }
  }
  be.set_region_level(-1);
  VORTEX_ASSIGN_OR_RETURN(auto regions, be.take_regions());
  double ms = 0;
  for (const auto& [n, t] : regions) ms += t;
  return ms;
}

}  // namespace

Result<BlockInput> make_block_input(Workload& w, int block, int sampler_steps) {
  if (block < 0 || block >= w.cfg.num_layers)
    return invalid_argument("block " + std::to_string(block) + " outside [0, " + std::to_string(w.cfg.num_layers) +
                            ")");
  VORTEX_ASSIGN_OR_RETURN(auto sigmas, second_step_sigmas(w, sampler_steps));
  BlockInput in;
  VORTEX_ASSIGN_OR_RETURN(in.tables, w.model->make_step_tables(sigmas.first, sigmas.second));
  VORTEX_ASSIGN_OR_RETURN(in.x, w.model->embed_inputs(w.noise));
  for (int i = 0; i < block; ++i) VORTEX_RETURN_IF_ERROR(w.model->run_block(i, in.x, in.tables));
  VORTEX_RETURN_IF_ERROR(w.backend->synchronize());
  return in;
}

Result<std::vector<nlohmann::json>> bench_block(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  RunEnvironment env = env_in;
  Backend& be = *w.backend;
  VORTEX_ASSIGN_OR_RETURN(BlockInput in, make_block_input(w, o.block, o.steps));
  VORTEX_ASSIGN_OR_RETURN(Tensor x, be.alloc(in.x.shape(), in.x.dtype()));
  for (int i = 0; i < o.warmup; ++i) {
    VORTEX_RETURN_IF_ERROR(restore(be, in.x, x));
    VORTEX_RETURN_IF_ERROR(w.model->run_block(o.block, x, in.tables));
  }
  // Pass 1: whole block.
  std::vector<double> totals;
  for (int i = 0; i < o.reps; ++i) {
    VORTEX_RETURN_IF_ERROR(restore(be, in.x, x));
    VORTEX_ASSIGN_OR_RETURN(double ms, timed_block(w, o.block, x, in.tables));
    totals.push_back(ms);
  }
  // Pass 2: per-component regions emitted by the model (level 1).
  std::map<std::string, std::vector<double>> comp;
  std::vector<std::string> order;
  for (int i = 0; i < o.reps; ++i) {
    VORTEX_RETURN_IF_ERROR(restore(be, in.x, x));
    be.set_region_level(1);
    Status st = w.model->run_block(o.block, x, in.tables);
    be.set_region_level(-1);
    VORTEX_RETURN_IF_ERROR(st);
    VORTEX_ASSIGN_OR_RETURN(auto regions, be.take_regions());
    std::map<std::string, double> sum;
    for (const auto& [n, t] : regions) {
      if (!sum.count(n) && i == 0) order.push_back(n);
      sum[n] += t;
    }
    for (const auto& [n, t] : sum) comp[n].push_back(t);
  }
  refresh_clocks(env);
  Percentiles tp = percentiles(totals);
  nlohmann::json components = nlohmann::json::array();
  std::printf("\nblock %d  (%s, %s)\n", o.block, workload_name(w).c_str(),
              describe_switches(w.model->options()).c_str());
  std::printf("%-16s %10s %10s %10s %7s\n", "component", "p10 ms", "p50 ms", "p90 ms", "share");
  for (const auto& n : order) {
    Percentiles p = percentiles(comp[n]);
    components.push_back({{"name", n}, {"ms_p10", p.p10}, {"ms_p50", p.p50}, {"ms_p90", p.p90}, {"ms_p95", p.p95}});
    std::printf("%-16s %10.3f %10.3f %10.3f %6.1f%%\n", n.c_str(), p.p10, p.p50, p.p90, 100.0 * p.p50 / tp.p50);
  }
  std::printf("%-16s %10.3f %10.3f %10.3f\n", "block total", tp.p10, tp.p50, tp.p90);
  nlohmann::json extra = {{"block", o.block},
                          {"components", components},
                          {"memory_peak_bytes", be.memory_peak()},
                          {"check", "none (timing only; gates run in `vortex gate`)"}};
  return std::vector<nlohmann::json>{evidence_row(env, "block " + workload_name(w), "vortex " + std::string(be.name()),
                                                  describe_switches(w.model->options()), tp, {}, extra)};
}

Result<std::vector<nlohmann::json>> bench_step(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  RunEnvironment env = env_in;
  Backend& be = *w.backend;
  VORTEX_ASSIGN_OR_RETURN(auto sigmas, second_step_sigmas(w, o.steps));
  std::vector<double> totals;
  std::vector<std::vector<double>> per_block(static_cast<size_t>(w.cfg.num_layers));
  int reps = std::max(1, o.reps / 4);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 = warm-up
    auto t0 = std::chrono::steady_clock::now();
    VORTEX_ASSIGN_OR_RETURN(StepTables tables, w.model->make_step_tables(sigmas.first, sigmas.second));
    VORTEX_ASSIGN_OR_RETURN(Tensor x, w.model->embed_inputs(w.noise));
    be.set_region_level(0);
    for (int i = 0; i < w.cfg.num_layers; ++i) {
      BackendRegion r(be, "block", 0);
      Status st = w.model->run_block(i, x, tables);
      if (!st.ok()) {
        be.set_region_level(-1);
        return st;
      }
    }
    be.set_region_level(-1);
    VORTEX_ASSIGN_OR_RETURN(AvLatents v, w.model->final_layer(x, tables));
    VORTEX_RETURN_IF_ERROR(be.synchronize());
    double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    VORTEX_ASSIGN_OR_RETURN(auto regions, be.take_regions());
    if (rep < 0) continue;
    totals.push_back(wall);
    for (size_t i = 0; i < regions.size() && i < per_block.size(); ++i) per_block[i].push_back(regions[i].second);
  }
  refresh_clocks(env);
  Percentiles tp = percentiles(totals);
  nlohmann::json blocks = nlohmann::json::array();
  double sum_p50 = 0;
  for (size_t i = 0; i < per_block.size(); ++i) {
    Percentiles p = percentiles(per_block[i]);
    sum_p50 += p.p50;
    blocks.push_back({{"block", i}, {"ms_p50", p.p50}, {"ms_p10", p.p10}, {"ms_p90", p.p90}});
  }
  std::printf("\nstep (%s, %s): total p50 %.1f ms (wall, incl. tables/embed/final), blocks sum p50 %.1f ms, n=%d\n",
              workload_name(w).c_str(), describe_switches(w.model->options()).c_str(), tp.p50, sum_p50, tp.n);
  nlohmann::json extra = {{"blocks", blocks},
                          {"blocks_sum_ms_p50", sum_p50},
                          {"memory_peak_bytes", be.memory_peak()},
                          {"check", "none (timing only)"}};
  return std::vector<nlohmann::json>{evidence_row(env, "step " + workload_name(w), "vortex " + std::string(be.name()),
                                                  describe_switches(w.model->options()), tp, {}, extra)};
}

Result<std::vector<nlohmann::json>> bench_run(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  RunEnvironment env = env_in;
  Backend& be = *w.backend;
  const SamplerSpec spec = workload_sampler(w, o.steps);
  std::vector<double> step_ms;
  auto last = std::chrono::steady_clock::now();
  DenoiseFn fn = [&](const AvLatents& x, double sv, double sa, int step) -> Result<AvLatents> {
    auto r = w.model->forward(x, sv, sa);
    auto now = std::chrono::steady_clock::now();
    step_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
    std::fprintf(stderr, "  step %d/%d  %.1f ms\n", step + 1, spec.steps, step_ms.back());
    return r;
  };
  auto t0 = std::chrono::steady_clock::now();
  last = t0;
  VORTEX_ASSIGN_OR_RETURN(AvLatents out, sample_av(spec, w.noise, fn));
  double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  refresh_clocks(env);
  Percentiles p = percentiles(step_ms);
  std::printf("\nrun (%s, %d steps, %s): total %.2f s, per step p50 %.1f ms, peak memory %.2f GB\n",
              workload_name(w).c_str(), spec.steps, describe_switches(w.model->options()).c_str(), total / 1000.0,
              p.p50, static_cast<double>(be.memory_peak()) / 1e9);
  nlohmann::json extra = {{"steps", spec.steps},
                          {"total_ms", total},
                          {"step_ms", step_ms},
                          {"memory_peak_bytes", be.memory_peak()},
                          {"check", "none (timing only; `vortex gate` checks trajectories)"}};
  return std::vector<nlohmann::json>{evidence_row(env, "run " + workload_name(w), "vortex " + std::string(be.name()),
                                                  describe_switches(w.model->options()), p, {}, extra)};
}

Result<std::vector<nlohmann::json>> bench_ab(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  RunEnvironment env = env_in;
  Backend& be = *w.backend;
  ExecOptions base = w.model->options();
  ExecOptions a = base, b = base;
  VORTEX_RETURN_IF_ERROR(apply_switches(o.a, a));
  VORTEX_RETURN_IF_ERROR(apply_switches(o.b, b));
  VORTEX_ASSIGN_OR_RETURN(BlockInput in, make_block_input(w, o.block, o.steps));
  VORTEX_ASSIGN_OR_RETURN(Tensor x, be.alloc(in.x.shape(), in.x.dtype()));
  std::vector<double> ta, tb, ratio;
  for (int i = -o.warmup; i < o.reps; ++i) {
    double ms[2];
    for (int k = 0; k < 2; ++k) {
      w.model->options() = k == 0 ? a : b;
      VORTEX_RETURN_IF_ERROR(restore(be, in.x, x));
      VORTEX_ASSIGN_OR_RETURN(ms[k], timed_block(w, o.block, x, in.tables));
    }
    if (i < 0) continue;
    ta.push_back(ms[0]);
    tb.push_back(ms[1]);
    ratio.push_back(ms[1] / ms[0]);
  }
  w.model->options() = base;
  refresh_clocks(env);
  Percentiles pa = percentiles(ta), pb = percentiles(tb), pr = percentiles(ratio);
  std::printf(
      "\nab block %d (%s)\n  A [%s]: p50 %.3f ms\n  B [%s]: p50 %.3f ms\n  B/A per-pair ratio: p10 %.4f p50 %.4f p90 "
      "%.4f (n=%d)\n",
      o.block, workload_name(w).c_str(), describe_switches(a).c_str(), pa.p50, describe_switches(b).c_str(), pb.p50,
      pr.p10, pr.p50, pr.p90, pr.n);
  std::string wl = "ab block " + std::to_string(o.block) + " " + workload_name(w);
  // ratio: the median of per-pair B/A ratios (alternating pairs cancel clock drift between A and B).
  const EvidenceBaseline baseline{"vortex " + std::string(be.name()) + " A: " + describe_switches(a), pa.p50, pr.p50};
  nlohmann::json extra_b = {{"block", o.block},
                            {"ratio_p10", pr.p10},
                            {"ratio_p90", pr.p90},
                            {"check", "alternating A,B pairs in one process; E0 checked by `vortex gate`"}};
  return std::vector<nlohmann::json>{
      evidence_row(env, wl, "vortex " + std::string(be.name()) + " B", describe_switches(b), pb, baseline, extra_b)};
}

}  // namespace vortex
