// sage2_bench: times the Sage2 sm90 attention at the canonical H3 shape (S = 37,810, 56 heads, d = 128)
// and at S = 8K/16K/32K: quantization pre-pass alone, mainloop alone (quantization excluded) and both
// (included). CUDA events, p10/p50/p90 over --reps (>= 20) after warm-up; TOPS = 4*S^2*128*H / time.
// Inputs: random bf16 rows (a 2,048-row random block tiled over S; timing does not depend on values).
// Usage: sage2_bench [--seq 37810,8192,16384,32768] [--heads 56] [--reps 20] [--mainloop mma|wgmma|all]
// [--sdpa 1|0] [--inputs random|realistic] [--evidence FILE.jsonl] (defaults: all = mma.sync and the warp-specialized
// wgmma kernel; cuDNN BF16 SDPA timed on the same inputs in the same run, with the ratio and the whole-tensor deviation
// of the Sage2 output from it; evidence rows appended).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "attention/sage2_test_util.h"
#include "core/strings.h"
#include "cuda/attention/sage2_attention.h"
#include "cuda/attention/sdpa.h"
#include "measure/gemm_evidence.h"
#include "profiling/evidence.h"

namespace {

using vortex::Status;
namespace sage2_test = vortex::sage2_test;

#define BENCH_CHECK(expr)                                                     \
  do {                                                                        \
    cudaError_t e_ = (expr);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(e_)); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

template <typename Fn>
int time_it(Fn&& fn, int reps, std::vector<double>& ms) {
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i) {  // warm-up
    Status s = fn();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
  }
  BENCH_CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < reps; ++i) {
    BENCH_CHECK(cudaEventRecord(a));
    Status s = fn();
    BENCH_CHECK(cudaEventRecord(b));
    BENCH_CHECK(cudaEventSynchronize(b));
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
    float t = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  BENCH_CHECK(cudaEventDestroy(a));
  BENCH_CHECK(cudaEventDestroy(b));
  return 0;
}

// Whole-tensor deviation of `got` from `want` (both bf16 bits): the Sage2 output against the cuDNN BF16
// SDPA program on the same inputs (E2: the quality of the approximate mode at the real shape).
sage2_test::ErrorStats compare_bf16(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  auto f = [](uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return static_cast<double>(x);
  };
  sage2_test::ErrorStats e;
  double num = 0.0, den = 0.0, dot = 0.0, gg = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = f(got[i]), w = f(want[i]);
    if (std::isnan(g) || std::isnan(w)) e.has_nan = true;
    const double diff = g - w;
    e.max_abs = std::max(e.max_abs, std::fabs(diff));
    num += diff * diff;
    den += w * w;
    dot += g * w;
    gg += g * g;
  }
  e.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  e.cosine = dot / std::sqrt(std::max(gg * den, 1e-300));
  return e;
}

// Evidence rows (docs/evidence.md) go to `evidence` when set: one per (mainloop, seq, part). The mainloop and
// total rows name the cuDNN SDPA timing of the same run as their baseline.
std::FILE* evidence = nullptr;

int run_one(int64_t seq, int heads, int reps, vortex::Sage2Mainloop mainloop, bool with_sdpa,
            sage2_test::InputKind kind) {
  using namespace vortex;
  const int64_t width = 3LL * heads * 128;
  constexpr int64_t kBlockRows = 2048;
  const int64_t block_rows = std::min(seq, kBlockRows);
  auto block = sage2_test::make_qkv(block_rows, heads, kind, sage2_test::fresh_seed());
  auto st = std::make_shared<Storage>();
  BENCH_CHECK(cudaMalloc(&st->ptr, static_cast<size_t>(seq * width) * 2));
  st->bytes = static_cast<size_t>(seq * width) * 2;
  st->device = Device::kCuda;
  st->release = [](void* p, size_t) { cudaFree(p); };
  for (int64_t r = 0; r < seq; r += block_rows) {
    const int64_t n = std::min(block_rows, seq - r);
    BENCH_CHECK(cudaMemcpy(static_cast<uint16_t*>(st->ptr) + r * width, block.data(),
                           static_cast<size_t>(n * width) * 2, cudaMemcpyHostToDevice));
  }
  auto ost = std::make_shared<Storage>();
  BENCH_CHECK(cudaMalloc(&ost->ptr, static_cast<size_t>(seq * heads * 128) * 2));
  ost->bytes = static_cast<size_t>(seq * heads * 128) * 2;
  ost->device = Device::kCuda;
  ost->release = [](void* p, size_t) { cudaFree(p); };
  Tensor q = Tensor::from_storage(st, 0, {seq, heads * 128}, DType::kBF16, {width, 1});
  Tensor k =
      Tensor::from_storage(st, static_cast<size_t>(heads) * 128 * 2, {seq, heads * 128}, DType::kBF16, {width, 1});
  Tensor v =
      Tensor::from_storage(st, static_cast<size_t>(heads) * 256 * 2, {seq, heads * 128}, DType::kBF16, {width, 1});
  Tensor out = Tensor::from_storage(ost, 0, {seq, heads * 128}, DType::kBF16);
  Sage2Workspace ws;
  ws.mainloop = mainloop;
  const char* ml_name = sage2_mainloop_name(mainloop);

  std::vector<double> t_quant, t_main, t_both;
  if (time_it([&] { return sage2_quantize(q, k, v, heads, 128, nullptr, ws); }, reps, t_quant)) return 1;
  if (time_it([&] { return sage2_attention_quantized(out, nullptr, ws); }, reps, t_main)) return 1;
  if (time_it([&] { return sage2_attention(q, k, v, heads, 128, out, nullptr, ws); }, reps, t_both)) return 1;
  // SM clock right after each timed phase: attention runs at whatever clock the power limit allows, and
  // block benchmarks recorded 1485-1755 MHz after sustained load (2026-11-29) vs a 1980 MHz boost.
  RunEnvironment clocks;
  refresh_clocks(clocks);
  const int clock_after_sage2 = clocks.clock_sm_mhz;
  const double flop = 4.0 * static_cast<double>(seq) * static_cast<double>(seq) * 128.0 * heads;
  auto report = [&](const char* what, const std::vector<double>& ms, bool tops) {
    const Percentiles p = percentiles(ms);
    if (tops)
      std::printf("%-8s S=%-6lld H=%-3d %-22s p10 %9.3f ms  p50 %9.3f ms  p90 %9.3f ms  -> %7.1f TOPS (p50)\n", ml_name,
                  static_cast<long long>(seq), heads, what, p.p10, p.p50, p.p90, flop / (p.p50 * 1e-3) / 1e12);
    else
      std::printf("%-8s S=%-6lld H=%-3d %-22s p10 %9.3f ms  p50 %9.3f ms  p90 %9.3f ms\n", ml_name,
                  static_cast<long long>(seq), heads, what, p.p10, p.p50, p.p90);
  };
  // The BF16 baseline on the same Q/K/V views, in the same process and run: cuDNN SDPA.
  std::vector<double> t_sdpa;
  const size_t out_elems = static_cast<size_t>(seq * heads * 128);
  std::vector<uint16_t> out_sage2, out_sdpa;
  sage2_test::ErrorStats dev;
  if (with_sdpa) {
    out_sage2.resize(out_elems);
    BENCH_CHECK(cudaMemcpy(out_sage2.data(), ost->ptr, out_elems * 2, cudaMemcpyDeviceToHost));
    auto sdpa = SdpaAttention::create();
    if (!sdpa.ok()) {
      std::fprintf(stderr, "%s\n", sdpa.status().to_string().c_str());
      return 1;
    }
    if (time_it([&] { return (*sdpa)->run(q, k, v, heads, 128, out, nullptr); }, reps, t_sdpa)) return 1;
    refresh_clocks(clocks);
    out_sdpa.resize(out_elems);
    BENCH_CHECK(cudaMemcpy(out_sdpa.data(), ost->ptr, out_elems * 2, cudaMemcpyDeviceToHost));
    dev = compare_bf16(out_sage2, out_sdpa);
  }
  report("quantize only", t_quant, false);
  report("mainloop (quant excl)", t_main, true);
  report("total (quant incl)", t_both, true);
  const double sdpa_p50 = with_sdpa ? percentiles(t_sdpa).p50 : 0.0;
  const int clock_after_sdpa = with_sdpa ? clocks.clock_sm_mhz : 0;
  std::printf(
      "%-8s S=%-6lld H=%-3d SM clock after the Sage2 timing %d MHz, after the SDPA timing %d MHz (nvidia-smi)\n",
      ml_name, static_cast<long long>(seq), heads, clock_after_sage2, clock_after_sdpa);
  if (with_sdpa) {
    report("cuDNN SDPA (bf16)", t_sdpa, true);
    std::printf("%-8s S=%-6lld H=%-3d speed-up vs cuDNN SDPA in this run: %.3fx (total incl. quantization)\n", ml_name,
                static_cast<long long>(seq), heads, sdpa_p50 / percentiles(t_both).p50);
    std::printf("%-8s S=%-6lld H=%-3d %s inputs, output vs cuDNN SDPA (whole tensor): %s\n", ml_name,
                static_cast<long long>(seq), heads, kind == sage2_test::InputKind::kRandom ? "random" : "realistic",
                dev.str().c_str());
  }
  if (evidence) {
    RunEnvironment env = cuda_run_environment();
    env.clock_sm_mhz = clock_after_sage2;  // the clock the Sage2 timings ran at (the SDPA one is in extra)
    const std::string config = std::string("mainloop=") + ml_name +
                               " inputs=" + (kind == sage2_test::InputKind::kRandom ? "random" : "realistic");
    const std::string workload = "sage2_attention S=" + std::to_string(seq) + " H=" + std::to_string(heads) + " D=128";
    auto row = [&](const char* part, const std::vector<double>& ms, bool vs_sdpa) {
      const Percentiles p = percentiles(ms);
      EvidenceBaseline base;
      if (vs_sdpa && with_sdpa) base = {"cudnn_sdpa bf16 (same inputs, same run)", sdpa_p50, 0};
      nlohmann::json extra = {{"part", part},
                              {"seq_len", seq},
                              {"num_heads", heads},
                              {"head_dim", 128},
                              {"tops_p50", flop / (p.p50 * 1e-3) / 1e12},
                              {"sm_clock_mhz_after_sdpa", clock_after_sdpa}};
      if (with_sdpa) {
        extra["vs_sdpa_rel_l2"] = dev.rel_l2;
        extra["vs_sdpa_cos"] = dev.cosine;
        extra["vs_sdpa_max_abs"] = dev.max_abs;
      }
      const std::string line =
          evidence_row(env, workload + " " + part, std::string("vortex sage2 ") + ml_name, config, p, base, extra)
              .dump();
      std::fprintf(evidence, "%s\n", line.c_str());
    };
    row("quantize", t_quant, false);
    row("mainloop", t_main, true);
    row("total", t_both, true);
    std::fflush(evidence);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> seqs = {37810, 8192, 16384, 32768};
  int heads = 56, reps = 20;
  bool with_sdpa = true;
  auto kind = sage2_test::InputKind::kRandom;
  std::vector<vortex::Sage2Mainloop> mainloops = {vortex::Sage2Mainloop::kMmaSync, vortex::Sage2Mainloop::kWgmma};

  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], val = argv[i + 1];
    if (flag == "--seq") {
      seqs.clear();
      for (const std::string& item : vortex::split_list(val)) {
        const long long n = std::atoll(item.c_str());
        if (n <= 0) {
          std::fprintf(stderr, "--seq takes positive token counts, got '%s'\n", item.c_str());
          return 1;
        }
        seqs.push_back(n);
      }
    } else if (flag == "--heads") {
      heads = std::atoi(val.c_str());
    } else if (flag == "--mainloop") {
      if (val == "all") mainloops = {vortex::Sage2Mainloop::kMmaSync, vortex::Sage2Mainloop::kWgmma};
      else if (val == "wgmma") mainloops = {vortex::Sage2Mainloop::kWgmma};
      else if (val == "mma") mainloops = {vortex::Sage2Mainloop::kMmaSync};
      else {
        std::fprintf(stderr, "--mainloop must be mma, wgmma or all\n");
        return 1;
      }

    } else if (flag == "--inputs") {
      if (val != "random" && val != "realistic") {
        std::fprintf(stderr, "--inputs must be random or realistic\n");
        return 1;
      }
      kind = val == "random" ? sage2_test::InputKind::kRandom : sage2_test::InputKind::kRealistic;
    } else if (flag == "--sdpa") {
      with_sdpa = val == "1" || val == "on";
    } else if (flag == "--evidence") {
      evidence = std::fopen(val.c_str(), "a");
      if (!evidence) {
        std::fprintf(stderr, "cannot open %s for appending\n", val.c_str());
        return 1;
      }
    } else if (flag == "--reps") {
      reps = std::max(20, std::atoi(val.c_str()));
    } else {
      std::fprintf(stderr,
                   "unknown flag %s (use --seq a,b,c --heads N --reps N --mainloop M --sdpa 0|1 --evidence F)\n",
                   flag.c_str());
      return 1;
    }
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device: sage2_bench needs an sm_90 GPU\n");
    return 1;
  }
  std::printf("device: %s (sm_%d%d, %d SMs), reps %d, FLOP = 4*S^2*128*H\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, reps);
  for (auto ml : mainloops)
    for (int64_t s : seqs)
      if (run_one(s, heads, reps, ml, with_sdpa, kind)) return 1;
  return 0;
}
