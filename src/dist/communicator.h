// Communicator: the collectives Ulysses sequence parallelism needs (docs/multi_gpu.md), over tensors that
// live on the caller's backend. Two implementations: InProcessWorld (threads, one per simulated rank,
// host memory; src/dist/in_process.h) and NcclCommunicator (one process per GPU; src/dist/nccl.h).
// Every collective has a deadline: a peer that never arrives or has failed turns into an error naming
// the rank and the collective, never a silent hang. Tested in tests/dist/communicator_test.cpp.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct CommOptions {
  // How long one collective may wait for its peers before the run fails. The first NCCL collective
  // also sets up the connections, so this covers that too.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view name() const = 0;  // "in-process", "nccl"

  // send[j] goes to rank j and recv[j] arrives from rank j (size() entries each). Every tensor is
  // contiguous on this communicator's device; recv[j] of rank i has the byte size of send[i] of rank j.
  // Zero-byte chunks are allowed (uneven row or head splits). send[rank()] is copied locally.
  virtual Status all_to_all(const std::vector<Tensor>& send, const std::vector<Tensor>& recv) = 0;
  // recv[j] = rank j's send (size() entries; recv[j] has rank j's byte size, which may differ by rank).
  virtual Status all_gather(const Tensor& send, const std::vector<Tensor>& recv) = 0;
  // buf of every rank = buf of `root`.
  virtual Status broadcast(const Tensor& buf, int root) = 0;
  virtual Status barrier() = 0;
  // This rank has failed with `reason`: collectives in flight and later ones fail on every rank
  // (in-process: peers get the reason; NCCL: ncclCommAbort, peers see the lost connection or time out).
  virtual void abort(const std::string& reason) = 0;
};

// The contiguous row range [begin, end) of rank `r` when `total` rows (or heads) are split over `size`
// ranks as evenly as possible: begin = total * r / size (integer division).
struct Span {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Span even_split(int64_t total, int size, int r);

// Checks a collective's arguments the same way for every implementation: `count` tensors, contiguous,
// on `device`. `what` names the collective in the message.
Status check_comm_tensors(const std::vector<Tensor>& tensors, size_t count, Device device, std::string_view what);
Status check_comm_tensor(const Tensor& t, Device device, std::string_view what);

}  // namespace vortex
