// The HTTP/1.1 server under `vortex serve`: POSIX sockets, one I/O thread polling every connection
// without blocking, and a small pool of handler threads that only ever see complete requests. Reading,
// writing, Server-Sent Event streams and slow peers stay on the I/O thread, so no client can hold a
// handler thread. Bounded everywhere: head size and deadlines (http_parser.h), a body limit per route
// checked before the body is read, a cap on connections and on body bytes in flight, a write deadline.
// Listens with a backlog of 1024 and without SO_REUSEPORT. Tested in tests/serve/http_server_test.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/http_parser.h"
#include "vortex/status.h"

namespace vortex::serve::http {

// The bytes of an open-ended response (text/event-stream), pulled by the I/O thread whenever the
// connection can take more; it must never block.
class StreamSource {
 public:
  virtual ~StreamSource() = default;
  // Appends what is ready to `out` (possibly nothing). Returns false once the stream is over, after
  // appending its last bytes.
  virtual bool poll(std::string& out) = 0;
};

// A file sent as a body, read as the socket drains (the descriptor is owned and closed here).
struct FileBody {
  int fd = -1;
  uint64_t size = 0;
  FileBody(int f, uint64_t s) : fd(f), size(s) {}
  FileBody(const FileBody&) = delete;
  FileBody& operator=(const FileBody&) = delete;
  ~FileBody();
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "application/json";
  std::string body;
  std::shared_ptr<FileBody> file;        // set: the body is this file
  std::shared_ptr<StreamSource> stream;  // set: a chunked stream, the connection closes at its end
  bool close = false;                    // close the connection after this response

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  void set_content(std::string bytes, std::string type) {
    body = std::move(bytes);
    content_type = std::move(type);
  }
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  int backlog = 1024;
  int max_connections = 512;  // beyond: a 503 and close at accept
  int handler_threads = 8;
  int max_pending = 256;  // complete requests waiting for a handler thread; beyond: 503
  HeadLimits head;
  std::chrono::milliseconds idle_timeout{15000};   // no byte of a next request (keep-alive)
  std::chrono::milliseconds head_timeout{10000};   // a request's first byte to the end of its head
  std::chrono::milliseconds body_timeout{60000};   // the end of the head to the end of the body
  std::chrono::milliseconds write_timeout{30000};  // pending response bytes with no progress
  uint64_t max_body_in_flight = 256ull << 20;      // bodies being received and handled, all together
  // Kernel send buffer per connection (bounds what a client that stops reading pins in the kernel, and
  // how soon the write deadline sees it stall); 0: the kernel's autotuning (up to a few MiB).
  int send_buffer_bytes = 512 << 10;
  // The largest body the route of a request (its head) accepts: a larger Content-Length is answered
  // 413 before any of the body is read.
  std::function<uint64_t(const Request&)> body_limit;
  // Answers a complete request on a handler thread. Whatever it throws becomes a 500.
  std::function<void(Request&, Response&)> handler;
  // The body of an error decided here (parse errors, limits, overload); status, fixed message, request id.
  std::function<std::string(int, const std::string&, const std::string&)> error_body;
  std::function<void(const std::string&)> log;
};

class HttpServer {
 public:
  // Binds, listens and starts the I/O and handler threads.
  static Result<std::unique_ptr<HttpServer>> start(ServerOptions options);
  ~HttpServer();  // stop()

  int port() const;
  // Streams may have something new: poll them now rather than at the next tick.
  void wake();
  // Stops reading requests, gives pending responses and ending streams up to `flush` to go out, then
  // closes every connection and the listener and joins every thread. Idempotent.
  void stop(std::chrono::milliseconds flush = std::chrono::milliseconds(1000));

  struct Stats {
    size_t connections = 0;
    size_t streams = 0;
    uint64_t accepted = 0;
    uint64_t refused_over_cap = 0;
    uint64_t timed_out = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The reason phrase of a status code ("Not Found").
const char* reason_phrase(int status);

}  // namespace vortex::serve::http
