// Atomic output files (see atomic_file.h).
#include "media/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace vortex {

std::string atomic_temp_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

Status atomic_commit(const std::string& temp_path, const std::string& path) {
  const int fd = ::open(temp_path.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string err = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    std::remove(temp_path.c_str());
    return io_error("could not sync " + temp_path + ": " + err);
  }
  ::close(fd);
  if (std::rename(temp_path.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(temp_path.c_str());
    return io_error("could not rename " + temp_path + " to " + path + ": " + err);
  }
  return Status::Ok();
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = atomic_temp_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return io_error(
        "cannot write " + tmp + ": " +
        (err == ELOOP ? std::string("a symbolic link is there, which is not followed") : std::strerror(err)));
  }
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      std::remove(tmp.c_str());
      return io_error("cannot write " + tmp + ": " + err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return io_error("cannot write " + tmp + ": " + err);
  }
  return atomic_commit(tmp, path);
}

}  // namespace vortex
