// Helpers shared by the communicators: the even split and argument checks.
#include "dist/communicator.h"

namespace vortex {

Span even_split(int64_t total, int size, int r) { return {total * r / size, total * (r + 1) / size}; }

Status check_comm_tensor(const Tensor& t, Device device, std::string_view what) {
  if (!t.defined()) return invalid_argument(std::string(what) + ": undefined tensor");
  if (t.device() != device)
    return invalid_argument(std::string(what) + ": tensor on " + device_name(t.device()) +
                            ", the communicator works on " + device_name(device));
  if (!t.is_contiguous())
    return invalid_argument(std::string(what) + ": tensor " + t.describe() + " is not contiguous");
  return Status::Ok();
}

Status check_comm_tensors(const std::vector<Tensor>& tensors, size_t count, Device device, std::string_view what) {
  if (tensors.size() != count)
    return invalid_argument(std::string(what) + ": " + std::to_string(tensors.size()) + " tensors for a world of " +
                            std::to_string(count));
  for (const Tensor& t : tensors) VORTEX_RETURN_IF_ERROR(check_comm_tensor(t, device, what));
  return Status::Ok();
}

}  // namespace vortex
