// The byte collectives of a multi-GPU world (see pipeline.h): all_gather_bytes (the ranks' reports on adapters)
// and agreed_cancel (rank 0's cancel, broadcast before every model evaluation). Exercised with ranks by
// tests/dist/ulysses_test.cpp and tests/serve/serve_world_test.cpp.
#include <cstring>
#include <string>
#include <vector>

#include "engine/pipeline.h"

namespace vortex {

Result<std::vector<std::string>> all_gather_bytes(Communicator& comm, Backend& backend, const std::string& mine,
                                                  const std::string& what) {
  const int u = comm.size();
  Tensor size_host = Tensor::empty({8}, DType::kU8);  // [8] u8: this rank's byte count (u64)
  const uint64_t n = mine.size();
  std::memcpy(size_host.raw_data(), &n, sizeof(n));
  VORTEX_ASSIGN_OR_RETURN(Tensor size_send, backend.upload(size_host));
  std::vector<Tensor> size_recv(u);
  for (Tensor& t : size_recv) {
    VORTEX_ASSIGN_OR_RETURN(t, backend.alloc({8}, DType::kU8));  // [8] u8
  }
  VORTEX_RETURN_IF_ERROR(backend.synchronize());
  VORTEX_RETURN_IF_ERROR(comm.all_gather(size_send, size_recv).with_context(what + " (sizes)"));
  std::vector<uint64_t> sizes(u);
  for (int j = 0; j < u; ++j) {
    VORTEX_RETURN_IF_ERROR(backend.download(size_recv[j], size_host));
    std::memcpy(&sizes[j], size_host.raw_data(), sizeof(uint64_t));
    if (sizes[j] == 0 || sizes[j] > (uint64_t{1} << 24))
      return internal_error(what + ": rank " + std::to_string(j) + " announced " + std::to_string(sizes[j]) + " bytes");
  }
  Tensor host = Tensor::empty({static_cast<int64_t>(n)}, DType::kU8);  // [n] u8
  std::memcpy(host.raw_data(), mine.data(), n);
  VORTEX_ASSIGN_OR_RETURN(Tensor send, backend.upload(host));
  std::vector<Tensor> recv(u);
  for (int j = 0; j < u; ++j) {
    VORTEX_ASSIGN_OR_RETURN(recv[j], backend.alloc({static_cast<int64_t>(sizes[j])}, DType::kU8));  // [n_j] u8
  }
  VORTEX_RETURN_IF_ERROR(backend.synchronize());
  VORTEX_RETURN_IF_ERROR(comm.all_gather(send, recv).with_context(what));
  std::vector<std::string> out(u);
  for (int j = 0; j < u; ++j) {
    Tensor h = Tensor::empty({static_cast<int64_t>(sizes[j])}, DType::kU8);  // [n_j] u8
    VORTEX_RETURN_IF_ERROR(backend.download(recv[j], h));
    out[j].assign(static_cast<const char*>(h.raw_data()), sizes[j]);
  }
  return out;
}

Result<bool> agreed_cancel(Communicator& comm, Backend& backend, const CancelToken& cancel) {
  Tensor flag = Tensor::empty({1}, DType::kU8);  // [1] u8 host: 1 = stop
  flag.data<uint8_t>()[0] = comm.rank() == 0 && cancel.cancelled() ? 1 : 0;
  VORTEX_ASSIGN_OR_RETURN(Tensor on_device, backend.upload(flag));
  VORTEX_RETURN_IF_ERROR(backend.synchronize());
  VORTEX_RETURN_IF_ERROR(comm.broadcast(on_device, 0).with_context("the cancel agreement"));
  VORTEX_RETURN_IF_ERROR(backend.download(on_device, flag));
  return flag.data<uint8_t>()[0] != 0;
}

}  // namespace vortex
