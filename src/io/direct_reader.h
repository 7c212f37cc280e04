// Direct reads of weights from safetensors files (docs/memory.md "Streaming from disk"): DirectFileReader maps a
// weight's name to its byte range in a file and reads it with O_DIRECT through an aligned bounce buffer, so the
// bytes bypass the page cache and host memory holds only the caller's destination. Filesystems that refuse O_DIRECT
// (tmpfs) are read with buffered reads and their pages dropped from the cache after each read
// (POSIX_FADV_DONTNEED). Tested in tests/io/disk_stream_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "model/h3_model.h"
#include "vortex/status.h"

namespace vortex {

// pread until `bytes` are read or the file ends; the bytes read, or -errno.
int64_t pread_full(int fd, void* dst, uint64_t bytes, uint64_t offset);

// A weight's bytes in a file: [offset, offset + bytes) of `path`.
struct FileExtent {
  std::string path;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

class DirectFileReader final : public WeightFileReader {
 public:
  explicit DirectFileReader(std::map<std::string, FileExtent> extents);
  ~DirectFileReader() override;
  DirectFileReader(const DirectFileReader&) = delete;
  DirectFileReader& operator=(const DirectFileReader&) = delete;

  // Reads weight `name` into `dst` (host, contiguous, exactly the extent's bytes). kNotFound for an unknown name,
  // kIoError (naming the file) for a failed or short read. Calls are serialised.
  Status read(const std::string& name, Tensor& dst) override;

  const std::map<std::string, FileExtent>& extents() const { return extents_; }
  uint64_t bytes_read() const;
  double read_seconds() const;
  // Every file read so far was opened with O_DIRECT.
  bool all_direct() const;

  // Bytes of one direct read (a multiple of kAlignment).
  static constexpr uint64_t kChunkBytes = 16ull << 20;
  static constexpr uint64_t kAlignment = 4096;

 private:
  struct OpenFile {
    int fd = -1;
    bool direct = false;
  };
  Result<OpenFile*> open_file(const std::string& path);
  std::map<std::string, FileExtent> extents_;
  std::map<std::string, OpenFile> files_;
  void* bounce_ = nullptr;  // kChunkBytes, kAlignment-aligned
  mutable std::mutex mutex_;
  uint64_t bytes_read_ = 0;
  double read_seconds_ = 0.0;
  bool all_direct_ = true;
};

}  // namespace vortex
