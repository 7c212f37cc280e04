// DirectUploader (see direct_upload.h): aligned O_DIRECT reads into two page-locked staging buffers, each chunk's
// weight bytes copied into the device tensor on the copy engine (Backend::copy_async) while the next chunk is read;
// a staging buffer is rewritten only once its previous copy has passed (Backend::wait_host).
#include "io/direct_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace vortex {

DirectUploader::DirectUploader(Backend& backend, uint64_t chunk_bytes)
    : backend_(backend), chunk_bytes_(std::max<uint64_t>(kAlignment, chunk_bytes & ~(kAlignment - 1))) {}

DirectUploader::~DirectUploader() {
  (void)finish();
  for (auto& [path, fd] : fds_)
    if (fd >= 0) ::close(fd);
}

bool DirectUploader::direct(const std::string& path) {
  if (auto it = fds_.find(path); it != fds_.end()) return it->second >= 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  fds_.emplace(path, fd);
  return fd >= 0;
}

Status DirectUploader::ensure_slots() {
  if (slots_[0].staging.defined()) return Status::Ok();
  for (Slot& s : slots_) {
    // kAlignment spare bytes, so the view can start on an aligned address whatever alloc_host returns.
    VORTEX_ASSIGN_OR_RETURN(Tensor raw,
                            backend_.alloc_host({static_cast<int64_t>(chunk_bytes_ + kAlignment)}, DType::kU8));
    const auto addr = reinterpret_cast<uintptr_t>(raw.raw_data());
    const size_t pad = static_cast<size_t>((kAlignment - addr % kAlignment) % kAlignment);
    s.staging = Tensor::from_storage(raw.storage(), raw.byte_offset() + pad, {static_cast<int64_t>(chunk_bytes_)},
                                     DType::kU8);
  }
  return Status::Ok();
}

Result<Tensor> DirectUploader::load(const FileExtent& e, const Shape& shape, DType dtype) {
  if (!direct(e.path)) return internal_error("DirectUploader::load: " + e.path + " does not open with O_DIRECT");
  const int fd = fds_.at(e.path);
  if (static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype) != e.bytes)
    return internal_error("DirectUploader::load: " + std::to_string(e.bytes) + " bytes in " + e.path + " for " +
                          shape_to_string(shape) + " " + dtype_name(dtype));
  VORTEX_RETURN_IF_ERROR(ensure_slots());
  VORTEX_ASSIGN_OR_RETURN(Tensor dst, backend_.alloc(shape, dtype));
  // The copies run beside the compute stream: they start after the work that may still use dst's memory.
  VORTEX_ASSIGN_OR_RETURN(std::shared_ptr<Backend::Fence> after, backend_.fence_compute());
  const uint64_t end = e.offset + e.bytes;
  for (uint64_t pos = e.offset & ~(kAlignment - 1); pos < end;) {
    Slot& slot = slots_[next_slot_];
    next_slot_ ^= 1;
    VORTEX_RETURN_IF_ERROR(backend_.wait_host(slot.copied.get()));  // its previous copy has read it
    slot.copied.reset();
    const uint64_t want = std::min<uint64_t>(chunk_bytes_, (end - pos + kAlignment - 1) & ~(kAlignment - 1));
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t got = pread_full(fd, slot.staging.raw_data(), want, pos);
    read_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t from = std::max(pos, e.offset);
    const uint64_t to = got < 0 ? from : std::min(end, pos + static_cast<uint64_t>(got));
    if (got < 0 || to < std::min(end, pos + want)) {
      return io_error(e.path + ": reading at byte " + std::to_string(pos) + " failed (" +
                      (got < 0 ? std::string(std::strerror(static_cast<int>(-got))) : std::string("the file ends early")) +
                      "); is the checkpoint complete and still in place?");
    }
    const auto n = static_cast<int64_t>(to - from);
    Tensor host = Tensor::from_storage(slot.staging.storage(), slot.staging.byte_offset() + (from - pos), {n}, DType::kU8);
    Tensor part = Tensor::from_storage(dst.storage(), dst.byte_offset() + (from - e.offset), {n}, DType::kU8);
    VORTEX_ASSIGN_OR_RETURN(slot.copied, backend_.copy_async({{host, part}}, after.get()));
    pos += want;
  }
  bytes_ += e.bytes;
  return dst;
}

Status DirectUploader::finish() {
  Status first = Status::Ok();
  for (Slot& s : slots_) {
    Status st = backend_.wait_host(s.copied.get());
    if (!st.ok() && first.ok()) first = st;
    s.copied.reset();
  }
  return first;
}

}  // namespace vortex
