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

}  // namespace vortex
