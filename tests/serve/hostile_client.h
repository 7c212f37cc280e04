// Raw-socket clients for the hostile-client tests (http_server_test.cpp, hostile_test.cpp): they send
// exactly the bytes given (malformed heads, slow drips, floods, clients that never read), which a
// well-behaved HTTP client library cannot. Loopback only; every wait is bounded.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

namespace vortex_serve_test {

// A connected TCP socket to 127.0.0.1:port (blocking), or -1.
inline int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{10, 0};  // no send blocks for longer (a server that stopped reading)
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the peer closes or `timeout_s` passes; what arrived.
inline std::string read_until_close(int fd, double timeout_s) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends `bytes` on a fresh connection and returns everything answered until the close (or timeout).
inline std::string raw_exchange(int port, const std::string& bytes, double timeout_s = 5.0) {
  const int fd = connect_loopback(port);
  if (fd < 0) return "";
  send_all(fd, bytes);
  std::string r = read_until_close(fd, timeout_s);
  ::close(fd);
  return r;
}

// The status code of the first response in `r` (0 if none).
inline int status_of(const std::string& r) {
  if (r.size() < 12 || r.compare(0, 9, "HTTP/1.1 ") != 0) return 0;
  return std::atoi(r.substr(9, 3).c_str());
}

// The body of a single Content-Length response (everything after the head).
inline std::string body_of(const std::string& r) {
  const size_t at = r.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : r.substr(at + 4);
}

// Sends one GET on a fresh connection and waits for the whole response; its latency in seconds (or -1).
inline double timed_get(int port, const std::string& path, int* status = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string r =
      raw_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 5.0);
  if (status) *status = status_of(r);
  if (r.empty()) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// This process's resident set size in bytes.
inline uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, rss = 0;
  f >> size >> rss;
  return rss * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace vortex_serve_test
