// BackendDevice: the device part of the Backend (src/backend/backend.h): allocation and host <-> device copies,
// the compute and copy streams (fences, asynchronous copies), step-graph capture, run-time switches (ExecOptions),
// cancel, injected allocation failures, profiling regions and memory statistics. All tensors passed to a backend
// live on its device. The CPU backend (src/ref/cpu_backend.h) and the CUDA backend (src/cuda/cuda_backend.h)
// implement it.
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
#include "backend/identity.h"
#include "backend/linear_weight.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

struct CUstream_st;

namespace vortex {

// The device part of a backend: memory and copies, streams and fences, graph capture, switches, cancel,
// fault injection, profiling regions and memory statistics. Op families (dit_ops.h, vae_ops.h, ...) hold the math.
class BackendDevice : public virtual BackendIdentity {
 public:
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
  // Blocks the calling thread until `fence` has passed (null: returns at once): the host memory a copy_async read may
  // then be rewritten (streaming from disk reuses its page-locked staging buffers).
  virtual Status wait_host(const Fence* fence) {
    (void)fence;
    return Status::Ok();
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

}  // namespace vortex
