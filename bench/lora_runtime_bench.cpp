// lora_runtime_bench: the overhead of the run-time LoRA branch (Backend::linear_lora, docs/lora.md "Run-time path")
// at the canonical shape (issue 17 target: <= 4% per block). Loads the canonical synthetic workload
// (engine/workload.h: h3, 1344x768, 124 frames, S rows), attaches a deterministic synthetic rank-128 adapter to the
// four fused linears of block --block (qkv_proj, out_proj, fc1, fc2; one full-width part each, scale 1), and times,
// rotating plain / concat_k / fp32_accumulator (CudaBackend::LoraProgram) in the same process (per-pair ratios
// against the plain run of the same rep):
//   linears: the four linears on synthetic inputs of their shapes, Backend::linear vs Backend::linear_lora;
//   block:   H3Model::run_block on the block's real input (make_block_input), without vs with the branches attached.
// Checks rows [0, 8) of the qkv branch output of both programs against ref::linear_lora on the host (rel-L2, bytes
// equal).
//   lora_runtime_bench --out DIR [--block 24] [--rank 128] [--reps 20] [--warmup 3]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/synthetic.h"
#include "cuda/cuda_backend.h"
#include "engine/workload.h"
#include "lora/lora.h"
#include "measure/bench.h"
#include "profiling/evidence.h"
#include "ref/ref_ops.h"

namespace {

using Clock = std::chrono::steady_clock;

int fail(const vortex::Status& s) {
  std::fprintf(stderr, "lora_runtime_bench: %s\n", s.to_string().c_str());
  return 1;
}

#define BENCH_OK(expr)                           \
  do {                                           \
    ::vortex::Status bench_st_ = (expr);         \
    if (!bench_st_.ok()) return fail(bench_st_); \
  } while (0)

double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i) r.push_back(a[i] / b[i]);
  return vortex::quantile(r, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir;
  int block = 24, rank = 128, reps = 20, warmup = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return std::fprintf(stderr, "lora_runtime_bench: missing value after %s\n", a.c_str()), 2;
    const std::string v = argv[++i];
    if (a == "--out") out_dir = v;
    else if (a == "--block") block = std::atoi(v.c_str());
    else if (a == "--rank") rank = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--warmup") warmup = std::atoi(v.c_str());
    else return std::fprintf(stderr, "lora_runtime_bench: unknown option %s\n", a.c_str()), 2;
  }
  if (out_dir.empty() || reps < 1 || rank < 1 || warmup < 0)
    return std::fprintf(stderr,
                        "usage: lora_runtime_bench --out DIR [--block 24] [--rank 128] [--reps 20] [--warmup 3]\n"),
           2;
  vortex::WorkloadSpec spec;  // canonical: h3 on cuda, synthetic weights
  std::fprintf(stderr, "lora_runtime_bench: loading the canonical synthetic workload on the GPU...\n");
  auto wl = vortex::load_workload(spec, [](const std::string& m) { std::fprintf(stderr, "  %s\n", m.c_str()); });
  if (!wl.ok()) return fail(wl.status());
  vortex::Workload& w = *wl;
  vortex::Backend& be = *w.backend;
  const vortex::ModelConfig& cfg = w.cfg;
  if (block < 0 || block >= cfg.num_layers) return fail(vortex::invalid_argument("--block outside the model"));
  vortex::H3BlockWeights& bw = w.model->mutable_weights().blocks[static_cast<size_t>(block)];

  // The adapter: one full-width rank-r part per fused linear of the block (FP32 host factors, as load_lora gives).
  struct Layer {
    const char* name;
    vortex::LinearWeight* lw;
  };
  const std::vector<Layer> layers = {{"attn.qkv_proj", &bw.attn_qkv_proj},
                                     {"attn.out_proj", &bw.attn_out_proj},
                                     {"mlp.fc1", &bw.mlp_fc1},
                                     {"mlp.fc2", &bw.mlp_fc2}};
  vortex::LoraAdapter ad;
  ad.path = "synthetic";
  ad.key_style = "native";
  for (const Layer& l : layers) {
    vortex::LoraPart p;
    p.layer = "blocks." + std::to_string(block) + "." + l.name;
    p.source = p.layer;
    const int64_t out = l.lw->weight.dim(0), in = l.lw->weight.dim(1);
    p.a = vortex::Tensor::empty({rank, in}, vortex::DType::kF32);   // [r, in] f32 host
    p.b = vortex::Tensor::empty({out, rank}, vortex::DType::kF32);  // [out, r] f32 host
    BENCH_OK(vortex::fill_synthetic_host(p.a, vortex::synthetic_seed(3, p.layer + ".A"), 0.02f, 0.0f));
    BENCH_OK(vortex::fill_synthetic_host(p.b, vortex::synthetic_seed(3, p.layer + ".B"), 0.02f, 0.0f));
    ad.parts.push_back(std::move(p));
  }
  BENCH_OK(vortex::attach_lora_branches(w.model->mutable_weights(), {{&ad, 1.0}}, be));
  std::vector<std::shared_ptr<const vortex::LoraBranch>> branches;
  for (const Layer& l : layers) branches.push_back(l.lw->lora);
  auto set_branches = [&](bool on) {
    for (size_t i = 0; i < layers.size(); ++i) layers[i].lw->lora = on ? branches[i] : nullptr;
  };

  // Linears alone: synthetic inputs [S, in] of each layer's width.
  const int64_t s = static_cast<int64_t>(w.layout.modality.size());  // S packed rows
  std::vector<vortex::Tensor> xs, ys;
  for (const Layer& l : layers) {
    auto x = be.alloc({s, l.lw->weight.dim(1)}, vortex::DType::kBF16);  // [S, in] bf16
    auto y = be.alloc({s, l.lw->weight.dim(0)}, vortex::DType::kBF16);  // [S, out] bf16
    if (!x.ok()) return fail(x.status());
    if (!y.ok()) return fail(y.status());
    BENCH_OK(be.fill_synthetic(*x, vortex::synthetic_seed(4, l.name), 1.0f, 0.0f));
    xs.push_back(std::move(*x));
    ys.push_back(std::move(*y));
  }
  const size_t nl = layers.size();
  auto* cuda = dynamic_cast<vortex::CudaBackend*>(&be);
  if (!cuda) return fail(vortex::invalid_argument("lora_runtime_bench needs the cuda backend"));
  using Program = vortex::CudaBackend::LoraProgram;
  // Variant 0: plain linears / block; 1: the branch by concat_k; 2: the branch by fp32_accumulator.
  const char* const kVariant[] = {"plain", "concat_k", "fp32_accumulator"};
  constexpr int kVariants = 3;
  auto select = [&](int v) {
    if (v > 0) cuda->set_lora_program(v == 1 ? Program::kConcatK : Program::kFp32Accumulator);
  };
  std::vector<std::vector<std::vector<double>>> layer_ms(kVariants, std::vector<std::vector<double>>(nl));
  std::vector<std::vector<double>> total_ms(kVariants);
  auto run_linears = [&](int v, bool record) -> vortex::Status {
    select(v);
    double total = 0;
    for (size_t i = 0; i < nl; ++i) {
      VORTEX_RETURN_IF_ERROR(be.synchronize());
      const auto t0 = Clock::now();
      if (v > 0) {
        VORTEX_RETURN_IF_ERROR(be.linear_lora(xs[i], *layers[i].lw, nullptr, *branches[i], ys[i]));
      } else {
        vortex::LinearWeight plain = *layers[i].lw;
        plain.lora.reset();
        VORTEX_RETURN_IF_ERROR(be.linear(xs[i], plain, nullptr, ys[i]));
      }
      VORTEX_RETURN_IF_ERROR(be.synchronize());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      total += ms;
      if (record) layer_ms[v][i].push_back(ms);
    }
    if (record) total_ms[v].push_back(total);
    return vortex::Status::Ok();
  };
  const vortex::Backend::DeviceInfo di = be.device_info();
  vortex::RunEnvironment env = vortex::collect_environment(di.name, di.sm, di.runtime);
  std::vector<int> clocks;
  std::fprintf(stderr, "lora_runtime_bench: S = %lld rows, rank %d, block %d: linears...\n", static_cast<long long>(s),
               rank, block);
  for (int i = 0; i < warmup; ++i)
    for (int v = 0; v < kVariants; ++v) BENCH_OK(run_linears(v, false));
  for (int i = 0; i < reps; ++i) {
    for (int v = 0; v < kVariants; ++v) BENCH_OK(run_linears((v + i) % kVariants, true));  // rotate the order
    vortex::refresh_clocks(env);
    clocks.push_back(env.clock_sm_mhz);
  }

  // Check: rows [0, 8) of the qkv branch output of both programs against ref::linear_lora on the host.
  std::string check;
  {
    const int64_t rows = 8, k = xs[0].dim(1), n = ys[0].dim(1);
    vortex::Tensor hx = vortex::Tensor::empty({rows, k}, vortex::DType::kBF16);
    auto xv = xs[0].as_strided({rows, k}, {k, 1});
    auto yv = ys[0].as_strided({rows, n}, {n, 1});
    if (!xv.ok() || !yv.ok()) return fail(vortex::internal_error("row views"));
    BENCH_OK(be.download(*xv, hx));
    vortex::LinearWeight hw;
    hw.weight = vortex::Tensor::empty({n, k}, vortex::DType::kBF16);
    BENCH_OK(be.download(layers[0].lw->weight, hw.weight));
    vortex::LoraBranch hb;
    for (const vortex::LoraBranchPart& p : branches[0]->parts) {
      vortex::LoraBranchPart q = p;
      q.a = vortex::Tensor::empty(p.a.shape(), vortex::DType::kBF16);
      q.b = vortex::Tensor::empty(p.b.shape(), vortex::DType::kBF16);
      BENCH_OK(be.download(p.a, q.a));
      BENCH_OK(be.download(p.b, q.b));
      hb.parts.push_back(q);
    }
    vortex::Tensor ref = vortex::Tensor::empty({rows, n}, vortex::DType::kBF16);
    BENCH_OK(vortex::ref::linear_lora(hx, hw, nullptr, hb, ref));
    for (int v = 1; v < kVariants; ++v) {
      select(v);
      BENCH_OK(be.linear_lora(xs[0], *layers[0].lw, nullptr, *branches[0], ys[0]));
      vortex::Tensor hy = vortex::Tensor::empty({rows, n}, vortex::DType::kBF16);
      BENCH_OK(be.download(*yv, hy));
      double e = 0, r2 = 0;
      int64_t same = 0;
      for (int64_t i = 0; i < rows * n; ++i) {
        const double a = vortex::f32_from_bf16_bits(hy.data<uint16_t>()[i]);
        const double b = vortex::f32_from_bf16_bits(ref.data<uint16_t>()[i]);
        e += (a - b) * (a - b), r2 += b * b;
        same += hy.data<uint16_t>()[i] == ref.data<uint16_t>()[i];
      }
      char buf[200];
      std::snprintf(buf, sizeof(buf), "%s%s: qkv rows [0, 8) vs ref::linear_lora rel-L2 %.3e, %.2f%% bytes equal",
                    check.empty() ? "" : "; ", kVariant[v], std::sqrt(e / r2),
                    100.0 * static_cast<double>(same) / static_cast<double>(rows * n));
      check += buf;
    }
    std::fprintf(stderr, "lora_runtime_bench: %s\n", check.c_str());
  }
  xs.clear();
  ys.clear();

  // Whole block on its real input, branches detached / attached.
  std::fprintf(stderr, "lora_runtime_bench: block %d input...\n", block);
  set_branches(false);
  auto in = vortex::make_block_input(w, block, 12);
  if (!in.ok()) return fail(in.status());
  auto xb = be.alloc(in->x.shape(), in->x.dtype());
  if (!xb.ok()) return fail(xb.status());
  std::vector<std::vector<double>> block_ms(kVariants);
  auto run_block = [&](int v, bool record) -> vortex::Status {
    select(v);
    set_branches(v > 0);
    VORTEX_RETURN_IF_ERROR(be.copy(in->x, *xb));
    VORTEX_RETURN_IF_ERROR(be.synchronize());
    const auto t0 = Clock::now();
    VORTEX_RETURN_IF_ERROR(w.model->run_block(block, *xb, in->tables));
    VORTEX_RETURN_IF_ERROR(be.synchronize());
    if (record) block_ms[v].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    return vortex::Status::Ok();
  };
  for (int i = 0; i < warmup; ++i)
    for (int v = 0; v < kVariants; ++v) BENCH_OK(run_block(v, false));
  for (int i = 0; i < reps; ++i) {
    for (int v = 0; v < kVariants; ++v) BENCH_OK(run_block((v + i) % kVariants, true));
    vortex::refresh_clocks(env);
    clocks.push_back(env.clock_sm_mhz);
  }
  set_branches(false);
  cuda->set_lora_program(Program::kConcatK);

  const vortex::Percentiles plain_lin = vortex::percentiles(total_ms[0]),
                            plain_block = vortex::percentiles(block_ms[0]);
  std::printf("%-34s %9s %9s %9s %8s\n", "lora run-time (ms)", "p10", "p50", "p90", "ratio");
  auto line = [](const std::string& what, const vortex::Percentiles& p, double ratio) {
    if (ratio > 0) std::printf("%-34s %9.3f %9.3f %9.3f %8.4f\n", what.c_str(), p.p10, p.p50, p.p90, ratio);
    else std::printf("%-34s %9.3f %9.3f %9.3f %8s\n", what.c_str(), p.p10, p.p50, p.p90, "-");
  };
  for (size_t i = 0; i < nl; ++i) {
    line(std::string(layers[i].name) + " plain", vortex::percentiles(layer_ms[0][i]), 0);
    for (int v = 1; v < kVariants; ++v)
      line(std::string(layers[i].name) + " " + kVariant[v], vortex::percentiles(layer_ms[v][i]),
           median_ratio(layer_ms[v][i], layer_ms[0][i]));
  }
  line("four linears plain", plain_lin, 0);
  line("block plain", plain_block, 0);
  const std::string config = "rank " + std::to_string(rank) + " on qkv/out/fc1/fc2 of block " + std::to_string(block) +
                             ", S=" + std::to_string(s);
  std::vector<nlohmann::json> rows;
  for (int v = 1; v < kVariants; ++v) {
    const double lin_ratio = median_ratio(total_ms[v], total_ms[0]);
    const double block_ratio = median_ratio(block_ms[v], block_ms[0]);
    line(std::string("four linears ") + kVariant[v], vortex::percentiles(total_ms[v]), lin_ratio);
    line(std::string("block ") + kVariant[v] + " (target 1.04)", vortex::percentiles(block_ms[v]), block_ratio);
    nlohmann::json per_layer = nlohmann::json::array();
    for (size_t i = 0; i < nl; ++i) {
      const vortex::Percentiles a = vortex::percentiles(layer_ms[0][i]), b = vortex::percentiles(layer_ms[v][i]);
      per_layer.push_back({{"layer", layers[i].name},
                           {"out_features", layers[i].lw->weight.dim(0)},
                           {"in_features", layers[i].lw->weight.dim(1)},
                           {"plain_ms", {{"p10", a.p10}, {"p50", a.p50}, {"p90", a.p90}}},
                           {"branch_ms", {{"p10", b.p10}, {"p50", b.p50}, {"p90", b.p90}}},
                           {"ratio", median_ratio(layer_ms[v][i], layer_ms[0][i])}});
    }
    const nlohmann::json common = {{"block", block},         {"rows", s},      {"rank", rank},
                                   {"program", kVariant[v]}, {"check", check}, {"clock_sm_mhz_samples", clocks},
                                   {"target_overhead", 0.04}};
    nlohmann::json lin_extra = common;
    lin_extra["per_layer"] = per_layer;
    lin_extra["overhead"] = lin_ratio - 1.0;
    nlohmann::json block_extra = common;
    block_extra["overhead"] = block_ratio - 1.0;
    block_extra["meets_target"] = block_ratio - 1.0 <= 0.04;
    block_extra["linears_share_of_block_plain"] = plain_lin.p50 / plain_block.p50;
    rows.push_back(
        vortex::evidence_row(env, "lora_runtime_linears", std::string("vortex_cuda linear_lora ") + kVariant[v], config,
                             vortex::percentiles(total_ms[v]),
                             {"plain bf16 linears (Backend::linear), same run", plain_lin.p50, lin_ratio}, lin_extra));
    rows.push_back(
        vortex::evidence_row(env, "lora_runtime_block", std::string("vortex_cuda run_block + lora ") + kVariant[v],
                             config, vortex::percentiles(block_ms[v]),
                             {"run_block without branches, same run", plain_block.p50, block_ratio}, block_extra));
  }
  const std::string path = vortex::evidence_path(out_dir, env, "lora-runtime");
  BENCH_OK(vortex::append_jsonl(path, rows));
  std::printf("linears: %.1f%% of the plain block; check: %s\nevidence: %s\n", 100.0 * plain_lin.p50 / plain_block.p50,
              check.c_str(), path.c_str());
  return 0;
}
