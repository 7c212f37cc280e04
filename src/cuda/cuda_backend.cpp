// CudaBackend implementation: device checks at creation, caching allocation, pinned staged transfers,
// strided 2-D copies, and dispatch of every op to GemmEngine / SdpaAttention / src/cuda/ops with a
// check (and, in debug mode, a synchronize) after each. See cuda_backend.h; tested in tests/cuda.
#include "cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda/attention/bf16_attention.h"
#include "cuda/attention/sage2_attention.h"
#include "cuda/attention/sdpa.h"
#include "cuda/check.h"
#include "cuda/nvfp4_activation_slots.h"
#include "cuda/ops/audio_decoder_ops.h"
#include "cuda/ops/audio_encoder_ops.h"
#include "cuda/ops/nvfp4_quantize.h"
#include "cuda/ops/ops.h"
#include "cuda/ops/vae_ops.h"
#include "cuda/ops/video_stitch.h"
#include "gemm/gemm.h"
#include "gemm/nvfp4_gemm.h"

namespace vortex {
namespace {

constexpr size_t kStagingChunk = size_t{64} << 20;  // pinned staging per transfer step

// Host tensors must be dense for staged transfers (views can be copied to a dense tensor first).
Status expect_dense_host(const Tensor& t, const char* what) {
  if (t.device() != Device::kCpu) return invalid_argument(std::string(what) + " must be a host tensor");
  if (!t.is_contiguous())
    return invalid_argument(std::string(what) + " " + t.describe() +
                            " must be contiguous (copy the view into a dense tensor first)");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int ordinal, GpuArch policy) {
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  VORTEX_RETURN_IF_ERROR(b->init(ordinal, policy));
  return b;
}

Status CudaBackend::init(int ordinal, GpuArch policy) {
  VORTEX_ASSIGN_OR_RETURN(info_, query_device(ordinal));
  VORTEX_RETURN_IF_ERROR(check_device_supported(info_));
  if (policy == GpuArch::kUnknown) {
    VORTEX_ASSIGN_OR_RETURN(policy, policy_from_env());
  }
  policy_ = make_device_policy(info_.name, info_.cc_major, info_.cc_minor, policy);
  fp8_gemm_ = select_gemm(policy_, Precision::kFp8).status();
  VORTEX_CUDA_CHECK(cudaSetDevice(ordinal));
  VORTEX_RETURN_IF_ERROR(cuda_ops::check_kernel_image());
  VORTEX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  allocator_ = std::make_shared<CachingAllocator>();
  pinned_ = std::make_unique<PinnedBuffer>();
  segments_ = std::make_unique<cuda_ops::SegmentRowMapCache>(allocator_);
  const ExecOptions defaults = policy_exec_options(policy_.policy_arch);
  debug_sync_ = defaults.debug_sync;
  debug_sync_env_ = debug_sync_from_env();
  fused_gate_add_ = defaults.fused_gate_add;
  // SiLU table: the CPU reference's scalar SiLU for all 65,536 BF16 inputs (see src/cuda/ops/swiglu.cu).
  const std::vector<uint16_t> table = cuda_ops::silu_bf16_table_host();
  VORTEX_ASSIGN_OR_RETURN(silu_table_, DeviceBuffer::allocate(allocator_, table.size() * sizeof(uint16_t)));
  VORTEX_CUDA_CHECK(
      cudaMemcpy(silu_table_.data(), table.data(), table.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  return Status::Ok();
}

CudaBackend::~CudaBackend() {
  if (copy_stream_) {
    (void)cudaStreamSynchronize(copy_stream_);
    (void)cudaStreamDestroy(copy_stream_);
  }
  if (stream_) (void)cudaStreamSynchronize(stream_);
  for (Region& r : regions_) {
    if (r.start) (void)cudaEventDestroy(r.start);
    if (r.stop) (void)cudaEventDestroy(r.stop);
  }
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  for (auto& [ticket, e] : downloads_) (void)cudaEventDestroy(e);
  sdpa_.reset();
  sage2_.reset();
  gate_scratch_.reset();
  nvfp4_slots_.reset();
  nvfp4_gemm_.reset();
  gemm_.reset();
  segments_.reset();
  silu_table_.reset();
  if (stream_) (void)cudaStreamDestroy(stream_);
}

GemmEngineOptions CudaBackend::gemm_options() const {
  GemmEngineOptions o;
  o.memory = allocator_;  // cuBLASLt workspace and FP8 scratch count in memory_in_use / memory_peak
  return o;
}

Status CudaBackend::after_op(const char* op, bool force_sync) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_status(err, op, __FILE__, __LINE__);
  if (debug_sync_ || force_sync) {
    err = cudaStreamSynchronize(stream_);
    if (err != cudaSuccess)
      return cuda_status(err, (std::string(op) + " (debug sync: the fault happened in this op)").c_str(), __FILE__,
                         __LINE__);
  }
  return Status::Ok();
}

// ---- profiling ---------------------------------------------------------------------------------
Result<cudaEvent_t> CudaBackend::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  VORTEX_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void CudaBackend::region_begin(std::string_view name) {
  Result<cudaEvent_t> start = take_event();
  Result<cudaEvent_t> stop = take_event();
  if (!start.ok() || !stop.ok()) {
    if (region_error_.ok()) region_error_ = !start.ok() ? start.status() : stop.status();
    return;
  }
  // Inside a graph capture the record becomes an event-record node, so a replay times the region's kernels.
  cudaError_t err = cudaEventRecordWithFlags(start.value(), stream_, capturing_ ? cudaEventRecordExternal : 0);
  if (err != cudaSuccess && region_error_.ok())
    region_error_ = cuda_status(err, "cudaEventRecord(region start)", __FILE__, __LINE__);
  regions_.push_back(Region{std::string(name), start.value(), stop.value()});
}

void CudaBackend::region_end() {
  if (regions_.empty()) return;
  cudaError_t err = cudaEventRecordWithFlags(regions_.back().stop, stream_, capturing_ ? cudaEventRecordExternal : 0);
  if (err != cudaSuccess && region_error_.ok())
    region_error_ = cuda_status(err, "cudaEventRecord(region stop)", __FILE__, __LINE__);
}

Result<std::vector<std::pair<std::string, double>>> CudaBackend::take_regions() {
  VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<Region> regions = std::move(regions_);
  regions_.clear();
  Status err = region_error_;
  region_error_ = Status::Ok();
  std::vector<std::pair<std::string, double>> out;
  for (Region& r : regions) {
    float ms = 0.0f;
    cudaError_t e = cudaEventElapsedTime(&ms, r.start, r.stop);
    if (e != cudaSuccess && err.ok())
      err = cuda_status(e, ("cudaEventElapsedTime(region " + r.name + ")").c_str(), __FILE__, __LINE__);
    out.emplace_back(r.name, static_cast<double>(ms));
    free_events_.push_back(r.start);
    free_events_.push_back(r.stop);
  }
  if (!err.ok()) return err;
  return out;
}

Backend::DeviceInfo CudaBackend::device_info() const {
  Backend::DeviceInfo d;
  d.name = info_.name;
  d.sm = "sm_" + std::to_string(info_.cc_major) + std::to_string(info_.cc_minor);
  d.runtime = std::to_string(info_.runtime_version / 1000) + "." + std::to_string((info_.runtime_version % 1000) / 10);
  return d;
}

AllocatorStats CudaBackend::memory_stats() const { return allocator_->stats(); }
std::optional<size_t> CudaBackend::free_device_memory() const {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; the caller treats the amount as unknown
    return std::nullopt;
  }
  const AllocatorStats st = allocator_->stats();
  const size_t free = free_bytes + st.cached_bytes;
  const size_t limit = allocator_->limit();
  if (limit == 0) return free;
  return std::min(free, limit > st.current_bytes ? limit - st.current_bytes : size_t{0});  // within the budget
}

Status CudaBackend::set_memory_budget(uint64_t bytes) {
  allocator_->set_limit(static_cast<size_t>(bytes));
  return Status::Ok();
}
void CudaBackend::reset_peak_memory() { allocator_->reset_peak(); }
uint64_t CudaBackend::segment_map_builds() const { return segments_->builds(); }

// ---- memory ------------------------------------------------------------------------------------
Result<Tensor> CudaBackend::alloc(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) return invalid_argument("alloc: negative dimension in " + shape_to_string(shape));
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  VORTEX_RETURN_IF_ERROR(take_injected_alloc_failure(bytes));
  VORTEX_ASSIGN_OR_RETURN(void* ptr, allocator_->allocate(bytes));
  auto storage = std::make_shared<Storage>();
  storage->ptr = ptr;
  storage->bytes = bytes;
  storage->device = Device::kCuda;
  std::shared_ptr<CachingAllocator> allocator = allocator_;
  storage->release = [allocator](void* p, size_t n) { allocator->release(p, n); };
  return Tensor::from_storage(std::move(storage), 0, shape, dtype);
}

Result<Tensor> CudaBackend::upload(const Tensor& host) {
  VORTEX_RETURN_IF_ERROR(expect_dense_host(host, "upload source"));
  VORTEX_ASSIGN_OR_RETURN(Tensor dst, alloc(host.shape(), host.dtype()));
  const size_t bytes = host.nbytes();
  if (is_page_locked(host.raw_data())) {  // alloc_host memory: one direct copy, no staging
    VORTEX_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), host.raw_data(), bytes, cudaMemcpyHostToDevice, stream_));
    VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return dst;
  }
  VORTEX_RETURN_IF_ERROR(pinned_->reserve(std::min(bytes, kStagingChunk)));
  const char* src = static_cast<const char*>(host.raw_data());
  char* out = static_cast<char*>(dst.raw_data());
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kStagingChunk, bytes - done);
    std::memcpy(pinned_->data(), src + done, n);
    VORTEX_CUDA_CHECK(cudaMemcpyAsync(out + done, pinned_->data(), n, cudaMemcpyHostToDevice, stream_));
    VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the staging buffer is reused next
    done += n;
  }
  return dst;
}

Result<Tensor> CudaBackend::alloc_host(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) return invalid_argument("alloc_host: negative dimension in " + shape_to_string(shape));
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>();
  if (bytes > 0) {
    VORTEX_CUDA_CHECK(cudaHostAlloc(&storage->ptr, bytes, cudaHostAllocDefault));
    storage->bytes = bytes;
    storage->release = [](void* p, size_t) { (void)cudaFreeHost(p); };
  }
  return Tensor::from_storage(std::move(storage), 0, shape, dtype);
}

Result<uint64_t> CudaBackend::download_async(const Tensor& src, Tensor& host_dst) {
  VORTEX_RETURN_IF_ERROR(expect_dense_host(host_dst, "download destination"));
  if (src.device() != Device::kCuda) return invalid_argument("download_async source must be a CUDA tensor");
  if (src.shape() != host_dst.shape() || src.dtype() != host_dst.dtype())
    return invalid_argument("download_async: " + src.describe() + " -> " + host_dst.describe() +
                            ": shape and dtype must match");
  // Page-locked destinations (alloc_host) take the asynchronous copy; pageable ones the staged download().
  cudaPointerAttributes attr{};
  const bool pinned =
      cudaPointerGetAttributes(&attr, host_dst.raw_data()) == cudaSuccess && attr.type == cudaMemoryTypeHost;
  (void)cudaGetLastError();  // a pageable pointer is not an error here
  if (!pinned || !src.is_contiguous()) {
    VORTEX_RETURN_IF_ERROR(download(src, host_dst));
    return uint64_t{0};
  }
  VORTEX_CUDA_CHECK(
      cudaMemcpyAsync(host_dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToHost, stream_));
  VORTEX_ASSIGN_OR_RETURN(cudaEvent_t done, take_event());
  VORTEX_CUDA_CHECK(cudaEventRecord(done, stream_));
  const uint64_t ticket = next_download_++;
  downloads_.emplace(ticket, done);
  return ticket;
}

Status CudaBackend::wait_download(uint64_t ticket) {
  if (ticket == 0) return Status::Ok();  // a synchronous download
  auto it = downloads_.find(ticket);
  if (it == downloads_.end()) return invalid_argument("wait_download: unknown ticket " + std::to_string(ticket));
  cudaEvent_t done = it->second;
  downloads_.erase(it);
  const cudaError_t err = cudaEventSynchronize(done);
  free_events_.push_back(done);
  if (err != cudaSuccess) return cuda_status(err, "cudaEventSynchronize(download)", __FILE__, __LINE__);
  return Status::Ok();
}

Status CudaBackend::download(const Tensor& src, Tensor& host_dst) {
  VORTEX_RETURN_IF_ERROR(expect_dense_host(host_dst, "download destination"));
  if (src.device() != Device::kCuda) return invalid_argument("download source must be a CUDA tensor");
  if (src.shape() != host_dst.shape() || src.dtype() != host_dst.dtype())
    return invalid_argument("download: " + src.describe() + " -> " + host_dst.describe() +
                            ": shape and dtype must match");
  const size_t es = dtype_size(src.dtype());
  char* out = static_cast<char*>(host_dst.raw_data());
  if (src.is_contiguous() && is_page_locked(out)) {  // alloc_host memory: one direct copy, no staging
    VORTEX_CUDA_CHECK(cudaMemcpyAsync(out, src.raw_data(), src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }
  if (src.is_contiguous()) {
    const size_t bytes = src.nbytes();
    VORTEX_RETURN_IF_ERROR(pinned_->reserve(std::min(bytes, kStagingChunk)));
    const char* in = static_cast<const char*>(src.raw_data());
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(kStagingChunk, bytes - done);
      VORTEX_CUDA_CHECK(cudaMemcpyAsync(pinned_->data(), in + done, n, cudaMemcpyDeviceToHost, stream_));
      VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
      std::memcpy(out + done, pinned_->data(), n);
      done += n;
    }
    return Status::Ok();
  }
  VORTEX_ASSIGN_OR_RETURN(cuda_ops::RowView v, cuda_ops::row_view(src, "download source"));
  const size_t row_bytes = static_cast<size_t>(v.cols) * es;
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, static_cast<int64_t>(kStagingChunk / std::max<size_t>(row_bytes, 1)));
  VORTEX_RETURN_IF_ERROR(pinned_->reserve(static_cast<size_t>(std::min(rows_per_chunk, v.rows)) * row_bytes));
  for (int64_t r = 0; r < v.rows; r += rows_per_chunk) {
    const int64_t n = std::min(rows_per_chunk, v.rows - r);
    VORTEX_CUDA_CHECK(cudaMemcpy2DAsync(pinned_->data(), row_bytes, static_cast<const char*>(v.ptr) + r * v.ld * es,
                                        v.ld * es, row_bytes, n, cudaMemcpyDeviceToHost, stream_));
    VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(out + r * row_bytes, pinned_->data(), n * row_bytes);
  }
  return Status::Ok();
}

Status CudaBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype())
    return invalid_argument("copy: " + src.describe() + " -> " + dst.describe() + ": shape and dtype must match");
  if (src.device() != Device::kCuda || dst.device() != Device::kCuda)
    return invalid_argument("copy: both tensors must be CUDA tensors (use upload/download across devices)");
  if (src.is_contiguous() && dst.is_contiguous()) {
    VORTEX_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream_));
    return after_op("copy");
  }
  VORTEX_ASSIGN_OR_RETURN(cuda_ops::RowView s, cuda_ops::row_view(src, "copy src"));
  VORTEX_ASSIGN_OR_RETURN(cuda_ops::RowView d, cuda_ops::row_view(dst, "copy dst"));
  if (s.rows == 0 || s.cols == 0) return Status::Ok();
  const size_t es = dtype_size(src.dtype());
  VORTEX_CUDA_CHECK(
      cudaMemcpy2DAsync(d.ptr, d.ld * es, s.ptr, s.ld * es, s.cols * es, s.rows, cudaMemcpyDeviceToDevice, stream_));
  return after_op("copy");
}

Status CudaBackend::synchronize() {
  VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return after_op("synchronize");
}

Status CudaBackend::fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::fill_synthetic(dst, seed, scale, offset, stream_));
  return after_op("fill_synthetic");
}

// ---- ops ---------------------------------------------------------------------------------------
Status CudaBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  if (!gemm_) {  // created on first use: backends used only for elementwise work need no cuBLASLt
    VORTEX_ASSIGN_OR_RETURN(gemm_, GemmEngine::create(gemm_options()));
  }
  if (w.format == QuantFormat::kNvfp4) return linear_nvfp4(x, w, bias, out);
  if (w.format == QuantFormat::kFp8Scaled && !fp8_gemm_.ok()) return fp8_gemm_;  // select_gemm at init
  VORTEX_RETURN_IF_ERROR(gemm_->linear(x, w, bias, out, stream_));
  return after_op("linear");
}

// ---- NVFP4: quantize into an activation slot, then GEMM from it ------------------------------------
Status CudaBackend::nvfp4_prepare(Nvfp4ActivationSlots::Role role, int64_t rows, int64_t cols,
                                  const LinearWeight& consumer, const char* op, Nvfp4ActivationSlots::Target& target,
                                  QuantizedActivation& out) {
  if (!nvfp4_gemm_) {  // the path follows the policy (cuBLASLt FP4 or the exact BF16 emulation)
    VORTEX_ASSIGN_OR_RETURN(Nvfp4GemmPath path, select_nvfp4(policy_));
    if (!gemm_) {
      VORTEX_ASSIGN_OR_RETURN(gemm_, GemmEngine::create(gemm_options()));
    }
    VORTEX_ASSIGN_OR_RETURN(nvfp4_gemm_, Nvfp4Gemm::create(*gemm_, path, allocator_));  // counted in memory_peak
  }
  if (!nvfp4_slots_) nvfp4_slots_ = std::make_unique<Nvfp4ActivationSlots>(allocator_);
  return nvfp4_slots_->prepare(role, rows, cols, consumer, op, stream_, target, out);
}

namespace {

// A recorded CUDA event; destroying it is safe while the work it marks is pending (the driver frees it after).
class CudaFence final : public Backend::Fence {
 public:
  explicit CudaFence(cudaEvent_t e) : event(e) {}
  ~CudaFence() override { (void)cudaEventDestroy(event); }
  cudaEvent_t event;
};

Result<cudaEvent_t> record_event(cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  VORTEX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  if (cudaError_t err = cudaEventRecord(e, stream); err != cudaSuccess) {
    (void)cudaEventDestroy(e);
    return cuda_status(err, "cudaEventRecord(fence)", __FILE__, __LINE__);
  }
  return e;
}

}  // namespace

Result<std::shared_ptr<Backend::Fence>> CudaBackend::fence_compute() {
  if (capturing_) return internal_error("fence_compute during a graph capture");
  VORTEX_ASSIGN_OR_RETURN(cudaEvent_t e, record_event(stream_));
  return std::shared_ptr<Fence>(std::make_shared<CudaFence>(e));
}

Result<std::shared_ptr<Backend::Fence>> CudaBackend::copy_async(const std::vector<std::pair<Tensor, Tensor>>& copies,
                                                                const Fence* after) {
  if (capturing_) return internal_error("copy_async during a graph capture");
  if (copy_stream_ == nullptr) VORTEX_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  if (const auto* f = dynamic_cast<const CudaFence*>(after))
    VORTEX_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, f->event, 0));
  for (const auto& [host, dst] : copies) {
    if (host.device() != Device::kCpu || !host.is_contiguous() || dst.device() != Device::kCuda ||
        !dst.is_contiguous() || host.shape() != dst.shape() || host.dtype() != dst.dtype())
      return invalid_argument("copy_async: " + host.describe() + " -> " + dst.describe() +
                              ": a contiguous host tensor into a contiguous CUDA tensor of the same shape and dtype");
    VORTEX_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw_data(), host.raw_data(), host.nbytes(), cudaMemcpyHostToDevice, copy_stream_));
  }
  VORTEX_ASSIGN_OR_RETURN(cudaEvent_t e, record_event(copy_stream_));
  return std::shared_ptr<Fence>(std::make_shared<CudaFence>(e));
}

Status CudaBackend::wait(const Fence* fence) {
  if (const auto* f = dynamic_cast<const CudaFence*>(fence))
    VORTEX_CUDA_CHECK(cudaStreamWaitEvent(stream_, f->event, 0));
  return Status::Ok();
}

Status CudaBackend::wait_host(const Fence* fence) {
  if (const auto* f = dynamic_cast<const CudaFence*>(fence)) VORTEX_CUDA_CHECK(cudaEventSynchronize(f->event));
  return Status::Ok();
}

Result<LinearWeight> CudaBackend::quantize_weight(const LinearWeight& w, QuantFormat format) {
  const Tensor& x = w.weight;
  if (w.format != QuantFormat::kNone || !x.defined() || x.device() != Device::kCuda || x.dtype() != DType::kBF16 ||
      x.ndim() != 2 || !x.is_contiguous() || x.dim(0) < 1 || x.dim(1) < 1)
    return invalid_argument("quantize_weight needs a contiguous non-empty CUDA [N, K] bf16 weight, got " +
                            (x.defined() ? x.describe() : std::string("undefined")));
  const int64_t n = x.dim(0), k = x.dim(1);
  LinearWeight out;
  out.format = format;
  out.out_features = n;
  out.in_features = k;
  VORTEX_ASSIGN_OR_RETURN(Tensor amax, alloc({1}, DType::kI32));  // [1] u32 bits: the amax reduction
  if (format == QuantFormat::kFp8Scaled) {
    VORTEX_ASSIGN_OR_RETURN(out.weight, alloc({n, k}, DType::kF8E4M3));  // [N, K] e4m3
    VORTEX_ASSIGN_OR_RETURN(out.weight_scale, alloc({1}, DType::kF32));  // [1] amax / 448
    VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor(x.raw_data(), n, k, k, out.weight.raw_data(),
                                                   out.weight_scale.data<float>(), amax.data<uint32_t>(), stream_));
    VORTEX_RETURN_IF_ERROR(after_op("quantize_weight(fp8)"));
    return out;
  }
  if (format == QuantFormat::kNvfp4) {
    const ref::Nvfp4Layout layout = ref::nvfp4_layout(n, k);
    VORTEX_ASSIGN_OR_RETURN(out.weight, alloc({layout.data_rows, layout.data_row_bytes}, DType::kU8));  // e2m1 pairs
    VORTEX_ASSIGN_OR_RETURN(out.weight_scale, alloc({layout.scale_rows, layout.scale_cols}, DType::kF8E4M3));
    VORTEX_ASSIGN_OR_RETURN(out.weight_scale_2, alloc({1}, DType::kF32));  // [1] g
    cuda_ops::Nvfp4GlobalScale g;
    g.dynamic = true;  // the weight's own amax: the host quantizer's nvfp4_global_scale_from_amax
    g.g = out.weight_scale_2.data<float>();
    g.amax_workspace = amax.data<uint32_t>();
    cuda_ops::Nvfp4Buffers buffers;
    buffers.data = out.weight.data<uint8_t>();
    buffers.scales = out.weight_scale.data<uint8_t>();
    VORTEX_RETURN_IF_ERROR(
        cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(x.raw_data()), n, k, k, g, buffers, stream_));
    VORTEX_RETURN_IF_ERROR(after_op("quantize_weight(nvfp4)"));
    return out;
  }
  return unsupported(std::string("quantize_weight: no device quantizer for ") + quant_format_name(format));
}

Status CudaBackend::quantize_nvfp4(const Tensor& x, const LinearWeight& consumer, QuantizedActivation& out) {
  VORTEX_ASSIGN_OR_RETURN(const cuda_ops::Nvfp4ProducerShape shape, cuda_ops::nvfp4_quantize_input_shape(x));
  const int64_t m = shape.rows, k = shape.cols;
  Nvfp4ActivationSlots::Target t;
  VORTEX_RETURN_IF_ERROR(
      nvfp4_prepare(Nvfp4ActivationSlots::Role::kLinearInput, m, k, consumer, "nvfp4 linear", t, out));
  if (m == 0) return Status::Ok();
  VORTEX_RETURN_IF_ERROR(
      cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(x.raw_data()), m, k, x.stride(0), t.g, t.buffers, stream_));
  return after_op("linear(nvfp4 activation quantize)");
}

// out = R(g_x * g_w * q(x) @ w'^T + bias): x quantized by the GPU producer into its slot (dynamic g =
// amax/2688 in comfy-kitchen's BF16 rounding, or the layer's static input_scale), then the NVFP4 GEMM.
Status CudaBackend::linear_nvfp4(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  QuantizedActivation q;
  VORTEX_RETURN_IF_ERROR(quantize_nvfp4(x, w, q));
  if (q.rows == 0) return Status::Ok();
  return linear_quantized(q, w, bias, out);
}

Status CudaBackend::modulate_quantize(const Tensor& n, const Tensor& table, int shift_chunk, int scale_chunk,
                                      const SegmentTable& seg, const LinearWeight& consumer, QuantizedActivation& out) {
  VORTEX_ASSIGN_OR_RETURN(const cuda_ops::Nvfp4ProducerShape shape,
                          cuda_ops::nvfp4_modulated_input_shape(n, table, shift_chunk, scale_chunk));
  const int64_t rows = shape.rows, d = shape.cols;
  Nvfp4ActivationSlots::Target t;
  VORTEX_RETURN_IF_ERROR(
      nvfp4_prepare(Nvfp4ActivationSlots::Role::kLinearInput, rows, d, consumer, "modulate_quantize", t, out));
  if (rows == 0) return Status::Ok();
  VORTEX_ASSIGN_OR_RETURN(cuda_ops::DeviceRowMap map, segments_->get(seg, table.dim(0), stream_));
  VORTEX_RETURN_IF_ERROR(cuda_ops::nvfp4_quantize_modulated(
      static_cast<const uint16_t*>(n.raw_data()), rows, d, n.stride(0), static_cast<const uint16_t*>(table.raw_data()),
      table.stride(0), shift_chunk, scale_chunk, map, t.g, t.buffers, stream_));
  return after_op("modulate_quantize");
}

Status CudaBackend::swiglu_quantize(const Tensor& u, const LinearWeight& consumer, QuantizedActivation& out) {
  VORTEX_ASSIGN_OR_RETURN(const cuda_ops::Nvfp4ProducerShape shape, cuda_ops::nvfp4_swiglu_input_shape(u));
  const int64_t rows = shape.rows, f = shape.cols;
  Nvfp4ActivationSlots::Target t;
  VORTEX_RETURN_IF_ERROR(
      nvfp4_prepare(Nvfp4ActivationSlots::Role::kFfnHidden, rows, f, consumer, "swiglu_quantize", t, out));
  if (rows == 0) return Status::Ok();
  VORTEX_RETURN_IF_ERROR(cuda_ops::nvfp4_quantize_swiglu(static_cast<const uint16_t*>(u.raw_data()), rows, f,
                                                         u.stride(0), silu_table_.as<uint16_t>(), t.g, t.buffers,
                                                         stream_));
  return after_op("swiglu_quantize");
}

Status CudaBackend::linear_quantized(const QuantizedActivation& x, const LinearWeight& w, const Tensor* bias,
                                     Tensor& out) {
  if (x.format != QuantFormat::kNvfp4 || w.format != QuantFormat::kNvfp4)
    return invalid_argument(std::string("linear_quantized: activation ") + quant_format_name(x.format) +
                            " and weight " + quant_format_name(w.format) + ": both must be nvfp4");
  if (!nvfp4_slots_ || !nvfp4_gemm_)
    return invalid_argument("linear_quantized: this backend has produced no NVFP4 activation (call a producer first)");
  VORTEX_RETURN_IF_ERROR(nvfp4_slots_->check_current(x, "linear_quantized"));
  if (x.cols != w.in_features)
    return invalid_argument("linear_quantized: the activation has K=" + std::to_string(x.cols) +
                            ", the weight K=" + std::to_string(w.in_features));
  if (x.static_global_scale != w.input_scale.defined())
    return invalid_argument(std::string("linear_quantized: the activation was quantized with a ") +
                            (x.static_global_scale ? "static" : "dynamic") + " global scale but the weight " +
                            (w.input_scale.defined() ? "has" : "has no") +
                            " input_scale: produce it for this consumer");
  if (x.rows == 0) return Status::Ok();
  Nvfp4Operand xo;
  xo.data = static_cast<const uint8_t*>(x.data.raw_data());
  xo.scales = static_cast<const uint8_t*>(x.scales.raw_data());
  xo.global_scale = static_cast<const float*>(x.global_scale.raw_data());
  xo.rows = x.rows;
  xo.cols = x.cols;
  VORTEX_RETURN_IF_ERROR(nvfp4_gemm_->linear(xo, w, bias, out, stream_));
  return after_op("linear(nvfp4)");
}

Status CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::rms_norm(x, weight, eps, out, stream_));
  return after_op("rms_norm");
}

Status CudaBackend::modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk,
                             const SegmentTable& seg) {
  VORTEX_ASSIGN_OR_RETURN(cuda_ops::DeviceRowMap map,
                          cuda_ops::table_row_map(*segments_, seg, table, "modulate", stream_));
  VORTEX_RETURN_IF_ERROR(cuda_ops::modulate(x, table, shift_chunk, scale_chunk, map, stream_));
  return after_op("modulate");
}

Status CudaBackend::rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table,
                                      int shift_chunk, int scale_chunk, const SegmentTable& seg, Tensor& out) {
  VORTEX_ASSIGN_OR_RETURN(cuda_ops::DeviceRowMap map,
                          cuda_ops::table_row_map(*segments_, seg, table, "rms_norm_modulate", stream_));
  VORTEX_RETURN_IF_ERROR(
      cuda_ops::rms_norm_modulate(x, weight, eps, table, shift_chunk, scale_chunk, map, out, stream_));
  return after_op("rms_norm_modulate");
}

Status CudaBackend::qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                                 const RopeTables* rope, int num_heads, int head_dim) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::qk_norm_rope(q, k, q_weight, k_weight, eps, rope ? &rope->cos : nullptr,
                                                rope ? &rope->sin : nullptr, rope ? rope->rope_dims : 0, num_heads,
                                                head_dim, stream_));
  return after_op("qk_norm_rope");
}

Status CudaBackend::rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::rms_norm_two_rounding(x, weight, eps, out, stream_));
  return after_op("rms_norm_two_rounding");
}

Status CudaBackend::head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads,
                                   int head_dim) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::head_norm_rope(x, weight, eps, rope ? &rope->cos : nullptr,
                                                  rope ? &rope->sin : nullptr, rope ? rope->rope_dims : 0, num_heads,
                                                  head_dim, stream_));
  return after_op("head_norm_rope");
}

Status CudaBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                                     int head_dim, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::causal_attention(q, k, v, num_heads, num_kv_heads, head_dim, out, stream_));
  return after_op("causal_attention");
}

Status CudaBackend::lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                               LoraMergeProgram program) {
  VORTEX_RETURN_IF_ERROR(
      cuda_ops::lora_merge(w, a, b, row_offset, scale, program == LoraMergeProgram::kSingleRounding, stream_));
  return after_op("lora_merge");
}

Status CudaBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim,
                              Tensor& out, const ExecOptions& opts) {
  VORTEX_ASSIGN_OR_RETURN(
      const AttentionKernel kernel,
      select_attention(policy_, opts, AttentionShape{q.defined() ? q.dim(0) : 0, num_heads, head_dim}));
  switch (kernel) {
    case AttentionKernel::kCudnnSdpa: {
#if defined(VORTEX_CUDA_HAVE_SDPA)
      if (!sdpa_) {
        VORTEX_ASSIGN_OR_RETURN(sdpa_, SdpaAttention::create(allocator_));  // counted in memory_peak
      }
      VORTEX_RETURN_IF_ERROR(sdpa_->run(q, k, v, num_heads, head_dim, out, stream_));
      return after_op("attention(sdpa)", opts.debug_sync);
#else
      return unsupported(
          "attention sdpa: this build has no cuDNN SDPA sources (src/cuda/attention/sdpa_sm90.*); "
          "rebuild with them listed in src/cuda/CMakeLists.txt");
#endif
    }
    case AttentionKernel::kSage2Wgmma:
    case AttentionKernel::kSage2MmaSync: {
      // Sage2-compatible INT8 QK / FP8 PV program (E2 vs the BF16 program; deviation in docs/results.md).
      VORTEX_RETURN_IF_ERROR(sage2_attention(q, k, v, num_heads, head_dim, out, stream_, sage2_workspace(kernel)));
      return after_op("attention(sage2)", opts.debug_sync);
    }
    case AttentionKernel::kBf16Wgmma:
      // The BF16 program through the owned sm_90a kernel (E1, like cuDNN; src/cuda/attention/bf16_attention.h).
      VORTEX_RETURN_IF_ERROR(bf16_attention(q, k, v, num_heads, head_dim, out, stream_));
      return after_op("attention(bf16-owned)", opts.debug_sync);
  }
  return internal_error("attention: unknown kernel");
}

Status CudaBackend::attention_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads,
                                      int head_dim, Tensor& out, const ExecOptions& opts) {
  if (batch < 1 || !q.defined() || q.ndim() != 2 || q.dim(0) % batch != 0)
    return invalid_argument("attention_batched: " + std::to_string(batch) + " sequences do not split q " +
                            (q.defined() ? q.describe() : std::string("undefined")) + " into equal row blocks");
  VORTEX_ASSIGN_OR_RETURN(const AttentionKernel kernel,
                          select_attention(policy_, opts, AttentionShape{q.dim(0) / batch, num_heads, head_dim}));
#if defined(VORTEX_CUDA_HAVE_SDPA)
  if (kernel == AttentionKernel::kCudnnSdpa && batch > 1) {
    if (!sdpa_) {
      VORTEX_ASSIGN_OR_RETURN(sdpa_, SdpaAttention::create(allocator_));  // counted in memory_peak
    }
    VORTEX_RETURN_IF_ERROR(sdpa_->run_batched(q, k, v, batch, num_heads, head_dim, out, stream_));
    return after_op("attention_batched(sdpa)", opts.debug_sync);
  }
#endif
  if (kernel == AttentionKernel::kBf16Wgmma && batch > 1) {
    // All sequences in one launch of the owned kernel (src/cuda/attention/bf16_attention.h).
    VORTEX_RETURN_IF_ERROR(bf16_attention_batched(q, k, v, batch, num_heads, head_dim, out, stream_));
    return after_op("attention_batched(bf16-owned)", opts.debug_sync);
  }
  return attention_per_sequence(q, k, v, batch, num_heads, head_dim, out, opts);
}

Sage2Workspace& CudaBackend::sage2_workspace(AttentionKernel kernel) {
  if (!sage2_) {
    sage2_ = std::make_unique<Sage2Workspace>();
    std::shared_ptr<CachingAllocator> allocator = allocator_;  // counted in memory_in_use / memory_peak
    sage2_->device_alloc = [allocator](size_t bytes) { return allocator->allocate(bytes); };
    sage2_->device_free = [allocator](void* ptr, size_t bytes) { allocator->release(ptr, bytes); };
  }
  sage2_->mainloop = kernel == AttentionKernel::kSage2Wgmma ? Sage2Mainloop::kWgmma : Sage2Mainloop::kMmaSync;
  return *sage2_;
}

bool CudaBackend::has_fused_q_quantize(int64_t rows, int num_heads, int head_dim, const ExecOptions& opts) const {
  if (!opts.fused_q_quantize || opts.attention != AttentionKind::kSage2) return false;
  const Result<AttentionKernel> kernel = select_attention(policy_, opts, AttentionShape{rows, num_heads, head_dim});
  return kernel.ok() && (*kernel == AttentionKernel::kSage2Wgmma || *kernel == AttentionKernel::kSage2MmaSync);
}

Status CudaBackend::qk_norm_rope_quantize_q(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight,
                                            float eps, const RopeTables* rope, int num_heads, int head_dim,
                                            const ExecOptions& opts, QuantizedQuery& out) {
  const int64_t rows = q.defined() && q.ndim() == 2 ? q.dim(0) : 0;
  VORTEX_ASSIGN_OR_RETURN(const AttentionKernel kernel,
                          select_attention(policy_, opts, AttentionShape{rows, num_heads, head_dim}));
  if (kernel != AttentionKernel::kSage2Wgmma && kernel != AttentionKernel::kSage2MmaSync)
    return invalid_argument(std::string("qk_norm_rope_quantize_q: the selected attention kernel (") +
                            attention_kernel_name(kernel) + ") reads a BF16 Q; use qk_norm_rope");
  Sage2Workspace& ws = sage2_workspace(kernel);
  const Tensor* cos = rope ? &rope->cos : nullptr;
  const Tensor* sin = rope ? &rope->sin : nullptr;
  const int rope_dims = rope ? rope->rope_dims : 0;
  const Status fused =
      qk_norm_rope_sage2(q, k, q_weight, k_weight, eps, cos, sin, rope_dims, num_heads, head_dim, stream_, ws);
  if (fused.code() == ErrorCode::kUnsupported) {  // a shape the fused kernel does not take: the two passes
    VORTEX_RETURN_IF_ERROR(
        cuda_ops::qk_norm_rope(q, k, q_weight, k_weight, eps, cos, sin, rope_dims, num_heads, head_dim, stream_));
    VORTEX_RETURN_IF_ERROR(sage2_quantize_q(q, num_heads, head_dim, stream_, ws));
  } else {
    VORTEX_RETURN_IF_ERROR(fused);
  }
  out = QuantizedQuery{rows, num_heads, head_dim, ++quantized_q_generation_};
  return after_op("qk_norm_rope_quantize_q(sage2)", opts.debug_sync);
}

Status CudaBackend::attention_quantized_q(const QuantizedQuery& q, const Tensor& k, const Tensor& v, int num_heads,
                                          int head_dim, Tensor& out, const ExecOptions& opts) {
  if (q.generation == 0 || q.generation != quantized_q_generation_ || !sage2_)
    return invalid_argument("attention_quantized_q: the quantized Q is not the last one qk_norm_rope_quantize_q wrote");
  if (q.heads != num_heads || q.head_dim != head_dim)
    return invalid_argument("attention_quantized_q: the quantized Q has " + std::to_string(q.heads) + " heads of " +
                            std::to_string(q.head_dim) + ", asked for " + std::to_string(num_heads) + " of " +
                            std::to_string(head_dim));
  VORTEX_ASSIGN_OR_RETURN(const AttentionKernel kernel,
                          select_attention(policy_, opts, AttentionShape{q.rows, num_heads, head_dim}));
  if (kernel != AttentionKernel::kSage2Wgmma && kernel != AttentionKernel::kSage2MmaSync)
    return invalid_argument(std::string("attention_quantized_q: the selected attention kernel (") +
                            attention_kernel_name(kernel) + ") reads a BF16 Q; use attention");
  Sage2Workspace& ws = sage2_workspace(kernel);
  // sage2_quantize_kv checks that ws still holds this Q (tokens, heads, layout) and marks it consumed.
  VORTEX_RETURN_IF_ERROR(sage2_quantize_kv(k, v, num_heads, head_dim, stream_, ws));
  VORTEX_RETURN_IF_ERROR(sage2_attention_quantized(out, stream_, ws));
  return after_op("attention_quantized_q(sage2)", opts.debug_sync);
}

Status CudaBackend::gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg) {
  if (table == nullptr) {
    VORTEX_RETURN_IF_ERROR(cuda_ops::gate_add(x, a, nullptr, 0, nullptr, stream_));
    return after_op("gate_add");
  }
  VORTEX_ASSIGN_OR_RETURN(cuda_ops::DeviceRowMap map,
                          cuda_ops::table_row_map(*segments_, seg, *table, "gate_add", stream_));
  if (fused_gate_add_) {
    VORTEX_RETURN_IF_ERROR(cuda_ops::gate_add(x, a, table, gate_chunk, &map, stream_));
    return after_op("gate_add");
  }
  // Eager program: gated = R(gate * a) into the backend's scratch, then x = R(x + gated).
  VORTEX_RETURN_IF_ERROR(gate_scratch_.reserve(allocator_, static_cast<size_t>(a.numel()) * sizeof(uint16_t)));
  auto scratch = std::make_shared<Storage>();  // non-owning view: gate_scratch_ keeps the block
  scratch->ptr = gate_scratch_.data();
  scratch->bytes = gate_scratch_.size();
  scratch->device = Device::kCuda;
  Tensor gated = Tensor::from_storage(std::move(scratch), 0, a.shape(), DType::kBF16);  // [S, D] bf16
  VORTEX_RETURN_IF_ERROR(cuda_ops::gate_multiply(a, *table, gate_chunk, map, gated, stream_));
  VORTEX_RETURN_IF_ERROR(after_op("gate_add (gate multiply)"));
  VORTEX_RETURN_IF_ERROR(cuda_ops::residual_add(x, gated, stream_));
  return after_op("gate_add (residual add)");
}

Status CudaBackend::swiglu(const Tensor& u, Tensor& m) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::swiglu(u, m, silu_table_.as<uint16_t>(), stream_));
  return after_op("swiglu");
}

Status CudaBackend::cast(const Tensor& src, Tensor& dst) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::cast(src, dst, stream_));
  return after_op("cast");
}

// ---- VAE decoder ops ---------------------------------------------------------------------------
Status CudaBackend::rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::rms_norm_fp32(x, weight, eps, out, stream_));
  return after_op("rms_norm_fp32");
}

Status CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::layer_norm(x, weight, bias, eps, out, stream_));
  return after_op("layer_norm");
}

Status CudaBackend::gelu(Tensor& x, bool tanh_approx) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::gelu(x, tanh_approx, stream_));
  return after_op("gelu");
}

Status CudaBackend::rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::rope_fp32(x, cos, sin, num_heads, head_dim, stream_));
  return after_op("rope_fp32");
}

Status CudaBackend::pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::pos_embed_add(x, table, index, weight, stream_));
  return after_op("pos_embed_add");
}

Status CudaBackend::vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255,
                                      const std::array<float, 3>& std255, int patch, int temporal_patch, int merge,
                                      Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::vision_pixel_rows(rgb, mean255, std255, patch, temporal_patch, merge, out, stream_));
  return after_op("vision_pixel_rows");
}

Status CudaBackend::pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right,
                                       Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::pad_causal_reflect(x, front, top, bottom, left, right, out, stream_));
  return after_op("pad_causal_reflect");
}

Status CudaBackend::group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps,
                                      bool silu, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::group_norm_frames(x, weight, bias, groups, eps, silu, out, stream_));
  return after_op("group_norm_frames");
}

Status CudaBackend::conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s,
                           bool allow_tf32, Tensor& out) {
  if (!conv3d_) {
    VORTEX_ASSIGN_OR_RETURN(conv3d_, cuda_ops::Conv3dCudnn::create(allocator_));  // counted in memory_peak
  }
  VORTEX_RETURN_IF_ERROR(conv3d_->run(x, weight, bias, stride_t, stride_s, allow_tf32, out, stream_));
  return after_op("conv3d");
}

Status CudaBackend::snake(Tensor& x, const Tensor& alpha) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::snake(x, alpha, stream_));
  return after_op("snake");
}

Status CudaBackend::conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation,
                                   int padding, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::conv1d_strided(x, weight, bias, stride, dilation, padding, out, stream_));
  return after_op("conv1d_strided");
}

Status CudaBackend::layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                        Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::layer_norm_channels(x, weight, bias, eps, out, stream_));
  return after_op("layer_norm_channels");
}

Status CudaBackend::pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::pooled_causal_attention(qkv, heads, out, stream_));
  return after_op("pooled_causal_attention");
}

Status CudaBackend::gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::gelu_tanh_mul(a, g, out, stream_));
  return after_op("gelu_tanh_mul");
}

Status CudaBackend::video_stitch_clip(const Tensor& y, const VideoStitchClip& geometry, const Tensor& prev, Tensor& out,
                                      Tensor& next) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::video_stitch_clip(y, geometry, prev, out, next, stream_));
  return after_op("video_stitch_clip");
}

Status CudaBackend::scale_add(Tensor& x, const Tensor& a, const Tensor& scale) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::scale_add(x, a, scale, stream_));
  return after_op("scale_add");
}

Status CudaBackend::scale_add_rms_norm_fp32(Tensor& x, const Tensor& a, const Tensor& scale, const Tensor& weight,
                                            float eps, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::scale_add_rms_norm_fp32(x, a, scale, weight, eps, out, stream_));
  return after_op("scale_add_rms_norm_fp32");
}

Status CudaBackend::add(Tensor& x, const Tensor& y, float scale) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::add(x, y, scale, stream_));
  return after_op("add");
}

Status CudaBackend::conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                           Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::conv1d(x, weight, bias, dilation, padding, out, stream_));
  return after_op("conv1d");
}

Status CudaBackend::conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding,
                                     Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::conv_transpose1d(x, weight, bias, stride, padding, out, stream_));
  return after_op("conv_transpose1d");
}

Status CudaBackend::conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                                Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::conv1d_fp32(x, weight, bias, dilation, padding, out, stream_));
  return after_op("conv1d_fp32");
}

Status CudaBackend::conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation,
                                         int padding, const Tensor& residual, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::conv1d_fp32_residual(x, weight, bias, dilation, padding, residual, out, stream_));
  return after_op("conv1d_fp32_residual");
}

Status CudaBackend::activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                                 const Tensor& down_filter, int ratio, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::activation1d(x, alpha, beta, up_filter, down_filter, ratio, out, stream_));
  return after_op("activation1d");
}

Status CudaBackend::snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::snake_beta(x, alpha, beta, stream_));
  return after_op("snake_beta");
}

Status CudaBackend::upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::upsample1d(x, filter, ratio, out, stream_));
  return after_op("upsample1d");
}

Status CudaBackend::downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
  VORTEX_RETURN_IF_ERROR(cuda_ops::downsample1d(x, filter, ratio, out, stream_));
  return after_op("downsample1d");
}

Result<std::unique_ptr<Backend>> make_cuda_backend(int ordinal) {
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(ordinal));
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace vortex
