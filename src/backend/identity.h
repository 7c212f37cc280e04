// BackendIdentity: the name and device shared by the parts of a Backend (src/backend/backend.h), so the device
// part (src/backend/device.h) and the op families (dit_ops.h, text_encoder_ops.h, vae_ops.h, lora_ops.h) can name
// their backend in kUnsupported messages.
#pragma once

#include <string_view>

#include "vortex/tensor.h"

namespace vortex {

// What every part of a backend knows: its name ("cpu", "cuda") and the device its tensors live on. The
// device part and each op family derive from it virtually, so a Backend has one name and one device.
class BackendIdentity {
 public:
  virtual ~BackendIdentity() = default;
  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;
};

}  // namespace vortex
