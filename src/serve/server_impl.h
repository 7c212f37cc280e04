// Private to the serve component: the state of one `vortex serve` (Server::Impl) and the job record it keeps.
// Its members are defined by concern: jobs.cpp (the job table, its store rows and retention), worker.cpp (the
// worker thread that owns the Pipeline, the world of ranks, the --max-job-seconds watchdog), admission.cpp
// (POST /v1/videos: body, validation, plan, price, queue), routes.cpp (routing and every other route),
// metrics.cpp (/metrics) and server.cpp (start and shutdown). One mutex, `mu`, guards the job table; the
// worker holds it only to update state, never while running a job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/engine_internal.h"
#include "core/clock.h"
#include "io/staging.h"
#include "media/atomic_file.h"
#include "serve/cost.h"
#include "serve/http_server.h"
#include "serve/job_store.h"
#include "serve/reconcile.h"
#include "serve/server.h"

namespace vortex::serve {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };

const char* state_name(JobState s);
bool terminal(JobState s);
double unix_now();                                                     // unix seconds
inline double since(Clock::time_point t) { return seconds_since(t); }  // core/clock.h
const char* error_type_for(ErrorCode code);                            // error types in JSON errors and job failures

struct Job {
  std::string id;
  fs::path dir;
  JobState state = JobState::kQueued;
  std::string phase = "queued";
  int step = 0, total_steps = 0;
  double created_at = 0, started_at = 0, finished_at = 0;  // unix seconds
  Clock::time_point created, started;
  std::string error_type, error_message;  // error_message as clients see it (redact())
  std::string error_message_raw;          // with paths, for the log
  std::unique_ptr<RunPlan> plan;          // released when the job ends (it holds the text rows)
  json request;                           // the request as it runs (after defaults and snapping)
  std::vector<std::string> notes;
  CancelToken cancel;
  bool cancel_requested = false;
  int cancel_step = -1;  // the step count when the cancel arrived (running jobs)
  Clock::time_point cancel_time;
  double cancel_latency = -1;  // seconds from the DELETE to the job's stop
  std::vector<double> step_seconds;
  double sampling_seconds = 0, wall_seconds = 0, queue_seconds = 0;
  std::vector<std::string> files;
  std::optional<json> frozen;  // a job restored from the store at start: its final status JSON, as stored
  double flops = 0;            // its price's floating-point work (all steps)
  bool time_limited = false;   // stopped by --max-job-seconds
  uint64_t version = 0;        // bumped on every change (SSE)
};

// A job's status as GET /v1/videos/{id} answers it (docs/serve.md).
json job_json(const Job& j);
// Request bytes quoted in a message: printable ASCII kept, every other byte (and '%') as %XX, at most
// `max` bytes read.
std::string quoted_input(const std::string& raw, size_t max = 64);
// JSON text that never throws: invalid UTF-8 (a client's bytes) is replaced, not a type_error.
std::string dump(const json& j, int indent = -1);
std::string error_body(const std::string& field, const std::string& message, const std::string& type,
                       const std::string& request_id = "");
void set_error(http::Response& res, int status, const std::string& field, const std::string& message,
               const std::string& type);
// Job ids: "video_" + 24 hex digits of a per-process random stream.
bool is_job_id(const std::string& id);

// The counters behind /metrics (metrics.cpp); under Server::Impl::mu.
struct ServeMetrics {
  std::map<std::string, uint64_t> rejected;  // submissions refused, by reason
  uint64_t submitted = 0;
  uint64_t steps_total = 0;
  double step_seconds_sum = 0, step_seconds_last = 0;
  uint64_t jobs_timed = 0;
  double job_wall_sum = 0, job_sampling_sum = 0;
  uint64_t cancels_timed = 0;
  double cancel_latency_sum = 0, cancel_latency_max = 0;
  size_t gpu_in_use = 0, gpu_peak = 0;
  std::optional<size_t> gpu_free;
};

struct Server::Impl {
  ServeOptions opt;
  // The loaded pipeline, owned through the public API's Engine (src/api/engine_internal.h); worker thread only.
  std::unique_ptr<Engine> engine;
  Pipeline* pipeline = nullptr;  // the engine's
  // The pipeline's planner, for admission on the HTTP threads: const, set once the load is done, before they start.
  const Planner* planner = nullptr;
  std::unique_ptr<Communicator> comm;  // rank 0's, with ServeOptions::join (worker thread only)
  int world_size = 1;
  std::string world_error;  // under mu: why the world failed ("" while it works)
  ModelConfig cfg;          // copies for the HTTP threads (immutable after load)
  ExecOptions exec;
  bool decoders = false;            // the pipeline holds the VAE decoders (jobs get video.mp4 + audio.wav)
  fs::path data_dir, jobs_dir;      // absolute
  std::unique_ptr<JobStore> store;  // every job's state (<data>/jobs.sqlite3)
  std::string owner;                // "host:port", written with each job
  std::mutex probe_mu;              // the data folder probe of /health
  Clock::time_point probe_time;
  bool probe_ok = false;
  std::unique_ptr<http::HttpServer> http;
  int bound_port = -1;
  std::thread worker;
  std::promise<Status> loaded;  // the worker's load result, awaited by start()

  std::mutex mu;
  std::condition_variable changed;  // any job changed (SSE, tests)
  std::condition_variable work;     // the queue or `stopping` changed
  std::map<std::string, std::shared_ptr<Job>> jobs;
  std::vector<std::string> order;    // creation order, for listing
  std::deque<std::string> queue;     // queued ids, FIFO
  std::deque<std::string> finished;  // terminal ids, oldest first (retention)
  std::shared_ptr<Job> running;
  bool accepting = true, stopping = false, stop_worker = false, shut_down = false;
  bool streams_ended = false;              // SSE streams send `done` now (the end of a shutdown)
  std::vector<std::string> allowed_hosts;  // Host / Origin hosts served ("*": any)
  std::mt19937_64 rng{std::random_device{}()};

  ServeMetrics metrics;                             // under mu
  std::optional<uint64_t> device_budget;            // free device memory right after load (cuda)
  std::optional<double> measured_flops_per_second;  // from finished jobs' sampling (prices requests)
  std::thread watchdog;                             // --max-job-seconds on the running job
  std::condition_variable watchdog_wake;            // shutdown

  void log(const std::string& line) const {
    if (opt.log) opt.log(line);
  }

  // ---- the job table, its store rows and retention (jobs.cpp) ----
  std::string new_id();
  void touch(Job& j);                   // a change: SSE streams and waiters wake; under mu
  void persist(const Job& j);           // the job's state in the store and in job.json (written atomically); under mu
  void finish(Job& j, JobState state);  // a terminal state: timings, metrics, job.json, retention; under mu
  void forget(const std::string& id);   // retention of one job: its store row and its folder
  Status restore_jobs();                // at start: reconcile, retention, the stored jobs loaded
  std::shared_ptr<Job> find(const std::string& id);  // under mu
  void request_cancel(Job& j);                       // marks a job cancelled and sets its token (under mu)

  // ---- the worker (worker.cpp) ----
  class JobProgress;
  Status load_pipeline();
  void worker_loop();
  std::shared_ptr<Job> next_job();  // waits for a queued job; nullptr when the worker stops
  Status run_job(const std::shared_ptr<Job>& job);
  void finish_stopped(Job& j);
  void world_failed(const Status& why);
  bool broadcast_job(const std::shared_ptr<Job>& job);
  Status world_status();
  void watchdog_loop();

  // ---- POST /v1/videos (admission.cpp) ----
  struct CreateBody;
  struct Admission;
  void handle_create(const http::Request& req, http::Response& res);
  bool read_create_body(const http::Request& req, http::Response& res, CreateBody& body);
  void reject(http::Response& res, int status, const std::string& field, const Status& s, const std::string& reason);
  bool refuse_unless_accepting(http::Response& res);  // under mu
  std::optional<uint64_t> admission_budget();
  std::optional<Admission> admit(RunRequest& run, bool has_upload, http::Response& res);
  json job_request_json(const RunRequest& run, const Admission& a) const;
  bool enqueue(const std::shared_ptr<Job>& job, http::Response& res, json& out);

  // ---- routing and the other routes (routes.cpp) ----
  class JobEvents;
  void handle(http::Request& req, http::Response& res);
  void route(http::Request& req, http::Response& res);
  http::ServerOptions http_options();
  bool authorized(const http::Request& req) const;
  uint64_t body_limit(const http::Request& req) const;
  bool host_allowed(const std::string& host) const;
  std::optional<std::string> misdirected(const http::Request& req) const;
  void no_job(http::Response& res, const std::string& id);
  void handle_get(const http::Request& req, http::Response& res);
  void handle_list(const http::Request& req, http::Response& res);
  void handle_delete(const http::Request& req, http::Response& res);
  void handle_content(const http::Request& req, http::Response& res);
  std::shared_ptr<http::FileBody> open_output(const std::string& id, const char* name) const;
  void handle_events(const http::Request& req, http::Response& res);
  bool data_writable();
  void handle_health(const http::Request& req, http::Response& res);
  std::string redact(const std::string& message) const;
  void internal_failure(const http::Request& req, http::Response& res, const std::string& what);

  // ---- /metrics (metrics.cpp) ----
  void handle_metrics(const http::Request& req, http::Response& res);

  // ---- start and the drain (server.cpp) ----
  void shutdown(RunningJob mode);
};

}  // namespace vortex::serve
