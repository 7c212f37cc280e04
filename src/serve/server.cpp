// The HTTP job server (see server.h). Routes: POST/GET /v1/videos, GET/DELETE /v1/videos/{id},
// GET /v1/videos/{id}/content, GET /v1/videos/{id}/events (SSE), GET /health, GET /metrics.
// One mutex guards the job table; the worker thread holds it only to update state, never while running
// a job. A job's cancel token is set under the lock and read by the model between blocks.
#include "serve/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/memory_estimate.h"
#include "serve/cost.h"
#include "serve/http_server.h"
#include "serve/job_store.h"
#include "serve/reconcile.h"

namespace vortex::serve {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
namespace http = vortex::serve::http;
using Clock = std::chrono::steady_clock;

namespace {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };

const char* state_name(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

bool terminal(JobState s) { return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled; }

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Error types in JSON errors and job failures.
const char* error_type_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOutOfMemory:
      return "out_of_memory";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kFormat:
    case ErrorCode::kUnsupported:
      return "invalid_request";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kCuda:
    case ErrorCode::kCublas:
    case ErrorCode::kCudnn:
    case ErrorCode::kNccl:
      return "device";
    default:
      return "internal";
  }
}

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

json job_json(const Job& j) {
  if (j.frozen) return *j.frozen;
  json t;
  t["queue_seconds"] = j.state == JobState::kQueued ? since(j.created) : j.queue_seconds;
  t["wall_seconds"] = j.state == JobState::kRunning ? since(j.started) : j.wall_seconds;
  t["sampling_seconds"] = j.sampling_seconds;
  double sum = 0;
  for (double s : j.step_seconds) sum += s;
  t["step_seconds_mean"] = j.step_seconds.empty() ? json(nullptr) : json(sum / j.step_seconds.size());
  t["step_seconds"] = j.step_seconds;
  t["cancel_latency_seconds"] = j.cancel_latency >= 0 ? json(j.cancel_latency) : json(nullptr);
  t["cancel_at_step"] = j.cancel_step >= 0 ? json(j.cancel_step) : json(nullptr);
  json o;
  o["id"] = j.id;
  o["object"] = "video";
  o["status"] = state_name(j.state);
  o["phase"] = j.phase;
  o["step"] = j.step;
  o["total_steps"] = j.total_steps;
  o["progress"] = j.total_steps > 0 ? 100 * j.step / j.total_steps : 0;
  json eta = nullptr;
  if (j.state == JobState::kRunning && j.step > 0) eta = sum / j.step * (j.total_steps - j.step);
  o["eta_seconds"] = eta;
  o["created_at"] = j.created_at;
  o["started_at"] = j.started_at > 0 ? json(j.started_at) : json(nullptr);
  o["finished_at"] = j.finished_at > 0 ? json(j.finished_at) : json(nullptr);
  o["cancel_requested"] = j.cancel_requested;
  o["error"] = j.error_type.empty() ? json(nullptr) : json{{"type", j.error_type}, {"message", j.error_message}};
  o["request"] = j.request;
  o["notes"] = j.notes;
  o["timing"] = t;
  if (j.state == JobState::kSucceeded) {
    // With decoders the content is the MP4 (and its WAV); the latents stay available as variants.
    const bool media = std::find(j.files.begin(), j.files.end(), "video.mp4") != j.files.end();
    json variants = media ? json{"video", "audio", "video_latents", "audio_latents", "preview", "run_json"}
                          : json{"video_latents", "audio_latents", "preview", "run_json"};
    o["content"] = {{"kind", media ? "video" : "latents"},
                    {"format", media ? "mp4" : "safetensors"},
                    {"url", "/v1/videos/" + j.id + "/content"},
                    {"variants", variants}};
  } else {
    o["content"] = nullptr;
  }
  return o;
}

// Request bytes quoted in a message: printable ASCII kept, every other byte (and '%') as %XX, at most
// `max` bytes read.
std::string quoted_input(const std::string& raw, size_t max = 64) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (size_t i = 0; i < raw.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c > 0x20 && c < 0x7f && c != '%') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (raw.size() > max) out += "...";
  return out;
}

// JSON text that never throws: invalid UTF-8 (a client's bytes) is replaced, not a type_error.
std::string dump(const json& j, int indent = -1) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }

std::string error_body(const std::string& field, const std::string& message, const std::string& type,
                       const std::string& request_id = "") {
  json e;
  e["error"] = {{"field", field.empty() ? json(nullptr) : json(field)}, {"message", message}, {"type", type}};
  if (!request_id.empty()) e["error"]["request_id"] = request_id;
  return dump(e);
}

void set_error(http::Response& res, int status, const std::string& field, const std::string& message,
               const std::string& type) {
  res.status = status;
  res.set_content(error_body(field, message, type), "application/json");
}

Status write_file_atomic(const fs::path& path, const std::string& bytes) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) return io_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

uint64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, rss = 0;
  f >> size >> rss;
  return rss * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Job ids: "video_" + 24 hex digits of a per-process random stream.
bool is_job_id(const std::string& id) {
  static const std::regex re("video_[0-9a-f]{24}");
  return std::regex_match(id, re);
}

// Collects plan notes (frames snapped up, slow-run warnings) for the job's status.
class NoteSink : public ProgressSink {
 public:
  void note(std::string_view what) override { notes.emplace_back(what); }
  void warning(std::string_view what) override { notes.push_back("warning: " + std::string(what)); }
  std::vector<std::string> notes;
};

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  std::unique_ptr<Pipeline> pipeline;  // owned and used by the worker thread only
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
  RunningJob on_stop = RunningJob::kCancel;
  std::mt19937_64 rng{std::random_device{}()};

  // Metrics (under mu).
  std::map<std::string, uint64_t> rejected;  // by reason
  uint64_t submitted = 0;
  uint64_t steps_total = 0;
  double step_seconds_sum = 0, step_seconds_last = 0;
  uint64_t jobs_timed = 0;
  double job_wall_sum = 0, job_sampling_sum = 0;
  uint64_t cancels_timed = 0;
  double cancel_latency_sum = 0, cancel_latency_max = 0;
  size_t gpu_in_use = 0, gpu_peak = 0;
  std::optional<size_t> gpu_free;
  std::optional<uint64_t> device_budget;            // free device memory right after load (cuda)
  std::optional<double> measured_flops_per_second;  // from finished jobs' sampling (prices requests)
  std::thread watchdog;                             // --max-job-seconds on the running job
  std::condition_variable watchdog_wake;            // shutdown

  void log(const std::string& line) const {
    if (opt.log) opt.log(line);
  }

  std::string new_id() {
    static const char* hex = "0123456789abcdef";
    std::string id = "video_";
    uint64_t a = rng(), b = rng();
    for (int i = 0; i < 16; ++i) id += hex[(a >> (4 * i)) & 15];
    for (int i = 0; i < 8; ++i) id += hex[(b >> (4 * i)) & 15];
    return id;
  }

  void touch(Job& j) {
    ++j.version;
    changed.notify_all();
    if (http) http->wake();  // SSE streams
  }

  // The job's state in the store and in job.json (written atomically); under mu.
  void persist(const Job& j) {
    const json status = job_json(j);
    Status s = write_file_atomic(j.dir / "job.json", dump(status, 2) + "\n");
    if (!s.ok()) log("cannot write job.json of " + j.id + ": " + s.message());
    if (!store) return;
    StoredJob row;
    row.id = j.id;
    row.state = state_name(j.state);
    row.created_at = j.created_at;
    row.finished_at = j.finished_at;
    row.request_json = dump(j.request);
    row.status_json = dump(status);
    row.owner = owner;
    if (Status st = store->put(row); !st.ok()) log(st.message());
  }

  // A job reached a terminal state: timings, metrics, job.json, retention. Under mu.
  void finish(Job& j, JobState state) {
    j.state = state;
    j.phase = state_name(state);
    j.finished_at = unix_now();
    if (j.started_at > 0) j.wall_seconds = since(j.started);
    if (j.cancel_requested) {
      j.cancel_latency = std::chrono::duration<double>(Clock::now() - j.cancel_time).count();
      ++cancels_timed;
      cancel_latency_sum += j.cancel_latency;
      cancel_latency_max = std::max(cancel_latency_max, j.cancel_latency);
    }
    if (j.started_at > 0) {
      ++jobs_timed;
      job_wall_sum += j.wall_seconds;
      job_sampling_sum += j.sampling_seconds;
    }
    j.plan.reset();
    persist(j);
    touch(j);
    log("job " + j.id + " " + state_name(state) + (j.error_message.empty() ? "" : ": " + j.error_message_raw));
    finished.push_back(j.id);
    while (static_cast<int>(finished.size()) > opt.keep_jobs) {
      const std::string old = finished.front();
      finished.pop_front();
      auto it = jobs.find(old);
      if (it == jobs.end()) continue;
      jobs.erase(it);
      order.erase(std::remove(order.begin(), order.end(), old), order.end());
      forget(old);
    }
  }

  // ---- the worker ----
  class JobProgress : public ProgressSink {
   public:
    JobProgress(Impl& s, Job& j) : s_(s), j_(j) {}
    void stage(std::string_view what) override {
      std::lock_guard<std::mutex> lock(s_.mu);
      j_.phase = std::string(what);
      s_.touch(j_);
    }
    void note(std::string_view what) override {
      std::lock_guard<std::mutex> lock(s_.mu);
      j_.notes.emplace_back(what);
    }
    void step(int done, int total, double step_seconds, double) override {
      // Device counters are read here, on the thread that owns the backend.
      const size_t in_use = s_.pipeline->backend().memory_in_use();
      const size_t peak = s_.pipeline->backend().memory_peak();
      std::lock_guard<std::mutex> lock(s_.mu);
      j_.step = done;
      j_.total_steps = total;
      j_.step_seconds.push_back(step_seconds);
      ++s_.steps_total;
      s_.step_seconds_sum += step_seconds;
      s_.step_seconds_last = step_seconds;
      s_.gpu_in_use = in_use;
      s_.gpu_peak = peak;
      s_.touch(j_);
    }

   private:
    Impl& s_;
    Job& j_;
  };

  // Runs `job`; its error when it failed (OK when it succeeded or was cancelled).
  Status run_job(const std::shared_ptr<Job>& job) {
    const fs::path staging = job->dir / "output.partial";
    const fs::path out = job->dir / "output";
    std::error_code ec;
    fs::remove_all(staging, ec);
    fs::create_directories(staging, ec);
    Result<RunOutputs> result = io_error("cannot create " + staging.string() + ": " + ec.message());
    if (!ec) {
      JobProgress progress(*this, *job);
      result = pipeline->run(*job->plan, progress, job->cancel, staging.string());
      if (result.ok()) {
        fs::rename(staging, out, ec);
        if (ec) result = io_error("cannot publish " + out.string() + ": " + ec.message());
      }
    }
    if (!result.ok()) fs::remove_all(staging, ec);
    const std::optional<size_t> free_now = pipeline->backend().free_device_memory();
    const size_t in_use = pipeline->backend().memory_in_use(), peak = pipeline->backend().memory_peak();

    std::lock_guard<std::mutex> lock(mu);
    gpu_free = free_now;
    gpu_in_use = in_use;
    gpu_peak = peak;
    if (result.ok()) {
      job->sampling_seconds = result->sampling_seconds;
      // The measured throughput prices the next requests (an even blend with the previous measurement).
      if (job->sampling_seconds > 0 && job->flops > 0) {
        const double r = job->flops / job->sampling_seconds;
        measured_flops_per_second = measured_flops_per_second ? 0.5 * (*measured_flops_per_second + r) : r;
      }
      job->files = result->files;
      finish(*job, JobState::kSucceeded);
    } else if ((result.status().code() == ErrorCode::kCancelled || job->cancel.cancelled()) && job->time_limited) {
      job->error_type = "time_limit";
      job->error_message = job->error_message_raw = "the job ran past this server's --max-job-seconds (" +
                                                    std::to_string(static_cast<long>(opt.cost.max_job_seconds)) +
                                                    " s) and was stopped";
      finish(*job, JobState::kFailed);
    } else if (result.status().code() == ErrorCode::kCancelled || job->cancel.cancelled()) {
      // A cancel cuts long ops short (Backend::set_cancel_flag); whatever they then report is the cancel.
      finish(*job, JobState::kCancelled);
    } else {
      job->error_type = error_type_for(result.status().code());
      job->error_message_raw = result.status().message();
      job->error_message = redact(job->error_message_raw);
      if (comm) {
        job->error_message += "; the world of " + std::to_string(world_size) + " ranks has stopped";
        job->error_message_raw += "; the world of " + std::to_string(world_size) + " ranks has stopped";
      }
      finish(*job, JobState::kFailed);
      running.reset();
      return result.status();
    }
    running.reset();
    return Status::Ok();
  }

  // A job failed while every rank ran it, or a broadcast failed: the ranks no longer agree on the
  // collective sequence, so the world stops. Aborts the communicator (followers fail at their next
  // collective instead of waiting), fails the queued jobs, refuses new ones (503) and tells the owner.
  void world_failed(const Status& why) {
    comm->abort(why.message());
    {
      std::lock_guard<std::mutex> lock(mu);
      world_error = why.message();
      accepting = false;
      while (!queue.empty()) {
        std::shared_ptr<Job> j = jobs.at(queue.front());
        queue.pop_front();
        j->error_type = "unavailable";
        j->error_message_raw =
            "not run: the world of " + std::to_string(world_size) + " ranks failed (" + world_error + ")";
        j->error_message = redact(j->error_message_raw);
        finish(*j, JobState::kFailed);
      }
      log("world failed: " + world_error);
    }
    if (opt.on_world_failure) opt.on_world_failure(why);
  }

  // Rank 0's side of a job: the text rows resolved (a prompt encoded here), then the job broadcast, then
  // (with adapters) the ranks' agreement on them. An error before the broadcast, or a verdict against the
  // adapters (every rank skips the job), fails the job alone; a failed broadcast or exchange fails the world.
  // Returns false when the job must not run.
  bool broadcast_job(const std::shared_ptr<Job>& job) {
    auto fail_job = [&](const Status& st) {
      std::lock_guard<std::mutex> lock(mu);
      job->error_type = error_type_for(st.code());
      job->error_message_raw = st.message();
      job->error_message = redact(job->error_message_raw);
      finish(*job, JobState::kFailed);
      running.reset();
    };
    JobProgress progress(*this, *job);
    if (Status st = pipeline->encode_prompt(*job->plan, progress); !st.ok()) {
      fail_job(st);
      return false;
    }
    if (job->cancel.cancelled()) {  // not broadcast yet: the followers never see it
      std::lock_guard<std::mutex> lock(mu);
      finish(*job, JobState::kCancelled);
      running.reset();
      return false;
    }
    Result<std::string> bytes = encode_world_job(*job->plan);
    if (!bytes.ok()) {
      fail_job(bytes.status());
      return false;
    }
    if (Status st = send_world_message(*comm, pipeline->backend(), WorldMessage::kJob, *bytes); !st.ok()) {
      fail_job(Status(st.code(), st.message() + "; the world of " + std::to_string(world_size) + " ranks has stopped"));
      world_failed(st);
      return false;
    }
    if (!job->plan->request.loras.empty()) {
      Result<AdapterVerdict> verdict = pipeline->agree_request_loras(job->plan->request, progress);
      if (!verdict.ok()) {
        const Status& st = verdict.status();
        fail_job(
            Status(st.code(), st.message() + "; the world of " + std::to_string(world_size) + " ranks has stopped"));
        world_failed(st);
        return false;
      }
      if (!verdict->status.ok()) {
        fail_job(verdict->status);
        return false;
      }
    }
    return true;
  }

  std::promise<Status> loaded;  // the worker's load result, awaited by start()

  void worker_loop() {
    class LoadLog : public ProgressSink {
     public:
      explicit LoadLog(const Impl& s) : s_(s) {}
      void stage(std::string_view what) override { s_.log(std::string(what)); }
      void note(std::string_view what) override { s_.log("note: " + std::string(what)); }

     private:
      const Impl& s_;
    } load_log(*this);
    Result<std::unique_ptr<Pipeline>> p = Pipeline::open(opt.pipeline);
    if (!p.ok()) {
      loaded.set_value(p.status());
      return;
    }
    pipeline = std::move(*p);
    if (opt.join) {  // joined before the weights load, as generate's ranks do
      load_log.stage("joining the world of ranks");
      Result<std::unique_ptr<Communicator>> c = opt.join(pipeline->backend());
      if (!c.ok()) {
        loaded.set_value(c.status());
        return;
      }
      comm = std::move(*c);
      world_size = comm->size();
    }
    if (Status st = pipeline->load_weights(load_log); !st.ok()) {
      if (comm) comm->abort("rank 0 could not load the weights: " + st.message());
      loaded.set_value(st);
      return;
    }
    if (comm) pipeline->model().set_communicator(comm.get());
    cfg = pipeline->config();
    decoders = pipeline->has_decoders();
    exec = pipeline->exec_options();
    {
      std::lock_guard<std::mutex> lock(mu);
      gpu_free = pipeline->backend().free_device_memory();
      device_budget = gpu_free;
      gpu_in_use = pipeline->backend().memory_in_use();
      gpu_peak = pipeline->backend().memory_peak();
    }
    loaded.set_value(Status::Ok());
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu);
        const auto ready = [&] { return stop_worker || !queue.empty(); };
        if (!comm) {
          work.wait(lock, ready);
        } else if (!work.wait_for(lock, opt.heartbeat, ready)) {
          lock.unlock();
          if (Status st = send_world_message(*comm, pipeline->backend(), WorldMessage::kIdle, ""); !st.ok()) {
            return world_failed(st);
          }
          continue;
        }
        if (queue.empty()) {  // stop_worker and nothing left
          lock.unlock();
          if (comm) {
            Status st = send_world_message(*comm, pipeline->backend(), WorldMessage::kStop, "");
            if (!st.ok()) world_failed(st);
          }
          return;
        }
        job = jobs.at(queue.front());
        queue.pop_front();
        job->state = JobState::kRunning;
        job->phase = "starting";
        job->started_at = unix_now();
        job->started = Clock::now();
        job->queue_seconds = std::chrono::duration<double>(job->started - job->created).count();
        running = job;
        persist(*job);
        touch(*job);
      }
      if (comm && !broadcast_job(job)) {
        if (!world_status().ok()) return;
        continue;
      }
      const Status failed = run_job(job);
      if (comm && !failed.ok()) return world_failed(failed.with_context("job " + job->id));
    }
  }

  Status world_status() {
    std::lock_guard<std::mutex> lock(mu);
    return world_error.empty() ? Status::Ok() : internal_error("the world of ranks failed: " + world_error);
  }

  // ---- HTTP ----
  bool authorized(const http::Request& req) const {
    if (opt.api_key.empty()) return true;
    // The header's raw bytes (never decoded); a repeated Authorization header counts as absent.
    const std::string* h = req.header("authorization");
    const std::string prefix = "Bearer ";
    const std::string token = h && h->rfind(prefix, 0) == 0 ? h->substr(prefix.size()) : std::string();
    return constant_time_equals(token, opt.api_key);
  }

  std::optional<uint64_t> admission_budget() {
    if (opt.memory_limit_bytes) return opt.memory_limit_bytes;
    std::lock_guard<std::mutex> lock(mu);
    return device_budget;  // cuda; the cpu backend's host memory is checked by plan_run
  }

  void handle_create(const http::Request& req, http::Response& res) {
    std::string body = req.body;
    std::string upload;
    bool has_upload = false;
    const std::string* content_type = req.header("content-type");
    const std::string media = content_type ? http::media_type(*content_type) : std::string();
    if (media == "multipart/form-data") {
      std::string why;
      std::optional<std::vector<http::FormPart>> parts = http::parse_multipart(*content_type, req.body, 4, &why);
      if (!parts) return set_error(res, 400, "", "malformed multipart/form-data body: " + why, "invalid_request");
      bool has_request = false;
      for (http::FormPart& part : *parts) {
        if (part.name == "request" && !has_request) {
          body = std::move(part.content);
          has_request = true;
        } else if (part.name == "text_embeddings" && !has_upload) {
          upload = std::move(part.content);
          has_upload = true;
        } else {
          return set_error(
              res, 400, quoted_input(part.name),
              "unknown or repeated form part '" + quoted_input(part.name) + "' (known: request, text_embeddings)",
              "invalid_request");
        }
      }
      if (!has_request) body = "{}";
      if (has_upload) {
        if (upload.size() > opt.max_upload_bytes) {
          return set_error(res, 413, "text_embeddings",
                           "the upload is " + std::to_string(upload.size()) + " bytes; the limit is " +
                               std::to_string(opt.max_upload_bytes),
                           "too_large");
        }
      }
    } else if (body.size() > opt.limits.max_body_bytes) {
      return set_error(res, 413, "",
                       "the body is " + std::to_string(body.size()) + " bytes; the limit is " +
                           std::to_string(opt.limits.max_body_bytes),
                       "too_large");
    }
    auto reject = [&](int status, const std::string& field, const Status& s, const std::string& reason) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++rejected[reason];
      }
      set_error(res, status, field, s.message(), reason);
    };
    std::string field;
    RunRequest defaults;
    Result<RunRequest> parsed = parse_video_request(body, opt.limits, defaults, &field);
    if (!parsed.ok()) return reject(400, field, parsed.status(), "invalid_request");
    RunRequest run = std::move(*parsed);
    if (!has_upload && run.prompt.empty()) {
      return reject(400, "prompt", invalid_argument("give a prompt, or upload text_embeddings (multipart)"),
                    "invalid_request");
    }
    if (std::optional<CostRefusal> over = check_request_fields(run, opt.cost)) {
      return reject(over->status, over->field, invalid_argument(over->message), "limit_exceeded");
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!accepting) {
        res.set_header("Retry-After", "30");
        return set_error(res, 503, "",
                         world_error.empty()
                             ? "the server is shutting down"
                             : "the world of ranks failed (" + world_error + "); the server is stopping",
                         "unavailable");
      }
    }
    // The job directory exists before validation only when an upload has to be read from it.
    std::string id;
    {
      std::lock_guard<std::mutex> lock(mu);
      do id = new_id();
      while (jobs.count(id));
    }
    const fs::path dir = jobs_dir / id;
    struct DirGuard {
      fs::path p;
      ~DirGuard() {
        if (!p.empty()) {
          std::error_code ec;
          fs::remove_all(p, ec);
        }
      }
    } guard{dir};
    std::error_code ec;
    fs::create_directory(dir, ec);
    if (ec) return internal_failure(req, res, "cannot create " + dir.string() + ": " + ec.message());
    if (has_upload) {
      const fs::path file = dir / "text_embeddings.safetensors";
      if (Status s = write_file_atomic(file, upload); !s.ok()) return internal_failure(req, res, s.message());
      run.text_embeddings_path = file.string();
    }
    // Adapters are named in --lora-dir (request.cpp admits plain file names only); check_run_request checks them.
    json lora_names = json::array();
    for (LoraSpec& l : run.loras) {
      lora_names.push_back(l.scale ? l.path + ":" + std::to_string(*l.scale) : l.path);
      if (!opt.pipeline.lora_dir.empty()) l.path = (fs::path(opt.pipeline.lora_dir) / l.path).string();
      std::error_code lec;
      if (fs::is_symlink(fs::symlink_status(l.path, lec))) {
        return reject(400, "lora",
                      invalid_argument("lora: adapters in --lora-dir must be regular files, not symbolic links"),
                      "invalid_request");
      }
    }
    if (std::optional<FieldError> e = check_run_request(run, opt.pipeline, FieldStyle::kJson)) {
      return reject(400, e->field, e->status, "invalid_request");
    }
    if (Status s = check_request_loras(run.loras, cfg, opt.pipeline.lora_allow_unmatched); !s.ok())
      return reject(400, "lora", s, "invalid_request");
    NoteSink notes;
    Result<RunPlan> plan =
        plan_run(cfg, opt.pipeline, run, notes, /*weights_resident=*/true, FieldStyle::kJson, &field);
    if (!plan.ok()) {
      const bool memory = plan.status().message().rfind("not enough memory", 0) == 0;
      return reject(400, field, plan.status(), memory ? "insufficient_memory" : "invalid_request");
    }
    // A world larger than the request's packed rows cannot split it (one row per rank at least).
    if (world_size > 1) {
      if (Status sp = check_sequence_parallel(cfg, world_size, plan->geo.total_rows()); !sp.ok()) {
        return reject(400, "width", sp, "invalid_request");
      }
    }
    // Decodable frames: check_decodable reads only the decoders' config, fixed since load.
    if (Status dec = pipeline->check_decodable(*plan, FieldStyle::kJson); !dec.ok()) {
      return reject(400, "frames", dec, "invalid_request");
    }
    if (const std::optional<uint64_t> budget = admission_budget(); budget && plan->memory.total() > *budget) {
      return reject(400, "",
                    invalid_argument("not enough memory: this request needs about " + format_gb(plan->memory.total()) +
                                     " (" + plan->memory.largest(3) + ") but the server admits " + format_gb(*budget) +
                                     "; reduce the size, frames or text rows"),
                    "insufficient_memory");
    }
    // The price (docs/serve.md "Cost limits"): refused when over a limit, else recorded with the job.
    std::optional<double> rate;
    {
      std::lock_guard<std::mutex> lock(mu);
      rate = measured_flops_per_second;
    }
    if (opt.cost.flops_per_second > 0) rate = opt.cost.flops_per_second;
    if (!rate && opt.pipeline.backend == "cpu") rate = kCpuFlopsPerThread * std::max(1, plan->workers);
    const Price price = price_of(*plan, rate);
    if (std::optional<CostRefusal> over = check_price(*plan, price, has_upload, opt.cost)) {
      return reject(over->status, over->field, invalid_argument(over->message), "limit_exceeded");
    }
    auto job = std::make_shared<Job>();
    job->id = id;
    job->dir = dir;
    job->created_at = unix_now();
    job->created = Clock::now();
    job->total_steps = run.steps;
    job->notes = notes.notes;
    const RunPlan& p = *plan;
    job->request = {{"text_source", p.text_source},
                    {"text_rows", p.geo.text_rows},
                    {"width", p.geo.width},
                    {"height", p.geo.height},
                    {"frames", p.geo.frames},
                    {"steps", run.steps},
                    {"seed", run.seed},
                    {"schedule", av_schedule_mode_name(p.schedule_mode)},
                    {"sampler", sampler_kind_name(p.sampler_kind)},
                    {"attention", run.attention.empty() ? std::string(attention_name(exec.attention)) : run.attention},
                    {"precision", precision_name(exec.precision)},
                    {"media", decoders && run.media.value_or(true)},
                    {"lora", lora_names},
                    {"memory_estimate_bytes", p.memory.total()},
                    {"price",
                     {{"rows", price.rows},
                      {"steps", price.steps},
                      {"memory_bytes", price.memory_bytes},
                      {"flops", price.flops},
                      {"estimated_seconds", price.seconds ? json(*price.seconds) : json(nullptr)}}}};
    job->flops = price.flops;
    job->plan = std::make_unique<RunPlan>(std::move(*plan));
    json out;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!accepting) {
        res.set_header("Retry-After", "30");
        return set_error(res, 503, "",
                         world_error.empty()
                             ? "the server is shutting down"
                             : "the world of ranks failed (" + world_error + "); the server is stopping",
                         "unavailable");
      }
      if (static_cast<int>(queue.size()) >= opt.queue_limit) {
        ++rejected["queue_full"];
        // About one job's time per queued job ahead, from the jobs run so far (at least a second).
        const double per_job = jobs_timed > 0 ? job_wall_sum / jobs_timed : 10.0;
        res.set_header("Retry-After", std::to_string(std::max<long>(1, std::lround(per_job))));
        return set_error(res, 429, "",
                         "the queue is full (" + std::to_string(opt.queue_limit) + " jobs waiting); retry later",
                         "queue_full");
      }
      jobs[id] = job;
      order.push_back(id);
      queue.push_back(id);
      ++submitted;
      persist(*job);
      touch(*job);
      out = job_json(*job);
    }
    guard.p.clear();
    work.notify_one();
    res.status = 201;
    res.set_content(dump(out), "application/json");
  }

  std::shared_ptr<Job> find(const std::string& id) {  // under mu
    auto it = jobs.find(id);
    return it == jobs.end() ? nullptr : it->second;
  }

  void no_job(http::Response& res, const std::string& id) {
    set_error(res, 404, "id", "no job '" + id + "' (finished jobs are kept up to the retention limit)", "not_found");
  }

  void handle_get(const http::Request& req, http::Response& res) {
    const std::string id = req.matches[1];
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<Job> j = find(id);
    if (!j) return no_job(res, id);
    res.set_content(dump(job_json(*j)), "application/json");
  }

  void handle_list(const http::Request&, http::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    json data = json::array();
    for (const std::string& id : order) data.push_back(job_json(*jobs.at(id)));
    res.set_content(dump(json{{"object", "list"}, {"data", data}}), "application/json");
  }

  void handle_delete(const http::Request& req, http::Response& res) {
    const std::string id = req.matches[1];
    std::unique_lock<std::mutex> lock(mu);
    std::shared_ptr<Job> j = find(id);
    if (!j) return no_job(res, id);
    if (terminal(j->state)) {
      return set_error(res, 409, "id", "job " + id + " has already " + std::string(state_name(j->state)), "conflict");
    }
    if (!j->cancel_requested) {
      j->cancel_requested = true;
      j->cancel_time = Clock::now();
      j->cancel.cancel();
      if (j->state == JobState::kQueued) {
        queue.erase(std::remove(queue.begin(), queue.end(), id), queue.end());
        finish(*j, JobState::kCancelled);
      } else {
        j->cancel_step = j->step;
        touch(*j);
      }
    }
    res.status = 202;
    res.set_content(dump(job_json(*j)), "application/json");
  }

  void handle_content(const http::Request& req, http::Response& res) {
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
  std::shared_ptr<http::FileBody> open_output(const std::string& id, const char* name) const {
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

  void handle_events(const http::Request& req, http::Response& res) {
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

  // A job's Server-Sent Events, pulled by the HTTP I/O thread (never blocks: the job table's lock only).
  // `progress` on every change, `done` with the final state at the end, or with the state at the time
  // the server ends the streams (shutdown); a comment line every 15 s keeps idle proxies open.
  class JobEvents : public http::StreamSource {
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

  // Whether a file can be created in <data>/jobs (a probe written and removed, at most once a second).
  bool data_writable() {
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
  void handle_health(const http::Request& req, http::Response& res) {
    const bool data_ok = data_writable();
    std::lock_guard<std::mutex> lock(mu);
    const bool down = stopping || !world_error.empty() || !data_ok;
    const char* worker_state = !world_error.empty() ? "failed"
                               : stop_worker        ? "stopping"
                               : running            ? "running"
                                                    : "idle";
    json h = {{"status", !world_error.empty() ? "failed"
                         : stopping           ? "stopping"
                         : !data_ok           ? "degraded"
                                              : "ok"},
              {"data_dir", data_ok ? "writable" : "not writable"},
              {"worker", worker_state}};
    if (authorized(req)) {
      h["model"] = cfg.name;
      h["backend"] = opt.pipeline.backend;
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
  std::string redact(const std::string& message) const {
    std::error_code ec;
    const std::string lora =
        opt.pipeline.lora_dir.empty() ? "" : fs::absolute(opt.pipeline.lora_dir, ec).lexically_normal().string();
    return redact_paths(message, {{data_dir.string(), "<data>"}, {lora, "<lora-dir>"}});
  }

  // A server-side failure: logged in full with the request id; the client gets the id only.
  void internal_failure(const http::Request& req, http::Response& res, const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(mu);
      log("request " + req.id + ": " + what);
    }
    set_error(res, 500, "", "the server could not complete this request (request " + req.id + "; see its log)", "io");
  }

  void handle_metrics(const http::Request&, http::Response& res) {
    std::ostringstream m;
    std::lock_guard<std::mutex> lock(mu);
    std::map<std::string, int> by_state = {
        {"queued", 0}, {"running", 0}, {"succeeded", 0}, {"failed", 0}, {"cancelled", 0}};
    for (const auto& [id, j] : jobs) ++by_state[state_name(j->state)];
    m << "# HELP vortex_queue_length Jobs waiting to run.\n# TYPE vortex_queue_length gauge\n"
      << "vortex_queue_length " << queue.size() << "\n";
    m << "# HELP vortex_jobs Jobs held (within the retention limit) by state.\n# TYPE vortex_jobs gauge\n";
    for (const auto& [s, n] : by_state) m << "vortex_jobs{state=\"" << s << "\"} " << n << "\n";
    m << "# HELP vortex_jobs_submitted_total Jobs accepted.\n# TYPE vortex_jobs_submitted_total counter\n"
      << "vortex_jobs_submitted_total " << submitted << "\n";
    m << "# HELP vortex_requests_rejected_total Submissions refused, by reason.\n"
      << "# TYPE vortex_requests_rejected_total counter\n";
    for (const char* r : {"invalid_request", "insufficient_memory", "limit_exceeded", "queue_full"}) {
      m << "vortex_requests_rejected_total{reason=\"" << r << "\"} " << (rejected.count(r) ? rejected.at(r) : 0)
        << "\n";
    }
    m << "# HELP vortex_step_seconds Denoising step time.\n# TYPE vortex_step_seconds summary\n"
      << "vortex_step_seconds_sum " << step_seconds_sum << "\nvortex_step_seconds_count " << steps_total << "\n"
      << "# HELP vortex_step_seconds_last The latest step's time.\n# TYPE vortex_step_seconds_last gauge\n"
      << "vortex_step_seconds_last " << step_seconds_last << "\n";
    m << "# HELP vortex_job_wall_seconds Run time of jobs that started (start to end).\n"
      << "# TYPE vortex_job_wall_seconds summary\n"
      << "vortex_job_wall_seconds_sum " << job_wall_sum << "\nvortex_job_wall_seconds_count " << jobs_timed << "\n"
      << "# HELP vortex_job_sampling_seconds Sampling time of jobs that started.\n"
      << "# TYPE vortex_job_sampling_seconds summary\n"
      << "vortex_job_sampling_seconds_sum " << job_sampling_sum << "\nvortex_job_sampling_seconds_count " << jobs_timed
      << "\n";
    m << "# HELP vortex_cancel_latency_seconds DELETE to job stop.\n# TYPE vortex_cancel_latency_seconds summary\n"
      << "vortex_cancel_latency_seconds_sum " << cancel_latency_sum << "\nvortex_cancel_latency_seconds_count "
      << cancels_timed << "\n# HELP vortex_cancel_latency_seconds_max The longest.\n"
      << "# TYPE vortex_cancel_latency_seconds_max gauge\nvortex_cancel_latency_seconds_max " << cancel_latency_max
      << "\n";
    m << "# HELP vortex_gpu_memory_bytes Device memory (0 on the cpu backend).\n# TYPE vortex_gpu_memory_bytes gauge\n"
      << "vortex_gpu_memory_bytes{kind=\"in_use\"} " << gpu_in_use << "\n"
      << "vortex_gpu_memory_bytes{kind=\"peak\"} " << gpu_peak << "\n"
      << "vortex_gpu_memory_bytes{kind=\"free\"} " << gpu_free.value_or(0) << "\n";
    m << "# HELP vortex_process_resident_bytes Resident set size.\n# TYPE vortex_process_resident_bytes gauge\n"
      << "vortex_process_resident_bytes " << resident_bytes() << "\n";
    res.set_content(m.str(), "text/plain; version=0.0.4");
  }

  // --max-job-seconds while a job runs: past it, the job is cancelled and fails with "time_limit".
  void watchdog_loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop_worker) {
      watchdog_wake.wait_for(lock, std::chrono::milliseconds(100));
      if (running && opt.cost.max_job_seconds > 0 && !running->cancel_requested &&
          since(running->started) > opt.cost.max_job_seconds) {
        running->time_limited = true;
        running->cancel_requested = true;
        running->cancel_time = Clock::now();
        running->cancel_step = running->step;
        running->cancel.cancel();
        touch(*running);
      }
    }
  }

  // Retention of one job: its store row and its folder (only a real folder named by a generated id).
  void forget(const std::string& id) {
    if (store) {
      if (Status s = store->remove(id); !s.ok()) log(s.message());
    }
    const fs::path dir = jobs_dir / id;
    std::error_code ec;
    if (is_job_id(id) && fs::is_directory(fs::symlink_status(dir, ec))) fs::remove_all(dir, ec);
  }

  // At start, before any request: the store reconciled with <data>/jobs (reconcile.h), retention applied
  // to every stored job, and the jobs kept loaded (terminal, served from their stored status).
  Status restore_jobs() {
    VORTEX_ASSIGN_OR_RETURN(ReconcileReport r, reconcile_jobs(*store, jobs_dir, &is_job_id, unix_now()));
    if (r.interrupted + r.imported + r.orphans > 0 || !r.left.empty()) {
      log("reconciled " + jobs_dir.string() + ": " + std::to_string(r.interrupted) + " interrupted job(s) failed, " +
          std::to_string(r.imported) + " imported, " + std::to_string(r.orphans) + " leftover(s) removed (" +
          std::to_string(r.orphan_bytes) + " bytes), " + std::to_string(r.left.size()) + " unknown entr(ies) left");
    }
    VORTEX_ASSIGN_OR_RETURN(std::vector<std::string> expired,
                            store->beyond_retention(static_cast<size_t>(opt.keep_jobs)));
    for (const std::string& id : expired) forget(id);
    VORTEX_ASSIGN_OR_RETURN(std::vector<StoredJob> rows, store->all());
    std::vector<std::pair<double, std::string>> by_finish;
    for (const StoredJob& row : rows) {
      json status = json::parse(row.status_json, nullptr, false);
      if (!is_job_id(row.id) || !status.is_object() || !terminal_state(row.state)) continue;
      auto job = std::make_shared<Job>();
      job->id = row.id;
      job->dir = jobs_dir / row.id;
      job->state = row.state == "succeeded" ? JobState::kSucceeded
                   : row.state == "failed"  ? JobState::kFailed
                                            : JobState::kCancelled;
      job->phase = row.state;
      job->created_at = row.created_at;
      job->finished_at = row.finished_at;
      std::error_code ec;
      for (fs::directory_iterator it(job->dir / "output", ec), end; !ec && it != end; it.increment(ec)) {
        job->files.push_back(it->path().filename().string());
      }
      job->frozen = std::move(status);
      jobs[row.id] = job;
      order.push_back(row.id);
      by_finish.emplace_back(row.finished_at, row.id);
    }
    std::sort(by_finish.begin(), by_finish.end());
    for (const auto& [t, id] : by_finish) finished.push_back(id);
    return Status::Ok();
  }

  // ---- routing ----
  // The largest body each route reads (checked against Content-Length before any of it is read).
  uint64_t body_limit(const http::Request& req) const {
    if (req.method != "POST" || req.path != "/v1/videos") return 0;
    const std::string* type = req.header("content-type");
    if (type && http::media_type(*type) == "multipart/form-data") {
      return opt.max_upload_bytes + opt.limits.max_body_bytes + (64u << 10);  // + part heads
    }
    return opt.limits.max_body_bytes;
  }

  // The host part of a Host or Origin authority ("[::1]:8000" -> "::1", "Example.com:80" -> "example.com").
  static std::string authority_host(std::string_view a) {
    std::string h;
    if (!a.empty() && a.front() == '[') {
      h = std::string(a.substr(1, a.find(']') == std::string_view::npos ? 0 : a.find(']') - 1));
    } else {
      h = std::string(a.substr(0, a.rfind(':') == std::string_view::npos ? a.size() : a.rfind(':')));
    }
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return h;
  }

  bool host_allowed(const std::string& host) const {
    for (const std::string& a : allowed_hosts) {
      if (a == "*" || a == host) return true;
    }
    return false;
  }

  // Host (DNS rebinding) and Origin (cross-site forms): refused unless one of --allowed-hosts.
  std::optional<std::string> misdirected(const http::Request& req) const {
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

  static bool valid_id_chars(std::string_view id) {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(),
                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  }

  void method_not_allowed(http::Response& res, const char* allow) {
    res.set_header("Allow", allow);
    set_error(res, 405, "", "method not allowed on this route", "invalid_request");
  }

  void handle(http::Request& req, http::Response& res) {
    route(req, res);
    if (res.status >= 400 && !res.stream && !res.file) res.body = redact(std::move(res.body));
  }

  void route(http::Request& req, http::Response& res) {
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

  http::ServerOptions http_options() {
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

  void shutdown(RunningJob mode) {
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
        j->cancel_requested = true;
        j->cancel_time = Clock::now();
        j->cancel.cancel();
        finish(*j, JobState::kCancelled);
      }
      if (running && mode == RunningJob::kCancel && !running->cancel_requested) {
        running->cancel_requested = true;
        running->cancel_time = Clock::now();
        running->cancel_step = running->step;
        running->cancel.cancel();
      }
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
};

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
  s->log("loaded " + s->cfg.name + " on " + options.pipeline.backend + " in " +
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
