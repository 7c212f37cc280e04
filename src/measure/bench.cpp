// `vortex bench` implementations. See bench.h. Timings are device-timeline regions (CUDA events on the
// CUDA backend), medians over reps after warm-up; the block input is copied fresh before every rep.
// With a world (Workload::comm) every rank runs the same loop on its rows, a barrier starts every timed
// iteration on all ranks together, and rank 0 gathers the ranks' timings into one row (docs/multi_gpu.md
// "Benchmarks with ranks").
#include "measure/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "engine/pipeline.h"

namespace vortex {

namespace {

// Copies `src` into `dst` (same shape) on the backend.
Status restore(Backend& be, const Tensor& src, Tensor& dst) { return be.copy(src, dst); }

// The block on this rank: all S rows on one device, the rank's rows (UlyssesPlan) with a world.
Status bench_run_block(Workload& w, int index, Tensor& x, const StepTables& tables) {
  return w.comm != nullptr ? w.model->run_block_shard(index, x, tables) : w.model->run_block(index, x, tables);
}

// Before every timed iteration: the ranks start it together (the collective returns once every rank has
// arrived and the backend's stream is idle), so every rank times the same iteration.
Status align_ranks(Workload& w) {
  return w.comm != nullptr ? w.comm->barrier().with_context("bench: barrier before a timed iteration") : Status::Ok();
}

bool leader(const Workload& w) { return w.comm == nullptr || w.comm->rank() == 0; }

// Every rank's `mine` on every rank, in rank order (all_gather_bytes of its JSON text).
Result<std::vector<nlohmann::json>> gather_json(Workload& w, const nlohmann::json& mine) {
  VORTEX_ASSIGN_OR_RETURN(std::vector<std::string> texts,
                          all_gather_bytes(*w.comm, *w.backend, mine.dump(), "bench: gathering the ranks' timings"));
  std::vector<nlohmann::json> all;
  for (const std::string& t : texts) all.push_back(nlohmann::json::parse(t));
  return all;
}

// Per iteration, the slowest rank: a sequence-parallel block (step) ends when its last rank does.
std::vector<double> max_over_ranks(const std::vector<nlohmann::json>& ranks, const char* key) {
  std::vector<double> out;
  for (const auto& r : ranks) {
    const std::vector<double> v = r.at(key).get<std::vector<double>>();
    if (out.size() < v.size()) out.resize(v.size(), 0.0);
    for (size_t i = 0; i < v.size(); ++i) out[i] = std::max(out[i], v[i]);
  }
  return out;
}

// The row's config: the switches, plus the world when the run has one.
std::string bench_config(const Workload& w) {
  std::string c = describe_switches(w.model->options());
  if (w.comm != nullptr) c += ",world=" + std::to_string(w.comm->size()) + ",comm=" + std::string(w.comm->name());
  return c;
}

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
    Status st = bench_run_block(w, index, x, tables);
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

// The exchange geometry of the world (the UlyssesPlan every rank builds in prepare()) and the bytes each
// rank moves to and from its peers per block, per all-to-all.
nlohmann::json ulysses_geometry(const Workload& w) {
  const int u = w.comm->size();
  const int64_t s = w.layout.geo.total_rows(), hd = w.cfg.head_dim,
                elt = static_cast<int64_t>(dtype_size(DType::kBF16));
  std::vector<Span> rows, heads;
  for (int j = 0; j < u; ++j) {
    rows.push_back(even_split(s, u, j));
    heads.push_back(even_split(w.cfg.num_heads, u, j));
  }
  nlohmann::json out = {{"size", u}, {"comm", std::string(w.comm->name())}};
  nlohmann::json rj = nlohmann::json::array(), hj = nlohmann::json::array();
  std::vector<int64_t> qkv_sent, qkv_recv, out_sent, out_recv;
  for (int r = 0; r < u; ++r) {
    const auto R = static_cast<size_t>(r);
    rj.push_back({rows[R].begin, rows[R].end});
    hj.push_back({heads[R].begin, heads[R].end});
    int64_t qs = 0, qr = 0, os = 0, orc = 0;
    for (int j = 0; j < u; ++j) {
      if (j == r) continue;  // the rank's own chunk is a local copy
      const auto J = static_cast<size_t>(j);
      // rows -> heads: my rows of peer j's q/k/v columns out, peer j's rows of my heads in.
      qs += rows[R].size() * 3 * heads[J].size() * hd * elt;
      qr += rows[J].size() * 3 * heads[R].size() * hd * elt;
      // heads -> rows: the attention output of my heads for peer j's rows out, my rows of its heads in.
      os += rows[J].size() * heads[R].size() * hd * elt;
      orc += rows[R].size() * heads[J].size() * hd * elt;
    }
    qkv_sent.push_back(qs);
    qkv_recv.push_back(qr);
    out_sent.push_back(os);
    out_recv.push_back(orc);
  }
  out["rows"] = rj;
  out["heads"] = hj;
  out["qkv_bytes_sent_per_rank"] = qkv_sent;
  out["qkv_bytes_received_per_rank"] = qkv_recv;
  out["out_bytes_sent_per_rank"] = out_sent;
  out["out_bytes_received_per_rank"] = out_recv;
  return out;
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
  if (w.comm != nullptr) {  // the rank's rows, as H3Model::forward holds them
    const Span mine = even_split(in.x.dim(0), w.comm->size(), w.comm->rank());
    VORTEX_ASSIGN_OR_RETURN(Tensor rows, in.x.narrow(0, mine.begin, mine.size()));
    VORTEX_ASSIGN_OR_RETURN(Tensor shard, w.backend->alloc(rows.shape(), rows.dtype()));  // [rows_r, D]
    VORTEX_RETURN_IF_ERROR(w.backend->copy(rows, shard));
    in.x = shard;
  }
  for (int i = 0; i < block; ++i) VORTEX_RETURN_IF_ERROR(bench_run_block(w, i, in.x, in.tables));
  VORTEX_RETURN_IF_ERROR(w.backend->synchronize());
  return in;
}

Result<std::vector<nlohmann::json>> bench_block(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  RunEnvironment env = env_in;
  Backend& be = *w.backend;
  VORTEX_ASSIGN_OR_RETURN(BlockInput in, make_block_input(w, o.block, o.steps));
  VORTEX_ASSIGN_OR_RETURN(Tensor x, be.alloc(in.x.shape(), in.x.dtype()));  // [S, D] or [rows_r, D]
  for (int i = 0; i < o.warmup; ++i) {
    VORTEX_RETURN_IF_ERROR(restore(be, in.x, x));
    VORTEX_RETURN_IF_ERROR(align_ranks(w));
    VORTEX_RETURN_IF_ERROR(bench_run_block(w, o.block, x, in.tables));
  }
  // Pass 1: whole block.
  std::vector<double> totals;
  for (int i = 0; i < o.reps; ++i) {
    VORTEX_RETURN_IF_ERROR(restore(be, in.x, x));
    VORTEX_RETURN_IF_ERROR(align_ranks(w));
    VORTEX_ASSIGN_OR_RETURN(double ms, timed_block(w, o.block, x, in.tables));
    totals.push_back(ms);
  }
  // Pass 2: per-component regions emitted by the model (level 1), sp_* included with a world.
  std::map<std::string, std::vector<double>> comp;
  std::vector<std::string> order;
  for (int i = 0; i < o.reps; ++i) {
    VORTEX_RETURN_IF_ERROR(restore(be, in.x, x));
    VORTEX_RETURN_IF_ERROR(align_ranks(w));
    be.set_region_level(1);
    Status st = bench_run_block(w, o.block, x, in.tables);
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
  nlohmann::json mine_components = nlohmann::json::array();
  for (const auto& n : order) {
    Percentiles p = percentiles(comp[n]);
    mine_components.push_back(
        {{"name", n}, {"ms_p10", p.p10}, {"ms_p50", p.p50}, {"ms_p90", p.p90}, {"ms_p95", p.p95}});
  }
  nlohmann::json extra = {{"block", o.block},
                          {"memory_peak_bytes", be.memory_peak()},
                          {"check", "none (timing only; gates run in `vortex gate`)"}};
  Percentiles tp = percentiles(totals);
  nlohmann::json components = mine_components;
  if (w.comm != nullptr) {
    const nlohmann::json mine = {
        {"totals", totals}, {"components", mine_components}, {"memory_peak_bytes", be.memory_peak()}};
    VORTEX_ASSIGN_OR_RETURN(std::vector<nlohmann::json> ranks, gather_json(w, mine));
    if (!leader(w)) return std::vector<nlohmann::json>{};
    const int u = w.comm->size();
    tp = percentiles(max_over_ranks(ranks, "totals"));
    // Per component: the slowest rank's percentiles (the block waits for it) and every rank's p50; a rank
    // without the component (no heads: no attention) has null.
    std::vector<std::string> names;
    for (const auto& r : ranks)
      for (const auto& c : r["components"])
        if (std::find(names.begin(), names.end(), c["name"].get<std::string>()) == names.end())
          names.push_back(c["name"].get<std::string>());
    components = nlohmann::json::array();
    for (const auto& n : names) {
      nlohmann::json per_rank = nlohmann::json::array();
      double mx[4] = {0, 0, 0, 0};
      int slowest = 0;
      for (int r = 0; r < u; ++r) {
        nlohmann::json v = nullptr;
        for (const auto& c : ranks[static_cast<size_t>(r)]["components"]) {
          if (c["name"] != n) continue;
          v = c["ms_p50"];
          const char* keys[4] = {"ms_p10", "ms_p50", "ms_p90", "ms_p95"};
          if (c["ms_p50"].get<double>() > mx[1]) slowest = r;
          for (int k = 0; k < 4; ++k) mx[k] = std::max(mx[k], c[keys[k]].get<double>());
        }
        per_rank.push_back(v);
      }
      components.push_back({{"name", n},
                            {"ms_p10", mx[0]},
                            {"ms_p50", mx[1]},
                            {"ms_p90", mx[2]},
                            {"ms_p95", mx[3]},
                            {"ms_p50_per_rank", per_rank},
                            {"slowest_rank", slowest}});
    }
    // All-to-all bytes per rank per block and the achieved bandwidth: bytes sent to peers over the p50 of
    // the rank's sp_all_to_all region (the same definition as bench/ulysses_comm_bench.cpp).
    nlohmann::json world = ulysses_geometry(w);
    for (const char* which : {"qkv", "out"}) {
      const std::string region = std::string("sp_all_to_all_") + which;
      const std::vector<int64_t> sent = world[std::string(which) + "_bytes_sent_per_rank"].get<std::vector<int64_t>>();
      nlohmann::json gbps = nlohmann::json::array();
      for (const auto& c : components) {
        if (c["name"] != region) continue;
        for (int r = 0; r < u; ++r) {
          const nlohmann::json& ms = c["ms_p50_per_rank"][static_cast<size_t>(r)];
          const double b = static_cast<double>(sent[static_cast<size_t>(r)]);
          gbps.push_back(ms.is_number() && ms.get<double>() > 0 && b > 0 ? nlohmann::json(b / (ms.get<double>() * 1e6))
                                                                         : nlohmann::json(nullptr));
        }
        const int64_t most = *std::max_element(sent.begin(), sent.end());
        world[std::string(which) + "_GBps_per_rank"] = gbps;
        // The slowest rank's time with the most bytes any rank sends: what the block pays for this exchange.
        world[std::string(which) + "_GBps"] = most > 0 && c["ms_p50"].get<double>() > 0
                                                  ? nlohmann::json(most / (c["ms_p50"].get<double>() * 1e6))
                                                  : nlohmann::json(nullptr);
      }
    }
    double comm_ms = 0;
    for (const auto& c : components)
      if (c["name"] == "sp_all_to_all_qkv" || c["name"] == "sp_all_to_all_out") comm_ms += c["ms_p50"].get<double>();
    world["block_comm_ms_p50"] = comm_ms;
    std::vector<double> totals_p50;
    std::vector<int64_t> peaks;
    for (const auto& r : ranks) {
      totals_p50.push_back(percentiles(r["totals"].get<std::vector<double>>()).p50);
      peaks.push_back(r["memory_peak_bytes"].get<int64_t>());
    }
    world["block_ms_p50_per_rank"] = totals_p50;
    extra["world"] = world;
    extra["memory_peak_bytes"] = *std::max_element(peaks.begin(), peaks.end());
    extra["memory_peak_bytes_per_rank"] = peaks;
    extra["timing"] =
        "a barrier before every timed iteration; block time per iteration = the slowest rank's; per component "
        "the slowest rank's percentiles";
  }
  extra["components"] = components;
  std::printf("\nblock %d  (%s, %s)\n", o.block, workload_name(w).c_str(), bench_config(w).c_str());
  std::printf("%-18s %10s %10s %10s %7s%s\n", "component", "p10 ms", "p50 ms", "p90 ms", "share",
              w.comm != nullptr ? "  p50 ms per rank" : "");
  for (const auto& c : components) {
    std::printf("%-18s %10.3f %10.3f %10.3f %6.1f%%", c["name"].get<std::string>().c_str(), c["ms_p10"].get<double>(),
                c["ms_p50"].get<double>(), c["ms_p90"].get<double>(), 100.0 * c["ms_p50"].get<double>() / tp.p50);
    if (c.contains("ms_p50_per_rank"))
      for (const auto& v : c["ms_p50_per_rank"])
        v.is_number() ? std::printf(" %8.3f", v.get<double>()) : std::printf(" %8s", "-");
    std::printf("\n");
  }
  std::printf("%-18s %10.3f %10.3f %10.3f\n", "block total", tp.p10, tp.p50, tp.p90);
  if (w.comm != nullptr) {
    const nlohmann::json& wd = extra["world"];
    for (const char* which : {"qkv", "out"}) {
      const auto sent = wd[std::string(which) + "_bytes_sent_per_rank"].get<std::vector<int64_t>>();
      const nlohmann::json& g = wd[std::string(which) + "_GBps"];
      if (g.is_number())
        std::printf("all-to-all %-3s: up to %.3f MB sent per rank per block, %.2f GB/s (slowest rank's p50)\n", which,
                    static_cast<double>(*std::max_element(sent.begin(), sent.end())) / 1e6, g.get<double>());
      else std::printf("all-to-all %-3s: no bytes leave a rank (world of 1: a local copy)\n", which);
    }
  }
  return std::vector<nlohmann::json>{evidence_row(env, "block " + workload_name(w), "vortex " + std::string(be.name()),
                                                  bench_config(w), tp, {}, extra)};
}

Result<std::vector<nlohmann::json>> bench_step(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  RunEnvironment env = env_in;
  Backend& be = *w.backend;
  VORTEX_ASSIGN_OR_RETURN(auto sigmas, second_step_sigmas(w, o.steps));
  std::vector<double> totals;
  std::vector<std::vector<double>> per_block(static_cast<size_t>(w.cfg.num_layers));
  int reps = std::max(1, o.reps / 4);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 = warm-up
    VORTEX_RETURN_IF_ERROR(align_ranks(w));
    auto t0 = std::chrono::steady_clock::now();
    VORTEX_ASSIGN_OR_RETURN(StepTables tables, w.model->make_step_tables(sigmas.first, sigmas.second));
    VORTEX_ASSIGN_OR_RETURN(Tensor h, w.model->embed_inputs(w.noise));  // [S, D]
    Tensor x = h;
    std::vector<Tensor> parts;  // with a world: the ranks' row blocks of h, for the all-gather
    if (w.comm != nullptr) {
      const int u = w.comm->size();
      for (int j = 0; j < u; ++j) {
        const Span r = even_split(h.dim(0), u, j);
        VORTEX_ASSIGN_OR_RETURN(Tensor part, h.narrow(0, r.begin, r.size()));  // [rows_j, D]
        parts.push_back(part);
      }
      VORTEX_ASSIGN_OR_RETURN(x, be.alloc(parts[static_cast<size_t>(w.comm->rank())].shape(), h.dtype()));
      VORTEX_RETURN_IF_ERROR(be.copy(parts[static_cast<size_t>(w.comm->rank())], x));
    }
    be.set_region_level(0);
    for (int i = 0; i < w.cfg.num_layers; ++i) {
      BackendRegion r(be, "block", 0);
      Status st = bench_run_block(w, i, x, tables);
      if (!st.ok()) {
        be.set_region_level(-1);
        return st;
      }
    }
    be.set_region_level(-1);
    if (w.comm != nullptr)
      VORTEX_RETURN_IF_ERROR(w.comm->all_gather(x, parts).with_context("all-gather of the residual stream"));
    VORTEX_ASSIGN_OR_RETURN(AvLatents v, w.model->final_layer(h, tables));
    VORTEX_RETURN_IF_ERROR(be.synchronize());
    double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    VORTEX_ASSIGN_OR_RETURN(auto regions, be.take_regions());
    if (rep < 0) continue;
    totals.push_back(wall);
    for (size_t i = 0; i < regions.size() && i < per_block.size(); ++i) per_block[i].push_back(regions[i].second);
  }
  refresh_clocks(env);
  nlohmann::json mine_blocks = nlohmann::json::array();
  for (size_t i = 0; i < per_block.size(); ++i) {
    Percentiles p = percentiles(per_block[i]);
    mine_blocks.push_back({{"block", i}, {"ms_p50", p.p50}, {"ms_p10", p.p10}, {"ms_p90", p.p90}});
  }
  Percentiles tp = percentiles(totals);
  nlohmann::json blocks = mine_blocks;
  nlohmann::json extra = {{"memory_peak_bytes", be.memory_peak()}, {"check", "none (timing only)"}};
  if (w.comm != nullptr) {
    VORTEX_ASSIGN_OR_RETURN(std::vector<nlohmann::json> ranks,
                            gather_json(w, {{"totals", totals}, {"blocks", mine_blocks}}));
    if (!leader(w)) return std::vector<nlohmann::json>{};
    tp = percentiles(max_over_ranks(ranks, "totals"));
    for (size_t i = 0; i < blocks.size(); ++i) {
      nlohmann::json per_rank = nlohmann::json::array();
      for (const char* key : {"ms_p10", "ms_p50", "ms_p90"}) {
        double mx = 0;
        for (const auto& r : ranks) mx = std::max(mx, r["blocks"][i][key].get<double>());
        blocks[i][key] = mx;
      }
      for (const auto& r : ranks) per_rank.push_back(r["blocks"][i]["ms_p50"]);
      blocks[i]["ms_p50_per_rank"] = per_rank;
    }
    extra["world"] = ulysses_geometry(w);
    extra["timing"] =
        "a barrier before every timed step; step wall time per iteration = the slowest rank's; per block the slowest "
        "rank's percentiles";
  }
  double sum_p50 = 0;
  for (const auto& b : blocks) sum_p50 += b["ms_p50"].get<double>();
  std::printf("\nstep (%s, %s): total p50 %.1f ms (wall, incl. tables/embed/final), blocks sum p50 %.1f ms, n=%d\n",
              workload_name(w).c_str(), bench_config(w).c_str(), tp.p50, sum_p50, tp.n);
  extra["blocks"] = blocks;
  extra["blocks_sum_ms_p50"] = sum_p50;
  return std::vector<nlohmann::json>{evidence_row(env, "step " + workload_name(w), "vortex " + std::string(be.name()),
                                                  bench_config(w), tp, {}, extra)};
}

Result<std::vector<nlohmann::json>> bench_run(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  RunEnvironment env = env_in;
  Backend& be = *w.backend;
  const SamplerSpec spec = workload_sampler(w, o.steps);
  std::vector<double> step_ms;
  auto last = std::chrono::steady_clock::now();
  DenoiseFn fn = [&](const AvLatents& x, double sv, double sa, int step) -> Result<AvLatents> {
    if (w.comm != nullptr) {  // with a world, a step is timed from the barrier that starts it on every rank
      VORTEX_RETURN_IF_ERROR(align_ranks(w));
      last = std::chrono::steady_clock::now();
    }
    auto r = w.model->forward(x, sv, sa);
    auto now = std::chrono::steady_clock::now();
    step_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
    if (leader(w)) std::fprintf(stderr, "  step %d/%d  %.1f ms\n", step + 1, spec.steps, step_ms.back());
    return r;
  };
  VORTEX_RETURN_IF_ERROR(align_ranks(w));
  auto t0 = std::chrono::steady_clock::now();
  last = t0;
  VORTEX_ASSIGN_OR_RETURN(AvLatents out, sample_av(spec, w.noise, fn));
  double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  refresh_clocks(env);
  Percentiles p = percentiles(step_ms);
  nlohmann::json extra = {{"steps", spec.steps},
                          {"total_ms", total},
                          {"step_ms", step_ms},
                          {"memory_peak_bytes", be.memory_peak()},
                          {"check", "none (timing only; `vortex gate` checks trajectories)"}};
  if (w.comm != nullptr) {
    VORTEX_ASSIGN_OR_RETURN(std::vector<nlohmann::json> ranks,
                            gather_json(w, {{"step_ms", step_ms}, {"total_ms", total}, {"peak", be.memory_peak()}}));
    if (!leader(w)) return std::vector<nlohmann::json>{};
    step_ms = max_over_ranks(ranks, "step_ms");
    p = percentiles(step_ms);
    std::vector<int64_t> peaks;
    for (const auto& r : ranks) {
      total = std::max(total, r["total_ms"].get<double>());
      peaks.push_back(r["peak"].get<int64_t>());
    }
    extra["total_ms"] = total;
    extra["step_ms"] = step_ms;
    extra["memory_peak_bytes"] = *std::max_element(peaks.begin(), peaks.end());
    extra["memory_peak_bytes_per_rank"] = peaks;
    extra["world"] = ulysses_geometry(w);
    extra["timing"] = "a barrier before every step; step time = the slowest rank's, from the barrier";
  }
  std::printf("\nrun (%s, %d steps, %s): total %.2f s, per step p50 %.1f ms, peak memory %.2f GB\n",
              workload_name(w).c_str(), spec.steps, bench_config(w).c_str(), total / 1000.0, p.p50,
              static_cast<double>(extra["memory_peak_bytes"].get<int64_t>()) / 1e9);
  return std::vector<nlohmann::json>{
      evidence_row(env, "run " + workload_name(w), "vortex " + std::string(be.name()), bench_config(w), p, {}, extra)};
}

Result<std::vector<nlohmann::json>> bench_ab(Workload& w, const BenchOptions& o, const RunEnvironment& env_in) {
  if (w.comm != nullptr)
    return invalid_argument(
        "bench ab does not run with ranks (--gpus, a rank environment): it alternates switches "
        "inside one process; run it on one device");
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
