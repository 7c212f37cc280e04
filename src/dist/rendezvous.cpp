// Rendezvous file (see rendezvous.h).
#include "dist/rendezvous.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace vortex {

Status publish_rendezvous(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    return invalid_argument("rendezvous file " + path + " already exists (left by another run?); pass a fresh path");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error("cannot create rendezvous file " + tmp + ": " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) return io_error("cannot write rendezvous file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return io_error("cannot publish rendezvous file " + path + ": " + why);
  }
  return Status::Ok();
}

Result<std::string> await_rendezvous(const std::string& path, size_t expected_bytes,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes.size() != expected_bytes)
        return format_error("rendezvous file " + path + " holds " + std::to_string(bytes.size()) + " bytes, expected " +
                            std::to_string(expected_bytes));
      return bytes;
    }
    if (std::chrono::steady_clock::now() > deadline)
      return Status(ErrorCode::kNccl, "rank 0 did not publish the rendezvous file " + path + " within " +
                                          std::to_string(timeout.count() / 1000.0) + " s (did it fail to start?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace vortex
