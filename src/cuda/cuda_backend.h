// CudaBackend: the Backend interface on one NVIDIA GPU. Memory through the caching
// allocator, uploads/downloads through pinned staging, linear layers through GemmEngine (cuBLASLt),
// attention through the kernel select_attention picks (cuDNN SDPA or a Sage2 mainloop; src/cuda/policy.h),
// every other op through the E0 kernels of src/cuda/ops. NVFP4 weights (precision nvfp4): the activation is
// quantized per call by cuda_ops::nvfp4_quantize (or a fused producer: modulate_quantize / swiglu_quantize)
// into the backend's Nvfp4ActivationSlots, then Nvfp4Gemm on the path select_nvfp4 picks (cuBLASLt FP4 on
// Blackwell, exact BF16 emulation on Hopper). The policy row is the device's own, or the one forced by
// create(ordinal, policy) / VORTEX_POLICY. All work runs on one stream; `debug_sync` (VORTEX_DEBUG_SYNC=1 or
// set_debug_sync) synchronizes and checks after every op. Tested in tests/cuda/ops_test.cpp against the CPU backend.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "cuda/device.h"
#include "cuda/nvfp4_activation_slots.h"
#include "cuda/ops/encoder_ops.h"
#include "cuda/ops/vision_prep.h"
#include "cuda/policy.h"

namespace vortex {

class GemmEngine;
struct GemmEngineOptions;
class Nvfp4Gemm;
class SdpaAttention;
class Sage2Workspace;
namespace cuda_ops {
class SegmentRowMapCache;
}

class CudaBackend : public Backend {
 public:
  // Device `ordinal` under the policy row of `policy` (kUnknown: VORTEX_POLICY if set, else the device's own);
  // kUnsupported when there is no device or this build has no kernels it can run.
  static Result<std::unique_ptr<CudaBackend>> create(int ordinal = 0, GpuArch policy = GpuArch::kUnknown);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }

  Result<Tensor> alloc(const Shape& shape, DType dtype) override;
  Result<Tensor> upload(const Tensor& host) override;
  Status download(const Tensor& src, Tensor& host_dst) override;
  Status copy(const Tensor& src, Tensor& dst) override;
  Status synchronize() override;
  Status fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset) override;

  Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) override;
  Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const SegmentTable& seg) override;
  Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                           int scale_chunk, const SegmentTable& seg, Tensor& out) override;
  Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                      const RopeTables* rope, int num_heads, int head_dim) override;
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                   const ExecOptions& opts) override;
  // One batched cuDNN SDPA call when the selected kernel is cuDNN SDPA, else one attention() per sequence. E1 vs
  // the CPU reference.
  Status attention_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads,
                           int head_dim, Tensor& out, const ExecOptions& opts) override;
  // attention sage2 with its Q quantization in the qk_norm_rope pass (qk_norm_rope_sage2, then the K/V-only
  // pre-pass): E0 vs qk_norm_rope + attention.
  bool has_fused_q_quantize(int64_t rows, int num_heads, int head_dim, const ExecOptions& opts) const override;
  Status qk_norm_rope_quantize_q(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                                 const RopeTables* rope, int num_heads, int head_dim, const ExecOptions& opts,
                                 QuantizedQuery& out) override;
  Status attention_quantized_q(const QuantizedQuery& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim,
                               Tensor& out, const ExecOptions& opts) override;
  // Decoder ops of the conditioner (src/text_encoder): E0 / E0 / E1 vs the CPU reference.
  Status rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads,
                        int head_dim) override;
  Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                          int head_dim, Tensor& out) override;
  // LoRA merge on the GPU (both programs, the CPU reference's bytes).
  Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                    LoraMergeProgram program) override;
  // The run-time LoRA branch (src/cuda/lora_linear.cpp): ref::linear_lora's rounding boundaries with cuBLASLt
  // FP32 accumulation, E1 against it. BF16 weights only (quantized ones: kUnsupported, merge instead).
  Status linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora,
                     Tensor& out) override;
  // How linear_lora realizes the program (both E1 vs ref::linear_lora; bench/lora_runtime_bench.cpp times both):
  //  kConcatK:         one GEMM over K + R: [x | t_1 .. t_p] @ [W | B_1 .. B_p]^T (B zero outside its rows),
  //                    operands assembled per call in scratch;
  //  kFp32Accumulator: x W^T into an FP32 [S, N] accumulator, each t_p B_p^T added with beta = 1, one cast.
  enum class LoraProgram : uint8_t { kConcatK, kFp32Accumulator };
  void set_lora_program(LoraProgram program) { lora_program_ = program; }
  LoraProgram lora_program() const { return lora_program_; }
  Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg) override;
  Status swiglu(const Tensor& u, Tensor& m) override;
  Status cast(const Tensor& src, Tensor& dst) override;
  // Fused NVFP4 producers (Nvfp4ActivationSlots; see Backend). E0 vs linear()'s own quantization.
  bool has_quantized_producers(QuantFormat format) const override { return format == QuantFormat::kNvfp4; }
  Status modulate_quantize(const Tensor& n, const Tensor& table, int shift_chunk, int scale_chunk,
                           const SegmentTable& seg, const LinearWeight& consumer, QuantizedActivation& out) override;
  Status swiglu_quantize(const Tensor& u, const LinearWeight& consumer, QuantizedActivation& out) override;
  Status linear_quantized(const QuantizedActivation& x, const LinearWeight& w, const Tensor* bias,
                          Tensor& out) override;
  // Gated residual in the FP8 GEMM epilogue (src/cuda/gate_epilogue.cpp): per-tensor FP8 weights without
  // a static input_scale or LoRA, on sm_90+ (cuBLASLt OUTER_VEC_32F scales).
  bool has_gate_epilogue(const LinearWeight& w) const override;
  Status linear_gate_residual(const Tensor& a, const LinearWeight& w, Tensor& x, const Tensor& table, int gate_chunk,
                              const SegmentTable& seg) override;
  // VAE decoder ops (src/cuda/ops/vae_ops.h): E0 vs the CPU reference except snake_beta's stated tolerance.
  Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) override;
  Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale) override;
  Status scale_add_rms_norm_fp32(Tensor& x, const Tensor& a, const Tensor& scale, const Tensor& weight, float eps,
                                 Tensor& out) override;
  Status add(Tensor& x, const Tensor& y, float scale) override;
  Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                Tensor& out) override;
  Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding,
                          Tensor& out) override;
  Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                     Tensor& out) override;
  Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                      const Tensor& down_filter, int ratio, Tensor& out) override;
  Status conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                              const Tensor& residual, Tensor& out) override;
  Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta) override;
  Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) override;
  Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) override;
  // Vision tower and video VAE encoder ops (src/cuda/ops/encoder_ops.h; conv3d through cuDNN).
  Status gelu(Tensor& x, bool tanh_approx) override;
  Status rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim) override;
  Status pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight) override;
  Status vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255, const std::array<float, 3>& std255,
                           int patch, int temporal_patch, int merge,
                           Tensor& out) override;  // src/cuda/ops/vision_prep.h
  // The vision tower's GEMMs with their pointwise tail in cuBLASLt's epilogue (src/cuda/vision_epilogue.cpp).
  Status linear_gelu_tanh(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& out) override;
  Status linear_residual(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& x) override;
  bool has_vision_epilogues() const override { return true; }
  Status pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right, Tensor& out) override;
  Status group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps, bool silu,
                           Tensor& out) override;
  Status conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s, bool allow_tf32,
                Tensor& out) override;
  // Audio VAE encoder ops (src/cuda/ops/audio_encoder_ops.h): E0 vs the CPU programs except the stated tolerance
  // of the FP64 sin / tanh / exp in snake, gelu_tanh_mul and pooled_causal_attention.
  Status snake(Tensor& x, const Tensor& alpha) override;
  Status conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation,
                        int padding, Tensor& out) override;
  Status layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                             Tensor& out) override;
  Status pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out) override;
  Status gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out) override;
  // video VAE clip stitch (src/cuda/ops/video_stitch.h): E0 vs src/ref/video_stitch.h
  Status video_stitch_clip(const Tensor& y, const VideoStitchClip& geometry, const Tensor& prev, Tensor& out,
                           Tensor& next) override;
  ExecOptions default_options() const override { return policy_exec_options(policy_.policy_arch); }
  // fused_gate_add and debug_sync follow the model's ExecOptions.
  void configure(const ExecOptions& opts) override {
    fused_gate_add_ = opts.fused_gate_add;
    debug_sync_ = opts.debug_sync || debug_sync_env_;
  }

  // Step graphs (src/cuda/cuda_backend_graph.cpp): stream capture of the backend stream in thread-local
  // mode with the caching allocator's capture guard up; a graph stays current while the allocator has
  // released no block since its capture (nothing it references can have been reused).
  bool supports_graphs() const override { return true; }
  Status begin_capture() override;
  Result<std::unique_ptr<Backend::Graph>> end_capture() override;
  bool graph_current(const Backend::Graph& graph) const override;
  Status replay(Backend::Graph& graph) override;
  Status upload_to(const Tensor& host, Tensor& dst) override;
  // Page-locked host tensors (cudaHostAlloc); download_async into one is a cudaMemcpyAsync on the backend stream
  // followed by an event that wait_download synchronizes on (into other host memory it is download()).
  Result<Tensor> alloc_host(const Shape& shape, DType dtype) override;
  Result<uint64_t> download_async(const Tensor& src, Tensor& host_dst) override;
  Status wait_download(uint64_t ticket) override;
  // Transfers from and to page-locked memory skip the staging copy.
  Status upload_async(const Tensor& host, Tensor& dst) override;
  Status release_cached_memory() override;
  // CUDA events on the compute stream and on a second (copy) stream created on first use.
  Result<std::shared_ptr<Fence>> fence_compute() override;
  Result<std::shared_ptr<Fence>> copy_async(const std::vector<std::pair<Tensor, Tensor>>& copies,
                                            const Fence* after) override;
  Status wait(const Fence* fence) override;
  Status wait_host(const Fence* fence) override;
  // FP8 (gemm/fp8_quantize.cu) and NVFP4 (cuda_ops::nvfp4_quantize, dynamic global scale) on the stream.
  Result<LinearWeight> quantize_weight(const LinearWeight& w, QuantFormat format) override;
  // Creates the cuBLASLt engine, and the cuDNN SDPA engine or NVFP4 GEMM when `opts` selects them.
  Status warm_up(const ExecOptions& opts) override;

  // Profiling regions: CUDA events recorded on the backend stream.
  void region_begin(std::string_view name) override;
  void region_end() override;
  Result<std::vector<std::pair<std::string, double>>> take_regions() override;
  Backend::DeviceInfo device_info() const override;
  size_t memory_in_use() const override { return memory_stats().current_bytes; }
  size_t memory_peak() const override { return memory_stats().peak_bytes; }
  // cudaMemGetInfo's free bytes plus the blocks this backend's cache holds free.
  std::optional<size_t> free_device_memory() const override;  // within the budget when one is set
  Status set_memory_budget(uint64_t bytes) override;  // the caching allocator's limit (CachingAllocator::set_limit)

  // ---- CUDA-specific ----
  const vortex::DeviceInfo& gpu_info() const { return info_; }
  const DevicePolicy& policy() const { return policy_; }
  cudaStream_t stream() const { return stream_; }
  CUstream_st* device_stream() const override { return stream_; }
  AllocatorStats memory_stats() const;  // current / peak bytes for reports
  void reset_peak_memory();
  void set_debug_sync(bool on) { debug_sync_ = on; }
  bool debug_sync() const { return debug_sync_; }
  // gate_add with a table: one fused pass (true) or gate_multiply + residual_add through a temporary
  // (false, the eager program). Default: the policy table's fused_gate_add for this arch.
  void set_fused_gate_add(bool on) { fused_gate_add_ = on; }
  bool fused_gate_add() const { return fused_gate_add_; }
  uint64_t segment_map_builds() const;
  const uint16_t* silu_table_device() const { return silu_table_.as<uint16_t>(); }
  // The eager NVFP4 producer alone: x [M, K] bf16 quantized exactly as linear() of the consumer quantizes it,
  // into linear()'s slot (the first half of an NVFP4 linear; tests compare the fused producers' bytes).
  Status quantize_nvfp4(const Tensor& x, const LinearWeight& consumer, QuantizedActivation& out);

 private:
  CudaBackend() = default;
  Status init(int ordinal, GpuArch policy);
  Status after_op(const char* op, bool force_sync = false);
  GemmEngineOptions gemm_options() const;
  Status linear_nvfp4(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out);
  // Creates the GEMM runners on first use (the NVFP4 path from select_nvfp4), then prepares the role's slot.
  Status nvfp4_prepare(Nvfp4ActivationSlots::Role role, int64_t rows, int64_t cols, const LinearWeight& consumer,
                       const char* op, Nvfp4ActivationSlots::Target& target, QuantizedActivation& out);

  struct Region {
    std::string name;
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  Result<cudaEvent_t> take_event();

  vortex::DeviceInfo info_;
  DevicePolicy policy_;
  Status fp8_gemm_;  // select_gemm(policy_, kFp8): whether FP8 weights may run
  std::vector<Region> regions_;
  std::vector<cudaEvent_t> free_events_;
  std::map<uint64_t, cudaEvent_t> downloads_;  // download_async tickets in flight
  uint64_t next_download_ = 1;
  Status region_error_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // weight streaming (copy_async), created on first use
  std::shared_ptr<CachingAllocator> allocator_;
  std::unique_ptr<PinnedBuffer> pinned_;
  std::unique_ptr<cuda_ops::SegmentRowMapCache> segments_;
  std::unique_ptr<GemmEngine> gemm_;
  std::unique_ptr<SdpaAttention> sdpa_;
  std::unique_ptr<cuda_ops::Conv3dCudnn> conv3d_;  // the video VAE encoder's convolutions, created on first use
  std::unique_ptr<Sage2Workspace> sage2_;          // quantized Q/K/V buffers, grown on demand
  uint64_t quantized_q_generation_ = 0;            // qk_norm_rope_quantize_q calls (QuantizedQuery::generation)
  // The Sage2 workspace (created on first use) set to the mainloop of `kernel`.
  Sage2Workspace& sage2_workspace(AttentionKernel kernel);
  std::unique_ptr<Nvfp4Gemm> nvfp4_gemm_;
  std::unique_ptr<Nvfp4ActivationSlots> nvfp4_slots_;  // NVFP4 activation scratch, grown on demand
  DeviceBuffer silu_table_;                            // [65536] bf16 bits, device
  DeviceBuffer gate_scratch_;  // eager gate_add's R(gate * a), [S, D] bf16, grown on demand (no per-call alloc)
  bool capturing_ = false;
  bool debug_sync_ = false;
  bool debug_sync_env_ = false;  // VORTEX_DEBUG_SYNC=1 forces synchronization whatever the options say
  bool fused_gate_add_ = false;
  LoraProgram lora_program_ = LoraProgram::kConcatK;
};

// The `cuda` entry of make_backend (src/engine/backend_registry.cpp): device `ordinal` (--device N).
Result<std::unique_ptr<Backend>> make_cuda_backend(int ordinal = 0);

}  // namespace vortex
