// Elementwise / normalization kernels of the H3 block on CUDA (Component 1), one stem per op:
// rms_norm, modulate, rms_norm_modulate, qk_norm_rope, gate_add, swiglu, cast, fill_synthetic.
// Each function here is the ONE validating entry point of its .cu file (shapes, dtypes, strides and
// alignment are checked here, then a launcher picks the 16-byte vector or the scalar kernel).
// Numerics are E0 (identical bytes) against the CPU reference (src/ref): explicit __fmul_rn/__fadd_rn,
// canonical FP64 reductions (src/core/reduce.h), FP64 rsqrt, host-built SiLU table. Tested in
// tests/cuda/ops_test.cpp (GPU label).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "backend/segments.h"
#include "cuda/device.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::cuda_ops {

// A 2-D device view: `rows` x `cols` elements, row stride `ld` elements, inner stride 1. Tensors with
// more than two dims are accepted when contiguous (flattened to [prod(leading), last]).
struct RowView {
  void* ptr = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  DType dtype = DType::kBF16;
};
Result<RowView> row_view(const Tensor& t, const char* what);

// Device map row -> AdaLN table row (the seeds' segment-index cache): int32 [rows].
struct DeviceRowMap {
  const int32_t* table_row = nullptr;
  int64_t rows = 0;
  int32_t table_rows = 0;  // rows of the table it was validated against
};

// Builds the device row map of a SegmentTable once and reuses it while the segments are unchanged
// (block tables and the final-layer table alternate within a step, so a few entries are kept).
class SegmentRowMapCache {
 public:
  explicit SegmentRowMapCache(std::shared_ptr<CachingAllocator> allocator) : allocator_(std::move(allocator)) {}
  ~SegmentRowMapCache();
  SegmentRowMapCache(const SegmentRowMapCache&) = delete;
  SegmentRowMapCache& operator=(const SegmentRowMapCache&) = delete;
  // Validates `seg` against `table_rows` (table row bounds) and returns its device map.
  Result<DeviceRowMap> get(const SegmentTable& seg, int64_t table_rows, cudaStream_t stream);
  uint64_t builds() const { return builds_; }

 private:
  struct Entry {
    std::vector<Segment> segments;
    int64_t rows = 0;
    int64_t table_rows = 0;
    std::vector<int32_t> host;  // kept alive: the async upload reads it
    void* device = nullptr;
    size_t bytes = 0;
  };
  std::shared_ptr<CachingAllocator> allocator_;
  std::deque<Entry> entries_;  // most recent first
  uint64_t builds_ = 0;
};

// The device row map of `seg` for an AdaLN table [rows, C * D]: kInvalidArgument naming `op` unless the table is
// 2-D (checked before its rows bound the segments), then cache.get(seg, rows).
Result<DeviceRowMap> table_row_map(SegmentRowMapCache& cache, const SegmentTable& seg, const Tensor& table,
                                   const char* op, cudaStream_t stream);

// out = R(fp32(fp32(x * r) * w)), r = fp32(1 / sqrt(ms + eps)) in FP64, ms canonical FP64 mean of x^2.
// x, out [S, D] bf16 (row views allowed), weight [D] bf16.
Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream);

// x = R(R(x * R(1 + scale)) + shift) in place; scale/shift = table[map[row], chunk * D : +D].
Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const DeviceRowMap& map,
                cudaStream_t stream);

// Fused rms_norm + modulate in one pass (E0 vs the two kernels).
Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                         int scale_chunk, const DeviceRowMap& map, Tensor& out, cudaStream_t stream);
// The same op through the warp-per-row kernel that rms_norm_modulate falls back to where its shared-memory-table
// kernel cannot be resident (rows <= 6144 bf16, 16-byte aligned; kInvalidArgument otherwise): the E0 tests check
// the fallback's bytes with it on a device where the table kernel always runs.
Status rms_norm_modulate_warp_rows(const Tensor& x, const Tensor& weight, float eps, const Tensor& table,
                                   int shift_chunk, int scale_chunk, const DeviceRowMap& map, Tensor& out,
                                   cudaStream_t stream);

// In place on strided q, k [S, H * hd] views (row stride e.g. 3 * I): per head RMSNorm over hd with
// weight [hd], then rotate-half RoPE on dims < rope_dims with cos/sin [S, rope_dims / 2] bf16
// (cos == nullptr: no RoPE). hd <= 256, even; rope_dims even, <= hd.
Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps, const Tensor* cos,
                    const Tensor* sin, int rope_dims, int num_heads, int head_dim, cudaStream_t stream);

// ---- decoder ops (the Qwen3-VL conditioner) ----
// out = R(fp32(R(fp32(x * r)) * w)), r as in rms_norm (transformers' Qwen3 RMSNorm). x, out [S, D] bf16, w [D].
Status rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream);
// In place on one strided view x [S, H * hd]: per head rms_norm_two_rounding over hd with weight [hd], then
// qk_norm_rope's RoPE on dims < rope_dims (cos == nullptr: none). hd <= 256.
Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const Tensor* cos, const Tensor* sin, int rope_dims,
                      int num_heads, int head_dim, cudaStream_t stream);
// out[S, H*hd] = R(softmax_causal(q k^T / sqrt(hd)) v), query head h reads kv head h / (H / H_kv); q, out [S, H*hd],
// k, v [S, H_kv*hd], strided views (4-byte aligned, even row strides); hd even, <= 128. E1 (FP32 program).
Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                        int head_dim, Tensor& out, cudaStream_t stream);

// ---- LoRA (src/lora) ----
// In place on w [N, K] bf16 rows [row_offset, row_offset + rows): single_rounding W' = R(W + scale * sum_q B A) in FP64
// (ascending q, one rounding), else PEFT's R(W + R(fp32(scale) * fma-chain_fp32(B A))). a [r, K], b [rows, r] f32.
Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale, bool single_rounding,
                  cudaStream_t stream);

// x = R(x + R(gate * a)), gate = table[map[row], gate_chunk * D : +D]; table == nullptr: x = R(x + a).
Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const DeviceRowMap* map,
                cudaStream_t stream);
// The unfused pair that gate_add replaces (E0 against it): out = R(gate * a), then x = R(x + out).
Status gate_multiply(const Tensor& a, const Tensor& table, int gate_chunk, const DeviceRowMap& map, Tensor& out,
                     cudaStream_t stream);
Status residual_add(Tensor& x, const Tensor& y, cudaStream_t stream);

// SiLU of every BF16 input: silu(g) = g / (1 + exp(-g)) in FP64 on the host, rounded once to BF16.
// Index = input bits. The GPU uses this table (see swiglu.cu for why).
std::vector<uint16_t> silu_bf16_table_host();
// m[S, F] = R(R(silu(u[:, :F])) * u[:, F:]); u [S, 2F] bf16, m [S, F] bf16; silu_table: device [65536].
Status swiglu(const Tensor& u, Tensor& m, const uint16_t* silu_table, cudaStream_t stream);
// Evidence kernel: device FP64 silu (CUDA's exp) rounded once to BF16 for all 65,536 inputs -> out [65536].
Status silu_fp64_device_all(uint16_t* out_device, cudaStream_t stream);

// dst = convert(src): f32 -> bf16 (RNE), bf16 -> f32, or same dtype copy; same shape, row views allowed.
Status cast(const Tensor& src, Tensor& dst, cudaStream_t stream);

// Element i (row-major logical index) = synthetic_value(seed, i, scale, offset) converted to dst's
// dtype (f32, or bf16 with RNE): the same bytes as the host (src/core/philox.h).
Status fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset, cudaStream_t stream);

// kUnsupported when this binary has no kernel image for the current device (compiled out).
Status check_kernel_image();

}  // namespace vortex::cuda_ops
