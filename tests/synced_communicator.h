// A rank's borrowed view of a world's Communicator that first completes the rank's pending device work (the
// bytes it sends) on its backend before every collective. Tests that run ranks as threads, each with its own
// backend, over one in-process world wrap each rank's communicator in it (tests/dist/ulysses_cuda_test.cpp,
// tests/serve/serve_world_test.cpp); the world keeps owning `inner`. Header-only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "dist/communicator.h"

namespace vortex::testing {

class SyncedCommunicator : public Communicator {
 public:
  SyncedCommunicator(Communicator& inner, Backend& backend) : inner_(inner), backend_(backend) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view name() const override { return inner_.name(); }
  Status all_to_all(const std::vector<Tensor>& send, const std::vector<Tensor>& recv) override {
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.all_to_all(send, recv);
  }
  Status all_gather(const Tensor& send, const std::vector<Tensor>& recv) override {
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.all_gather(send, recv);
  }
  Status broadcast(const Tensor& buf, int root) override {
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.broadcast(buf, root);
  }
  Status barrier() override {
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.barrier();
  }
  void abort(const std::string& reason) override { inner_.abort(reason); }

 private:
  Communicator& inner_;
  Backend& backend_;
};

}  // namespace vortex::testing
