// The routes of `vortex serve` (server_impl.h) but POST /v1/videos (admission.cpp) and /metrics
// (metrics.cpp): routing with the Host/Origin and bearer checks, per-route body limits, the job routes
// (status, list, cancel, content opened with O_NOFOLLOW, SSE events) and /health. Error bodies are redacted
// (no absolute paths); server-side failures are logged with the request id and answered with the id only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "serve/server_impl.h"

namespace vortex::serve {
namespace {

// The host part of a Host or Origin authority ("[::1]:8000" -> "::1", "Example.com:80" -> "example.com").
std::string authority_host(std::string_view a) {
  std::string h;
  if (!a.empty() && a.front() == '[') {
    h = std::string(a.substr(1, a.find(']') == std::string_view::npos ? 0 : a.find(']') - 1));
  } else {
    h = std::string(a.substr(0, a.rfind(':') == std::string_view::npos ? a.size() : a.rfind(':')));
  }
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h;
}

bool valid_id_chars(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

void method_not_allowed(http::Response& res, const char* allow) {
  res.set_header("Allow", allow);
  set_error(res, 405, "", "method not allowed on this route", "invalid_request");
}

}  // namespace

void Server::Impl::handle(http::Request& req, http::Response& res) {
  route(req, res);
  if (res.status >= 400 && !res.stream && !res.file) res.body = redact(std::move(res.body));
}

void Server::Impl::route(http::Request& req, http::Response& res) {
  if (std::optional<std::string> why = misdirected(req)) return set_error(res, 403, "", *why, "forbidden");
  if (req.path != "/health" && !authorized(req)) {
    res.set_header("WWW-Authenticate", "Bearer");
    return set_error(res, 401, "", "missing or wrong bearer token (Authorization: Bearer <key>)", "unauthorized");
  }
  const std::string& m = req.method;
  if (req.path == "/v1/videos") {
    if (m == "GET") return handle_list(req, res);
    if (m != "POST") return method_not_allowed(res, "GET, POST");
    const std::string* type = req.header("content-type");
    const std::string media = type ? http::media_type(*type) : std::string();
    if (media != "application/json" && media != "multipart/form-data") {
      return set_error(res, 415, "", "POST /v1/videos takes application/json (or multipart/form-data with an upload)",
                       "unsupported_media_type");
    }
    return handle_create(req, res);
  }
  if (req.path == "/health") return m == "GET" ? handle_health(req, res) : method_not_allowed(res, "GET");
  if (req.path == "/metrics") return m == "GET" ? handle_metrics(req, res) : method_not_allowed(res, "GET");
  static const std::string kPrefix = "/v1/videos/";
  if (req.path.rfind(kPrefix, 0) == 0) {
    const std::string rest = req.path.substr(kPrefix.size());
    const size_t slash = rest.find('/');
    const std::string id = rest.substr(0, slash);
    const std::string sub = slash == std::string::npos ? std::string() : rest.substr(slash);
    if (valid_id_chars(id)) {
      req.matches = {req.path, id};
      if (sub.empty()) {
        if (m == "GET") return handle_get(req, res);
        if (m == "DELETE") return handle_delete(req, res);
        return method_not_allowed(res, "GET, DELETE");
      }
      if (sub == "/content") return m == "GET" ? handle_content(req, res) : method_not_allowed(res, "GET");
      if (sub == "/events") return m == "GET" ? handle_events(req, res) : method_not_allowed(res, "GET");
    }
  }
  set_error(res, 404, "", "no route for this method and path", "not_found");
}

http::ServerOptions Server::Impl::http_options() {
  http::ServerOptions h;
  h.host = opt.host;
  h.port = opt.port;
  h.handler_threads = std::max(2, opt.http_threads);
  h.max_connections = opt.max_connections;
  h.body_limit = [this](const http::Request& r) { return body_limit(r); };
  h.handler = [this](http::Request& q, http::Response& r) { handle(q, r); };
  h.error_body = [](int status, const std::string& message, const std::string& request_id) {
    const char* type = status == 413 || status == 431 || status == 414 ? "too_large"
                       : status == 503                                 ? "unavailable"
                       : status == 408                                 ? "timeout"
                                                                       : "invalid_request";
    return error_body("", message, type, request_id);
  };
  h.log = [this](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    log(line);
  };
  return h;
}

bool Server::Impl::authorized(const http::Request& req) const {
  if (opt.api_key.empty()) return true;
  // The header's raw bytes (never decoded); a repeated Authorization header counts as absent.
  const std::string* h = req.header("authorization");
  const std::string prefix = "Bearer ";
  const std::string token = h && h->rfind(prefix, 0) == 0 ? h->substr(prefix.size()) : std::string();
  return constant_time_equals(token, opt.api_key);
}

// The largest body each route reads (checked against Content-Length before any of it is read).
uint64_t Server::Impl::body_limit(const http::Request& req) const {
  if (req.method != "POST" || req.path != "/v1/videos") return 0;
  const std::string* type = req.header("content-type");
  if (type && http::media_type(*type) == "multipart/form-data") {
    return opt.max_upload_bytes + opt.limits.max_body_bytes + (64u << 10);  // + part heads
  }
  return opt.limits.max_body_bytes;
}

bool Server::Impl::host_allowed(const std::string& host) const {
  for (const std::string& a : allowed_hosts) {
    if (a == "*" || a == host) return true;
  }
  return false;
}

// Host (DNS rebinding) and Origin (cross-site forms): refused unless one of --allowed-hosts.
std::optional<std::string> Server::Impl::misdirected(const http::Request& req) const {
  const std::string* host = req.header("host");
  if (host && !host_allowed(authority_host(*host))) return "the Host header names a host this server does not serve";
  if (const std::string* origin = req.header("origin")) {
    const size_t scheme = origin->find("://");
    if (scheme == std::string::npos || !host_allowed(authority_host(origin->substr(scheme + 3)))) {
      return "cross-origin requests are refused (the Origin is not one of --allowed-hosts)";
    }
  }
  return std::nullopt;
}

void Server::Impl::no_job(http::Response& res, const std::string& id) {
  set_error(res, 404, "id", "no job '" + id + "' (finished jobs are kept up to the retention limit)", "not_found");
}

void Server::Impl::handle_get(const http::Request& req, http::Response& res) {
  const std::string id = req.matches[1];
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<Job> j = find(id);
  if (!j) return no_job(res, id);
  res.set_content(dump(job_json(*j)), "application/json");
}

void Server::Impl::handle_list(const http::Request&, http::Response& res) {
  std::lock_guard<std::mutex> lock(mu);
  json data = json::array();
  for (const std::string& id : order) data.push_back(job_json(*jobs.at(id)));
  res.set_content(dump(json{{"object", "list"}, {"data", data}}), "application/json");
}

void Server::Impl::handle_delete(const http::Request& req, http::Response& res) {
  const std::string id = req.matches[1];
  std::unique_lock<std::mutex> lock(mu);
  std::shared_ptr<Job> j = find(id);
  if (!j) return no_job(res, id);
  if (terminal(j->state)) {
    return set_error(res, 409, "id", "job " + id + " has already " + std::string(state_name(j->state)), "conflict");
  }
  if (!j->cancel_requested) {
    request_cancel(*j);
    if (j->state == JobState::kQueued) {
      queue.erase(std::remove(queue.begin(), queue.end(), id), queue.end());
      finish(*j, JobState::kCancelled);
    } else {
      touch(*j);
    }
  }
  res.status = 202;
  res.set_content(dump(job_json(*j)), "application/json");
}

void Server::Impl::handle_content(const http::Request& req, http::Response& res) {
  const std::string id = req.matches[1];
  fs::path out;
  bool media = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<Job> j = find(id);
    if (!j) return no_job(res, id);
    if (j->state != JobState::kSucceeded) {
      return set_error(res, 409, "id",
                       "job " + id + " is " + state_name(j->state) + "; its content exists once it has succeeded",
                       "conflict");
    }
    out = j->dir / "output";
    media = std::find(j->files.begin(), j->files.end(), "video.mp4") != j->files.end();
  }
  // The MP4 by default when the job was decoded, else the video latents.
  const std::optional<std::string> param = req.param("variant");
  const std::string variant = param ? *param : media ? "video" : "video_latents";
  static const std::map<std::string, std::pair<const char*, const char*>> kFiles = {
      {"video", {"video.mp4", "video/mp4"}},
      {"audio", {"audio.wav", "audio/wav"}},
      {"video_latents", {"video_latents.safetensors", "application/octet-stream"}},
      {"audio_latents", {"audio_latents.safetensors", "application/octet-stream"}},
      {"preview", {"preview.png", "image/png"}},
      {"run_json", {"run.json", "application/json"}}};
  auto it = kFiles.find(variant);
  if (it == kFiles.end()) {
    return set_error(res, 400, "variant",
                     "variant must be video, audio, video_latents, audio_latents, preview or run_json",
                     "invalid_request");
  }
  if ((variant == "video" || variant == "audio") && !media) {
    return set_error(res, 404, "variant",
                     "job " + id +
                         " was not decoded (the server has no decoders, or the request "
                         "set \"media\": false); its content is the latents: variant=video_latents",
                     "not_found");
  }
  std::shared_ptr<http::FileBody> file = open_output(id, it->second.first);
  if (!file) return set_error(res, 404, "id", "job " + id + "'s outputs were removed", "not_found");
  const bool latents = variant == "video_latents" || variant == "audio_latents";
  res.set_header("X-Vortex-Content-Kind", latents ? "latents" : variant);
  res.set_header("Content-Disposition", std::string("attachment; filename=\"") + id + "_" + it->second.first + "\"");
  res.content_type = it->second.second;
  res.file = std::move(file);
}

// <jobs>/<id>/output/<name>, opened without following a symbolic link at any of the three levels
// (O_NOFOLLOW) and only when it is a regular file; nullptr otherwise.
std::shared_ptr<http::FileBody> Server::Impl::open_output(const std::string& id, const char* name) const {
  int base = ::open(jobs_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (base < 0) return nullptr;
  int job = ::openat(base, id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(base);
  if (job < 0) return nullptr;
  int out = ::openat(job, "output", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(job);
  if (out < 0) return nullptr;
  const int fd = ::openat(out, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  ::close(out);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return nullptr;
  }
  return std::make_shared<http::FileBody>(fd, static_cast<uint64_t>(st.st_size));
}

// A job's Server-Sent Events, pulled by the HTTP I/O thread (never blocks: the job table's lock only).
// `progress` on every change, `done` with the final state at the end, or with the state at the time
// the server ends the streams (shutdown); a comment line every 15 s keeps idle proxies open.
class Server::Impl::JobEvents : public http::StreamSource {
 public:
  JobEvents(Impl& s, std::shared_ptr<Job> job) : s_(s), job_(std::move(job)) {}
  bool poll(std::string& out) override {
    std::lock_guard<std::mutex> lock(s_.mu);
    const bool end = terminal(job_->state) || s_.streams_ended;
    if (job_->version != last_ || end) {
      last_ = job_->version;
      out += std::string("event: ") + (end ? "done" : "progress") + "\ndata: " + dump(job_json(*job_)) + "\n\n";
      last_sent_ = Clock::now();
      return !end;
    }
    if (Clock::now() - last_sent_ > std::chrono::seconds(15)) {
      out += ": keep-alive\n\n";
      last_sent_ = Clock::now();
    }
    return true;
  }

 private:
  Impl& s_;
  std::shared_ptr<Job> job_;
  uint64_t last_ = ~0ull;
  Clock::time_point last_sent_ = Clock::now();
};

void Server::Impl::handle_events(const http::Request& req, http::Response& res) {
  const std::string id = req.matches[1];
  std::shared_ptr<Job> job;
  {
    std::lock_guard<std::mutex> lock(mu);
    job = find(id);
  }
  if (!job) return no_job(res, id);
  res.set_header("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.stream = std::make_shared<JobEvents>(*this, std::move(job));
}

// Whether a file can be created in <data>/jobs (a probe written and removed, at most once a second).
bool Server::Impl::data_writable() {
  std::lock_guard<std::mutex> lock(probe_mu);
  if (Clock::now() - probe_time < std::chrono::seconds(1)) return probe_ok;
  const fs::path probe = jobs_dir / ".vortex-health-probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  probe_ok = fd >= 0 && ::write(fd, "ok", 2) == 2;
  if (fd >= 0) {
    probe_ok = (::close(fd) == 0) && probe_ok;
    ::unlink(probe.c_str());
  }
  probe_time = Clock::now();
  return probe_ok;
}

// Without credentials (when a key is set): the status, the data folder and the worker only. 503 when
// stopping, when the world failed or when the data folder cannot be written (every job would fail).
void Server::Impl::handle_health(const http::Request& req, http::Response& res) {
  const bool data_ok = data_writable();
  std::lock_guard<std::mutex> lock(mu);
  const bool down = stopping || !world_error.empty() || !data_ok;
  const char* worker_state = !world_error.empty() ? "failed" : stop_worker ? "stopping" : running ? "running" : "idle";
  json h = {{"status", !world_error.empty() ? "failed"
                       : stopping           ? "stopping"
                       : !data_ok           ? "degraded"
                                            : "ok"},
            {"data_dir", data_ok ? "writable" : "not writable"},
            {"worker", worker_state}};
  if (authorized(req)) {
    h["model"] = cfg.name;
    h["backend"] = backend_kind_name(opt.pipeline.backend);
    h["precision"] = precision_name(exec.precision);
    h["attention"] = attention_name(exec.attention);
    h["queue_length"] = queue.size();
    h["running"] = running ? json(running->id) : json(nullptr);
    h["content_kind"] = decoders ? "video" : "latents";
    h["world_size"] = world_size;
    h["world_error"] = world_error.empty() ? json(nullptr) : json(world_error);
  }
  res.status = down ? 503 : 200;
  res.set_content(dump(h), "application/json");
}

// `message` without absolute paths, for clients: one under --data becomes "<data>/...", one under
// --lora-dir "<lora-dir>/...", any other "<path>/NAME" (its last component). API routes are kept.
std::string Server::Impl::redact(const std::string& message) const {
  std::error_code ec;
  const std::string lora =
      opt.pipeline.lora_dir.empty() ? "" : fs::absolute(opt.pipeline.lora_dir, ec).lexically_normal().string();
  return redact_paths(message, {{data_dir.string(), "<data>"}, {lora, "<lora-dir>"}});
}

// A server-side failure: logged in full with the request id; the client gets the id only.
void Server::Impl::internal_failure(const http::Request& req, http::Response& res, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mu);
    log("request " + req.id + ": " + what);
  }
  set_error(res, 500, "", "the server could not complete this request (request " + req.id + "; see its log)", "io");
}

}  // namespace vortex::serve
