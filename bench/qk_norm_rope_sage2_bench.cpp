// qk_norm_rope_sage2_bench: steps 4-5's pre-attention work for Sage2 at the canonical H3 shape (S = 37,810,
// 56 heads, d = 128, RoPE on 96 dims), in one process on the same QKV buffer:
//   baseline  qk_norm_rope + sage2_quantize (the separate pre-pass: Q INT8, K mean + INT8, V FP8)
//   fused     qk_norm_rope_sage2 (Q INT8 in the norm pass) + sage2_quantize_kv (K/V only)
// and the Q part alone (qk_norm_rope + sage2_quantize_q vs qk_norm_rope_sage2). A and B alternate rep by rep
// (CUDA events around each), p10/p50/p90 over --reps, ratio = median of per-pair fused / baseline. Before timing,
// one run of each on identical inputs must give identical bytes (normed q/k, every workspace byte and scale).
// Usage: qk_norm_rope_sage2_bench OUT_DIR [--seq 37810] [--heads 56] [--reps 30] [--mainloop wgmma|mma]
// Writes OUT_DIR/<yyyy-mm-dd>-<gpu>-qk-norm-rope-sage2.jsonl (vortex-evidence-1, docs/evidence.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/attention/sage2_attention.h"
#include "cuda/ops/ops.h"
#include "measure/gemm_evidence.h"
#include "profiling/evidence.h"
#include "ref/sage2_attention.h"
#include "vortex/dtype.h"

namespace {

using vortex::Status;

#define BENCH_CUDA(expr)                                                      \
  do {                                                                        \
    cudaError_t e_ = (expr);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)
#define BENCH_OK(expr)                                                        \
  do {                                                                        \
    const Status s_ = (expr);                                                 \
    if (!s_.ok()) {                                                           \
      std::fprintf(stderr, "%s failed: %s\n", #expr, s_.to_string().c_str()); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

std::shared_ptr<vortex::Storage> device_storage(size_t bytes) {
  auto st = std::make_shared<vortex::Storage>();
  BENCH_CUDA(cudaMalloc(&st->ptr, bytes));
  st->bytes = bytes;
  st->device = vortex::Device::kCuda;
  st->release = [](void* p, size_t) { cudaFree(p); };
  return st;
}

vortex::Tensor upload(const std::vector<uint16_t>& host, const vortex::Shape& shape) {
  auto st = device_storage(host.size() * 2);
  BENCH_CUDA(cudaMemcpy(st->ptr, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  return vortex::Tensor::from_storage(st, 0, shape, vortex::DType::kBF16);
}

template <typename T>
std::vector<T> download(const void* dev, size_t count) {
  std::vector<T> host(count);
  BENCH_CUDA(cudaMemcpy(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Milliseconds of fn() between two events on the default stream.
template <typename Fn>
double time_once(Fn&& fn, cudaEvent_t a, cudaEvent_t b) {
  BENCH_CUDA(cudaEventRecord(a));
  BENCH_OK(fn());
  BENCH_CUDA(cudaEventRecord(b));
  BENCH_CUDA(cudaEventSynchronize(b));
  float ms = 0.0f;
  BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: qk_norm_rope_sage2_bench OUT_DIR [--seq 37810] [--heads 56] [--reps 30] "
                 "[--mainloop wgmma|mma]\n");
    return 1;
  }
  const std::string out_dir = argv[1];
  int64_t seq = 37810;
  int heads = 56, reps = 30;
  vortex::Sage2Mainloop mainloop = vortex::Sage2Mainloop::kWgmma;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], val = argv[i + 1];
    if (flag == "--seq") seq = std::atoll(val.c_str());
    else if (flag == "--heads") heads = std::atoi(val.c_str());
    else if (flag == "--reps") reps = std::atoi(val.c_str());
    else if (flag == "--mainloop" && (val == "wgmma" || val == "mma"))
      mainloop = val == "wgmma" ? vortex::Sage2Mainloop::kWgmma : vortex::Sage2Mainloop::kMmaSync;
    else {
      std::fprintf(stderr, "unknown flag or value %s %s\n", flag.c_str(), val.c_str());
      return 1;
    }
  }
  if (seq <= 0 || heads <= 0 || reps < 20) {
    std::fprintf(stderr, "--seq and --heads must be positive and --reps >= 20\n");
    return 1;
  }
  constexpr int kD = vortex::kSage2HeadDim, kRope = 96;
  const int64_t inner = static_cast<int64_t>(heads) * kD, width = 3 * inner;

  // Inputs: a 2,048-row random bf16 block tiled over S (timing does not depend on values); weights near 1;
  // RoPE tables of the H3 form.
  std::printf("building inputs [%lld, %lld] bf16 ...\n", static_cast<long long>(seq), static_cast<long long>(width));
  std::mt19937_64 rng(0x51A6E2ULL);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t block_rows = std::min<int64_t>(seq, 2048);
  std::vector<uint16_t> block(static_cast<size_t>(block_rows * width));
  for (auto& b : block) b = vortex::bf16_bits_from_f32(normal(rng));
  std::vector<uint16_t> qkv(static_cast<size_t>(seq * width));
  for (int64_t r = 0; r < seq; ++r)
    std::memcpy(&qkv[static_cast<size_t>(r * width)], &block[static_cast<size_t>((r % block_rows) * width)],
                static_cast<size_t>(width) * 2);
  std::vector<uint16_t> qw(kD), kw(kD), cosv(static_cast<size_t>(seq * kRope / 2)), sinv(cosv.size());
  std::uniform_real_distribution<float> w(0.5f, 1.5f);
  for (int i = 0; i < kD; ++i) {
    qw[i] = vortex::bf16_bits_from_f32(w(rng));
    kw[i] = vortex::bf16_bits_from_f32(w(rng));
  }
  for (int64_t r = 0; r < seq; ++r)
    for (int j = 0; j < kRope / 2; ++j) {
      const double ang = static_cast<double>(r % 4096) * std::pow(10000.0, -double(j) / (kRope / 2));
      cosv[static_cast<size_t>(r * kRope / 2 + j)] = vortex::bf16_bits_from_f64(std::cos(ang));
      sinv[static_cast<size_t>(r * kRope / 2 + j)] = vortex::bf16_bits_from_f64(std::sin(ang));
    }
  vortex::Tensor buf_a = upload(qkv, {seq, width}), buf_b = upload(qkv, {seq, width});
  vortex::Tensor tqw = upload(qw, {kD}), tkw = upload(kw, {kD});
  vortex::Tensor tcos = upload(cosv, {seq, kRope / 2}), tsin = upload(sinv, {seq, kRope / 2});
  auto view = [&](vortex::Tensor& buf, int part) {
    return buf.as_strided({seq, inner}, {width, 1}, part * inner).value();
  };
  vortex::Tensor qa = view(buf_a, 0), ka = view(buf_a, 1), va = view(buf_a, 2);
  vortex::Tensor qb = view(buf_b, 0), kb = view(buf_b, 1), vb = view(buf_b, 2);
  vortex::Sage2Workspace ws_a, ws_b;
  ws_a.mainloop = ws_b.mainloop = mainloop;
  BENCH_OK(ws_a.reserve(heads, seq));
  BENCH_OK(ws_b.reserve(heads, seq));
  const float eps = 1e-6f;

  auto norm = [&]() {
    return vortex::cuda_ops::qk_norm_rope(qa, ka, tqw, tkw, eps, &tcos, &tsin, kRope, heads, kD, nullptr);
  };
  auto baseline = [&]() -> Status {
    VORTEX_RETURN_IF_ERROR(norm());
    return vortex::sage2_quantize(qa, ka, va, heads, kD, nullptr, ws_a);
  };
  auto fused = [&]() -> Status {
    VORTEX_RETURN_IF_ERROR(
        vortex::qk_norm_rope_sage2(qb, kb, tqw, tkw, eps, &tcos, &tsin, kRope, heads, kD, nullptr, ws_b));
    return vortex::sage2_quantize_kv(kb, vb, heads, kD, nullptr, ws_b);
  };
  auto baseline_q = [&]() -> Status {
    VORTEX_RETURN_IF_ERROR(norm());
    return vortex::sage2_quantize_q(qa, heads, kD, nullptr, ws_a);
  };
  auto fused_q = [&]() {
    return vortex::qk_norm_rope_sage2(qb, kb, tqw, tkw, eps, &tcos, &tsin, kRope, heads, kD, nullptr, ws_b);
  };

  // Check on identical inputs: one run of each, then every byte.
  BENCH_CUDA(cudaMemset(ws_b.q_int8, 0x5A, static_cast<size_t>(heads * ws_b.padded * kD)));
  BENCH_OK(baseline());
  BENCH_OK(fused());
  BENCH_CUDA(cudaDeviceSynchronize());
  const size_t n8 = static_cast<size_t>(heads * ws_a.padded * kD), nqs = static_cast<size_t>(heads * ws_a.padded / 2);
  const size_t nks = static_cast<size_t>(heads * ws_a.padded / 32);
  const bool same =
      download<uint16_t>(buf_a.raw_data(), qkv.size()) == download<uint16_t>(buf_b.raw_data(), qkv.size()) &&
      download<int8_t>(ws_a.q_int8, n8) == download<int8_t>(ws_b.q_int8, n8) &&
      download<uint32_t>(ws_a.q_scale, nqs) == download<uint32_t>(ws_b.q_scale, nqs) &&
      download<int8_t>(ws_a.k_int8, n8) == download<int8_t>(ws_b.k_int8, n8) &&
      download<uint32_t>(ws_a.k_scale, nks) == download<uint32_t>(ws_b.k_scale, nks) &&
      download<uint8_t>(ws_a.v_fp8, n8) == download<uint8_t>(ws_b.v_fp8, n8);
  const std::string check = std::string("fused vs unfused on identical inputs: normed q/k, Q INT8 + scales, K/V ") +
                            "operands " + (same ? "identical" : "DIFFER");
  std::printf("%s\n", check.c_str());

  cudaEvent_t ea, eb;
  BENCH_CUDA(cudaEventCreate(&ea));
  BENCH_CUDA(cudaEventCreate(&eb));
  struct Pair {
    const char* part;
    std::function<Status()> a, b;
    std::vector<double> ms_a, ms_b, ratio;
  };
  std::vector<Pair> pairs;
  pairs.push_back({"qk_norm_rope + pre-pass", baseline, fused, {}, {}, {}});
  pairs.push_back({"qk_norm_rope + Q pass", baseline_q, fused_q, {}, {}, {}});
  vortex::RunEnvironment env = vortex::cuda_run_environment();
  std::vector<int> clocks;
  for (Pair& p : pairs) {
    for (int i = 0; i < 3; ++i) {  // warm-up
      BENCH_OK(p.a());
      BENCH_OK(p.b());
    }
    BENCH_CUDA(cudaDeviceSynchronize());
    for (int r = 0; r < reps; ++r) {  // A, B alternating
      p.ms_a.push_back(time_once(p.a, ea, eb));
      p.ms_b.push_back(time_once(p.b, ea, eb));
      p.ratio.push_back(p.ms_b.back() / p.ms_a.back());
      if (r % 10 == 9) std::printf("  %s: %d / %d pairs\n", p.part, r + 1, reps);
    }
    vortex::refresh_clocks(env);
    clocks.push_back(env.clock_sm_mhz);
  }

  const std::string workload = "qk_norm_rope sage2 S=" + std::to_string(seq) + " H=" + std::to_string(heads) +
                               " d=128 rope=96 " + vortex::sage2_mainloop_name(mainloop);
  std::vector<nlohmann::json> rows;
  std::printf("\n%-26s %-44s %9s %9s %9s %8s %6s\n", "part", "impl", "p10 ms", "p50 ms", "p90 ms", "ratio", "MHz");
  for (size_t i = 0; i < pairs.size(); ++i) {
    Pair& p = pairs[i];
    const bool whole = i == 0;
    const std::string impl_a = whole ? "qk_norm_rope + sage2_quantize" : "qk_norm_rope + sage2_quantize_q";
    const std::string impl_b = whole ? "qk_norm_rope_sage2 + sage2_quantize_kv" : "qk_norm_rope_sage2";
    const vortex::Percentiles pa = vortex::percentiles(p.ms_a), pb = vortex::percentiles(p.ms_b);
    const double ratio = vortex::quantile(p.ratio, 0.5);
    env.clock_sm_mhz = clocks[i];
    rows.push_back(vortex::evidence_row(env, workload + " " + p.part, "vortex " + impl_a, "baseline", pa, {},
                                        {{"check", check}, {"part", p.part}}));
    vortex::EvidenceBaseline base{"vortex " + impl_a, pa.p50, ratio};
    rows.push_back(vortex::evidence_row(env, workload + " " + p.part, "vortex " + impl_b, "fused_q_quantize=1", pb,
                                        base,
                                        {{"check", check}, {"part", p.part}, {"ratio_method", "median of A/B pairs"}}));
    std::printf("%-26s %-44s %9.3f %9.3f %9.3f %8s %6d\n", p.part, impl_a.c_str(), pa.p10, pa.p50, pa.p90, "-",
                clocks[i]);
    std::printf("%-26s %-44s %9.3f %9.3f %9.3f %8.4f %6d\n", p.part, impl_b.c_str(), pb.p10, pb.p50, pb.p90, ratio,
                clocks[i]);
  }
  const std::string path = vortex::evidence_path(out_dir, env, "qk-norm-rope-sage2");
  BENCH_OK(vortex::append_jsonl(path, rows));
  std::printf("\nevidence: %s\n", path.c_str());
  return same ? 0 : 2;
}
