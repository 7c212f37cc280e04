// `vortex serve`: one resident Pipeline behind an HTTP job API in the /v1/videos dialect (docs/serve.md).
// HTTP comes from http_server.h (one I/O thread, strict parsing, bounded everything); its handler threads
// only validate, enqueue and read job state; one worker thread owns the
// pipeline and runs the jobs one at a time, so GPU work is serialized. Each job lives in memory and in
// <data>/jobs/<id>/ (job.json, output/ published by one rename, an uploaded text_embeddings file); ids are
// generated here and only ever looked up, never used as paths from the client. With ServeOptions::join the
// worker is rank 0 of a world of ranks (world.h): it broadcasts each job before running it, heartbeats
// while idle and stops the followers at shutdown. Retention keeps the last
// `keep_jobs` finished jobs and deletes only their own directories. Every job is also a row of the job
// store (job_store.h, <data>/jobs.sqlite3), reconciled with <data>/jobs at start (reconcile.h), so
// finished jobs stay reachable across restarts.
// Tested in process on 127.0.0.1 in tests/serve/server_test.cpp (every route and error, the curl examples
// of docs/serve.md), tests/serve/hostile_test.cpp (issue 26's hostile clients) and tests/serve/soak_test.cpp; as a
// process with SIGTERM in tests/cli/cli_serve_test.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/pipeline.h"
#include "serve/cost.h"
#include "serve/request.h"
#include "serve/world.h"
#include "vortex/status.h"

namespace vortex::serve {

struct ServeOptions {
  PipelineOptions pipeline;
  std::string host = "127.0.0.1";
  int port = 8000;       // 0: an ephemeral port (Server::port() tells which)
  std::string data_dir;  // required: job directories go under <data>/jobs
  int queue_limit = 16;  // queued jobs (the running one not counted); beyond: 429 + Retry-After
  int keep_jobs = 100;   // finished jobs kept (memory and disk); older ones are deleted
  RequestLimits limits;
  CostLimits cost;                        // per-field limits and --max-job-seconds (cost.h)
  size_t max_upload_bytes = 64ull << 20;  // one text_embeddings upload
  std::string api_key;                    // non-empty: every route but /health needs "Authorization: Bearer <key>"
  // Admission budget for a request's memory estimate; unset: free device memory after load (cuda), free
  // host memory at submission (cpu).
  std::optional<uint64_t> memory_limit_bytes;
  int http_threads = 16;      // handler threads (requests handled at once; streams and slow peers hold none)
  int max_connections = 512;  // open connections; beyond: 503 at accept
  // Host and Origin hosts answered (DNS rebinding, cross-site forms); "*": any. Empty: the bound address
  // plus localhost, 127.0.0.1 and ::1 (any for a wildcard bind, which needs a key).
  std::vector<std::string> allowed_hosts;
  bool insecure_no_auth = false;  // allow a non-loopback --host without api_key
  // One line per event ("loaded ...", "job <id> <terminal state>[: reason]"); called with the job table
  // locked, so it must not call back into the server. May be empty.
  std::function<void(const std::string&)> log;
  // Several ranks as one pipeline (world.h, docs/multi_gpu.md): makes rank 0's communicator once the
  // backend is open, before the weights load; the other ranks run run_serve_follower. Empty: one device.
  WorldJoin join;
  // While idle, rank 0 broadcasts a heartbeat this often (keep it well below the communicator timeout, so
  // a waiting follower never times out and a dead one is noticed without a job).
  std::chrono::milliseconds heartbeat{std::chrono::seconds(10)};
  // Called once, from the worker thread with no lock held, when the world fails (a rank failed or died, a
  // collective timed out): the running job has failed with the reason, the queued ones too, and the
  // server takes no more jobs (503); its owner should shut it down and exit non-zero. May be empty.
  std::function<void(const Status&)> on_world_failure;
};

// How a shutdown treats the running job (queued ones are always cancelled).
enum class RunningJob { kFinish, kCancel };

class Server {
 public:
  // Loads the pipeline (on the worker thread), binds host:port and starts serving.
  static Result<std::unique_ptr<Server>> start(const ServeOptions& options);
  ~Server();  // shutdown(RunningJob::kCancel) if not done yet

  int port() const;
  // Drains: new submissions get 503 + Retry-After while the queue is cancelled and the running job is
  // finished or cancelled; then SSE streams send `done` with the final state, the listener closes and
  // every thread is joined. Idempotent.
  void shutdown(RunningJob running);
  // OK unless the world of ranks (ServeOptions::join) has failed; then why.
  Status world_status() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `message` with its absolute paths replaced for clients: a path under one of `known`'s prefixes by that
// entry's name plus the rest ("<data>/jobs/x"), any other by "<path>/" and its last component; the API
// routes (/v1/..., /health, /metrics) are kept.
std::string redact_paths(const std::string& message, const std::vector<std::pair<std::string, std::string>>& known);

// 127.0.0.0/8, ::1 or localhost.
bool is_loopback_host(const std::string& host);
// ServeOptions::allowed_hosts, or its default for the bound host.
std::vector<std::string> default_allowed_hosts(const ServeOptions& options);

// Equal strings in time that depends only on their lengths (bearer token check).
bool constant_time_equals(const std::string& a, const std::string& b);

}  // namespace vortex::serve
