// InProcessWorld: threads as ranks over shared host memory (see in_process.h for the protocol).
#include "dist/in_process.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>
#include <utility>

namespace vortex {
namespace {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessWorld& world, int r) : world_(world), rank_(r) {}
  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }
  std::string_view name() const override { return "in-process"; }

  Status all_to_all(const std::vector<Tensor>& send, const std::vector<Tensor>& recv) override {
    const size_t n = static_cast<size_t>(size());
    VORTEX_RETURN_IF_ERROR(check_comm_tensors(send, n, world_.memory().device, "all_to_all send"));
    VORTEX_RETURN_IF_ERROR(check_comm_tensors(recv, n, world_.memory().device, "all_to_all recv"));
    return world_.exchange(rank_, {"all_to_all", seq_++, &send, &recv});
  }
  Status all_gather(const Tensor& send, const std::vector<Tensor>& recv) override {
    const size_t n = static_cast<size_t>(size());
    VORTEX_RETURN_IF_ERROR(check_comm_tensor(send, world_.memory().device, "all_gather send"));
    VORTEX_RETURN_IF_ERROR(check_comm_tensors(recv, n, world_.memory().device, "all_gather recv"));
    std::vector<Tensor> sends(n, send);  // the same buffer for every peer
    return world_.exchange(rank_, {"all_gather", seq_++, &sends, &recv});
  }
  Status broadcast(const Tensor& buf, int root) override {
    if (root < 0 || root >= size())
      return invalid_argument("broadcast: root " + std::to_string(root) + " outside the world");
    VORTEX_RETURN_IF_ERROR(check_comm_tensor(buf, world_.memory().device, "broadcast"));
    const size_t n = static_cast<size_t>(size());
    // The root sends `buf` to everyone; every rank receives only from the root (empty chunks elsewhere).
    Tensor empty = Tensor::empty({0}, buf.dtype());
    std::vector<Tensor> sends(n, rank_ == root ? buf : empty);
    std::vector<Tensor> recvs(n, empty);
    sends[static_cast<size_t>(root)] = empty;  // the root keeps its own buffer
    if (rank_ != root) recvs[static_cast<size_t>(root)] = buf;
    return world_.exchange(rank_, {"broadcast", seq_++, &sends, &recvs});
  }
  Status barrier() override { return world_.exchange(rank_, {"barrier", seq_++, nullptr, nullptr}); }
  void abort(const std::string& reason) override { world_.fail(rank_, reason); }

 private:
  InProcessWorld& world_;
  int rank_;
  uint64_t seq_ = 0;
};

std::string collective_name(const InProcessWorld::Post& p) { return p.kind + " #" + std::to_string(p.seq); }

}  // namespace

InProcessWorld::InProcessWorld(int size, CommOptions options, InProcessMemory memory)
    : size_(size),
      options_(options),
      memory_(std::move(memory)),
      present_(static_cast<size_t>(size), 0),
      posts_(static_cast<size_t>(size)) {}

std::unique_ptr<Communicator> InProcessWorld::communicator(int r) {
  return std::make_unique<InProcessCommunicator>(*this, r);
}

void InProcessWorld::fail(int r, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.empty()) failure_ = "rank " + std::to_string(r) + " failed: " + reason;
  cv_.notify_all();
}

std::string InProcessWorld::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

Status InProcessWorld::rendezvous(std::unique_lock<std::mutex>& lock, int r, const std::string& what) {
  if (!failure_.empty()) return Status(ErrorCode::kNccl, what + " on rank " + std::to_string(r) + ": " + failure_);
  const uint64_t gen = generation_;
  present_[static_cast<size_t>(r)] = 1;
  if (++arrived_ == size_) {
    arrived_ = 0;
    std::fill(present_.begin(), present_.end(), 0);
    ++generation_;
    cv_.notify_all();
    return Status::Ok();
  }
  const bool done = cv_.wait_for(lock, options_.timeout, [&] { return generation_ != gen || !failure_.empty(); });
  if (generation_ != gen) return Status::Ok();  // everyone arrived (a later failure is the next step's problem)
  if (!done) {
    std::ostringstream missing;
    for (int j = 0; j < size_; ++j)
      if (!present_[static_cast<size_t>(j)]) missing << (missing.tellp() > 0 ? ", " : "") << j;
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f", std::chrono::duration<double>(options_.timeout).count());
    failure_ = "rank(s) " + missing.str() + " did not reach " + what + " within " + secs +
               " s (hung or died); the run is stopped";
    cv_.notify_all();
  }
  return Status(ErrorCode::kNccl, what + " on rank " + std::to_string(r) + ": " + failure_);
}

Status InProcessWorld::exchange(int r, const Post& post) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::string what = collective_name(post);
  posts_[static_cast<size_t>(r)] = post;
  VORTEX_RETURN_IF_ERROR(rendezvous(lock, r, what));
  // Every rank has posted this step: check that all called the same collective, then pull.
  Status st = Status::Ok();
  for (int j = 0; j < size_ && st.ok(); ++j) {
    const Post& p = posts_[static_cast<size_t>(j)];
    if (p.kind != post.kind || p.seq != post.seq)
      st = internal_error("collective mismatch: rank " + std::to_string(r) + " called " + what + ", rank " +
                          std::to_string(j) + " called " + collective_name(p));
  }
  if (st.ok() && post.recv) {
    // Copies run outside the lock so the ranks pull concurrently; the posted buffers stay valid until
    // the second rendezvous.
    std::vector<Post> posts = posts_;
    lock.unlock();
    for (int j = 0; j < size_ && st.ok(); ++j) {
      const Tensor& dst = (*post.recv)[static_cast<size_t>(j)];
      const Tensor& src = (*posts[static_cast<size_t>(j)].send)[static_cast<size_t>(r)];
      if (src.nbytes() != dst.nbytes()) {
        st =
            invalid_argument(what + ": rank " + std::to_string(j) + " sends " + std::to_string(src.nbytes()) +
                             " bytes to rank " + std::to_string(r) + ", which expects " + std::to_string(dst.nbytes()));
        break;
      }
      if (dst.nbytes() == 0) continue;
      if (memory_.copy) {
        st = memory_.copy(dst.raw_data(), src.raw_data(), dst.nbytes())
                 .with_context(what + ": copy from rank " + std::to_string(j));
      } else {
        std::memcpy(dst.raw_data(), src.raw_data(), dst.nbytes());
      }
    }
    lock.lock();
  }
  if (!st.ok()) {
    if (failure_.empty()) failure_ = "rank " + std::to_string(r) + " failed: " + st.message();
    cv_.notify_all();
    return st;
  }
  return rendezvous(lock, r, what + " (completion)");
}

Status run_in_process_ranks(int size, CommOptions options, const std::function<Status(Communicator&)>& fn,
                            InProcessMemory memory) {
  if (size < 1) return invalid_argument("run_in_process_ranks: size must be >= 1, got " + std::to_string(size));
  InProcessWorld world(size, options, std::move(memory));
  std::vector<Status> results(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm = world.communicator(r);
      Status st;
      try {
        st = fn(*comm);
      } catch (const std::exception& e) {
        st = internal_error(std::string("exception: ") + e.what());
      } catch (...) {
        st = internal_error("unknown exception");
      }
      if (!st.ok()) world.fail(r, st.to_string());
      results[static_cast<size_t>(r)] = st;
    });
  for (std::thread& t : threads) t.join();
  const std::string failure = world.failure();
  if (failure.empty()) return Status::Ok();
  // The root cause's own code when it was a rank's Status, else kNccl (a timeout).
  for (int r = 0; r < size; ++r) {
    const Status& st = results[static_cast<size_t>(r)];
    if (!st.ok() && failure.rfind("rank " + std::to_string(r) + " failed: ", 0) == 0) return Status(st.code(), failure);
  }
  return Status(ErrorCode::kNccl, failure);
}

}  // namespace vortex
