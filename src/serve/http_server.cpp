// The HTTP/1.1 server (see http_server.h). The I/O thread owns every connection: it polls them, reads
// heads and bodies within their limits and deadlines, hands complete requests to the handler pool, and
// writes responses, files and streams as each socket drains. Requests on one connection are answered in
// order: the next pipelined request is parsed only once the previous response has been written.
#include "serve/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace vortex::serve::http {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kReadChunk = 16384;
constexpr size_t kStreamHighWater = 65536;  // pending stream bytes above which the source is not polled
constexpr size_t kFileChunk = 65536;
constexpr uint64_t kLingerBytes = 128ull << 20;
constexpr auto kLingerTime = std::chrono::seconds(2);

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string hex(size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%zx", n);
  return buf;
}

}  // namespace

FileBody::~FileBody() {
  if (fd >= 0) ::close(fd);
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 421:
      return "Misdirected Request";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

struct HttpServer::Impl {
  // kLinger: the last response is out and our side shut down; what the peer still sends (the rest of a
  // refused body) is read and dropped for a moment, so it sees the response rather than a reset.
  enum class Phase { kHead, kBody, kHandling, kWriting, kStreaming, kLinger };
  struct Conn {
    int fd = -1;
    Phase phase = Phase::kHead;
    std::string in;  // received and not consumed
    HeadScanner scanner;
    Request req;
    uint64_t body_need = 0;
    uint64_t reserved = 0;   // body bytes counted against max_body_in_flight
    uint64_t discarded = 0;  // kLinger
    std::string out;
    size_t out_off = 0;
    std::shared_ptr<FileBody> file;
    uint64_t file_off = 0;
    std::shared_ptr<StreamSource> stream;
    bool stream_over = false;
    bool close_after = false;
    Clock::time_point deadline;       // of the current read phase
    Clock::time_point last_progress;  // of writing
    explicit Conn(const HeadLimits& l) : scanner(l) {}
    bool pending_out() const { return out_off < out.size() || (file && file_off < file->size); }
  };
  struct Task {
    uint64_t conn;
    Request req;
  };
  struct Done {
    uint64_t conn;
    Response res;
  };

  ServerOptions opt;
  int listen_fd = -1, wake_fd = -1, bound_port = 0;
  std::thread io;
  std::vector<std::thread> handlers;
  std::map<uint64_t, Conn> conns;  // I/O thread only
  uint64_t next_conn = 1;
  uint64_t body_in_flight = 0;  // I/O thread only
  std::mt19937_64 rng{std::random_device{}()};

  std::mutex mu;  // tasks, done, flags
  std::condition_variable task_cv;
  std::deque<Task> tasks;
  std::deque<Done> done;
  bool stop_handlers = false;
  std::atomic<bool> stopping{false};
  Clock::time_point stop_deadline;
  std::atomic<bool> stopped{false};
  mutable std::mutex stats_mu;
  Stats stats;

  void log(const std::string& line) const {
    if (opt.log) opt.log(line);
  }

  std::string new_request_id() {
    static const char* digits = "0123456789abcdef";
    std::string id = "req_";
    uint64_t v = rng();
    for (int i = 0; i < 16; ++i) id += digits[(v >> (4 * i)) & 15];
    return id;
  }

  // ---- responses ----
  void queue_response(Conn& c, Response&& res) {
    std::string h = "HTTP/1.1 " + std::to_string(res.status) + " " + reason_phrase(res.status) + "\r\n";
    const bool close = res.close || c.close_after || !c.req.keep_alive || stopping.load() || res.stream;
    c.close_after = close;
    if (res.stream) {
      h += "Content-Type: " + res.content_type + "\r\nTransfer-Encoding: chunked\r\n";
    } else {
      const uint64_t length = res.file ? res.file->size : res.body.size();
      h += "Content-Type: " + res.content_type + "\r\nContent-Length: " + std::to_string(length) + "\r\n";
    }
    for (const auto& [k, v] : res.headers) h += k + ": " + v + "\r\n";
    if (!c.req.id.empty()) h += "X-Request-Id: " + c.req.id + "\r\n";
    h += close ? "Connection: close\r\n\r\n" : "\r\n";
    c.out.erase(0, c.out_off);
    c.out_off = 0;
    c.out += h;
    const bool head = c.req.method == "HEAD";  // the length of the body a GET would get, and no body
    if (!res.stream && !res.file && !head) c.out += res.body;
    if (head) res.file.reset();
    c.file = std::move(res.file);
    c.file_off = 0;
    c.stream = std::move(res.stream);
    c.stream_over = false;
    c.phase = c.stream ? Phase::kStreaming : Phase::kWriting;
    c.last_progress = Clock::now();
  }

  void queue_error(Conn& c, int status, const std::string& message, bool close) {
    Response r;
    r.status = status;
    r.body = opt.error_body ? opt.error_body(status, message, c.req.id) : message;
    r.close = close;
    if (status == 503) r.set_header("Retry-After", "1");
    queue_response(c, std::move(r));
  }

  // Output to send; the write deadline counts from now when nothing was pending.
  static void append_out(Conn& c, const std::string& bytes) {
    if (!c.pending_out()) c.last_progress = Clock::now();
    c.out += bytes;
  }

  void release_body(Conn& c) {
    body_in_flight -= c.reserved;
    c.reserved = 0;
  }

  // ---- requests ----
  // Parses whatever `c.in` holds for the current phase; may dispatch a request or queue an error.
  void process_input(uint64_t id, Conn& c) {
    if (c.phase == Phase::kHead) {
      if (c.in.empty()) return;
      const HeadScanner::Result r = c.scanner.scan(c.in);
      if (r == HeadScanner::Result::kNeedMore) return;
      if (r == HeadScanner::Result::kError) {
        c.req = Request();
        c.req.id = new_request_id();
        return queue_error(c, c.scanner.error().status, c.scanner.error().message, true);
      }
      const size_t head_len = c.scanner.head_length();
      c.req = Request();
      c.req.id = new_request_id();
      std::optional<HeadError> e = parse_head(std::string_view(c.in).substr(0, head_len), opt.head, c.req);
      c.in.erase(0, head_len);
      c.scanner.reset();
      if (e) return queue_error(c, e->status, e->message, true);
      const uint64_t length = c.req.content_length.value_or(0);
      const uint64_t limit = opt.body_limit ? opt.body_limit(c.req) : 0;
      if (length > limit) {
        return queue_error(
            c, 413,
            "the body is " + std::to_string(length) + " bytes; this route accepts at most " + std::to_string(limit),
            true);
      }
      if (length > 0 && body_in_flight + length > opt.max_body_in_flight) {
        return queue_error(c, 503, "too many request bodies in flight; retry shortly", true);
      }
      c.reserved = length;
      body_in_flight += length;
      c.body_need = length;
      c.phase = Phase::kBody;
      c.deadline = Clock::now() + opt.body_timeout;
      if (c.req.expect_continue && length > 0 && c.in.empty()) append_out(c, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    if (c.phase == Phase::kBody) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(c.body_need - c.req.body.size(), c.in.size()));
      if (c.req.body.empty() && take > 0) c.req.body.reserve(std::min<uint64_t>(c.body_need, 1u << 20));
      c.req.body.append(c.in, 0, take);
      c.in.erase(0, take);
      if (c.req.body.size() < c.body_need) return;
      dispatch(id, c);
    }
  }

  void dispatch(uint64_t id, Conn& c) {
    c.phase = Phase::kHandling;
    std::unique_lock<std::mutex> lock(mu);
    if (static_cast<int>(tasks.size()) >= opt.max_pending) {
      lock.unlock();
      release_body(c);
      c.req.body.clear();
      return queue_error(c, 503, "the server is busy; retry shortly", true);
    }
    std::string body = std::move(c.req.body);
    c.req.body.clear();
    Request task = c.req;  // the connection keeps the head (id, keep-alive) for the response
    task.body = std::move(body);
    tasks.push_back(Task{id, std::move(task)});
    task_cv.notify_one();
  }

  void handler_loop() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> lock(mu);
        task_cv.wait(lock, [&] { return stop_handlers || !tasks.empty(); });
        if (tasks.empty()) return;
        t = std::move(tasks.front());
        tasks.pop_front();
      }
      Response res;
      try {
        opt.handler(t.req, res);
      } catch (const std::exception& e) {
        log("request " + t.req.id + ": handler error: " + e.what());
        res = Response();
        res.status = 500;
        res.body = opt.error_body ? opt.error_body(500, "internal error", t.req.id) : "internal error";
      } catch (...) {
        log("request " + t.req.id + ": handler error (not a std::exception)");
        res = Response();
        res.status = 500;
        res.body = opt.error_body ? opt.error_body(500, "internal error", t.req.id) : "internal error";
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        done.push_back(Done{t.conn, std::move(res)});
      }
      wake();
    }
  }

  void wake() {
    const uint64_t one = 1;
    if (wake_fd >= 0) [[maybe_unused]]
      ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  // ---- I/O ----
  // Runs one connection's step; an exception (out of memory) closes that connection, never the server.
  template <typename F>
  bool guarded(F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      log(std::string("connection closed on an error: ") + e.what());
      return false;
    }
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a transient error (EMFILE, ECONNABORTED): try at the next tick
      if (stopping.load() || static_cast<int>(conns.size()) >= opt.max_connections) {
        std::string body =
            opt.error_body ? opt.error_body(503, "too many connections; retry shortly", "") : "too many connections";
        const std::string r =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            "Connection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        [[maybe_unused]] ssize_t n = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        std::lock_guard<std::mutex> lock(stats_mu);
        ++stats.refused_over_cap;
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Conn c(opt.head);
      c.fd = fd;
      c.deadline = Clock::now() + opt.idle_timeout;
      c.last_progress = Clock::now();
      if (opt.send_buffer_bytes > 0) {
        ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opt.send_buffer_bytes, sizeof opt.send_buffer_bytes);
      }
      conns.emplace(next_conn++, std::move(c));
      std::lock_guard<std::mutex> lock(stats_mu);
      ++stats.accepted;
    }
  }

  // Returns false when the connection is to be closed.
  bool read_some(uint64_t id, Conn& c) {
    char buf[kReadChunk];
    if (c.phase == Phase::kLinger) {
      for (;;) {
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n == 0) return false;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c.discarded += static_cast<uint64_t>(n);
        if (c.discarded > kLingerBytes) return false;
      }
    }
    for (int rounds = 0; rounds < 8 && (c.phase == Phase::kHead || c.phase == Phase::kBody); ++rounds) {
      size_t want = sizeof buf;
      if (c.phase == Phase::kBody) {
        want = static_cast<size_t>(std::min<uint64_t>(want, c.body_need - c.req.body.size()));
        if (want == 0) want = 1;
      }
      const ssize_t n = ::recv(c.fd, buf, want, 0);
      if (n == 0) return false;  // the peer closed
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      if (c.phase == Phase::kHead && c.in.empty() && c.scanner.head_length() == 0) {
        c.deadline = Clock::now() + opt.head_timeout;  // the first byte of a request starts its deadline
      }
      c.in.append(buf, static_cast<size_t>(n));
      process_input(id, c);
      if (static_cast<size_t>(n) < want) break;
    }
    return true;
  }

  // Returns false when the connection is to be closed.
  bool write_some(uint64_t id, Conn& c) {
    for (;;) {
      if (c.out_off == c.out.size() && c.file && c.file_off < c.file->size) {
        c.out.clear();
        c.out_off = 0;
        const size_t want = static_cast<size_t>(std::min<uint64_t>(kFileChunk, c.file->size - c.file_off));
        c.out.resize(want);
        const ssize_t n = ::pread(c.file->fd, c.out.data(), want, static_cast<off_t>(c.file_off));
        if (n <= 0) return false;  // the file shrank or failed: the Content-Length cannot be met
        c.out.resize(static_cast<size_t>(n));
        c.file_off += static_cast<uint64_t>(n);
      }
      if (c.out_off == c.out.size()) break;
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
        return false;
      }
      c.out_off += static_cast<size_t>(n);
      c.last_progress = Clock::now();
    }
    c.out.clear();
    c.out_off = 0;
    if (c.phase == Phase::kStreaming && !c.stream_over) return true;
    if (c.phase == Phase::kWriting || c.phase == Phase::kStreaming) {
      if (c.close_after) {
        ::shutdown(c.fd, SHUT_WR);
        c.phase = Phase::kLinger;
        c.in.clear();
        c.deadline = Clock::now() + kLingerTime;
        return true;
      }
      // Response complete: the next request (perhaps already buffered: pipelining, in order).
      c.file.reset();
      c.stream.reset();
      c.phase = Phase::kHead;
      c.req = Request();
      c.deadline = Clock::now() + (c.in.empty() ? opt.idle_timeout : opt.head_timeout);
      process_input(id, c);
    }
    return true;
  }

  void pull_streams() {
    for (auto& [id, c] : conns) {
      if (c.phase != Phase::kStreaming || c.stream_over || c.out.size() - c.out_off > kStreamHighWater) continue;
      std::string chunk;
      bool more = true;
      try {
        more = c.stream->poll(chunk);
      } catch (...) {
        more = false;
      }
      if (!chunk.empty()) append_out(c, hex(chunk.size()) + "\r\n" + chunk + "\r\n");
      if (!more) {
        append_out(c, "0\r\n\r\n");
        c.stream_over = true;
      }
    }
  }

  void take_done() {
    std::deque<Done> ready;
    {
      std::lock_guard<std::mutex> lock(mu);
      ready.swap(done);
    }
    for (Done& d : ready) {
      auto it = conns.find(d.conn);
      if (it == conns.end()) continue;  // closed meanwhile
      release_body(it->second);
      queue_response(it->second, std::move(d.res));
    }
  }

  void close_conn(std::map<uint64_t, Conn>::iterator it) {
    release_body(it->second);
    close_fd(it->second.fd);
    conns.erase(it);
  }

  void io_loop() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    for (;;) {
      const bool draining = stopping.load();
      if (draining && Clock::now() >= stop_deadline) break;
      guarded([&] {
        take_done();
        pull_streams();
        return true;
      });
      // Flush what is ready before polling (most responses fit the socket buffer at once).
      for (auto it = conns.begin(); it != conns.end();) {
        auto next_it = std::next(it);
        if (it->second.pending_out() && !guarded([&] { return write_some(it->first, it->second); })) close_conn(it);
        it = next_it;
      }
      if (draining) {
        bool busy = false;
        for (auto& [id, c] : conns) busy |= c.pending_out() || c.phase == Phase::kHandling;
        if (!busy) break;
      }
      fds.clear();
      ids.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      ids.push_back(0);
      if (!draining) {
        fds.push_back({listen_fd, POLLIN, 0});
        ids.push_back(0);
      }
      const Clock::time_point now = Clock::now();
      Clock::time_point next = now + std::chrono::milliseconds(250);
      for (auto& [id, c] : conns) {
        short ev = 0;
        if ((!draining && (c.phase == Phase::kHead || c.phase == Phase::kBody)) || c.phase == Phase::kLinger) {
          ev |= POLLIN;
          next = std::min(next, c.deadline);
        }
        if (c.pending_out()) {
          ev |= POLLOUT;
          next = std::min(next, c.last_progress + opt.write_timeout);
        }
        if (ev == 0) continue;  // handling, or a stream with nothing to send: nothing to wait for
        fds.push_back({c.fd, ev, 0});
        ids.push_back(id);
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
      const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(wait, 0, 250)));
      if (rc < 0 && errno != EINTR) {
        log("poll failed: " + std::string(std::strerror(errno)));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (fds[0].revents & POLLIN) {
        uint64_t v;
        [[maybe_unused]] ssize_t n = ::read(wake_fd, &v, sizeof v);
      }
      if (!draining && (fds[1].revents & POLLIN)) accept_all();
      const size_t first = draining ? 1 : 2;
      for (size_t i = first; i < fds.size(); ++i) {
        auto it = conns.find(ids[i]);
        if (it == conns.end()) continue;
        Conn& c = it->second;
        const short rev = fds[i].revents;
        const bool ok = guarded([&] {
          if (rev & (POLLERR | POLLNVAL)) return false;
          if ((rev & (POLLIN | POLLHUP)) &&
              (c.phase == Phase::kHead || c.phase == Phase::kBody || c.phase == Phase::kLinger) &&
              !read_some(it->first, c))
            return false;
          if ((rev & POLLOUT) && !write_some(it->first, c)) return false;
          return true;
        });
        if (!ok) close_conn(it);
      }
      expire(Clock::now());
    }
    for (auto it = conns.begin(); it != conns.end();) {
      auto next = std::next(it);
      close_conn(it);
      it = next;
    }
  }

  void expire(Clock::time_point now) {
    uint64_t expired = 0;
    for (auto it = conns.begin(); it != conns.end();) {
      Conn& c = it->second;
      const bool reading = c.phase == Phase::kHead || c.phase == Phase::kBody || c.phase == Phase::kLinger;
      const bool read_late = reading && !c.pending_out() && now >= c.deadline;
      const bool write_late = c.pending_out() && now >= c.last_progress + opt.write_timeout;
      if (read_late && c.phase == Phase::kHead && !c.in.empty()) {
        // A started request that missed its deadline is told so (best effort) before the close.
        c.req = Request();
        c.req.id = new_request_id();
        c.in.clear();
        queue_error(c, 408, "the request was not received within its deadline", true);
        c.last_progress = now - opt.write_timeout + std::chrono::seconds(1);  // one second to take it
        ++expired;
        ++it;
        continue;
      }
      if (read_late || write_late) {
        ++expired;
        auto next = std::next(it);
        close_conn(it);
        it = next;
        continue;
      }
      ++it;
    }
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.timed_out += expired;
    stats.connections = conns.size();
    size_t streams = 0;
    for (auto& [id, c] : conns) streams += c.phase == Phase::kStreaming;
    stats.streams = streams;
  }

  Status bind_and_listen() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(opt.port);
    if (int rc = ::getaddrinfo(opt.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
      return invalid_argument("cannot resolve --host " + opt.host + ": " + ::gai_strerror(rc));
    }
    std::string why = "no address";
    bool in_use = false;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      // SO_REUSEADDR lets a restart bind past TIME_WAIT; on Linux it never lets two listeners share a port.
      // SO_REUSEPORT, which would, is not set.
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, opt.backlog) != 0) {
        in_use |= errno == EADDRINUSE;
        why = std::strerror(errno);
        ::close(fd);
        continue;
      }
      listen_fd = fd;
      break;
    }
    ::freeaddrinfo(res);
    if (listen_fd < 0 && in_use) {
      return io_error("port " + port + " is in use: another process listens on " + opt.host + ":" + port +
                      "; choose another --port");
    }
    if (listen_fd < 0) {
      return io_error("cannot listen on " + opt.host + ":" + port + " (" + why +
                      "; in use, or not an address of this machine)");
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
    bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    return Status::Ok();
  }

  void stop(std::chrono::milliseconds flush) {
    if (stopped.exchange(true)) return;
    stop_deadline = Clock::now() + flush;
    stopping.store(true);
    wake();
    if (io.joinable()) io.join();
    {
      std::lock_guard<std::mutex> lock(mu);
      stop_handlers = true;
      task_cv.notify_all();
    }
    for (std::thread& t : handlers) {
      if (t.joinable()) t.join();
    }
    close_fd(listen_fd);
    close_fd(wake_fd);
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }
int HttpServer::port() const { return impl_->bound_port; }
void HttpServer::wake() { impl_->wake(); }
void HttpServer::stop(std::chrono::milliseconds flush) { impl_->stop(flush); }
HttpServer::Stats HttpServer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(ServerOptions options) {
  if (!options.handler) return invalid_argument("the HTTP server needs a handler");
  if (options.backlog < 1 || options.max_connections < 1 || options.handler_threads < 1 || options.max_pending < 1)
    return invalid_argument("the HTTP server's backlog, connection cap, threads and pending cap must be >= 1");
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(options);
  VORTEX_RETURN_IF_ERROR(impl->bind_and_listen());
  impl->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->wake_fd < 0) {
    close_fd(impl->listen_fd);
    return io_error(std::string("eventfd: ") + std::strerror(errno));
  }
  Impl* s = impl.get();
  for (int i = 0; i < s->opt.handler_threads; ++i) s->handlers.emplace_back([s] { s->handler_loop(); });
  s->io = std::thread([s] { s->io_loop(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace vortex::serve::http
