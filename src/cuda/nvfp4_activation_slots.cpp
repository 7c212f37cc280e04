// NVFP4 activation slots; see nvfp4_activation_slots.h.
#include "cuda/nvfp4_activation_slots.h"

#include <string>

#include "cuda/check.h"
#include "ref/nvfp4_quantize.h"

namespace vortex {

Nvfp4ActivationSlots::~Nvfp4ActivationSlots() {
  for (Slot& s : slots_)
    if (s.scratch) allocator_->release(s.scratch, s.bytes);
}

Status Nvfp4ActivationSlots::prepare(Role role, int64_t rows, int64_t cols, const LinearWeight& consumer,
                                     const char* op, cudaStream_t stream, Target& target, QuantizedActivation& out) {
  if (consumer.format != QuantFormat::kNvfp4)
    return invalid_argument(std::string(op) + ": the consuming layer is " + quant_format_name(consumer.format) +
                            ", not nvfp4 (only NVFP4 weights take a quantized activation; use the eager path)");
  if (cols != consumer.in_features)
    return invalid_argument(std::string(op) + ": the activation has K=" + std::to_string(cols) +
                            ", the consuming weight K=" + std::to_string(consumer.in_features));
  Slot& sl = slots_[static_cast<int>(role)];
  const ref::Nvfp4Layout layout = ref::nvfp4_layout(rows, cols);
  auto up = [](size_t v) { return (v + 255) / 256 * 256; };
  const size_t data_bytes = up(layout.data_bytes()), scale_bytes = up(layout.scale_bytes());
  const size_t need = data_bytes + scale_bytes + 256;
  if (need > sl.bytes) {
    // No synchronize: a released block is reused only by later work on the same stream (the allocator's
    // single-stream rule, src/cuda/device.h), which runs after every kernel still reading the old block.
    if (sl.scratch) allocator_->release(sl.scratch, sl.bytes);
    sl.scratch = nullptr;
    sl.bytes = 0;
    VORTEX_ASSIGN_OR_RETURN(sl.scratch, allocator_->allocate(need));
    sl.bytes = need;
  }
  sl.generation = ++producer_calls_;
  char* base = static_cast<char*>(sl.scratch);
  target.buffers.data = reinterpret_cast<uint8_t*>(base);                 // [M16, K16/2] e2m1 pairs
  target.buffers.scales = reinterpret_cast<uint8_t*>(base + data_bytes);  // [M128, C4] e4m3, 128x4 tiles
  target.g = cuda_ops::Nvfp4GlobalScale{};
  target.g.g = reinterpret_cast<float*>(base + data_bytes + scale_bytes);
  target.g.amax_workspace = reinterpret_cast<uint32_t*>(base + data_bytes + scale_bytes + 16);
  if (consumer.input_scale.defined()) {  // static activation scale from the checkpoint
    const Tensor& is = consumer.input_scale;
    if (is.device() != Device::kCuda || is.dtype() != DType::kF32 || is.numel() != 1)
      return invalid_argument(std::string(op) + ": input_scale must be one f32 on the device, got " + is.describe());
    VORTEX_CUDA_CHECK(cudaMemcpyAsync(target.g.g, is.raw_data(), sizeof(float), cudaMemcpyDeviceToDevice, stream));
    target.g.dynamic = false;
  }
  // Non-owning views of the slot (the slots keep the memory; valid until the slot's next producer call).
  auto storage = std::make_shared<Storage>();
  storage->ptr = sl.scratch;
  storage->bytes = sl.bytes;
  storage->device = Device::kCuda;
  out = QuantizedActivation{};
  out.format = QuantFormat::kNvfp4;
  out.data = Tensor::from_storage(storage, 0, {layout.data_rows, layout.data_row_bytes}, DType::kU8);
  out.scales = Tensor::from_storage(storage, data_bytes, {layout.scale_rows, layout.scale_cols}, DType::kF8E4M3);
  out.global_scale = Tensor::from_storage(storage, data_bytes + scale_bytes, {1}, DType::kF32);
  out.static_global_scale = !target.g.dynamic;
  out.rows = rows;
  out.cols = cols;
  out.generation = sl.generation;
  return Status::Ok();
}

Status Nvfp4ActivationSlots::check_current(const QuantizedActivation& x, const char* op) const {
  if (x.data.defined())
    for (const Slot& s : slots_)
      if (s.scratch != nullptr && x.data.raw_data() == s.scratch && x.generation == s.generation) return Status::Ok();
  return invalid_argument(std::string(op) +
                          ": the activation is not this backend's latest producer output for its scratch (it was "
                          "overwritten by a later producer call, or comes from another backend); produce it again");
}

}  // namespace vortex
