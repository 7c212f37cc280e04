// Backend: the op interface the H3 model and samplers are written against. `cpu` (src/ref, the
// reference program) and `cuda` (src/cuda) implement it; model code never names a backend.
// Every op's numerics are NUMERICS.md's; the CPU backend is the oracle. All tensors passed to an op
// live on this backend's device. Row-major activations; dim 0 is the packed row (token).
// "R" = round to BF16 (RNE). Shapes use S = rows, D = hidden, I = inner = heads * head_dim, F = ffn.
#pragma once

#include <atomic>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/exec_options.h"
#include "backend/linear_weight.h"
#include "backend/segments.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

struct CUstream_st;

namespace vortex {

// A quantized GEMM activation owned by the backend: views into backend scratch, valid until the backend
// reuses that scratch (it keeps the two most recent producer outputs alive; linear() of an NVFP4 weight
// is a producer call too). Stale views are rejected by linear_quantized.
struct QuantizedActivation {
  QuantFormat format = QuantFormat::kNone;  // kNvfp4
  Tensor data;                       // u8 [roundup(S,16), roundup(K,16)/2] e2m1 pairs (even element in the high nibble)
  Tensor scales;                     // f8e4m3 128x4 tiles [roundup(roundup(S,16),128), roundup(roundup(K,16)/16,4)]
  Tensor global_scale;               // f32 [1]: the dynamic g of this call, or a copy of the consumer's input_scale
  bool static_global_scale = false;  // true: g is the consumer's static input_scale
  int64_t rows = 0, cols = 0;        // logical S, K
  uint64_t generation = 0;           // the backend's producer count when written (stale views are rejected)
};

// The Q operand of a quantized attention program, written by Backend::qk_norm_rope_quantize_q into backend
// scratch and consumed by the next attention_quantized_q (a second use, or a use after another producer, is
// rejected by generation).
struct QuantizedQuery {
  int64_t rows = 0;
  int heads = 0, head_dim = 0;
  uint64_t generation = 0;  // the backend's count of qk_norm_rope_quantize_q calls when written
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;

  // ---- memory ----
  virtual Result<Tensor> alloc(const Shape& shape, DType dtype) = 0;  // contents undefined
  virtual Result<Tensor> upload(const Tensor& host) = 0;              // host -> this device (copy)
  virtual Status download(const Tensor& src, Tensor& host_dst) = 0;   // this device -> host, same shape
  // dst = src, same shape and dtype, either may be strided (row views of a packed buffer).
  virtual Status copy(const Tensor& src, Tensor& dst) = 0;
  virtual Status synchronize() = 0;
  // Deterministic synthetic values, identical bytes on every backend (src/core/synthetic.h):
  // element i = offset + scale * u(seed, i), u uniform in [-1, 1), then converted to dst's dtype.
  virtual Status fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset) = 0;

  // Applies run-time switches that are not op arguments (e.g. the fused gate/add kernel on the CUDA
  // backend). The model calls it before each block, so A/B gates can flip switches per call.
  virtual void configure(const ExecOptions& opts) {}
  // While set, long host ops poll `flag` every few rows and skip the rest of their work once it is true;
  // their outputs are then undefined, so the caller must stop at its next check of the same flag (the
  // model's block boundary). nullptr clears it. The CPU backend uses it (one CPU block can take minutes);
  // device backends return between blocks quickly enough and ignore it.
  virtual void set_cancel_flag(const std::atomic<bool>* flag) { (void)flag; }

  // ---- fault injection (tests of the out-of-memory path) ----
  // The alloc() after `successes` more successful ones fails with kOutOfMemory, exactly as an exhausted
  // device does; -1 disarms. Both backends check it where a real allocation would fail.
  void inject_alloc_failure(int successes) { alloc_failure_countdown_.store(successes); }
  // The switch defaults for this backend and device (the CUDA policy table; plain defaults elsewhere).
  virtual ExecOptions default_options() const { return ExecOptions{}; }

  // ---- fused gated residual (ExecOptions::fp8_gate_epilogue) ----
  // x = R(x + (s_a[r] * fp32(s_w * gate[r])) * (q(a) @ q(W)^T)) in one GEMM epilogue per segment, with a
  // quantized per row (s_a[r] = amax(a[r]) / 448) and gate = table[seg.table_row, gate_chunk * D : +D]:
  // the GEMM output and gate * out are never rounded to BF16 (E2 vs linear() + gate_add()).
  virtual bool has_gate_epilogue(const LinearWeight& w) const { return false; }
  virtual Status linear_gate_residual(const Tensor& a, const LinearWeight& w, Tensor& x, const Tensor& table,
                                      int gate_chunk, const SegmentTable& seg) {
    return unsupported(std::string(name()) + " backend has no fused gated-residual GEMM epilogue");
  }

  // ---- ops ----
  // out[M,N] = x[M,K] @ W[N,K]^T (+ bias[N]), accumulated in FP32 or wider, one rounding to out's dtype.
  // bf16 x -> bf16 out (bias added before the rounding); f32 x -> f32 out. Quantized W per w.format.
  virtual Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) = 0;
  // out = R(fp32(fp32(x * r) * w)), r = fp32(1/sqrt(mean(x^2) + eps)), mean accumulated in FP64.
  virtual Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // x = R(R(x * R(1 + scale)) + shift) in place, scale/shift = table[seg.table_row, chunk*D : +D].
  // table [rows, C*D] bf16 (C = 6 for blocks, 2 for the final layer).
  virtual Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk,
                          const SegmentTable& seg) = 0;
  // Fused rms_norm + modulate; E0 against the two ops.
  virtual Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table,
                                   int shift_chunk, int scale_chunk, const SegmentTable& seg, Tensor& out) = 0;
  // In place on the strided views q, k [S, I] of the QKV output: per head, RMSNorm over head_dim with
  // weight (one rounding), then (if rope != nullptr) rotate-half RoPE on dims < rope->rope_dims:
  // y = R(R(x * cos) + R(rot(x) * sin)), rot = [-x2, x1]. Dims >= rope_dims pass unchanged.
  virtual Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                              const RopeTables* rope, int num_heads, int head_dim) = 0;
  // out[S, I] = R(softmax(q k^T / sqrt(head_dim)) v) per head; q, k, v may be strided views.
  virtual Status attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                           const ExecOptions& opts) = 0;
  // `batch` independent sequences of equal length packed along the rows: q, k, v, out [batch * L, I], sequence b
  // in rows [b * L, (b + 1) * L); each is attention() of its own rows (same bytes as that call, E1 between
  // backends). The default runs attention() once per sequence on row views; the CUDA backend runs one batched
  // cuDNN call (the video VAE's tiles).
  virtual Status attention_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads,
                                   int head_dim, Tensor& out, const ExecOptions& opts) {
    return attention_per_sequence(q, k, v, batch, num_heads, head_dim, out, opts);
  }
  // attention_batched realized as one attention() per sequence (the default; also a measured CUDA alternative).
  Status attention_per_sequence(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads,
                                int head_dim, Tensor& out, const ExecOptions& opts) {
    if (batch < 1 || !q.defined() || q.ndim() != 2 || q.dim(0) % batch != 0)
      return invalid_argument("attention_batched: " + std::to_string(batch) + " sequences do not split q " +
                              (q.defined() ? q.describe() : std::string("undefined")) + " into equal row blocks");
    for (const Tensor* t : {&k, &v, static_cast<const Tensor*>(&out)})
      if (!t->defined() || t->ndim() != 2 || t->dim(0) != q.dim(0))
        return invalid_argument("attention_batched: k, v and out need q's " + std::to_string(q.dim(0)) + " rows");
    const int64_t len = q.dim(0) / batch;
    for (int64_t b = 0; b < batch; ++b) {
      VORTEX_ASSIGN_OR_RETURN(Tensor qb, q.narrow(0, b * len, len));  // [L, I] views
      VORTEX_ASSIGN_OR_RETURN(Tensor kb, k.narrow(0, b * len, len));
      VORTEX_ASSIGN_OR_RETURN(Tensor vb, v.narrow(0, b * len, len));
      VORTEX_ASSIGN_OR_RETURN(Tensor ob, out.narrow(0, b * len, len));
      VORTEX_RETURN_IF_ERROR(attention(qb, kb, vb, num_heads, head_dim, ob, opts));
    }
    return Status::Ok();
  }
  // ---- attention's Q quantization fused into qk_norm_rope (ExecOptions::fused_q_quantize) ----
  // True when the attention kernel that `opts` selects for [rows, num_heads, head_dim] reads a quantized Q that
  // qk_norm_rope_quantize_q writes in the norm pass (the Sage2 program's INT8 Q and scales).
  virtual bool has_fused_q_quantize(int64_t rows, int num_heads, int head_dim, const ExecOptions& opts) const {
    (void)rows, (void)num_heads, (void)head_dim, (void)opts;
    return false;
  }
  // qk_norm_rope (q and k get the same bytes), and Q quantized as that attention kernel quantizes the normed q
  // (same bytes and scales) into backend scratch, described by `out`.
  virtual Status qk_norm_rope_quantize_q(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight,
                                         float eps, const RopeTables* rope, int num_heads, int head_dim,
                                         const ExecOptions& opts, QuantizedQuery& out) {
    (void)q, (void)k, (void)q_weight, (void)k_weight, (void)eps, (void)rope, (void)num_heads, (void)head_dim,
        (void)opts, (void)out;
    return unsupported("qk_norm_rope_quantize_q: not provided by the " + std::string(name()) +
                       " backend (leave fused_q_quantize=0)");
  }
  // attention() with the Q operand of `q` (its BF16 source is not read again): out gets the same bytes as
  // attention() on the normed q. k, v [S, I] views as in attention().
  virtual Status attention_quantized_q(const QuantizedQuery& q, const Tensor& k, const Tensor& v, int num_heads,
                                       int head_dim, Tensor& out, const ExecOptions& opts) {
    (void)q, (void)k, (void)v, (void)num_heads, (void)head_dim, (void)out, (void)opts;
    return unsupported("attention_quantized_q: not provided by the " + std::string(name()) +
                       " backend (leave fused_q_quantize=0)");
  }
  // ---- decoder ops (the Qwen3-VL conditioner, src/text_encoder); kUnsupported where not provided ----
  // out = R(fp32(R(fp32(x * r)) * w)), r as in rms_norm: transformers' Qwen3 RMSNorm (two roundings).
  virtual Status rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
    (void)x, (void)weight, (void)eps, (void)out;
    return unsupported("rms_norm_two_rounding: not provided by the " + std::string(name()) +
                       " backend (the cpu and cuda backends provide it)");
  }
  // In place on one strided view x [S, num_heads * head_dim]: per head rms_norm_two_rounding over head_dim,
  // then qk_norm_rope's RoPE. One operand per call, so q and k may have different head counts (GQA).
  virtual Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads,
                                int head_dim) {
    (void)x, (void)weight, (void)eps, (void)rope, (void)num_heads, (void)head_dim;
    return unsupported("head_norm_rope: not provided by the " + std::string(name()) +
                       " backend (the cpu and cuda backends provide it)");
  }
  // out[S, H*hd] = R(softmax_causal(q k^T / sqrt(head_dim)) v): query row i sees key rows j <= i, query head h
  // reads kv head h / (num_heads / num_kv_heads). q, out [S, H*hd]; k, v [S, H_kv*hd]; strided views allowed.
  virtual Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                                  int head_dim, Tensor& out) {
    (void)q, (void)k, (void)v, (void)num_heads, (void)num_kv_heads, (void)head_dim, (void)out;
    return unsupported("causal_attention: not provided by the " + std::string(name()) +
                       " backend (the cpu and cuda backends provide it)");
  }
  // x = R(x + R(gate * a)), gate = table[seg.table_row, gate_chunk*D : +D]; table == nullptr: x = R(x + a).
  virtual Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg) = 0;
  // m[S, F] = R(R(silu(u[:, :F])) * u[:, F:]), silu evaluated in FP64 and rounded once.
  virtual Status swiglu(const Tensor& u, Tensor& m) = 0;

  // ---- fused quantized producers (precision nvfp4; optional, E0 vs the eager producers) ----
  // True when modulate_quantize / swiglu_quantize / linear_quantized are provided for `format`.
  virtual bool has_quantized_producers(QuantFormat format) const {
    (void)format;
    return false;
  }
  // x = R(R(n * R(1 + scale)) + shift) quantized to consumer.format without writing x: the bytes and g
  // that linear(x, consumer) quantizes (dynamic g, or the consumer's static input_scale). n [S, D] bf16.
  virtual Status modulate_quantize(const Tensor& n, const Tensor& table, int shift_chunk, int scale_chunk,
                                   const SegmentTable& seg, const LinearWeight& consumer, QuantizedActivation& out) {
    (void)n, (void)table, (void)shift_chunk, (void)scale_chunk, (void)seg, (void)consumer, (void)out;
    return unsupported("modulate_quantize: not provided by the " + std::string(name()) +
                       " backend (fused NVFP4 producers need --backend cuda; leave fused_nvfp4_producers=0)");
  }
  // m = R(R(silu(u[:, :F])) * u[:, F:]) quantized to consumer.format without writing m. u [S, 2F] bf16.
  virtual Status swiglu_quantize(const Tensor& u, const LinearWeight& consumer, QuantizedActivation& out) {
    (void)u, (void)consumer, (void)out;
    return unsupported("swiglu_quantize: not provided by the " + std::string(name()) +
                       " backend (fused NVFP4 producers need --backend cuda; leave fused_nvfp4_producers=0)");
  }
  // out[S, N] = R(g_x * g_w * x' @ w'^T + bias) for an activation from the producers above: the same GEMM
  // that linear() runs after quantizing its input.
  virtual Status linear_quantized(const QuantizedActivation& x, const LinearWeight& w, const Tensor* bias,
                                  Tensor& out) {
    (void)x, (void)w, (void)bias, (void)out;
    return unsupported("linear_quantized: not provided by the " + std::string(name()) +
                       " backend (fused NVFP4 producers need --backend cuda; leave fused_nvfp4_producers=0)");
  }
  // dst = convert(src): f32 -> bf16 (RNE), bf16 -> f32 (exact), same shape; either may be strided.
  virtual Status cast(const Tensor& src, Tensor& dst) = 0;

  // ---- VAE decoder ops (docs/numerics.md "VAE decoders"; CPU programs in src/ref/vae_ops.h) ----
  // Backends without a kernel report kUnsupported naming the op; the CPU backend provides all of them.
  // out[S, D] (f32 or bf16) = fp32(fp32(x * r) * w), r = fp32(1/sqrt(mean(x^2) + eps)) from an FP64 sum; x f32, w f32.
  virtual Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
    (void)x, (void)weight, (void)eps, (void)out;
    return vae_op_unsupported("rms_norm_fp32");
  }
  // out[S, D] (f32 or bf16) = fp32(fp32(fp32(x - mean) * r) * w) + b, FP64 mean/variance; x, w, b f32.
  virtual Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)eps, (void)out;
    return vae_op_unsupported("layer_norm");
  }
  // x[S, D] f32 = fp32(x + fp32(a * scale[D])), a bf16 or f32 (LayerScale residual).
  virtual Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale) {
    (void)x, (void)a, (void)scale;
    return vae_op_unsupported("scale_add");
  }
  // x[C, L] f32 = fp32(fp32(x + y) * scale) (the multiply only when scale != 1).
  virtual Status add(Tensor& x, const Tensor& y, float scale) {
    (void)x, (void)y, (void)scale;
    return vae_op_unsupported("add");
  }
  // out[Cout, L + 2p - d(K-1)] = conv1d(x[Cin, L], w[Cout, Cin, K]) + bias, zero padding p, dilation d, f32.
  // Contiguous [B, Cin, L] -> [B, Cout, Lout] stacks convolve B signals in one call (same program per signal).
  virtual Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                        Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)dilation, (void)padding, (void)out;
    return vae_op_unsupported("conv1d");
  }
  // out[Cout, (L-1)s - 2p + K] = conv_transpose1d(x[Cin, L], w[Cin, Cout, K]) + bias, f32 ([B, C, L] stacks too).
  virtual Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding,
                                  Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)stride, (void)padding, (void)out;
    return vae_op_unsupported("conv_transpose1d");
  }
  // In place on x[B * C, L] f32 (row r is channel r % C): x + 1/(exp(beta) + 1e-9) * sin(exp(alpha) * x)^2,
  // alpha/beta [C] log-space.
  virtual Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta) {
    (void)x, (void)alpha, (void)beta;
    return vae_op_unsupported("snake_beta");
  }
  // Anti-aliased x`ratio` upsampling [C, L] -> [C, L * ratio] with a Kaiser-sinc filter [K] f32.
  virtual Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
    (void)x, (void)filter, (void)ratio, (void)out;
    return vae_op_unsupported("upsample1d");
  }
  // Anti-aliased /`ratio` downsampling [C, L] -> [C, (L - 1) / ratio + 1] with a Kaiser-sinc filter [K] f32.
  virtual Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
    (void)x, (void)filter, (void)ratio, (void)out;
    return vae_op_unsupported("downsample1d");
  }

  // ---- LoRA (src/lora; optional: a backend without them gets kUnsupported and src/lora falls back) ----
  // Merge one LoRA part into a BF16 weight in place, rows [row_offset, row_offset + B.rows):
  //   kSingleRounding: W' = R(W + scale * sum_k B[i,k] A[k,j]), sum and add in FP64 (ascending k), ONE rounding;
  //   kPeft:           W' = R(W + R(fp32(scale) * fma-chain_fp32(B @ A))), PEFT's CPU merge (docs/lora.md).
  // w [N, K] bf16 contiguous; a [r, K] f32, b [rows, r] f32, all on this backend.
  virtual Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                            LoraMergeProgram program) {
    (void)w, (void)a, (void)b, (void)row_offset, (void)scale, (void)program;
    return unsupported("lora_merge: not provided by the " + std::string(name()) + " backend");
  }
  // out = linear(x, w, bias) plus the run-time branch (LoraBranch in h3_weights.h): BF16 W and x only.
  virtual Status linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora,
                             Tensor& out) {
    (void)x, (void)w, (void)bias, (void)lora, (void)out;
    return unsupported("linear_lora (run-time LoRA): not provided by the " + std::string(name()) +
                       " backend; use the merged path (--lora-mode merge, the default)");
  }

  // ---- step graphs (ExecOptions::cuda_graph; src/model/step_graph.h) ----
  // Work issued on this backend between begin_capture() and end_capture() is recorded, not run;
  // replay() runs the recording again on the same buffers. While capturing, the backend refuses to
  // allocate (the op fails; end_capture then reports why and the caller runs the work eagerly).
  class Graph {
   public:
    virtual ~Graph() = default;
  };
  virtual bool supports_graphs() const { return false; }
  virtual Status begin_capture() { return unsupported(std::string(name()) + " backend has no graph capture"); }
  // Ends the capture begun by begin_capture() (always, even after a failed op) and instantiates it.
  virtual Result<std::unique_ptr<Graph>> end_capture() {
    return unsupported(std::string(name()) + " backend has no graph capture");
  }
  // True while no memory a graph may reference was released since it was captured.
  virtual bool graph_current(const Graph& graph) const {
    (void)graph;
    return false;
  }
  virtual Status replay(Graph& graph) {
    (void)graph;
    return unsupported(std::string(name()) + " backend has no graph capture");
  }
  // Host -> an existing tensor of this backend (same shape and dtype, dst contiguous): the allocation-free
  // form of upload() for inputs that are rewritten every step.
  virtual Status upload_to(const Tensor& host, Tensor& dst) {
    VORTEX_ASSIGN_OR_RETURN(Tensor staged, upload(host));
    return copy(staged, dst);
  }
  // Host memory the device copies into and from without staging (page-locked on CUDA, about 7x the pageable rate;
  // ordinary host memory elsewhere). Weights kept off the device (H3Model's host-resident AdaLN projections,
  // streamed blocks) live here.
  virtual Result<Tensor> alloc_host(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype); }
  // Queues a device -> host copy of contiguous `src` behind the work already queued and returns a ticket;
  // host_dst (same shape and dtype, from alloc_host to be asynchronous) holds the bytes once wait_download(ticket)
  // returns, and must stay alive until then. The default copies synchronously (download()).
  virtual Result<uint64_t> download_async(const Tensor& src, Tensor& host_dst) {
    VORTEX_RETURN_IF_ERROR(download(src, host_dst));
    return uint64_t{0};
  }
  virtual Status wait_download(uint64_t ticket) {
    (void)ticket;
    return Status::Ok();
  }
  // Host -> an existing tensor of this backend, ordered with the backend's later work and without waiting for it
  // when `host` came from alloc_host (CUDA: one cudaMemcpyAsync on the stream). `host` must stay alive and unchanged
  // until the next synchronize(). Other host memory: upload_to.
  virtual Status upload_async(const Tensor& host, Tensor& dst) { return upload_to(host, dst); }
  // Hands the blocks the allocator caches free back to the device (CUDA: cudaFree), so what other processes and
  // nvidia-smi see is what is in use. No-op where nothing is cached.
  virtual Status release_cached_memory() { return Status::Ok(); }
  // ---- weight streaming (H3Model::stream_blocks) ----
  // A point in this backend's work: the compute work issued before fence_compute(), or a batch of copy_async()
  // copies. Backend-defined; a backend whose work completes before each call returns has empty (null) fences.
  class Fence {
   public:
    virtual ~Fence() = default;
  };
  // The compute work issued so far.
  virtual Result<std::shared_ptr<Fence>> fence_compute() { return std::shared_ptr<Fence>(); }
  // Copies each (host, device) pair (host page-locked: alloc_host; same shape and dtype, both contiguous) on a copy
  // engine beside the compute work, once `after` has passed (null: at once). Returns the copies' fence: compute work
  // issued after wait() on it reads the new bytes. The host tensors must stay alive and unchanged until then.
  virtual Result<std::shared_ptr<Fence>> copy_async(const std::vector<std::pair<Tensor, Tensor>>& copies,
                                                    const Fence* after) {
    (void)after;
    for (const auto& [host, device] : copies) {
      Tensor dst = device;
      VORTEX_RETURN_IF_ERROR(upload_to(host, dst));
    }
    return std::shared_ptr<Fence>();
  }
  // Compute work issued after this call waits for `fence` (null: nothing to wait for).
  virtual Status wait(const Fence* fence) {
    (void)fence;
    return Status::Ok();
  }
  // GEMM weight quantization at load, on this backend's device: `w` a BF16 [N, K] weight (format kNone) held by this
  // backend -> `format`: kFp8Scaled (per tensor: scale = amax/448, E4M3 RNE satfinite) or kNvfp4 (E2M1 with tiled
  // E4M3 block scales, global scale from amax/2688, comfy-kitchen's CUDA encode), the bytes of the host quantizers
  // (gemm/gemm.h quantize_weight_fp8, engine/precision.h quantize_weight_nvfp4). Ordered like the backend's ops.
  // kUnsupported where the backend has no device quantizer (the caller quantizes on the host).
  virtual Result<LinearWeight> quantize_weight(const LinearWeight& w, QuantFormat format) {
    (void)w, (void)format;
    return unsupported("quantize_weight: the " + std::string(name()) + " backend has no device weight quantizer");
  }
  // Creates what the ops under `opts` create on first use (GEMM and attention engines), so that later
  // steps create nothing. Optional: the default has nothing to create.
  virtual Status warm_up(const ExecOptions& opts) {
    (void)opts;
    return Status::Ok();
  }

  // ---- profiling (vortex bench) ----
  // Named regions on the device timeline (CUDA events on the CUDA backend). Regions do not nest.
  // take_regions() synchronizes and returns (name, ms) in issue order since the last call. The
  // default times regions with the host clock after synchronize(), which is exact for backends whose
  // ops complete before they return (the CPU backend).
  virtual void region_begin(std::string_view name) {
    (void)synchronize();
    open_region_ = std::string(name);
    region_start_ = std::chrono::steady_clock::now();
  }
  virtual void region_end() {
    (void)synchronize();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - region_start_).count();
    host_regions_.emplace_back(open_region_, ms);
  }
  virtual Result<std::vector<std::pair<std::string, double>>> take_regions() {
    VORTEX_RETURN_IF_ERROR(synchronize());
    return std::exchange(host_regions_, {});
  }
  // Which region level is recorded: -1 none (default), 0 outer regions (whole blocks, steps), 1 the
  // model's per-component regions. BackendRegion only calls region_begin/end at the enabled level, so
  // regions never nest and cost nothing when profiling is off.
  void set_region_level(int level) { region_level_ = level; }
  int region_level() const { return region_level_; }

  // What this backend runs on, for evidence files: {"NVIDIA H200", "sm_90", "13.0"}; empty on the CPU.
  struct DeviceInfo {
    std::string name, sm, runtime;
  };
  virtual DeviceInfo device_info() const { return {}; }
  // The CUDA stream this backend orders its work on, for device collectives (src/dist/nccl.h); nullptr on a
  // backend without one (the CPU backend).
  virtual CUstream_st* device_stream() const { return nullptr; }

  // Bytes of device memory currently allocated / peak since start (0 when not tracked).
  virtual size_t memory_in_use() const { return 0; }
  virtual size_t memory_peak() const { return 0; }
  // Device memory free for new allocations (cudaMemGetInfo on the CUDA backend), so a request can be
  // refused before its weights are allocated; nullopt where unknown (the CPU backend: host memory is
  // checked from /proc instead, src/engine/memory_estimate.h).
  virtual std::optional<size_t> free_device_memory() const { return std::nullopt; }
  // A ceiling on the device memory this backend's allocator may hold (bytes; 0: none), enforced by the allocator: an
  // allocation past it fails with kOutOfMemory naming the budget. kUnsupported where the backend has no device memory.
  virtual Status set_memory_budget(uint64_t bytes) {
    (void)bytes;
    return unsupported("a device memory budget (--max-vram) needs a GPU backend; the " + std::string(name()) +
                       " backend runs in host memory");
  }

 protected:
  Status vae_op_unsupported(const char* op) const {
    return unsupported(std::string(op) + " is not yet implemented on the " + std::string(name()) +
                       " backend (a VAE decoder op); decode with --backend cpu or cuda");
  }

 private:
  int region_level_ = -1;
  std::string open_region_;
  std::chrono::steady_clock::time_point region_start_;
  std::vector<std::pair<std::string, double>> host_regions_;

 protected:
  // kOutOfMemory when an injected failure is due (inject_alloc_failure), else OK.
  Status take_injected_alloc_failure(size_t bytes) {
    int n = alloc_failure_countdown_.load();
    while (n >= 0) {
      if (alloc_failure_countdown_.compare_exchange_weak(n, n == 0 ? -1 : n - 1)) {
        if (n > 0) return Status::Ok();
        return Status(ErrorCode::kOutOfMemory,
                      "allocation of " + std::to_string(bytes) + " bytes failed (injected allocation failure)");
      }
    }
    return Status::Ok();
  }

 private:
  std::atomic<int> alloc_failure_countdown_{-1};
};

// RAII region: `BackendRegion r(backend, "qkv");` around the ops of one component (level 1), or
// `BackendRegion r(backend, "block", 0);` around a whole block in a benchmark.
class BackendRegion {
 public:
  BackendRegion(Backend& backend, std::string_view name, int level = 1)
      : backend_(backend), active_(backend.region_level() == level) {
    if (active_) backend_.region_begin(name);
  }
  ~BackendRegion() {
    if (active_) backend_.region_end();
  }
  BackendRegion(const BackendRegion&) = delete;
  BackendRegion& operator=(const BackendRegion&) = delete;

 private:
  Backend& backend_;
  bool active_;
};

// "cpu" or "cuda" on CUDA device `device` (--device N; the cpu backend takes only 0). `threads` is the CPU worker count
// (0 = hardware concurrency, at most max_cpu_threads()); results never depend on it. Returns kUnsupported when Vortex
// was built without the requested backend or no device exists, kInvalidArgument for a thread count outside [0,
// max_cpu_threads()].
Result<std::unique_ptr<Backend>> make_backend(std::string_view name, int threads = 0, int device = 0);
// More workers than cores only adds switching; beyond 4x it is a typo (--threads 100000).
constexpr int kMaxThreadsPerCore = 4;
int max_cpu_threads();  // kMaxThreadsPerCore x std::thread::hardware_concurrency() (>= 1)

}  // namespace vortex
