#include "io/direct_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace vortex {

int64_t pread_full(int fd, void* dst, uint64_t bytes, uint64_t offset) {
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, static_cast<char*>(dst) + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -static_cast<int64_t>(errno);
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  return static_cast<int64_t>(done);
}

DirectFileReader::DirectFileReader(std::map<std::string, FileExtent> extents) : extents_(std::move(extents)) {}

DirectFileReader::~DirectFileReader() {
  for (auto& [path, f] : files_)
    if (f.fd >= 0) ::close(f.fd);
  std::free(bounce_);
}

Result<DirectFileReader::OpenFile*> DirectFileReader::open_file(const std::string& path) {
  if (auto it = files_.find(path); it != files_.end()) return &it->second;
  OpenFile f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  f.direct = f.fd >= 0;
  if (f.fd < 0 && errno == EINVAL) f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // no O_DIRECT here (tmpfs)
  if (f.fd < 0) return io_error(path + ": cannot open for streaming (" + std::strerror(errno) + ")");
  if (!f.direct) all_direct_ = false;
  return &files_.emplace(path, f).first->second;
}

Status DirectFileReader::read(const std::string& name, Tensor& dst) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = extents_.find(name);
  if (it == extents_.end()) return not_found("streaming from disk: no file holds weight '" + name + "'");
  const FileExtent& e = it->second;
  if (dst.device() != Device::kCpu || !dst.is_contiguous() || dst.nbytes() != e.bytes)
    return invalid_argument("streaming from disk: " + name + " (" + std::to_string(e.bytes) + " bytes in " + e.path +
                            ") into " + dst.describe());
  VORTEX_ASSIGN_OR_RETURN(OpenFile * f, open_file(e.path));
  const auto t0 = std::chrono::steady_clock::now();
  char* out = static_cast<char*>(dst.raw_data());
  auto short_read = [&](int64_t got, uint64_t at) {
    return io_error(
        e.path + ": reading " + name + " at byte " + std::to_string(at) + " failed (" +
        (got < 0 ? std::string(std::strerror(static_cast<int>(-got))) : std::string("the file ends early")) +
        "); is the checkpoint complete and still in place?");
  };
  if (!f->direct) {
    const int64_t got = pread_full(f->fd, out, e.bytes, e.offset);
    if (got != static_cast<int64_t>(e.bytes)) return short_read(got, e.offset);
    (void)::posix_fadvise(f->fd, static_cast<off_t>(e.offset), static_cast<off_t>(e.bytes), POSIX_FADV_DONTNEED);
  } else {
    if (bounce_ == nullptr && ::posix_memalign(&bounce_, kAlignment, kChunkBytes) != 0) {
      bounce_ = nullptr;
      return Status(ErrorCode::kOutOfMemory, "streaming from disk: cannot allocate the " +
                                                 std::to_string(kChunkBytes >> 20) + " MiB read buffer");
    }
    // Aligned chunks covering [offset, offset + bytes); each chunk's part inside the range goes to `out`.
    const uint64_t end = e.offset + e.bytes;
    uint64_t pos = e.offset & ~(kAlignment - 1);
    while (pos < end) {
      const uint64_t want = std::min<uint64_t>(kChunkBytes, (end - pos + kAlignment - 1) & ~(kAlignment - 1));
      const int64_t got = pread_full(f->fd, bounce_, want, pos);
      if (got < 0) return short_read(got, pos);
      const uint64_t from = std::max(pos, e.offset), to = std::min(end, pos + static_cast<uint64_t>(got));
      if (to <= from) return short_read(got, pos);
      std::memcpy(out + (from - e.offset), static_cast<const char*>(bounce_) + (from - pos), to - from);
      if (to < std::min(end, pos + want)) return short_read(got, pos);  // the file ended inside the range
      pos += want;
    }
  }
  bytes_read_ += e.bytes;
  read_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

uint64_t DirectFileReader::bytes_read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_read_;
}

double DirectFileReader::read_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return read_seconds_;
}

bool DirectFileReader::all_direct() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_direct_;
}

}  // namespace vortex
