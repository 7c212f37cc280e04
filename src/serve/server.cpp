// The HTTP job server (see server.h): start (options checked, the data folder and the job store opened and
// reconciled, the pipeline loaded on the worker thread, then the listener), the drain of shutdown, and the
// helpers of server.h. Routes: POST/GET /v1/videos, GET/DELETE /v1/videos/{id}, GET /v1/videos/{id}/content,
// GET /v1/videos/{id}/events (SSE), GET /health, GET /metrics; the rest of Server::Impl (server_impl.h) is
// defined by concern in jobs.cpp, worker.cpp, admission.cpp, routes.cpp and metrics.cpp.
#include "serve/server.h"

#include <algorithm>
#include <future>

#include "serve/http_server.h"
#include "serve/job_store.h"
#include "serve/server_impl.h"

namespace vortex::serve {

void Server::Impl::shutdown(RunningJob mode) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (shut_down) return;
    shut_down = true;
    accepting = false;
    stopping = true;
    changed.notify_all();
  }
  // The drain: HTTP keeps answering (new work gets 503 + Retry-After, /health 503), the queue is
  // cancelled, the running job finishes or is cancelled; then every SSE stream sends `done` with its
  // job's final state and the listener closes.
  {
    std::lock_guard<std::mutex> lock(mu);
    while (!queue.empty()) {
      std::shared_ptr<Job> j = jobs.at(queue.front());
      queue.pop_front();
      request_cancel(*j);
      finish(*j, JobState::kCancelled);
    }
    if (running && mode == RunningJob::kCancel && !running->cancel_requested) request_cancel(*running);
    stop_worker = true;
    work.notify_all();
    watchdog_wake.notify_all();
  }
  if (worker.joinable()) worker.join();
  if (watchdog.joinable()) watchdog.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    streams_ended = true;
  }
  if (http) http->stop(std::chrono::milliseconds(1000));
}

std::string redact_paths(const std::string& message, const std::vector<std::pair<std::string, std::string>>& known) {
  auto delimiter = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\'' || c == '"' || c == ',' || c == ';' || c == ')' ||
           c == ']' || c == '(' || c == '[' || c == '=';
  };
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const bool starts = message[i] == '/' && (i == 0 || delimiter(message[i - 1]) || message[i - 1] == ':');
    if (!starts) {
      out += message[i++];
      continue;
    }
    size_t end = i;
    while (end < message.size() && !delimiter(message[end]) &&
           !(message[end] == ':' && (end + 1 == message.size() || message[end + 1] == ' ')))
      ++end;
    std::string path = message.substr(i, end - i);
    while (path.size() > 1 && (path.back() == '.' || path.back() == ':')) {
      path.pop_back();
      --end;
    }
    i = end;
    if (path.rfind("/v1/", 0) == 0 || path == "/v1" || path == "/health" || path == "/metrics" || path == "/") {
      out += path;
      continue;
    }
    bool replaced = false;
    for (const auto& [prefix, name] : known) {
      if (prefix.size() > 1 && path.rfind(prefix, 0) == 0 &&
          (path.size() == prefix.size() || path[prefix.size()] == '/')) {
        out += name + path.substr(prefix.size());
        replaced = true;
        break;
      }
    }
    if (!replaced) {
      const size_t slash = path.find_last_of('/');
      out += "<path>/" + path.substr(slash + 1);
    }
  }
  return out;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::vector<std::string> default_allowed_hosts(const ServeOptions& o) {
  if (!o.allowed_hosts.empty()) return o.allowed_hosts;
  // A wildcard bind has no one name clients use: any Host then (such a server needs a key, see start()).
  if (o.host == "0.0.0.0" || o.host == "::" || o.host.empty()) return {"*"};
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1"};
  std::string h = o.host;
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  return hosts;
}

bool constant_time_equals(const std::string& a, const std::string& b) {
  // Every byte of the longer string is visited whatever the contents.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { shutdown(RunningJob::kCancel); }
int Server::port() const { return impl_->bound_port; }
void Server::shutdown(RunningJob running) { impl_->shutdown(running); }
Status Server::world_status() const { return impl_->world_status(); }

Result<std::unique_ptr<Server>> Server::start(const ServeOptions& options) {
  if (options.data_dir.empty()) return invalid_argument("--data is required: the directory job outputs go to");
  if (options.queue_limit < 1)
    return invalid_argument("--queue must be >= 1, got " + std::to_string(options.queue_limit));
  if (options.keep_jobs < 1)
    return invalid_argument("--keep-jobs must be >= 1, got " + std::to_string(options.keep_jobs));
  if (options.port < 0 || options.port > 65535) return invalid_argument("--port must be in [0, 65535]");
  if (options.max_connections < 1)
    return invalid_argument("--max-connections must be >= 1, got " + std::to_string(options.max_connections));
  if (options.api_key.empty() && !options.insecure_no_auth && !is_loopback_host(options.host)) {
    return invalid_argument("--host " + options.host +
                            " is reachable from other machines: give --api-key (or VORTEX_API_KEY), or "
                            "--insecure-no-auth to serve it without authentication");
  }
  VORTEX_RETURN_IF_ERROR(validate_pipeline_options(options.pipeline));
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  impl->allowed_hosts = default_allowed_hosts(options);
  std::error_code ec;
  impl->data_dir = fs::absolute(fs::path(options.data_dir), ec).lexically_normal();
  if (!impl->data_dir.empty() && impl->data_dir.filename().empty()) impl->data_dir = impl->data_dir.parent_path();
  impl->jobs_dir = impl->data_dir / "jobs";
  fs::create_directories(impl->jobs_dir, ec);
  if (ec)
    return io_error("cannot create " + impl->jobs_dir.string() + ": " + ec.message() + "; choose a writable --data");
  VORTEX_ASSIGN_OR_RETURN(impl->store, open_sqlite_job_store((impl->data_dir / "jobs.sqlite3").string()));
  impl->owner = options.host + ":" + std::to_string(options.port);
  VORTEX_RETURN_IF_ERROR(impl->restore_jobs());

  Impl* s = impl.get();
  std::future<Status> load_done = s->loaded.get_future();
  s->worker = std::thread([s] { s->worker_loop(); });
  Status load = load_done.get();
  if (!load.ok()) {
    s->worker.join();
    return load;
  }
  s->log("loaded " + s->cfg.name + " on " + backend_kind_name(options.pipeline.backend) + " in " +
         std::to_string(s->pipeline->load_seconds()) + " s");
  s->watchdog = std::thread([s] { s->watchdog_loop(); });
  Result<std::unique_ptr<http::HttpServer>> h = http::HttpServer::start(s->http_options());
  if (!h.ok()) {
    std::unique_ptr<Server> tmp(new Server(std::move(impl)));  // joins the worker
    return h.status();
  }
  s->http = std::move(*h);
  s->bound_port = s->http->port();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace vortex::serve
