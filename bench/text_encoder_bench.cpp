// text_encoder_bench: the conditioner's prefill on the GPU, resident weights. Builds the Qwen3-VL-32B text model's
// first --layers (50) decoder layers with deterministic synthetic weights of the real names and shapes directly on
// the device (TextEncoder::synthesize: fill_synthetic per tensor, no file; the embedding table on the host as in a
// loaded model), then times encode() of a --tokens (500) id prompt to hidden_states[layers] end to end (host
// gather, upload, 50 layers, download), --reps times after --warmup. SM clock sampled by nvidia-smi during the timed
// loop. With --baseline FILE (bench/text_encoder_transformers.py's JSON from the same session) it records the ratio.
//   text_encoder_bench --out DIR [--layers 50] [--tokens 500] [--reps 20] [--warmup 3] [--baseline FILE]
// Appends one vortex-evidence-1 row to DIR/<date>-<gpu>-text-encoder.jsonl and prints a short table.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "profiling/evidence.h"
#include "text_encoder/text_encoder.h"

namespace {

using Clock = std::chrono::steady_clock;

int usage(const char* why) {
  std::fprintf(stderr,
               "text_encoder_bench: %s\nusage: text_encoder_bench --out DIR [--layers 50] [--tokens 500] "
               "[--reps 20] [--warmup 3] [--baseline transformers.json]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir, baseline_path;
  int layers = vortex::kH3TextEncoderLayer, tokens = 500, reps = 20, warmup = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--out") out_dir = v;
    else if (a == "--baseline") baseline_path = v;
    else if (a == "--layers") layers = std::atoi(v.c_str());
    else if (a == "--tokens") tokens = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--warmup") warmup = std::atoi(v.c_str());
    else return usage(("unknown option " + a).c_str());
  }
  if (out_dir.empty()) return usage("--out DIR is required");
  const vortex::TextEncoderConfig cfg = vortex::TextEncoderConfig::qwen3_vl_32b();
  if (layers < 1 || layers > cfg.num_layers || tokens < 1 || reps < 1 || warmup < 0)
    return usage("need 1 <= --layers <= 64, --tokens >= 1, --reps >= 1, --warmup >= 0");
  nlohmann::json baseline;
  if (!baseline_path.empty()) {
    std::ifstream f(baseline_path);
    if (!f) return usage(("cannot read --baseline " + baseline_path).c_str());
    try {
      f >> baseline;
    } catch (const std::exception& e) {
      return usage(("--baseline is not JSON: " + std::string(e.what())).c_str());
    }
  }

  auto backend = vortex::make_backend("cuda", 0);
  if (!backend.ok()) {
    std::fprintf(stderr, "text_encoder_bench: %s\n", backend.status().to_string().c_str());
    return 1;
  }
  vortex::Backend& be = **backend;
  const auto t_build = Clock::now();
  std::fprintf(stderr, "text_encoder_bench: synthesizing %d layers of Qwen3-VL-32B on the GPU...\n", layers);
  auto enc = vortex::TextEncoder::synthesize(cfg, be, 20261201, layers);
  if (!enc.ok()) {
    std::fprintf(stderr, "text_encoder_bench: %s\n", enc.status().to_string().c_str());
    return 1;
  }
  if (vortex::Status s = be.synchronize(); !s.ok()) {
    std::fprintf(stderr, "text_encoder_bench: %s\n", s.to_string().c_str());
    return 1;
  }
  const double build_s = std::chrono::duration<double>(Clock::now() - t_build).count();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, cfg.vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int32_t& t : ids) t = id(rng);

  auto run_once = [&](double* ms) -> bool {
    const auto a = Clock::now();
    auto h = (*enc)->encode(ids, layers);
    if (!h.ok()) {
      std::fprintf(stderr, "text_encoder_bench: %s\n", h.status().to_string().c_str());
      return false;
    }
    *ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
    return true;
  };
  double ms = 0;
  for (int i = 0; i < warmup; ++i)
    if (!run_once(&ms)) return 1;
  const vortex::Backend::DeviceInfo di = be.device_info();
  vortex::RunEnvironment env = vortex::collect_environment(di.name, di.sm, di.runtime);
  std::atomic<bool> stop{false};
  std::vector<int> clocks;
  std::thread sampler([&] {
    while (!stop.load()) {
      vortex::RunEnvironment e = env;
      vortex::refresh_clocks(e);
      if (e.clock_sm_mhz > 0) clocks.push_back(e.clock_sm_mhz);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) {
    if (!run_once(&ms)) {
      stop = true;
      sampler.join();
      return 1;
    }
    samples.push_back(ms);
  }
  stop = true;
  sampler.join();
  if (!clocks.empty()) {
    std::vector<int> c = clocks;
    std::nth_element(c.begin(), c.begin() + c.size() / 2, c.end());
    env.clock_sm_mhz = c[c.size() / 2];
  }
  const vortex::Percentiles p = vortex::percentiles(samples);
  // Weight bytes of the resident layers (BF16): what one prefill streams from HBM at least once.
  const double layer_params = static_cast<double>(cfg.hidden) * (cfg.q_width() + 2 * cfg.kv_width()) +
                              static_cast<double>(cfg.q_width()) * cfg.hidden + 3.0 * cfg.hidden * cfg.ffn;
  const double gemm_tflop = 2.0 * layer_params * layers * tokens / 1e12;
  nlohmann::json extra = {{"layers", layers},
                          {"tokens", tokens},
                          {"target_ms", 100.0},
                          {"meets_target", p.p50 <= 100.0},
                          {"weights_gb", 2.0 * layer_params * layers / 1e9},
                          {"gemm_tflops_at_p50", gemm_tflop / (p.p50 / 1e3)},
                          {"clock_sm_mhz_samples", clocks},
                          {"synthesize_s", build_s},
                          {"memory_peak_gb", static_cast<double>(be.memory_peak()) / 1e9},
                          {"weights", "synthetic (TextEncoder::synthesize, seed 20261201), created on the device"}};
  vortex::EvidenceBaseline base;
  if (!baseline.is_null()) {
    const double b50 = baseline.value("ms_p50", 0.0);
    extra["baseline_row"] = baseline;
    base.what = baseline.value("impl", std::string("transformers_sdpa"));
    base.ms_p50 = b50;
  }
  const nlohmann::json row =
      vortex::evidence_row(env, "text_encoder_prefill", "vortex_cuda",
                           std::to_string(layers) + " layers, " + std::to_string(tokens) + " tokens", p, base, extra);
  const std::string path = vortex::evidence_path(out_dir, env, "text-encoder");
  if (vortex::Status s = vortex::append_jsonl(path, {row}); !s.ok()) {
    std::fprintf(stderr, "text_encoder_bench: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("%-22s %8s %8s %8s %s\n", "impl", "p10 ms", "p50 ms", "p90 ms", "note");
  std::printf("%-22s %8.2f %8.2f %8.2f %d layers x %d tokens, SM %d MHz, target <= 100 ms\n", "vortex_cuda", p.p10,
              p.p50, p.p90, layers, tokens, env.clock_sm_mhz);
  if (!baseline.is_null())
    std::printf("%-22s %8.2f %8.2f %8.2f ratio vortex/transformers p50 = %.3f\n", "transformers_sdpa",
                baseline.value("ms_p10", 0.0), baseline.value("ms_p50", 0.0), baseline.value("ms_p90", 0.0),
                row.value("ratio", 0.0));
  std::printf("evidence: %s\n", path.c_str());
  return 0;
}
