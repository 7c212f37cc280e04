// Loading resident weights with direct reads (docs/memory.md "Loading a checkpoint"): a weight stored as the model
// reads it is read from its file with O_DIRECT in aligned chunks straight into one of two page-locked staging
// buffers, and each chunk is copied into its device tensor on the backend's copy engine while the next chunk is read,
// so the load runs at the disk's direct-read rate instead of through page faults on a mapping; the bytes can be checked
// for NaN/Inf in the staging buffer on the way, with no second pass. A file whose
// filesystem refuses O_DIRECT (tmpfs before Linux 6.6) is not read here: load_checkpoint keeps the mapping for it.
// Tested in tests/io/direct_upload_test.cpp (bytes equal the mapping's, on the CPU backend).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "io/direct_reader.h"
#include "vortex/status.h"

namespace vortex {

class DirectUploader {
 public:
  // Bytes of one direct read and one staging buffer (a multiple of kAlignment).
  static constexpr uint64_t kChunkBytes = 32ull << 20;
  static constexpr uint64_t kAlignment = DirectFileReader::kAlignment;

  explicit DirectUploader(Backend& backend, uint64_t chunk_bytes = kChunkBytes);
  ~DirectUploader();  // waits for the copies in flight (their staging buffers die with it)
  DirectUploader(const DirectUploader&) = delete;
  DirectUploader& operator=(const DirectUploader&) = delete;

  // Whether `path` opens with O_DIRECT here (false where the filesystem refuses it, or it cannot be opened); the file
  // stays open for load().
  bool direct(const std::string& path);
  // A new backend tensor of `shape` and `dtype` holding the extent's bytes (extent.bytes must be its size; the file
  // must pass direct()). Its copies may still be in flight when it returns: finish() waits for them. The next chunk
  // is read on a helper thread while this one is checked and copied. With `scanned` set, a floating-point weight is
  // checked for NaN/Inf in the staging buffer as it passes (first_non_finite, model/weights_finite.h): kFormat
  // naming the file, `name` and the element, as check_weights_finite does; *scanned says whether it was checked (its
  // elements must start on element boundaries in the file, as safetensors writes them).
  Result<Tensor> load(const FileExtent& extent, const Shape& shape, DType dtype, const std::string& name = "",
                      bool* scanned = nullptr);
  // Waits until every copy issued so far has reached the device.
  Status finish();

  uint64_t bytes() const { return bytes_; }              // weight bytes loaded
  double read_seconds() const { return read_seconds_; }  // seconds waiting for reads

 private:
  struct Slot {
    Tensor staging;  // kAlignment-aligned view of chunk_bytes_ page-locked bytes
    std::shared_ptr<Backend::Fence> copied;
  };
  Status ensure_slots();
  Backend& backend_;
  uint64_t chunk_bytes_;
  std::map<std::string, int> fds_;  // path -> O_DIRECT descriptor, -1 when refused
  Slot slots_[2];
  uint64_t bytes_ = 0;
  double read_seconds_ = 0.0;
};

}  // namespace vortex
