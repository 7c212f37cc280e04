// Helpers for the in-process server tests (server_test.cpp, soak_test.cpp): a Server on 127.0.0.1 with
// an ephemeral port over synthetic h3-tiny weights on the CPU, a scratch data directory, an httplib
// client, and polling helpers. Loopback only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "serve/server.h"

namespace vortex_serve_test {
namespace fs = std::filesystem;
using json = nlohmann::json;

// A fresh directory under the system temp dir, removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    path_ =
        fs::temp_directory_path() / ("vortex_serve_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline vortex::serve::ServeOptions tiny_options(const fs::path& data) {
  vortex::serve::ServeOptions o;
  o.pipeline.config_name = "h3-tiny";
  o.pipeline.synthetic_weights = true;
  o.pipeline.backend = vortex::BackendKind::kCpu;
  o.pipeline.threads = 2;
  o.host = "127.0.0.1";
  o.port = 0;
  o.data_dir = data.string();
  o.limits.allow_fault_injection = true;
  return o;
}

struct TestServer {
  explicit TestServer(vortex::serve::ServeOptions o) {
    auto s = vortex::serve::Server::start(o);
    if (!s.ok()) {
      ADD_FAILURE() << s.status().to_string();
      return;
    }
    server = std::move(*s);
  }
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    c->set_read_timeout(30, 0);
    c->set_connection_timeout(5, 0);
    return c;
  }
  std::unique_ptr<vortex::serve::Server> server;
};

inline json body_json(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

// A small job: 64x64, 5 frames, `steps` steps.
inline std::string small_job(int steps = 2, uint64_t seed = 1) {
  return json{{"prompt", "a lighthouse at dusk"},
              {"width", 64},
              {"height", 64},
              {"frames", 5},
              {"steps", steps},
              {"seed", seed}}
      .dump();
}

// Polls GET /v1/videos/{id} until `pred(status)` or the timeout; returns the last status.
template <typename Pred>
json wait_for(httplib::Client& c, const std::string& id, Pred pred, double timeout_s = 60.0) {
  const auto t0 = std::chrono::steady_clock::now();
  json j;
  for (;;) {
    auto r = c.Get("/v1/videos/" + id);
    if (r && r->status == 200) j = json::parse(r->body, nullptr, false);
    if (!j.is_discarded() && j.is_object() && pred(j)) return j;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline bool is_terminal(const json& j) {
  const std::string s = j.value("status", "");
  return s == "succeeded" || s == "failed" || s == "cancelled";
}

// A file's bytes, for data URLs in request bodies.
inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Standard base64 with padding (RFC 4648), as a data URL carries it.
inline std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<uint8_t>(in[i + 2]);
    out += k[(n >> 18) & 63];
    out += k[(n >> 12) & 63];
    out += i + 1 < in.size() ? k[(n >> 6) & 63] : '=';
    out += i + 2 < in.size() ? k[n & 63] : '=';
  }
  return out;
}

}  // namespace vortex_serve_test
