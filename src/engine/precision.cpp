// Weight precision modes at load. See precision.h.
#include "engine/precision.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#if defined(VORTEX_WITH_CUDA)
#include "gemm/gemm.h"
#endif

namespace vortex {

Status apply_precision(H3Weights& weights, Backend& backend, const std::string& precision, int threads) {
  if (precision == "bf16") return Status::Ok();
  if (precision == "nvfp4")
    return unsupported("precision nvfp4 is not wired into the runtime yet (NVFP4 producers and the exact Hopper "
                       "emulation exist as kernels; see docs/); use --precision bf16 or fp8");
  if (precision != "fp8") return invalid_argument("unknown precision '" + precision + "' (valid: bf16, fp8, nvfp4)");
#if !defined(VORTEX_WITH_CUDA)
  return unsupported("precision fp8 needs the CUDA build (cuBLASLt FP8 GEMMs)");
#else
  std::vector<LinearWeight*> targets;
  for (auto& b : weights.blocks)
    for (LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
      if (w->format == QuantFormat::kNone) targets.push_back(w);
  std::atomic<size_t> next{0};
  std::mutex io_mutex;  // backend transfers are serialized; quantization runs in parallel
  Status first_error;
  std::mutex error_mutex;
  auto worker = [&]() {
    for (size_t i = next++; i < targets.size(); i = next++) {
      LinearWeight& w = *targets[i];
      Status st;
      Tensor host = Tensor::empty(w.weight.shape(), w.weight.dtype());  // [N, K] bf16
      {
        std::lock_guard<std::mutex> lock(io_mutex);
        st = backend.download(w.weight, host);
      }
      Result<LinearWeight> q = st.ok() ? quantize_weight_fp8(host, Fp8Scaling::kPerTensor) : Result<LinearWeight>(st);
      if (q.ok()) {
        std::lock_guard<std::mutex> lock(io_mutex);
        auto dw = backend.upload(q->weight);
        auto ds = dw.ok() ? backend.upload(q->weight_scale) : Result<Tensor>(dw.status());
        if (ds.ok()) {
          w.format = QuantFormat::kFp8Scaled;
          w.weight = std::move(dw).value();        // [N, K] f8e4m3, device
          w.weight_scale = std::move(ds).value();  // [1] f32, device
        } else {
          st = ds.status();
        }
      } else {
        st = q.status();
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (first_error.ok()) first_error = st.with_context("fp8 weight quantization");
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  VORTEX_RETURN_IF_ERROR(first_error);
  return backend.synchronize();
#endif
}

}  // namespace vortex
