// No single request ends `vortex serve` (src/serve/server.cpp): invalid and cut UTF-8 in the path, the query,
// a header and the body, sent as raw bytes over a loopback socket to every route with every method, each get an
// HTTP answer whose JSON body (when it has one) is valid JSON, and the server answers /health after each.
// A second server on a port in use is refused, naming the port (httplib's default SO_REUSEPORT would let it
// bind and take half of the connections). Loopback only, an ephemeral port, bounded timeouts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include "serve_test_util.h"

namespace vortex_serve_test {
namespace {

// True once `reply` holds one whole response (headers, then Content-Length bytes of body; none for HEAD).
bool complete(const std::string& reply, bool head) {
  const size_t end = reply.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  if (head) return true;
  std::string headers = reply.substr(0, end);
  for (char& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = headers.find("\r\ncontent-length:");
  if (at == std::string::npos) return false;  // read until the server closes
  return reply.size() >= end + 4 + std::strtoull(headers.c_str() + at + 17, nullptr, 10);
}

// Sends `request` byte for byte to 127.0.0.1:port and returns the response: until it is complete, the server
// closes the connection, or 10 s pass.
std::string raw_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  const bool head = request.rfind("HEAD ", 0) == 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[4096];
    while (!complete(reply, head)) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return reply;
}

std::string request(const std::string& method, const std::string& target, const std::string& extra_headers = "",
                    const std::string& body = "") {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers;
  // A body always comes with its length (a PUT or POST without one would make the server wait for it).
  r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return r + "\r\n" + body;
}

int status_of(const std::string& reply) {
  if (reply.rfind("HTTP/1.1 ", 0) != 0 || reply.size() < 12) return -1;
  return std::atoi(reply.substr(9, 3).c_str());
}

std::string body_of(const std::string& reply) {
  const size_t at = reply.find("\r\n\r\n");
  return at == std::string::npos ? "" : reply.substr(at + 4);
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ServeHostileInput, InvalidAndCutUtf8NeverEndTheServer) {
  ScratchDir data;
  TestServer ts(tiny_options(data.path()));
  ASSERT_TRUE(ts.server);
  const int port = ts.server->port();
  auto health = [&] { return status_of(raw_exchange(port, request("GET", "/health"))); };
  ASSERT_EQ(health(), 200);

  // The reproducers first: each used to abort the process (json type_error.316 in the 404 body).
  const std::string e_acute_70 = repeat("\xc3\xa9", 70);  // valid UTF-8 that a 128-byte cut splits
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{{"GET", "/%FF"},
                                                                                       {"GET", "/" + e_acute_70},
                                                                                       {"HEAD", "/%FF"},
                                                                                       {"GET", "/v1/videos/%FF"},
                                                                                       {"GET", "/v1/%C3"}}) {
    const std::string reply = raw_exchange(port, request(method, target));
    EXPECT_EQ(status_of(reply), 404) << method << " " << target << " -> " << reply.substr(0, 200);
    if (method == "GET") {
      const json body = json::parse(body_of(reply), nullptr, false);
      ASSERT_TRUE(body.is_object()) << body_of(reply);
      EXPECT_EQ(body["error"]["type"], "not_found");
      // The path is quoted escaped, never as raw bytes.
      const std::string message = body["error"]["message"].get<std::string>();
      for (unsigned char c : message) EXPECT_LT(c, 0x80) << message;
    }
    ASSERT_EQ(health(), 200) << "the server died after " << method << " " << target;
  }

  // Every route, every method, hostile bytes in each part of the request.
  const std::vector<std::string> routes = {"/",
                                           "/health",
                                           "/metrics",
                                           "/v1/videos",
                                           "/v1/videos/video_0123",
                                           "/v1/videos/video_0123/content",
                                           "/v1/videos/video_0123/events",
                                           "/v1"};
  const std::vector<std::string> methods = {"GET", "HEAD", "POST", "DELETE", "PUT", "\xff\xfe"};
  const std::string bad = "\xff\xfe\xc3";                           // invalid, and a cut two-byte sequence at the end
  const std::string cut = repeat("\xe6\x97\xa5", 50) + "\xe6\x97";  // 150 bytes of CJK, then a cut one
  std::vector<std::string> suffixes = {
      "/%FF", "%C3", "/" + bad, "/" + cut, "?variant=%FF&x=%C3", "?variant=" + bad, "?" + cut + "=" + cut, "/%E6%97"};
  const std::vector<std::string> headers = {"", "X-Junk: " + bad + "\r\n", "Authorization: Bearer " + cut + "\r\n",
                                            bad + ": " + bad + "\r\n"};
  const std::vector<std::string> bodies = {"",
                                           "{\"prompt\": \"" + bad + "\"}",
                                           "{\"" + cut + "\": 1}",
                                           "{\"prompt\": \"" + cut,
                                           "{\"prompt\": \"a cat\", \"" + bad + "\": \"" + bad + "\"}",
                                           bad};
  int exchanges = 0, json_bodies = 0;
  for (const std::string& route : routes) {
    for (const std::string& method : methods) {
      std::vector<std::string> targets = {route};
      for (const std::string& s : suffixes) targets.push_back(route + s);
      for (size_t t = 0; t < targets.size(); ++t) {
        // Headers and bodies vary with the target so that every combination kind is sent without the product.
        const std::string& h = headers[t % headers.size()];
        const std::string& b = bodies[t % bodies.size()];
        const std::string reply = raw_exchange(port, request(method, targets[t], h, b));
        ++exchanges;
        const int status = status_of(reply);
        EXPECT_GE(status, 200) << method << " " << targets[t] << " got no HTTP answer";
        const std::string body = body_of(reply);
        if (method != "HEAD" && !body.empty() && body.front() == '{') {
          ++json_bodies;
          EXPECT_FALSE(json::parse(body, nullptr, false).is_discarded())
              << method << " " << targets[t] << ": the body is not valid JSON: " << body.substr(0, 200);
        }
      }
      ASSERT_EQ(health(), 200) << "the server died during " << method << " " << route << "...";
    }
  }
  // Multipart with a hostile part name (the 400 names the part, escaped).
  const std::string boundary = "XyZ";
  const std::string multipart = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + bad +
                                "\"\r\n\r\nvalue\r\n--" + boundary + "--\r\n";
  const std::string reply = raw_exchange(
      port,
      "POST /v1/videos HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: multipart/form-data; "
      "boundary=" +
          boundary + "\r\nContent-Length: " + std::to_string(multipart.size()) + "\r\n\r\n" + multipart);
  EXPECT_EQ(status_of(reply), 400) << reply.substr(0, 300);
  const json body = json::parse(body_of(reply), nullptr, false);
  ASSERT_TRUE(body.is_object()) << body_of(reply);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("%FF%FE%C3"), std::string::npos) << body.dump();
  EXPECT_EQ(health(), 200);
  EXPECT_GT(exchanges, 400);
  EXPECT_GT(json_bodies, 100);  // the error bodies were produced, not skipped
}

TEST(ServeHostileInput, APortInUseIsRefusedNamingIt) {
  ScratchDir data_a, data_b;
  TestServer first(tiny_options(data_a.path()));
  ASSERT_TRUE(first.server);
  vortex::serve::ServeOptions o = tiny_options(data_b.path());
  o.port = first.server->port();
  auto second = vortex::serve::Server::start(o);
  ASSERT_FALSE(second.ok()) << "a second server bound port " << o.port << ", which the first one listens on";
  EXPECT_EQ(second.status().code(), vortex::ErrorCode::kIo);
  EXPECT_NE(second.status().message().find("port " + std::to_string(o.port) + " is in use"), std::string::npos)
      << second.status().message();
  // The first server is untouched.
  auto c = first.client();
  auto r = c->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace vortex_serve_test
