// NcclCommunicator (see nccl.h): NCCL through dlopen, a non-blocking communicator, collectives with a
// deadline (event + ncclCommGetAsyncError polling, ncclCommAbort on timeout or error).
#include "dist/nccl.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace vortex {
namespace {

// dist sits below the CUDA backend (src/CMakeLists.txt), so it reports its few runtime calls itself.
Status cuda_call_status(cudaError_t err, const char* call) {
  return Status(ErrorCode::kCuda, std::string(call) + " failed in the NCCL communicator: " + cudaGetErrorName(err) +
                                      " (" + cudaGetErrorString(err) + ")");
}
#define VORTEX_DIST_CUDA_CHECK(expr)                                                       \
  do {                                                                                     \
    cudaError_t vortex_dist_err_ = (expr);                                                 \
    if (vortex_dist_err_ != cudaSuccess) return cuda_call_status(vortex_dist_err_, #expr); \
  } while (0)

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueIdBytes), "NCCL_UNIQUE_ID_BYTES changed");

// The NCCL entry points Vortex calls, resolved from the loaded library.
struct NcclApi {
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommFinalize)(ncclComm_t) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  const char* (*GetLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
};

NcclApi g_api;
Status g_load_status = unsupported("NCCL not loaded");
std::once_flag g_load_once;

template <typename F>
bool resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

Status load_library() {
  const char* env = std::getenv("VORTEX_NCCL_LIBRARY");
  const std::string path = env && *env ? env : "libnccl.so.2";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return unsupported("cannot load NCCL (" + path + ": " + dlerror() +
                       "); install the `nvidia-nccl-cu13` wheel (pip) or the libnccl2 package and put its lib folder "
                       "on LD_LIBRARY_PATH, or set VORTEX_NCCL_LIBRARY to libnccl.so.2's path");
  bool ok = resolve(lib, "ncclGetVersion", g_api.GetVersion) && resolve(lib, "ncclGetUniqueId", g_api.GetUniqueId) &&
            resolve(lib, "ncclCommInitRankConfig", g_api.CommInitRankConfig) &&
            resolve(lib, "ncclCommFinalize", g_api.CommFinalize) &&
            resolve(lib, "ncclCommDestroy", g_api.CommDestroy) && resolve(lib, "ncclCommAbort", g_api.CommAbort) &&
            resolve(lib, "ncclCommGetAsyncError", g_api.CommGetAsyncError) &&
            resolve(lib, "ncclGetErrorString", g_api.GetErrorString) &&
            resolve(lib, "ncclGetLastError", g_api.GetLastError) && resolve(lib, "ncclGroupStart", g_api.GroupStart) &&
            resolve(lib, "ncclGroupEnd", g_api.GroupEnd) && resolve(lib, "ncclSend", g_api.Send) &&
            resolve(lib, "ncclRecv", g_api.Recv) && resolve(lib, "ncclBroadcast", g_api.Broadcast) &&
            resolve(lib, "ncclAllReduce", g_api.AllReduce);
  if (!ok)
    return unsupported(path + " lacks an NCCL entry point Vortex needs (" + dlerror() + "); NCCL >= 2.18 is required");
  int version = 0;
  if (g_api.GetVersion(&version) != ncclSuccess) return Status(ErrorCode::kNccl, "ncclGetVersion failed");
  if (version < 21800)
    return unsupported("NCCL " + std::to_string(version) +
                       " is too old: Vortex needs >= 2.18 (ncclCommFinalize, "
                       "non-blocking communicators)");
  return Status::Ok();
}

Status nccl_error(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  std::string msg = std::string(call) + " failed: " + g_api.GetErrorString(r);
  if (comm) {
    const char* last = g_api.GetLastError(comm);
    if (last && *last) msg += std::string(" (") + last + ")";
  }
  return Status(ErrorCode::kNccl, msg);
}

// In non-blocking mode a call may answer ncclInProgress: that is not an error.
#define VORTEX_NCCL_CALL(expr, comm)                                       \
  do {                                                                     \
    ncclResult_t vortex_nccl_r_ = (expr);                                  \
    if (vortex_nccl_r_ != ncclSuccess && vortex_nccl_r_ != ncclInProgress) \
      return nccl_error(vortex_nccl_r_, #expr, comm);                      \
  } while (0)

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int size, cudaStream_t stream, CommOptions options)
      : rank_(rank), size_(size), stream_(stream), options_(options) {}

  ~NcclCommunicator() override {
    if (event_) cudaEventDestroy(event_);
    if (scratch_) cudaFree(scratch_);
    if (!comm_) return;
    if (!aborted_) {
      // Flush, then destroy; a finalize that does not complete in time falls back to abort.
      bool done = g_api.CommFinalize(comm_) == ncclSuccess || poll_async(std::chrono::seconds(10)).ok();
      if (done) {
        g_api.CommDestroy(comm_);
        return;
      }
    }
    g_api.CommAbort(comm_);
  }

  Status init(const NcclUniqueIdBytes& id_bytes) {
    VORTEX_DIST_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    VORTEX_DIST_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    VORTEX_DIST_CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(float)));
    ncclUniqueId id;
    std::memcpy(&id, id_bytes.data(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // calls return at once; completion and errors are polled with a deadline
    VORTEX_NCCL_CALL(g_api.CommInitRankConfig(&comm_, size_, id, rank_, &config), nullptr);
    Status st = poll_async(options_.timeout);
    if (!st.ok()) return fail("ncclCommInitRankConfig (joining the world of " + std::to_string(size_) + " ranks)", st);
    return Status::Ok();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "nccl"; }

  Status all_to_all(const std::vector<Tensor>& send, const std::vector<Tensor>& recv) override {
    const size_t n = static_cast<size_t>(size_);
    VORTEX_RETURN_IF_ERROR(check_comm_tensors(send, n, Device::kCuda, "all_to_all send"));
    VORTEX_RETURN_IF_ERROR(check_comm_tensors(recv, n, Device::kCuda, "all_to_all recv"));
    return exchange("all_to_all", send, recv);
  }
  Status all_gather(const Tensor& send, const std::vector<Tensor>& recv) override {
    const size_t n = static_cast<size_t>(size_);
    VORTEX_RETURN_IF_ERROR(check_comm_tensor(send, Device::kCuda, "all_gather send"));
    VORTEX_RETURN_IF_ERROR(check_comm_tensors(recv, n, Device::kCuda, "all_gather recv"));
    return exchange("all_gather", std::vector<Tensor>(n, send), recv);  // uneven sizes: grouped send/recv
  }
  Status broadcast(const Tensor& buf, int root) override {
    if (root < 0 || root >= size_)
      return invalid_argument("broadcast: root " + std::to_string(root) + " outside the world");
    VORTEX_RETURN_IF_ERROR(check_comm_tensor(buf, Device::kCuda, "broadcast"));
    VORTEX_RETURN_IF_ERROR(usable("broadcast"));
    const uint64_t seq = seq_++;
    VORTEX_NCCL_CALL(g_api.Broadcast(buf.raw_data(), buf.raw_data(), buf.nbytes(), ncclChar, root, comm_, stream_),
                     comm_);
    return wait("broadcast #" + std::to_string(seq));
  }
  Status barrier() override {
    VORTEX_RETURN_IF_ERROR(usable("barrier"));
    const uint64_t seq = seq_++;
    VORTEX_NCCL_CALL(g_api.AllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_), comm_);
    return wait("barrier #" + std::to_string(seq));
  }
  void abort(const std::string& reason) override {
    if (comm_ && !aborted_) g_api.CommAbort(comm_);
    aborted_ = true;
    abort_reason_ = reason;
  }

 private:
  Status usable(const char* what) const {
    if (aborted_)
      return Status(ErrorCode::kNccl, std::string(what) + ": the communicator was aborted (" + abort_reason_ + ")");
    return Status::Ok();
  }

  // Polls the communicator's state until it leaves ncclInProgress (init, group end, finalize).
  Status poll_async(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = g_api.CommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) return nccl_error(r, "ncclCommGetAsyncError", comm_);
      if (state == ncclSuccess) return Status::Ok();
      if (state != ncclInProgress) return nccl_error(state, "NCCL (asynchronous error)", comm_);
      if (std::chrono::steady_clock::now() > deadline)
        return Status(ErrorCode::kNccl, "did not complete within " + std::to_string(timeout.count() / 1000.0) + " s");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Aborts the communicator after `st` and says which step failed.
  Status fail(const std::string& what, const Status& st) {
    if (comm_ && !aborted_) g_api.CommAbort(comm_);
    aborted_ = true;
    abort_reason_ = what + ": " + st.message();
    return Status(ErrorCode::kNccl,
                  "rank " + std::to_string(rank_) + ": " + abort_reason_ +
                      "; a peer rank died, hung or called another collective; the communicator is aborted");
  }

  // Waits for the work just enqueued on stream_ with the deadline, watching for asynchronous errors.
  Status wait(const std::string& what) {
    Status st = poll_async(options_.timeout);  // the enqueue itself (ncclGroupEnd may be in progress)
    if (!st.ok()) return fail(what, st);
    cudaError_t e = cudaEventRecord(event_, stream_);
    if (e != cudaSuccess) return fail(what, cuda_call_status(e, "cudaEventRecord(event_, stream_)"));
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    for (;;) {
      e = cudaEventQuery(event_);
      if (e == cudaSuccess) return Status::Ok();
      if (e != cudaErrorNotReady) return fail(what, cuda_call_status(e, "cudaEventQuery(event_)"));
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = g_api.CommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) return fail(what, nccl_error(r, "ncclCommGetAsyncError", comm_));
      if (state != ncclSuccess && state != ncclInProgress) return fail(what, nccl_error(state, "NCCL", comm_));
      if (std::chrono::steady_clock::now() > deadline)
        return fail(what, Status(ErrorCode::kNccl,
                                 "timed out after " + std::to_string(options_.timeout.count() / 1000.0) + " s"));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // Grouped point-to-point: send[j] to j, recv[j] from j; the local chunk is a device copy.
  Status exchange(const char* kind, const std::vector<Tensor>& send, const std::vector<Tensor>& recv) {
    VORTEX_RETURN_IF_ERROR(usable(kind));
    const std::string what = std::string(kind) + " #" + std::to_string(seq_++);
    const Tensor& self_src = send[static_cast<size_t>(rank_)];
    const Tensor& self_dst = recv[static_cast<size_t>(rank_)];
    if (self_src.nbytes() != self_dst.nbytes())
      return invalid_argument(what + ": the local chunk is " + std::to_string(self_src.nbytes()) + " bytes, its slot " +
                              std::to_string(self_dst.nbytes()));
    if (self_src.nbytes() > 0 && self_src.raw_data() != self_dst.raw_data())
      VORTEX_DIST_CUDA_CHECK(cudaMemcpyAsync(self_dst.raw_data(), self_src.raw_data(), self_src.nbytes(),
                                             cudaMemcpyDeviceToDevice, stream_));
    VORTEX_NCCL_CALL(g_api.GroupStart(), comm_);
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      const Tensor& s = send[static_cast<size_t>(j)];
      const Tensor& r = recv[static_cast<size_t>(j)];
      if (s.nbytes() > 0) {
        ncclResult_t res = g_api.Send(s.raw_data(), s.nbytes(), ncclChar, j, comm_, stream_);
        if (res != ncclSuccess && res != ncclInProgress) {
          (void)g_api.GroupEnd();
          return fail(what, nccl_error(res, "ncclSend", comm_));
        }
      }
      if (r.nbytes() > 0) {
        ncclResult_t res = g_api.Recv(r.raw_data(), r.nbytes(), ncclChar, j, comm_, stream_);
        if (res != ncclSuccess && res != ncclInProgress) {
          (void)g_api.GroupEnd();
          return fail(what, nccl_error(res, "ncclRecv", comm_));
        }
      }
    }
    ncclResult_t end = g_api.GroupEnd();
    if (end != ncclSuccess && end != ncclInProgress) return fail(what, nccl_error(end, "ncclGroupEnd", comm_));
    return wait(what);
  }

  int rank_, size_;
  cudaStream_t stream_;
  CommOptions options_;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t event_ = nullptr;
  float* scratch_ = nullptr;  // the barrier's one-element all-reduce
  uint64_t seq_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace

Status nccl_load() {
  std::call_once(g_load_once, [] { g_load_status = load_library(); });
  return g_load_status;
}

Result<std::string> nccl_version() {
  VORTEX_RETURN_IF_ERROR(nccl_load());
  int v = 0;
  ncclResult_t r = g_api.GetVersion(&v);
  if (r != ncclSuccess) return nccl_error(r, "ncclGetVersion");
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Result<NcclUniqueIdBytes> nccl_unique_id() {
  VORTEX_RETURN_IF_ERROR(nccl_load());
  ncclUniqueId id;
  ncclResult_t r = g_api.GetUniqueId(&id);
  if (r != ncclSuccess) return nccl_error(r, "ncclGetUniqueId");
  NcclUniqueIdBytes out;
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

Result<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclUniqueIdBytes& id, int rank, int size,
                                                             CUstream_st* stream, CommOptions options) {
  if (size < 1 || rank < 0 || rank >= size)
    return invalid_argument("NCCL world: rank " + std::to_string(rank) + " of " + std::to_string(size) + " is invalid");
  // NVLink multicast (NVLS) is off on the lent machines; NCCL would fail or fall back noisily without this.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  VORTEX_RETURN_IF_ERROR(nccl_load());
  auto comm = std::make_unique<NcclCommunicator>(rank, size, stream, options);
  VORTEX_RETURN_IF_ERROR(comm->init(id));
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace vortex
