// step_graph_bench: one H3 denoiser step (AdaLN tables, input projections, all blocks, final layer and
// heads: H3Model::run_step) at a small request, eager launches vs the replayed CUDA graph (issue 16 item 4).
// Synthetic weights on the device (the real H3 dims, 50 blocks, ~66 GB in BF16), synthetic refined text.
//   step time:  CUDA events around run_step on the backend stream (inputs staged before, outputs read
//               after, neither timed), in alternating chunks eager / graph (a chunk of graph steps starts with
//               an untimed warm-up and capture); per-pair ratio = graph chunk p50 / eager chunk p50.
//   busy time:  the eager program captured with the model's per-op profiling regions (each region's events
//               become event-record nodes) and replayed: with nothing waiting on the host, a region's time is
//               its kernels' time (plus the <= 1-2 us between kernels inside one op). busy = the sum over
//               all regions of the step; idle fraction = 1 - busy / step time, for eager and for graph.
//   check:      the graph replay's velocity bytes == the eager step's on the same input (E0).
// Writes OUT_DIR/<date>-<gpu>-step-graph.jsonl (vortex-evidence-1) and prints a table.
//   step_graph_bench OUT_DIR [--config h3] [--width 512] [--height 512] [--frames 22] [--text-rows 100]
//                    [--reps 20] [--chunk 5] [--busy-reps 5] [--precision bf16] [--switches LIST]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "engine/workload.h"
#include "measure/gemm_evidence.h"
#include "profiling/evidence.h"

namespace vortex {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Options {
  std::string out_dir;
  WorkloadSpec spec;
  int reps = 20, chunk = 5, busy_reps = 5;
};

struct StepTiming {
  double device_ms = 0;  // events around run_step
  double wall_ms = 0;    // stage + run + finish on the host clock (what the sampler sees per step)
  StepGraphAction action = StepGraphAction::kEager;
};

class Events {
 public:
  Status init() {
    VORTEX_CUDA_CHECK(cudaEventCreate(&a_));
    VORTEX_CUDA_CHECK(cudaEventCreate(&b_));
    return Status::Ok();
  }
  ~Events() {
    if (a_) (void)cudaEventDestroy(a_);
    if (b_) (void)cudaEventDestroy(b_);
  }
  cudaEvent_t a() const { return a_; }
  cudaEvent_t b() const { return b_; }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

Result<StepTiming> timed_step(H3Model& m, CudaBackend& be, const Events& ev, const AvLatents& x, double sv, double sa,
                              AvLatents* out = nullptr) {
  StepTiming t;
  const auto t0 = Clock::now();
  VORTEX_RETURN_IF_ERROR(m.stage_step(x, sv, sa));
  VORTEX_CUDA_CHECK(cudaEventRecord(ev.a(), be.stream()));
  VORTEX_RETURN_IF_ERROR(m.run_step());
  VORTEX_CUDA_CHECK(cudaEventRecord(ev.b(), be.stream()));
  VORTEX_ASSIGN_OR_RETURN(AvLatents v, m.finish_step());  // synchronizes (downloads)
  t.wall_ms = ms_since(t0);
  float ms = 0;
  VORTEX_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a(), ev.b()));
  t.device_ms = ms;
  t.action = m.last_step_action();
  if (out) *out = std::move(v);
  return t;
}

// Sum of the per-op region times of one step, the eager program replayed as a graph (see the header).
Result<double> busy_ms(H3Model& m, CudaBackend& be, const AvLatents& x, double sv, double sa,
                       std::vector<std::pair<std::string, double>>* regions_out) {
  const CudaGraphMode mode = m.options().cuda_graph;
  m.options().cuda_graph = CudaGraphMode::kOff;  // run_step issues the eager program into our capture
  be.set_region_level(1);
  // One profiled eager step first: its events return to the backend's pool, so the capture creates none.
  Status st = m.stage_step(x, sv, sa);
  if (st.ok()) st = m.run_step();
  if (st.ok()) st = be.take_regions().status();
  if (st.ok()) st = m.stage_step(x, sv, sa);
  std::unique_ptr<Backend::Graph> graph;
  if (st.ok()) st = be.begin_capture();
  if (st.ok()) {
    Status work = m.run_step();
    auto g = be.end_capture();
    st = !work.ok() ? work : g.status();
    if (st.ok()) graph = std::move(g).value();
  }
  be.set_region_level(-1);
  m.options().cuda_graph = mode;
  VORTEX_RETURN_IF_ERROR(st);
  VORTEX_RETURN_IF_ERROR(be.replay(*graph));
  VORTEX_ASSIGN_OR_RETURN(auto regions, be.take_regions());
  double sum = 0;
  for (const auto& [name, ms] : regions) sum += ms;
  if (regions_out) *regions_out = std::move(regions);
  return sum;
}

bool same_bytes(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

Result<int> run(const Options& o) {
  auto log = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  WorkloadSpec spec = o.spec;
  spec.backend = "cuda";
  std::fprintf(stderr, "loading %s (synthetic weights on the device) ...\n", spec.config.c_str());
  VORTEX_ASSIGN_OR_RETURN(Workload w, load_workload(spec, log));
  auto* be = dynamic_cast<CudaBackend*>(w.backend);
  if (be == nullptr) return internal_error("step_graph_bench needs the cuda backend");
  H3Model& m = *w.model;
  VORTEX_ASSIGN_OR_RETURN(auto sigmas, second_step_sigmas(w, 12));
  const double sv = sigmas.first, sa = sigmas.second;
  Events ev;
  VORTEX_RETURN_IF_ERROR(ev.init());
  const ExecOptions base = m.options();
  ExecOptions eager = base, graphed = base;
  eager.cuda_graph = CudaGraphMode::kOff;
  graphed.cuda_graph = CudaGraphMode::kOn;

  // ---- check: graph replay bytes == eager bytes, same input --------------------------------------
  m.options() = eager;
  AvLatents v_eager, v_graph;
  VORTEX_RETURN_IF_ERROR(timed_step(m, *be, ev, w.noise, sv, sa, &v_eager).status());  // also the warm-up
  m.options() = graphed;
  StepGraphAction last = StepGraphAction::kEager;
  for (int i = 0; i < 3; ++i) {  // warm-up, capture, replay
    VORTEX_ASSIGN_OR_RETURN(StepTiming t, timed_step(m, *be, ev, w.noise, sv, sa, &v_graph));
    last = t.action;
  }
  if (last != StepGraphAction::kReplay)
    return internal_error("the step was not replayed as a graph: " + m.step_graph_stats().fallback);
  const bool identical = same_bytes(v_eager, v_graph);
  std::fprintf(stderr, "check: graph replay vs eager velocity: %s\n", identical ? "identical bytes" : "DIFFER");

  // ---- timing: alternating chunks ------------------------------------------------------------------
  std::vector<double> dev_e, dev_g, wall_e, wall_g, pair_ratio;
  std::vector<int> clocks;
  RunEnvironment env = cuda_run_environment();
  const int chunks = std::max(1, (o.reps + o.chunk - 1) / o.chunk);
  for (int c = -1; c < chunks; ++c) {  // chunk -1: warm-up of both modes
    std::vector<double> ce, cg;
    m.options() = eager;
    for (int k = 0; k < o.chunk; ++k) {
      VORTEX_ASSIGN_OR_RETURN(StepTiming t, timed_step(m, *be, ev, w.noise, sv, sa));
      ce.push_back(t.device_ms);
      if (c >= 0) wall_e.push_back(t.wall_ms);
    }
    m.options() = graphed;
    for (int k = 0; k < 2; ++k)  // warm-up + capture (untimed)
      VORTEX_RETURN_IF_ERROR(timed_step(m, *be, ev, w.noise, sv, sa).status());
    for (int k = 0; k < o.chunk; ++k) {
      VORTEX_ASSIGN_OR_RETURN(StepTiming t, timed_step(m, *be, ev, w.noise, sv, sa));
      if (t.action != StepGraphAction::kReplay)
        return internal_error(std::string("a timed graph step ran as ") + step_graph_action_name(t.action) + ": " +
                              m.step_graph_stats().fallback);
      cg.push_back(t.device_ms);
      if (c >= 0) wall_g.push_back(t.wall_ms);
    }
    if (c < 0) continue;
    dev_e.insert(dev_e.end(), ce.begin(), ce.end());
    dev_g.insert(dev_g.end(), cg.begin(), cg.end());
    pair_ratio.push_back(quantile(cg, 0.5) / quantile(ce, 0.5));
    refresh_clocks(env);
    clocks.push_back(env.clock_sm_mhz);
  }
  m.options() = base;

  // ---- busy time ------------------------------------------------------------------------------------
  std::vector<double> busy;
  std::vector<std::pair<std::string, double>> regions;
  std::string busy_error;
  for (int i = 0; i < o.busy_reps; ++i) {
    Result<double> b = busy_ms(m, *be, w.noise, sv, sa, &regions);
    if (!b.ok()) {
      busy_error = b.status().to_string();
      break;
    }
    busy.push_back(*b);
  }

  refresh_clocks(env);
  const Percentiles pe = percentiles(dev_e), pg = percentiles(dev_g), pr = percentiles(pair_ratio);
  const Percentiles pwe = percentiles(wall_e), pwg = percentiles(wall_g), pb = percentiles(busy);
  const auto& g = w.layout.geo;
  const std::string wl = "step " + w.cfg.name + " " + std::to_string(g.width) + "x" + std::to_string(g.height) + "x" +
                         std::to_string(g.frames) + "f S=" + std::to_string(g.total_rows());
  const std::string cfg = describe_switches(base);
  auto idle = [&](double step_ms) -> nlohmann::json {
    if (busy.empty() || step_ms <= 0) return nullptr;
    return 1.0 - pb.p50 / step_ms;
  };
  std::sort(clocks.begin(), clocks.end());
  nlohmann::json clock_samples = clocks;
  nlohmann::json busy_regions = nlohmann::json::object();
  for (const auto& [name, ms] : regions) busy_regions[name] = busy_regions.value(name, 0.0) + ms;
  const std::string check = identical ? "E0: graph replay velocity bytes == eager step bytes on the same input"
                                      : "FAILED: graph replay velocity differs from the eager step";
  const nlohmann::json common = {
      {"layers", w.cfg.num_layers},
      {"rows", g.total_rows()},
      {"timed", "events around H3Model::run_step (AdaLN tables, input projections, all blocks, final layer, heads)"},
      {"busy_ms_p50", busy.empty() ? nlohmann::json(nullptr) : nlohmann::json(pb.p50)},
      {"busy_n", pb.n},
      {"busy_method", "sum of per-op profiling regions, eager program captured with event-record nodes and replayed"},
      {"busy_error", busy_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(busy_error)},
      {"busy_regions_ms", busy_regions},
      {"sm_clock_mhz_per_chunk", clock_samples},
      {"memory_peak_bytes", be->memory_peak()},
      {"check", check}};
  nlohmann::json extra_e = common, extra_g = common;
  extra_e["idle_fraction"] = idle(pe.p50);
  extra_e["forward_wall_ms_p50"] = pwe.p50;
  extra_g["idle_fraction"] = idle(pg.p50);
  extra_g["forward_wall_ms_p50"] = pwg.p50;
  extra_g["eager_idle_fraction"] = idle(pe.p50);
  extra_g["ratio_p10"] = pr.p10;
  extra_g["ratio_p90"] = pr.p90;
  extra_g["captures"] = m.step_graph_stats().captures;
  const std::vector<nlohmann::json> rows = {
      evidence_row(env, wl, "vortex cuda eager", cfg + ",cuda_graph=off", pe, {}, extra_e),
      evidence_row(env, wl, "vortex cuda graph", cfg + ",cuda_graph=on", pg,
                   EvidenceBaseline{"vortex cuda eager " + cfg + ",cuda_graph=off", pe.p50, pr.p50}, extra_g)};
  const std::string path = evidence_path(o.out_dir, env, "step-graph");
  VORTEX_RETURN_IF_ERROR(append_jsonl(path, rows));

  std::printf("\n%s, %d blocks (%s)\n", wl.c_str(), w.cfg.num_layers, cfg.c_str());
  std::printf("%-8s %9s %9s %9s %11s %8s\n", "mode", "p10 ms", "p50 ms", "p90 ms", "fwd wall", "idle");
  auto line = [&](const char* name, const Percentiles& p, const Percentiles& wall) {
    const nlohmann::json f = idle(p.p50);
    std::printf("%-8s %9.3f %9.3f %9.3f %11.3f %7s\n", name, p.p10, p.p50, p.p90, wall.p50,
                f.is_null() ? "n/a" : (std::to_string(100.0 * f.get<double>()).substr(0, 5) + "%").c_str());
  };
  line("eager", pe, pwe);
  line("graph", pg, pwg);
  std::printf("graph / eager per-pair ratio: p10 %.4f p50 %.4f p90 %.4f (%d pairs of %d steps)\n", pr.p10, pr.p50,
              pr.p90, pr.n, o.chunk);
  if (!busy.empty()) std::printf("busy (sum of op times) p50 %.3f ms over %d captures\n", pb.p50, pb.n);
  else std::printf("busy: not measured (%s)\n", busy_error.c_str());
  std::printf("SM clock per chunk (MHz): %s\ncheck: %s\nevidence: %s\n", clock_samples.dump().c_str(), check.c_str(),
              path.c_str());
  return identical ? 0 : 1;
}

}  // namespace
}  // namespace vortex

int main(int argc, char** argv) {
  vortex::Options o;
  o.spec.config = "h3";
  o.spec.width = 512;
  o.spec.height = 512;
  o.spec.frames = 22;
  o.spec.text_rows = 100;
  const char* usage =
      "usage: step_graph_bench OUT_DIR [--config h3] [--width 512] [--height 512] [--frames 22] [--text-rows 100]\n"
      "                        [--reps 20] [--chunk 5] [--busy-reps 5] [--precision bf16] [--switches LIST]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      if (!o.out_dir.empty()) return std::fprintf(stderr, "%s", usage), 2;
      o.out_dir = a;
      continue;
    }
    if (i + 1 >= argc) return std::fprintf(stderr, "step_graph_bench: missing value after %s\n%s", a.c_str(), usage), 2;
    const std::string v = argv[++i];
    if (a == "--config") o.spec.config = v;
    else if (a == "--width") o.spec.width = std::atoi(v.c_str());
    else if (a == "--height") o.spec.height = std::atoi(v.c_str());
    else if (a == "--frames") o.spec.frames = std::atoi(v.c_str());
    else if (a == "--text-rows") o.spec.text_rows = std::atoi(v.c_str());
    else if (a == "--reps") o.reps = std::atoi(v.c_str());
    else if (a == "--chunk") o.chunk = std::atoi(v.c_str());
    else if (a == "--busy-reps") o.busy_reps = std::atoi(v.c_str());
    else if (a == "--precision") o.spec.precision = v;
    else if (a == "--switches") o.spec.switches = v;
    else return std::fprintf(stderr, "step_graph_bench: unknown option %s\n%s", a.c_str(), usage), 2;
  }
  if (o.out_dir.empty() || o.reps < 1 || o.chunk < 1 || o.busy_reps < 0) return std::fprintf(stderr, "%s", usage), 2;
  auto r = vortex::run(o);
  if (!r.ok()) {
    std::fprintf(stderr, "step_graph_bench: %s\n", r.status().to_string().c_str());
    return 1;
  }
  return *r;
}
