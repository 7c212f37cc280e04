// bf16_attention_bench: the owned BF16 attention (bf16_attention.h: TMA loads, ping-pong warpgroups) against cuDNN
// SDPA on the same Q/K/V views of one [S, 3*I] buffer, in the same run: both are timed in alternation (one sample of
// each per round, CUDA events) so clock drift hits them alike. Default shapes: the
// canonical H3 attention (S = 37,810, 56 heads, D = 128) and a ~2K-row request (S = 2,048). TFLOP/s = 4*S^2*H*D / time.
// Also the whole-tensor deviation of the owned output from cuDNN's (max-abs, rel-L2). Prints a table and appends
// vortex-evidence-1 rows (docs/evidence.md) to OUT_DIR/bf16_attention_bench.jsonl.
//   bf16_attention_bench OUT_DIR [--seq 37810,2048] [--heads 56] [--reps 30]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/strings.h"
#include "cuda/attention/bf16_attention.h"
#include "cuda/attention/sdpa.h"
#include "measure/gemm_evidence.h"
#include "profiling/evidence.h"
#include "vortex/dtype.h"

namespace {

using namespace vortex;

#define BENCH_CHECK(expr)                                                     \
  do {                                                                        \
    cudaError_t e_ = (expr);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(e_)); \
      return 1;                                                               \
    }                                                                         \
  } while (0)
#define BENCH_STATUS(expr)                                             \
  do {                                                                 \
    const Status s_ = (expr);                                          \
    if (!s_.ok()) {                                                    \
      std::fprintf(stderr, "%s: %s\n", #expr, s_.to_string().c_str()); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

struct Deviation {
  double max_abs = 0, rel_l2 = 0;
  int64_t nonfinite = 0;
};
Deviation deviation(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  Deviation d;
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = f32_from_bf16_bits(got[i]), w = f32_from_bf16_bits(want[i]);
    if (!std::isfinite(g) || !std::isfinite(w)) {
      ++d.nonfinite;
      continue;
    }
    d.max_abs = std::max(d.max_abs, std::fabs(g - w));
    num += (g - w) * (g - w);
    den += w * w;
  }
  d.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  return d;
}

struct Impl {
  std::string name;  // evidence impl
  std::string config;
  std::vector<double> ms;
  std::vector<uint16_t> out;
  Deviation vs_cudnn;
};

int run_one(int64_t seq, int heads, int reps, SdpaAttention& sdpa, const std::string& out_dir) {
  const int64_t width = static_cast<int64_t>(heads) * 128, ld = 3 * width;
  // Random bf16 rows: a 2,048-row block tiled over S (timing does not depend on the values). Q scaled up and K
  // given a per-channel mean so the softmax is not flat, as in the tests.
  const int64_t block_rows = std::min<int64_t>(seq, 2048);
  std::vector<uint16_t> block(static_cast<size_t>(block_rows * ld));
  std::mt19937_64 rng(0x5eed0000u + static_cast<uint64_t>(seq));
  std::normal_distribution<float> g(0.f, 1.f);
  for (int64_t t = 0; t < block_rows; ++t)
    for (int64_t c = 0; c < ld; ++c) {
      float val = g(rng);
      if (c < width) val *= 1.5f;
      else if (c < 2 * width) val += 0.5f * static_cast<float>((c % 7) - 3);
      block[static_cast<size_t>(t * ld + c)] = bf16_bits_from_f32(val);
    }
  auto qkv = std::make_shared<Storage>();
  BENCH_CHECK(cudaMalloc(&qkv->ptr, static_cast<size_t>(seq * ld) * 2));
  qkv->bytes = static_cast<size_t>(seq * ld) * 2;
  qkv->device = Device::kCuda;
  qkv->release = [](void* p, size_t) { cudaFree(p); };
  for (int64_t r = 0; r < seq; r += block_rows) {
    const int64_t n = std::min(block_rows, seq - r);
    BENCH_CHECK(cudaMemcpy(static_cast<uint16_t*>(qkv->ptr) + r * ld, block.data(), static_cast<size_t>(n * ld) * 2,
                           cudaMemcpyHostToDevice));
  }
  auto ost = std::make_shared<Storage>();
  const size_t out_elems = static_cast<size_t>(seq * width);
  BENCH_CHECK(cudaMalloc(&ost->ptr, out_elems * 2));
  ost->bytes = out_elems * 2;
  ost->device = Device::kCuda;
  ost->release = [](void* p, size_t) { cudaFree(p); };
  Tensor q = Tensor::from_storage(qkv, 0, {seq, width}, DType::kBF16, {ld, 1});
  Tensor k = Tensor::from_storage(qkv, static_cast<size_t>(width) * 2, {seq, width}, DType::kBF16, {ld, 1});
  Tensor v = Tensor::from_storage(qkv, static_cast<size_t>(width) * 4, {seq, width}, DType::kBF16, {ld, 1});
  Tensor out = Tensor::from_storage(ost, 0, {seq, width}, DType::kBF16);

  // The owned kernel (entry 0), then cuDNN (entry 1, the baseline).
  constexpr int n_impl = 2, owned = 0, cudnn = 1;
  std::vector<Impl> impls(static_cast<size_t>(n_impl));
  impls[owned].name = "vortex bf16_attention";
  impls[owned].config = "kernel=bf16_wgmma tile=128x128 stages=2 schedule=intra-warpgroup+pingpong loads=tma";
  impls[cudnn].name = "cudnn_sdpa";
  auto plan = sdpa.plan_info(seq, heads, 128, ld, width);
  impls[cudnn].config = plan.ok() ? *plan : std::string("plan: ") + plan.status().to_string();
  auto launch = [&](int i) -> Status {
    if (i == owned) return bf16_attention(q, k, v, heads, 128, out, nullptr);
    return sdpa.run(q, k, v, heads, 128, out, nullptr);
  };
  // Outputs (poisoned first), then warm-up.
  for (int i = 0; i < n_impl; ++i) {
    BENCH_CHECK(cudaMemset(ost->ptr, 0xFF, out_elems * 2));
    BENCH_STATUS(launch(i));
    BENCH_CHECK(cudaDeviceSynchronize());
    impls[static_cast<size_t>(i)].out.resize(out_elems);
    BENCH_CHECK(cudaMemcpy(impls[static_cast<size_t>(i)].out.data(), ost->ptr, out_elems * 2, cudaMemcpyDeviceToHost));
    BENCH_STATUS(launch(i));
  }
  for (auto& im : impls) im.vs_cudnn = deviation(im.out, impls[static_cast<size_t>(cudnn)].out);
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  RunEnvironment env = cuda_run_environment();
  std::vector<int> clocks;
  for (int rep = 0; rep < reps; ++rep) {
    for (int i = 0; i < n_impl; ++i) {
      BENCH_CHECK(cudaEventRecord(a));
      BENCH_STATUS(launch(i));
      BENCH_CHECK(cudaEventRecord(b));
      BENCH_CHECK(cudaEventSynchronize(b));
      float t = 0;
      BENCH_CHECK(cudaEventElapsedTime(&t, a, b));
      impls[static_cast<size_t>(i)].ms.push_back(t);
    }
    if (rep % 10 == 9 || rep == reps - 1) {  // SM clock sampled under load during the run (nvidia-smi)
      refresh_clocks(env);
      clocks.push_back(env.clock_sm_mhz);
    }
  }
  BENCH_CHECK(cudaEventDestroy(a));
  BENCH_CHECK(cudaEventDestroy(b));
  const double flop = 4.0 * static_cast<double>(seq) * static_cast<double>(seq) * heads * 128.0;
  const double cudnn_p50 = percentiles(impls[static_cast<size_t>(cudnn)].ms).p50;
  std::string clock_list;
  for (int c : clocks) clock_list += (clock_list.empty() ? "" : ",") + std::to_string(c);
  std::printf("S=%lld H=%d D=128 reps=%d  SM clock samples (MHz): %s\n", static_cast<long long>(seq), heads, reps,
              clock_list.c_str());
  std::printf("  %-44s %9s %9s %9s %9s %10s %10s %10s\n", "impl", "p10 ms", "p50 ms", "p90 ms", "TFLOP/s", "x cuDNN",
              "maxabs", "relL2");
  std::vector<nlohmann::json> rows;
  for (size_t i = 0; i < impls.size(); ++i) {
    const Impl& im = impls[i];
    const Percentiles p = percentiles(im.ms);
    const double tflops = flop / (p.p50 * 1e-3) / 1e12;
    const std::string label = static_cast<int>(i) == cudnn ? "cuDNN SDPA" : "owned tma +pingpong";
    std::printf("  %-44s %9.3f %9.3f %9.3f %9.1f %10.3f %10.3e %10.3e\n", label.c_str(), p.p10, p.p50, p.p90, tflops,
                cudnn_p50 / p.p50, im.vs_cudnn.max_abs, im.vs_cudnn.rel_l2);
    EvidenceBaseline base;
    if (static_cast<int>(i) != cudnn)
      base = {"cudnn_sdpa bf16 (same inputs, same run, alternating samples)", cudnn_p50, 0};
    nlohmann::json extra = {{"seq_len", seq},
                            {"num_heads", heads},
                            {"head_dim", 128},
                            {"tflops_p50", tflops},
                            {"speedup_vs_cudnn", cudnn_p50 / p.p50},
                            {"sm_clock_mhz_samples", clocks},
                            {"vs_cudnn_max_abs", im.vs_cudnn.max_abs},
                            {"vs_cudnn_rel_l2", im.vs_cudnn.rel_l2},
                            {"vs_cudnn_nonfinite", im.vs_cudnn.nonfinite}};
    rows.push_back(evidence_row(env,
                                "bf16 attention S=" + std::to_string(seq) + " H=" + std::to_string(heads) +
                                    " D=128 non-causal, strided QKV views",
                                im.name, im.config, p, base, extra));
  }
  const std::string path = out_dir + "/bf16_attention_bench.jsonl";
  BENCH_STATUS(append_jsonl(path, rows));
  std::printf("  evidence: %s\n", path.c_str());
  std::fflush(stdout);
  for (const Impl& im : impls)
    if (im.vs_cudnn.nonfinite != 0 || im.vs_cudnn.rel_l2 > 1e-2) {
      std::fprintf(stderr, "error: %s (%s) deviates from cuDNN: rel-L2 %.3e, %lld non-finite\n", im.name.c_str(),
                   im.config.c_str(), im.vs_cudnn.rel_l2, static_cast<long long>(im.vs_cudnn.nonfinite));
      return 1;
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: bf16_attention_bench OUT_DIR [--seq 37810,2048] [--heads 56] [--reps 30]\n");
    return 1;
  }
  const std::string out_dir = argv[1];
  std::vector<int64_t> seqs = {37810, 2048};
  int heads = 56, reps = 30;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return 1;
    }
    const std::string val = argv[i + 1];
    if (flag == "--seq") {
      seqs.clear();
      for (const std::string& item : split_list(val)) {
        const long long n = std::atoll(item.c_str());
        if (n <= 0) {
          std::fprintf(stderr, "--seq takes positive token counts, got '%s'\n", item.c_str());
          return 1;
        }
        seqs.push_back(n);
      }
    } else if (flag == "--heads") {
      heads = std::atoi(val.c_str());
      if (heads <= 0) {
        std::fprintf(stderr, "--heads must be positive\n");
        return 1;
      }
    } else if (flag == "--reps") {
      reps = std::max(20, std::atoi(val.c_str()));
    } else {
      std::fprintf(stderr, "unknown flag %s (use --seq a,b --heads N --reps N)\n", flag.c_str());
      return 1;
    }
  }
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device: bf16_attention_bench needs an sm_90 GPU\n");
    return 1;
  }
  if (!bf16_attention_supported(dev)) {
    std::fprintf(stderr, "%s (sm_%d%d): the owned BF16 attention needs sm_90 and a build with 90a\n", prop.name,
                 prop.major, prop.minor);
    return 1;
  }
  auto sdpa = SdpaAttention::create();
  if (!sdpa.ok()) {
    std::fprintf(stderr, "%s\n", sdpa.status().to_string().c_str());
    return 1;
  }
  std::printf("device: %s (sm_%d%d, %d SMs); FLOP = 4*S^2*H*D; samples alternate between the rows\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount);
  for (int64_t s : seqs)
    if (run_one(s, heads, reps, **sdpa, out_dir)) return 1;
  return 0;
}
