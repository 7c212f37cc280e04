// Weight precision modes at load (see precision.h): one job per main-block GEMM weight, run on the device when the
// backend has a quantizer (Backend::quantize_weight, CUDA: FP8 and NVFP4), else by host workers (download -> exact
// host quantizer / expander -> upload; transfers serialized, quantization in parallel). Same bytes either way.
// Tested in tests/engine/precision_test.cpp (CPU: weight-only bytes, NVFP4 bytes vs the reference quantizer,
// FC2 switch values, errors) and tests/engine/nvfp4_mode_test.cpp (GPU: h3-tiny in nvfp4 mode).
#include "engine/precision.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "io/quantized_layers.h"
#include "model/h3_model.h"
#include "ref/nvfp4_quantize.h"

#if defined(VORTEX_WITH_CUDA)
#include "gemm/gemm.h"
#endif

namespace vortex {
namespace {

enum class Action { kFp8, kNvfp4, kExpandBf16 };

struct Job {
  LinearWeight* w;
  Action action;
};

// A copy of `w` with each defined tensor replaced by `copy(tensor)` (an upload or a download).
template <typename CopyFn>
Result<LinearWeight> map_linear(const LinearWeight& w, CopyFn&& copy) {
  LinearWeight out = w;
  for (auto [src, dst] :
       {std::pair{&w.weight, &out.weight}, std::pair{&w.weight_scale, &out.weight_scale},
        std::pair{&w.weight_scale_2, &out.weight_scale_2}, std::pair{&w.input_scale, &out.input_scale}}) {
    if (!src->defined()) continue;
    VORTEX_ASSIGN_OR_RETURN(*dst, copy(*src));
  }
  return out;
}

// Host copy of every defined tensor of a layer.
Result<LinearWeight> download_linear(Backend& backend, const LinearWeight& w) {
  return map_linear(w, [&backend](const Tensor& t) -> Result<Tensor> {
    if (t.device() == Device::kCpu) return t;  // already in host memory (a streamed block's weight)
    Tensor host = Tensor::empty(t.shape(), t.dtype());
    VORTEX_RETURN_IF_ERROR(backend.download(t, host));
    return host;
  });
}

// Device copy of every defined tensor of a host layer.
Result<LinearWeight> upload_linear(Backend& backend, const LinearWeight& h) {
  return map_linear(h, [&backend](const Tensor& t) { return backend.upload(t); });
}

Result<LinearWeight> transform(const LinearWeight& host, Action action) {
  LinearWeight in = host;
  if (in.format == QuantFormat::kNone) {
    if (in.weight.ndim() != 2) return invalid_argument("a GEMM weight must be 2-D [N, K], got " + in.weight.describe());
    in.out_features = in.weight.dim(0);
    in.in_features = in.weight.dim(1);
  }
  switch (action) {
    case Action::kFp8:
#if defined(VORTEX_WITH_CUDA)
      return quantize_weight_fp8(in.weight, Fp8Scaling::kPerTensor);
#else
      return unsupported("precision fp8 needs the CUDA build (cuBLASLt FP8 GEMMs)");
#endif
    case Action::kNvfp4:
      if (in.format == QuantFormat::kNvfp4) return in;
      return quantize_weight_nvfp4(in.weight, true);
    case Action::kExpandBf16: {
      if (in.format == QuantFormat::kNone) {
        VORTEX_ASSIGN_OR_RETURN(in, quantize_weight_nvfp4(in.weight, true));
      } else if (in.format != QuantFormat::kNvfp4) {
        return unsupported(std::string("nvfp4 weight-only expansion of a ") + quant_format_name(in.format) +
                           " layer: load a BF16 or NVFP4 checkpoint");
      }
      VORTEX_ASSIGN_OR_RETURN(Tensor bf, dequantize_linear_bf16(in));  // [N, K] bf16 = R(e2m1 * (e4m3 * g))
      LinearWeight out;
      out.format = QuantFormat::kNone;
      out.weight = std::move(bf);
      out.out_features = in.out_features;
      out.in_features = in.in_features;
      return out;
    }
  }
  return internal_error("unknown precision action");
}

// The backend's default for FC2 in nvfp4 mode (the CUDA policy table through default_options(); "off" elsewhere).
std::string default_fc2_mode(Backend& backend) { return nvfp4_fc2_name(backend.default_options().nvfp4_fc2); }

// The device quantizer (Backend::quantize_weight) for the FP8 and NVFP4 jobs, tensor by tensor: each BF16 weight is
// replaced by its quantized form before the next is converted, so the device holds one extra tensor at a time.
// Removes the jobs it did from `jobs`; leaves them all when the backend has no device quantizer.
Status run_jobs_on_device(std::vector<Job>& jobs, Backend& backend, const std::string& what) {
  if (backend.device() == Device::kCpu) return Status::Ok();
  std::vector<Job> rest;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i];
    if (job.action == Action::kExpandBf16) {
      rest.push_back(job);
      continue;
    }
    LinearWeight in = *job.w;
    if (in.format == QuantFormat::kNone && in.weight.ndim() == 2) {
      in.out_features = in.weight.dim(0);
      in.in_features = in.weight.dim(1);
    }
    // A streamed block's weight (H3Model::stream_blocks) lives in host memory: converted on the device, kept there.
    const bool on_host = in.weight.defined() && in.weight.device() == Device::kCpu;
    if (on_host) {
      VORTEX_ASSIGN_OR_RETURN(in.weight, backend.upload(in.weight));
    }
    const QuantFormat format = job.action == Action::kFp8 ? QuantFormat::kFp8Scaled : QuantFormat::kNvfp4;
    Result<LinearWeight> q = backend.quantize_weight(in, format);
    // No device quantizer (the first call says so): every job stays for the host workers.
    if (!q.ok() && q.status().code() == ErrorCode::kUnsupported && i == 0) return Status::Ok();
    if (!q.ok()) return q.status().with_context(what);
    if (on_host) {
      for (Tensor* t : {&q->weight, &q->weight_scale, &q->weight_scale_2, &q->input_scale}) {
        if (!t->defined()) continue;
        VORTEX_ASSIGN_OR_RETURN(*t, move_to_host(backend, *t));
      }
    }
    *job.w = std::move(q).value();
    // The replaced BF16 blocks stay cached under their own sizes, which the quantized tensors never reuse: hand
    // them back now and then so the conversion never holds both forms of every weight.
    if (i % 16 == 15) VORTEX_RETURN_IF_ERROR(backend.release_cached_memory());
  }
  jobs = std::move(rest);
  return backend.synchronize();
}

Status run_jobs(std::vector<Job>& jobs, Backend& backend, int threads, const std::string& what) {
  VORTEX_RETURN_IF_ERROR(run_jobs_on_device(jobs, backend, what));
  if (jobs.empty()) return Status::Ok();
  std::atomic<size_t> next{0};
  std::mutex io_mutex;  // backend transfers are serialized; quantization runs in parallel
  Status first_error;
  std::mutex error_mutex;
  auto worker = [&]() {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      Job& job = jobs[i];
      Result<LinearWeight> dev = [&]() -> Result<LinearWeight> {
        Result<LinearWeight> host = [&]() {
          std::lock_guard<std::mutex> lock(io_mutex);
          return download_linear(backend, *job.w);
        }();
        VORTEX_RETURN_IF_ERROR(host.status());
        VORTEX_ASSIGN_OR_RETURN(LinearWeight t, transform(*host, job.action));
        std::lock_guard<std::mutex> lock(io_mutex);
        return upload_linear(backend, t);
      }();
      if (!dev.ok()) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (first_error.ok()) first_error = dev.status().with_context(what);
        return;
      }
      *job.w = std::move(dev).value();
    }
  };
  std::vector<std::thread> pool;
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  VORTEX_RETURN_IF_ERROR(first_error);
  return backend.synchronize();
}

}  // namespace

bool is_precision_name(const std::string& name) {
  return name == "bf16" || name == "fp8" || name == "nvfp4" || name == "nvfp4-weight-only";
}
const char* precision_names_help() { return "bf16, fp8, nvfp4, nvfp4-weight-only"; }

Result<LinearWeight> quantize_weight_nvfp4(const Tensor& w, bool approx_encode) {
  if (!w.defined() || w.device() != Device::kCpu || w.dtype() != DType::kBF16 || w.ndim() != 2 || !w.is_contiguous())
    return invalid_argument("quantize_weight_nvfp4 needs a contiguous host [N, K] bf16 tensor, got " +
                            (w.defined() ? w.describe() : std::string("undefined")));
  const int64_t n = w.dim(0), k = w.dim(1);
  ref::Nvfp4Options options;
  std::shared_ptr<const ref::RcpApproxTable> table;
  if (approx_encode) {
    Result<std::shared_ptr<const ref::RcpApproxTable>> t = ref::RcpApproxTable::default_table();
    if (!t.ok())
      return t.status().with_context(
          "NVFP4 weight quantization reproduces comfy-kitchen's CUDA encode and needs the measured rcp.approx "
          "table (data/approx/rcp_approx_sm90.bin; set VORTEX_DATA_DIR to the repository's data/ directory)");
    table = *t;
    options.encode = ref::Nvfp4Encode::kApproxInstructions;
    options.rcp = table.get();
  } else {
    options.encode = ref::Nvfp4Encode::kExactDivision;
  }
  const uint16_t* src = w.data<uint16_t>();  // [N, K] bf16
  LinearWeight out;
  out.format = QuantFormat::kNvfp4;
  out.out_features = n;
  out.in_features = k;
  out.weight = Tensor::empty(nvfp4_weight_shape(n, k), DType::kU8);                  // [N16, K16/2] e2m1 pairs
  out.weight_scale = Tensor::empty(nvfp4_weight_scale_shape(n, k), DType::kF8E4M3);  // [N128, C4] tiled e4m3
  out.weight_scale_2 = Tensor::empty({1}, DType::kF32);                              // g = amax / 2688
  const float g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(src, n, k, k));
  out.weight_scale_2.data<float>()[0] = g;
  VORTEX_RETURN_IF_ERROR(
      ref::nvfp4_quantize(src, n, k, k, g, options, out.weight.data<uint8_t>(), out.weight_scale.data<uint8_t>()));
  return out;
}

Status apply_precision(H3Weights& weights, Backend& backend, const std::string& precision, int threads) {
  PrecisionOptions o;
  o.precision = precision;
  o.threads = threads;
  return apply_precision(weights, backend, o);
}

Status apply_precision(H3Weights& weights, Backend& backend, const PrecisionOptions& options) {
  const std::string& p = options.precision;
  if (!is_precision_name(p))
    return invalid_argument("unknown precision '" + p + "' (valid: " + precision_names_help() + ")");
  if (p == "bf16") {
    // An NVFP4 checkpoint has no BF16 program: make the choice explicit instead of running W4A4 silently.
    for (const auto* list : {&weights.blocks, &weights.token_refiner_blocks})
      for (const auto& b : *list)
        for (const LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
          if (w->format == QuantFormat::kNvfp4)
            return invalid_argument(
                "the checkpoint has NVFP4 layers, which have no BF16 program: use --precision "
                "nvfp4 (W4A4) or nvfp4-weight-only (weights expanded to BF16, as ComfyUI on Hopper)");
    return Status::Ok();
  }
  std::vector<Job> jobs;
  if (p == "fp8") {
#if !defined(VORTEX_WITH_CUDA)
    return unsupported("precision fp8 needs the CUDA build (cuBLASLt FP8 GEMMs)");
#endif
    for (auto& b : weights.blocks)
      for (LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
        if (w->format == QuantFormat::kNone) jobs.push_back({w, Action::kFp8});
    return run_jobs(jobs, backend, options.threads, "fp8 weight quantization");
  }
  if (p == "nvfp4-weight-only") {
    for (auto& b : weights.blocks)
      for (LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
        jobs.push_back({w, Action::kExpandBf16});
    // Refiner layers: BF16 ones stay; NVFP4 ones of a checkpoint are expanded too (no W4A4 in this mode).
    for (auto& b : weights.token_refiner_blocks)
      for (LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
        if (w->format == QuantFormat::kNvfp4) jobs.push_back({w, Action::kExpandBf16});
    return run_jobs(jobs, backend, options.threads, "nvfp4 weight-only expansion");
  }
  // nvfp4 (W4A4)
  if (backend.device() != Device::kCuda)
    return unsupported("precision nvfp4 (W4A4) needs --backend cuda (NVFP4 activation producers and GEMMs); the " +
                       std::string(backend.name()) + " backend can run --precision nvfp4-weight-only");
  const std::string fc2 = options.nvfp4_fc2.empty() ? default_fc2_mode(backend) : options.nvfp4_fc2;
  if (fc2 != "off" && fc2 != "weight-only" && fc2 != "bf16")
    return invalid_argument("nvfp4_fc2_fallback must be off, weight-only or bf16, got '" + fc2 + "'");
  for (auto& b : weights.blocks) {
    for (LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2}) {
      if (w->format == QuantFormat::kFp8Scaled)
        return unsupported("precision nvfp4 on an fp8_scaled checkpoint: load a BF16 or NVFP4 checkpoint");
      Action a = Action::kNvfp4;
      if (w == &b.mlp_fc2 && fc2 == "weight-only") a = Action::kExpandBf16;
      if (w == &b.mlp_fc2 && fc2 == "bf16") {
        if (w->format == QuantFormat::kNone) continue;  // keeps the release BF16 weight
        a = Action::kExpandBf16;
      }
      if (a == Action::kNvfp4 && w->format == QuantFormat::kNvfp4) continue;  // checkpoint NVFP4: as loaded
      jobs.push_back({w, a});
    }
  }
  return run_jobs(jobs, backend, options.threads, "nvfp4 weight quantization (FC2: " + fc2 + ")");
}

}  // namespace vortex
