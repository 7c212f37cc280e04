// InProcessWorld: `size` ranks as threads of one process exchanging host tensors through shared memory.
// Each collective is a real concurrent exchange: every rank posts its buffers, waits for all peers
// (rendezvous 1), copies what its peers posted for it, and waits again (rendezvous 2) so no sender
// reuses a buffer a peer is still reading. A rank that fails (abort(), or an exception in
// run_in_process_ranks) or does not arrive within the timeout fails the collective on every rank with a
// message naming it. CI runs Ulysses on the CPU backend through it (tests/dist/ulysses_test.cpp); with a
// device copy function the ranks can be threads sharing one GPU (tests/dist/ulysses_cuda_test.cpp).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace vortex {

// Where the exchanged tensors live and how bytes move between ranks' buffers (host memcpy by default).
// A device copy must be complete when it returns; the caller makes the sent bytes ready before each
// collective (e.g. synchronizes its stream).
struct InProcessMemory {
  Device device = Device::kCpu;
  std::function<Status(void* dst, const void* src, size_t bytes)> copy;  // empty: std::memcpy
};

class InProcessWorld {
 public:
  InProcessWorld(int size, CommOptions options, InProcessMemory memory = {});
  const InProcessMemory& memory() const { return memory_; }
  int size() const { return size_; }
  // The communicator of rank r (one per rank; the world must outlive it).
  std::unique_ptr<Communicator> communicator(int r);
  // Marks rank r failed with `reason` and wakes every waiting rank.
  void fail(int r, const std::string& reason);
  // Empty while no rank has failed.
  std::string failure() const;

  // One collective step of rank r: post (kind, send, recv), rendezvous, pull peers' chunks for r,
  // rendezvous. Used by the communicators; `sends`/`recvs` hold size() entries (empty = none).
  struct Post {
    std::string kind;
    uint64_t seq = 0;
    const std::vector<Tensor>* send = nullptr;  // send[j] for rank j
    const std::vector<Tensor>* recv = nullptr;  // recv[j] from rank j
  };
  Status exchange(int r, const Post& post);

 private:
  Status rendezvous(std::unique_lock<std::mutex>& lock, int r, const std::string& what);

  int size_;
  CommOptions options_;
  InProcessMemory memory_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<char> present_;  // [size] arrived at the current rendezvous
  std::vector<Post> posts_;    // [size]
  std::string failure_;
};

// Runs fn(comm) on `size` threads, one per rank, and joins them. Returns OK when every rank succeeded,
// else the first failure to happen (the root cause; peers' follow-on errors are dropped): a rank's error
// Status or an exception it threw, each prefixed with "rank r".
Status run_in_process_ranks(int size, CommOptions options, const std::function<Status(Communicator&)>& fn,
                            InProcessMemory memory = {});

}  // namespace vortex
