// lora_merge_bench: merging a rank-128 adapter into the canonical H3 model's 50 blocks on the GPU (issue 17 target:
// <= 10 s). The model is synthesize_weights() directly on the device (33B BF16, no file); the adapter is a
// deterministic synthetic LoraAdapter in memory with one rank-128 part per block layer (qkv_proj, out_proj, fc1,
// fc2, and adaln_proj.linear unless --no-adaln), FP32 factors on the host as load_lora returns them. Timed:
//   merge_lora end to end (factor uploads + Backend::lora_merge + synchronize), --reps times, single-rounding;
//   the same with the PEFT program once; and the kernels alone on pre-uploaded factors.
// Checks rows [0, 64) of blocks.0.attn.qkv_proj after the first merge against ref::lora_merge on the host.
//   lora_merge_bench --out DIR [--reps 3] [--rank 128] [--no-adaln]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/synthetic.h"
#include "lora/lora.h"
#include "model/h3_spec.h"
#include "profiling/evidence.h"
#include "ref/ref_ops.h"

namespace {

using Clock = std::chrono::steady_clock;
using vortex::seconds_since;

int fail(const vortex::Status& s) {
  std::fprintf(stderr, "lora_merge_bench: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir;
  int reps = 3, rank = 128;
  bool adaln = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-adaln") {
      adaln = false;
      continue;
    }
    if (i + 1 >= argc) return std::fprintf(stderr, "lora_merge_bench: missing value after %s\n", a.c_str()), 2;
    const std::string v = argv[++i];
    if (a == "--out") out_dir = v;
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--rank") rank = std::atoi(v.c_str());
    else return std::fprintf(stderr, "lora_merge_bench: unknown option %s\n", a.c_str()), 2;
  }
  if (out_dir.empty() || reps < 1 || rank < 1)
    return std::fprintf(stderr, "usage: lora_merge_bench --out DIR [--reps 3] [--rank 128] [--no-adaln]\n"), 2;
  auto be_r = vortex::make_backend("cuda", 0);
  if (!be_r.ok()) return fail(be_r.status());
  vortex::Backend& be = **be_r;
  const vortex::ModelConfig cfg = vortex::ModelConfig::h3();
  auto t0 = Clock::now();
  std::fprintf(stderr, "lora_merge_bench: synthesizing the canonical H3 weights on the GPU...\n");
  auto weights_r = vortex::synthesize_weights(cfg, be, 1);
  if (!weights_r.ok()) return fail(weights_r.status());
  vortex::H3Weights& weights = *weights_r;
  if (vortex::Status s = be.synchronize(); !s.ok()) return fail(s);
  const double synth_s = seconds_since(t0);

  // The adapter: one part per block layer, FP32 factors (B @ A ~ 1e-3 of the weights' scale).
  t0 = Clock::now();
  vortex::LoraAdapter ad;
  ad.path = "synthetic";
  ad.key_style = "native";
  struct Dims {
    const char* layer;
    int64_t out, in;
  };
  const std::vector<Dims> dims = {{"attn.qkv_proj", 3LL * cfg.inner(), cfg.hidden},
                                  {"attn.out_proj", cfg.hidden, cfg.inner()},
                                  {"mlp.fc1", 2LL * cfg.ffn, cfg.hidden},
                                  {"mlp.fc2", cfg.hidden, cfg.ffn},
                                  {"adaln_proj.linear", cfg.adaln_features(), cfg.time_embed_dim}};
  int64_t factor_elems = 0, merged_elems = 0;
  for (int b = 0; b < cfg.num_layers; ++b) {
    for (const Dims& d : dims) {
      if (!adaln && std::strcmp(d.layer, "adaln_proj.linear") == 0) continue;
      vortex::LoraPart p;
      p.layer = "blocks." + std::to_string(b) + "." + d.layer;
      p.source = p.layer;
      p.a = vortex::Tensor::empty({rank, d.in}, vortex::DType::kF32);   // [r, in] f32 host
      p.b = vortex::Tensor::empty({d.out, rank}, vortex::DType::kF32);  // [out, r] f32 host
      if (vortex::Status s = vortex::fill_synthetic_host(p.a, vortex::synthetic_seed(2, p.layer + ".A"), 0.02f, 0.0f);
          !s.ok())
        return fail(s);
      if (vortex::Status s = vortex::fill_synthetic_host(p.b, vortex::synthetic_seed(2, p.layer + ".B"), 0.02f, 0.0f);
          !s.ok())
        return fail(s);
      factor_elems += p.a.numel() + p.b.numel();
      merged_elems += d.out * d.in;
      ad.parts.push_back(std::move(p));
    }
  }
  const double adapter_s = seconds_since(t0);
  std::fprintf(stderr, "lora_merge_bench: %zu parts, rank %d, %.2f GB of FP32 factors, %.2f G weights merged\n",
               ad.parts.size(), rank, factor_elems * 4.0 / 1e9, merged_elems / 1e9);

  // Original rows [0, 64) of blocks.0.attn.qkv_proj for the bit-identity check.
  const int64_t check_rows = 64, kq = cfg.hidden;
  vortex::Tensor& qkv = weights.blocks[0].attn_qkv_proj.weight;
  vortex::Tensor before = vortex::Tensor::empty({check_rows, kq}, vortex::DType::kBF16);
  {
    auto view = qkv.as_strided({check_rows, kq}, {kq, 1});
    if (!view.ok()) return fail(view.status());
    if (vortex::Status s = be.download(*view, before); !s.ok()) return fail(s);
  }

  const vortex::Backend::DeviceInfo di = be.device_info();
  vortex::RunEnvironment env = vortex::collect_environment(di.name, di.sm, di.runtime);
  std::vector<double> e2e;
  std::vector<int> clocks;
  std::string check = "not run";
  for (int i = 0; i < reps; ++i) {
    t0 = Clock::now();
    if (vortex::Status s = vortex::merge_lora(weights, ad, 1.0, be, vortex::LoraMergeProgram::kSingleRounding); !s.ok())
      return fail(s);
    e2e.push_back(seconds_since(t0) * 1e3);
    vortex::refresh_clocks(env);
    clocks.push_back(env.clock_sm_mhz);
    std::fprintf(stderr, "lora_merge_bench: merge %d/%d: %.3f s\n", i + 1, reps, e2e.back() / 1e3);
    if (i == 0) {  // bit identity of the first merge on rows [0, 64) of block 0's qkv_proj
      vortex::Tensor got = vortex::Tensor::empty({check_rows, kq}, vortex::DType::kBF16);
      auto view = qkv.as_strided({check_rows, kq}, {kq, 1});
      if (!view.ok()) return fail(view.status());
      if (vortex::Status s = be.download(*view, got); !s.ok()) return fail(s);
      const vortex::LoraPart& p = ad.parts[0];
      vortex::Tensor b_rows = vortex::Tensor::empty({check_rows, rank}, vortex::DType::kF32);
      std::memcpy(b_rows.raw_data(), p.b.raw_data(), b_rows.nbytes());
      vortex::Tensor expect = before;
      if (vortex::Status s =
              vortex::ref::lora_merge(expect, p.a, b_rows, 0, 1.0, vortex::LoraMergeProgram::kSingleRounding);
          !s.ok())
        return fail(s);
      check = std::memcmp(expect.raw_data(), got.raw_data(), got.nbytes()) == 0 ? "identical" : "DIFFERENT";
      std::fprintf(stderr, "lora_merge_bench: blocks.0.attn.qkv_proj rows [0, 64) vs ref::lora_merge: %s\n",
                   check.c_str());
    }
  }
  t0 = Clock::now();
  if (vortex::Status s = vortex::merge_lora(weights, ad, 1.0, be, vortex::LoraMergeProgram::kPeft); !s.ok())
    return fail(s);
  const double peft_ms = seconds_since(t0) * 1e3;

  // Kernels alone: factors uploaded first, then every part's Backend::lora_merge and one synchronize.
  std::vector<std::pair<vortex::Tensor, vortex::Tensor>> dev;
  for (const vortex::LoraPart& p : ad.parts) {
    auto a = be.upload(p.a);
    auto b = be.upload(p.b);
    if (!a.ok()) return fail(a.status());
    if (!b.ok()) return fail(b.status());
    dev.emplace_back(std::move(*a), std::move(*b));
  }
  std::map<std::string, vortex::Tensor*> slot;
  for (auto& [name, lw] : vortex::h3_linear_slots(weights)) slot[name] = &lw->weight;
  for (size_t i = 0; i < weights.blocks.size(); ++i)
    slot["blocks." + std::to_string(i) + ".adaln_proj.linear"] = &weights.blocks[i].adaln_proj_linear_weight;
  if (vortex::Status s = be.synchronize(); !s.ok()) return fail(s);
  t0 = Clock::now();
  for (size_t i = 0; i < ad.parts.size(); ++i) {
    auto it = slot.find(ad.parts[i].layer);
    if (it == slot.end()) return fail(vortex::invalid_argument("no layer " + ad.parts[i].layer));
    if (vortex::Status s =
            be.lora_merge(*it->second, dev[i].first, dev[i].second, 0, 1.0, vortex::LoraMergeProgram::kSingleRounding);
        !s.ok())
      return fail(s);
  }
  if (vortex::Status s = be.synchronize(); !s.ok()) return fail(s);
  const double kernels_ms = seconds_since(t0) * 1e3;

  const vortex::Percentiles p = vortex::percentiles(e2e);
  nlohmann::json extra = {{"blocks", cfg.num_layers},
                          {"rank", rank},
                          {"adaln_included", adaln},
                          {"parts", ad.parts.size()},
                          {"weights_merged", merged_elems},
                          {"factor_gb_f32", factor_elems * 4.0 / 1e9},
                          {"program", "single_rounding"},
                          {"peft_program_ms", peft_ms},
                          {"kernels_only_ms", kernels_ms},
                          {"fp64_tflops_kernels", 2.0 * rank * merged_elems / (kernels_ms / 1e3) / 1e12},
                          {"check_block0_qkv_rows0_64", check},
                          {"target_s", 10.0},
                          {"meets_target", p.p50 <= 10000.0},
                          {"clock_sm_mhz_samples", clocks},
                          {"synthesize_weights_s", synth_s},
                          {"adapter_build_s", adapter_s}};
  const nlohmann::json row = vortex::evidence_row(env, "lora_merge_canonical", "vortex_cuda",
                                                  "rank " + std::to_string(rank) + ", 50 blocks", p, {}, extra);
  const std::string path = vortex::evidence_path(out_dir, env, "lora-merge");
  if (vortex::Status s = vortex::append_jsonl(path, {row}); !s.ok()) return fail(s);
  const std::string title = "lora merge (50 blocks, rank " + std::to_string(rank) + ")";
  std::printf("%-34s %10s %10s %10s\n", title.c_str(), "p10 ms", "p50 ms", "p90 ms");
  std::printf("%-34s %10.1f %10.1f %10.1f  target <= 10000 ms\n", "merge_lora single-rounding e2e", p.p10, p.p50,
              p.p90);
  std::printf("%-34s %10.1f\n", "merge_lora peft e2e", peft_ms);
  std::printf("%-34s %10.1f  (%.1f FP64 TFLOPS)\n", "lora_merge kernels only", kernels_ms,
              extra["fp64_tflops_kernels"].get<double>());
  std::printf("check vs ref::lora_merge: %s\nevidence: %s\n", check.c_str(), path.c_str());
  return check == "identical" ? 0 : 1;
}
