// bench_sdpa: times SdpaAttention at one shape (default canonical S = 37,810, 56 heads, D = 128) on
// device-random Q/K/V read as strided views of one [S, 3I] buffer, exactly as the block runs it.
// Reports p10/p50/p90/p95 over >= 20 reps and TFLOP/s (4 * S^2 * heads * D). Used by bench/sdpa_bench.cpp;
// the correctness of the same plan is checked in tests/attention/sdpa_test.cpp.
#include "measure/sdpa_bench.h"

#include <cuda_runtime.h>

#include <vector>

#include "measure/gemm_tune.h"

namespace vortex {

Result<SdpaBenchResult> bench_sdpa(SdpaAttention& sdpa, int64_t seq_len, int num_heads, int head_dim, int reps) {
  if (reps < 1) return invalid_argument("bench_sdpa: reps must be >= 1");
  const int64_t width = static_cast<int64_t>(num_heads) * head_dim;
  const size_t qkv_bytes = static_cast<size_t>(seq_len * 3 * width) * 2;
  const size_t out_bytes = static_cast<size_t>(seq_len * width) * 2;
  void* qkv = nullptr;
  void* out = nullptr;
  cudaError_t err = cudaMalloc(&qkv, qkv_bytes);
  if (err == cudaSuccess) err = cudaMalloc(&out, out_bytes);
  struct Free {
    void* a;
    void* b;
    ~Free() {
      cudaFree(a);
      cudaFree(b);
    }
  } guard{qkv, out};
  if (err != cudaSuccess)
    return Status(ErrorCode::kOutOfMemory, std::string("bench_sdpa buffers: ") + cudaGetErrorString(err));
  cudaStream_t s = nullptr;
  VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(qkv, seq_len * 3 * width, 12345, 2.0f, s));
  const char* base = static_cast<const char*>(qkv);
  const void* q = base;
  const void* k = base + width * 2;
  const void* v = base + 2 * width * 2;
  SdpaBenchResult r;
  r.seq_len = seq_len;
  r.num_heads = num_heads;
  r.head_dim = head_dim;
  VORTEX_ASSIGN_OR_RETURN(r.plan, sdpa.plan_info(seq_len, num_heads, head_dim, 3 * width, width));
  for (int w = 0; w < 2; ++w)
    VORTEX_RETURN_IF_ERROR(sdpa.run_raw(q, k, v, 3 * width, out, width, seq_len, num_heads, head_dim, s));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> ms;
  Status st = Status::Ok();
  for (int i = 0; i < reps && st.ok(); ++i) {
    cudaEventRecord(start, s);
    st = sdpa.run_raw(q, k, v, 3 * width, out, width, seq_len, num_heads, head_dim, s);
    cudaEventRecord(stop, s);
    if (cudaEventSynchronize(stop) != cudaSuccess) st = Status(ErrorCode::kCuda, "bench_sdpa: event sync failed");
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  VORTEX_RETURN_IF_ERROR(st);
  const TimingStats t = timing_stats(ms);
  r.ms_p10 = t.p10;
  r.ms_p50 = t.p50;
  r.ms_p90 = t.p90;
  r.ms_p95 = t.p95;
  r.reps = t.n;
  r.tflops_p50 = 4.0 * static_cast<double>(seq_len) * static_cast<double>(seq_len) * static_cast<double>(width) /
                 (t.p50 * 1e-3) / 1e12;
  return r;
}

}  // namespace vortex
