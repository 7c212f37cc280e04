// DirectUploader (see direct_upload.h): aligned O_DIRECT reads into two page-locked staging buffers, the next chunk
// read on a helper thread while this chunk's weight bytes are checked and copied into the device tensor on the copy
// engine (Backend::copy_async); a staging buffer is rewritten only once its previous copy has passed
// (Backend::wait_host). Every backend call stays on the calling thread.
#include "io/direct_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <utility>

#include "model/weights_finite.h"

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
    s.staging =
        Tensor::from_storage(raw.storage(), raw.byte_offset() + pad, {static_cast<int64_t>(chunk_bytes_)}, DType::kU8);
  }
  return Status::Ok();
}

Result<Tensor> DirectUploader::load(const FileExtent& e, const Shape& shape, DType dtype, const std::string& name,
                                    bool* scanned) {
  if (!direct(e.path)) return internal_error("DirectUploader::load: " + e.path + " does not open with O_DIRECT");
  const int fd = fds_.at(e.path);
  const uint64_t esz = dtype_size(dtype);
  if (static_cast<uint64_t>(shape_numel(shape)) * esz != e.bytes)
    return internal_error("DirectUploader::load: " + std::to_string(e.bytes) + " bytes in " + e.path + " for " +
                          shape_to_string(shape) + " " + dtype_name(dtype));
  // Chunk starts are kAlignment-aligned, so they fall on element boundaries exactly when the tensor's start does.
  const bool scan = scanned != nullptr && e.offset % esz == 0;
  if (scanned != nullptr) *scanned = scan;
  VORTEX_RETURN_IF_ERROR(ensure_slots());
  VORTEX_ASSIGN_OR_RETURN(Tensor dst, backend_.alloc(shape, dtype));
  // The copies run beside the compute stream: they start after the work that may still use dst's memory.
  VORTEX_ASSIGN_OR_RETURN(std::shared_ptr<Backend::Fence> after, backend_.fence_compute());
  const uint64_t end = e.offset + e.bytes;
  const uint64_t first = e.offset & ~(kAlignment - 1);
  auto want_at = [&](uint64_t pos) {
    return std::min<uint64_t>(chunk_bytes_, (end - pos + kAlignment - 1) & ~(kAlignment - 1));
  };
  // Starts the read of the chunk at `pos` into slot k % 2 on a helper thread, once that slot's last copy has passed.
  auto start_read = [&](uint64_t pos, int k) -> Result<std::future<int64_t>> {
    Slot& slot = slots_[k % 2];
    VORTEX_RETURN_IF_ERROR(backend_.wait_host(slot.copied.get()));
    slot.copied.reset();
    return std::async(std::launch::async, [fd, buf = slot.staging.raw_data(), want = want_at(pos), pos] {
      return pread_full(fd, buf, want, pos);
    });
  };
  if (first >= end) return dst;
  VORTEX_ASSIGN_OR_RETURN(std::future<int64_t> pending, start_read(first, 0));
  int k = 0;
  for (uint64_t pos = first; pos < end; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t got = pending.get();
    read_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t want = want_at(pos);
    if (pos + want < end) {
      VORTEX_ASSIGN_OR_RETURN(pending, start_read(pos + want, k + 1));
    }
    const uint64_t from = std::max(pos, e.offset);
    const uint64_t to = got < 0 ? from : std::min(end, pos + static_cast<uint64_t>(got));
    if (got < 0 || to < std::min(end, pos + want)) {
      return io_error(
          e.path + ": reading at byte " + std::to_string(pos) + " failed (" +
          (got < 0 ? std::string(std::strerror(static_cast<int>(-got))) : std::string("the file ends early")) +
          "); is the checkpoint complete and still in place?");
    }
    Slot& slot = slots_[k % 2];
    const auto n = static_cast<int64_t>(to - from);
    Tensor host =
        Tensor::from_storage(slot.staging.storage(), slot.staging.byte_offset() + (from - pos), {n}, DType::kU8);
    if (scan) {  // [n / esz] elements of the weight, element (from - offset) / esz first
      Tensor elements =
          Tensor::from_storage(host.storage(), host.byte_offset(), {n / static_cast<int64_t>(esz)}, dtype);
      if (std::optional<int64_t> bad = first_non_finite(elements)) {
        return format_error(e.path + ": tensor '" + name + "' (" + dst.describe() +
                            ") holds a non-finite value (NaN or Inf) at element " +
                            std::to_string(static_cast<int64_t>((from - e.offset) / esz) + *bad) +
                            "; the checkpoint is damaged (download it again)");
      }
    }
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
