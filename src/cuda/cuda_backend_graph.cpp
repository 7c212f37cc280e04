// CudaBackend's step-graph support (ExecOptions::cuda_graph): stream capture of the backend stream, graph
// instantiation and replay, allocation-free uploads into existing tensors, and eager creation of the engines
// the ops would otherwise create on first use. A captured graph bakes in every device pointer its kernels
// read, so it is replayed only while the caching allocator has released no block since the capture (a
// released block could have been handed to other data). Tested in tests/cuda/step_graph_test.cpp (GPU).
#include <algorithm>
#include <cstring>

#include "cuda/attention/sdpa.h"
#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "gemm/gemm.h"
#include "gemm/nvfp4_gemm.h"

namespace vortex {
namespace {

constexpr size_t kUploadChunk = size_t{64} << 20;  // pinned staging per transfer step, as upload()

class CudaGraph final : public Backend::Graph {
 public:
  CudaGraph(const CudaBackend* owner, cudaGraph_t graph, cudaGraphExec_t exec, uint64_t releases)
      : owner_(owner), graph_(graph), exec_(exec), releases_(releases) {}
  ~CudaGraph() override {
    // An in-flight executable graph is freed when its launch completes (cudaGraphExecDestroy).
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  const CudaBackend* owner() const { return owner_; }
  cudaGraphExec_t exec() const { return exec_; }
  uint64_t releases() const { return releases_; }

 private:
  const CudaBackend* owner_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  uint64_t releases_;  // the allocator's release count when the capture ended
};

}  // namespace

Status CudaBackend::begin_capture() {
  if (capturing_) return internal_error("begin_capture: a capture is already open on this backend");
  if (debug_sync_)
    return unsupported("graph capture with debug_sync on (it synchronizes after every op, which a capture cannot)");
  VORTEX_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  allocator_->set_capture_guard(true);
  capturing_ = true;
  return Status::Ok();
}

Result<std::unique_ptr<Backend::Graph>> CudaBackend::end_capture() {
  if (!capturing_) return internal_error("end_capture without begin_capture");
  capturing_ = false;
  allocator_->set_capture_guard(false);
  const uint64_t releases_before = allocator_->stats().releases;
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(stream_, &graph);
  // A call the capture refused (and an op that returned on its error before its launch check) leaves a
  // non-sticky error behind; clear it so that the eager rerun of the step starts clean.
  (void)cudaGetLastError();
  if (err != cudaSuccess || graph == nullptr) {
    if (graph) (void)cudaGraphDestroy(graph);
    return cuda_status(err != cudaSuccess ? err : cudaErrorStreamCaptureInvalidated,
                       "cudaStreamEndCapture (the step issued work a capture cannot record)", __FILE__, __LINE__);
  }
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaGraphDestroy(graph);
    return cuda_status(err, "cudaGraphInstantiate(step graph)", __FILE__, __LINE__);
  }
  return std::unique_ptr<Backend::Graph>(std::make_unique<CudaGraph>(this, graph, exec, releases_before));
}

bool CudaBackend::graph_current(const Backend::Graph& graph) const {
  const auto* g = dynamic_cast<const CudaGraph*>(&graph);
  return g != nullptr && g->owner() == this && g->releases() == allocator_->stats().releases;
}

Status CudaBackend::replay(Backend::Graph& graph) {
  auto* g = dynamic_cast<CudaGraph*>(&graph);
  if (g == nullptr || g->owner() != this) return invalid_argument("replay: the graph was captured on another backend");
  if (!graph_current(graph))
    return invalid_argument(
        "replay: device memory was released since the capture (the graph may reference reused blocks); capture "
        "again");
  VORTEX_CUDA_CHECK(cudaGraphLaunch(g->exec(), stream_));
  return after_op("step graph replay");
}

Status CudaBackend::upload_to(const Tensor& host, Tensor& dst) {
  if (host.device() != Device::kCpu || !host.is_contiguous())
    return invalid_argument("upload_to: the source must be a contiguous host tensor, got " + host.describe());
  if (dst.device() != Device::kCuda || !dst.is_contiguous() || dst.shape() != host.shape() ||
      dst.dtype() != host.dtype())
    return invalid_argument("upload_to: " + host.describe() + " -> " + dst.describe() +
                            ": dst must be a contiguous CUDA tensor of the same shape and dtype");
  if (capturing_) return internal_error("upload_to during a graph capture (uploads synchronize)");
  const size_t bytes = host.nbytes();
  if (is_page_locked(host.raw_data())) {  // alloc_host memory: one direct copy, no staging
    VORTEX_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), host.raw_data(), bytes, cudaMemcpyHostToDevice, stream_));
    VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }
  VORTEX_RETURN_IF_ERROR(pinned_->reserve(std::min(bytes, kUploadChunk)));
  const char* src = static_cast<const char*>(host.raw_data());
  char* out = static_cast<char*>(dst.raw_data());
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kUploadChunk, bytes - done);
    std::memcpy(pinned_->data(), src + done, n);
    VORTEX_CUDA_CHECK(cudaMemcpyAsync(out + done, pinned_->data(), n, cudaMemcpyHostToDevice, stream_));
    VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the staging buffer is reused next
    done += n;
  }
  return Status::Ok();
}

Status CudaBackend::upload_async(const Tensor& host, Tensor& dst) {
  if (!is_page_locked(host.raw_data())) return upload_to(host, dst);
  if (host.device() != Device::kCpu || !host.is_contiguous())
    return invalid_argument("upload_async: the source must be a contiguous host tensor, got " + host.describe());
  if (dst.device() != Device::kCuda || !dst.is_contiguous() || dst.shape() != host.shape() ||
      dst.dtype() != host.dtype())
    return invalid_argument("upload_async: " + host.describe() + " -> " + dst.describe() +
                            ": dst must be a contiguous CUDA tensor of the same shape and dtype");
  VORTEX_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), host.raw_data(), host.nbytes(), cudaMemcpyHostToDevice, stream_));
  return Status::Ok();
}

Status CudaBackend::release_cached_memory() {
  VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return allocator_->empty_cache();
}

Status CudaBackend::warm_up(const ExecOptions& opts) {
  if (!gemm_) {
    VORTEX_ASSIGN_OR_RETURN(gemm_, GemmEngine::create(gemm_options()));
  }
  if (opts.precision == Precision::kNvfp4 && !nvfp4_gemm_) {
    // A policy without a runnable NVFP4 path is reported by the first NVFP4 linear, as without warm_up.
    Result<Nvfp4GemmPath> path = select_nvfp4(policy_);
    if (path.ok()) {
      VORTEX_ASSIGN_OR_RETURN(nvfp4_gemm_, Nvfp4Gemm::create(*gemm_, *path, allocator_));
    }
  }
#if defined(VORTEX_CUDA_HAVE_SDPA)
  if (opts.attention == AttentionKind::kSdpa && !sdpa_) {
    VORTEX_ASSIGN_OR_RETURN(sdpa_, SdpaAttention::create(allocator_));
  }
#endif
  return Status::Ok();
}

}  // namespace vortex
