// The HTTP job server (see server.h). Routes: POST/GET /v1/videos, GET/DELETE /v1/videos/{id},
// GET /v1/videos/{id}/content, GET /v1/videos/{id}/events (SSE), GET /health, GET /metrics.
// One mutex guards the job table; the worker thread holds it only to update state, never while running
// a job. A job's cancel token is set under the lock and read by the model between blocks.
#include "serve/server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
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

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/memory_estimate.h"

namespace vortex::serve {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
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
  std::string error_type, error_message;
  std::unique_ptr<RunPlan> plan;  // released when the job ends (it holds the text rows)
  json request;                   // the request as it runs (after defaults and snapping)
  std::vector<std::string> notes;
  CancelToken cancel;
  bool cancel_requested = false;
  int cancel_step = -1;  // the step count when the cancel arrived (running jobs)
  Clock::time_point cancel_time;
  double cancel_latency = -1;  // seconds from the DELETE to the job's stop
  std::vector<double> step_seconds;
  double sampling_seconds = 0, wall_seconds = 0, queue_seconds = 0;
  std::vector<std::string> files;
  uint64_t version = 0;  // bumped on every change (SSE)
};

json job_json(const Job& j) {
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

// Every JSON text the server writes: strings that are not valid UTF-8 (a request's bytes reaching a message)
// are written with U+FFFD in place of the bad bytes instead of throwing.
std::string json_text(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

// Request bytes quoted in a message: printable ASCII kept, every other byte as %XX, at most `max` bytes read.
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

std::string error_body(const std::string& field, const std::string& message, const std::string& type) {
  json e;
  e["error"] = {{"field", field.empty() ? json(nullptr) : json(field)}, {"message", message}, {"type", type}};
  return json_text(e);
}

void set_error(httplib::Response& res, int status, const std::string& field, const std::string& message,
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
  bool decoders = false;  // the pipeline holds the VAE decoders (jobs get video.mp4 + audio.wav)
  fs::path jobs_dir;
  httplib::Server http;
  int bound_port = -1;
  std::thread listener, worker;

  std::mutex mu;
  std::condition_variable changed;  // any job changed (SSE, tests)
  std::condition_variable work;     // the queue or `stopping` changed
  std::map<std::string, std::shared_ptr<Job>> jobs;
  std::vector<std::string> order;    // creation order, for listing
  std::deque<std::string> queue;     // queued ids, FIFO
  std::deque<std::string> finished;  // terminal ids, oldest first (retention)
  std::shared_ptr<Job> running;
  bool accepting = true, stopping = false, stop_worker = false, shut_down = false;
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
  std::optional<uint64_t> device_budget;  // free device memory right after load (cuda)

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
  }

  void persist(const Job& j) {  // job.json, written atomically; under mu
    Status s = write_file_atomic(j.dir / "job.json", json_text(job_json(j), 2) + "\n");
    if (!s.ok()) log("cannot write job.json of " + j.id + ": " + s.message());
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
    log("job " + j.id + " " + state_name(state) + (j.error_message.empty() ? "" : ": " + j.error_message));
    finished.push_back(j.id);
    while (static_cast<int>(finished.size()) > opt.keep_jobs) {
      const std::string old = finished.front();
      finished.pop_front();
      auto it = jobs.find(old);
      if (it == jobs.end()) continue;
      const fs::path dir = it->second->dir;
      jobs.erase(it);
      order.erase(std::remove(order.begin(), order.end(), old), order.end());
      // Only a directory this server made for a job id it generated.
      if (is_job_id(old) && dir.parent_path() == jobs_dir) {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
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
      job->files = result->files;
      finish(*job, JobState::kSucceeded);
    } else if (result.status().code() == ErrorCode::kCancelled) {
      finish(*job, JobState::kCancelled);
    } else {
      job->error_type = error_type_for(result.status().code());
      job->error_message = result.status().message();
      if (comm) job->error_message += "; the world of " + std::to_string(world_size) + " ranks has stopped";
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
        j->error_message =
            "not run: the world of " + std::to_string(world_size) + " ranks failed (" + world_error + ")";
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
      job->error_message = st.message();
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
  bool authorized(const httplib::Request& req) const {
    if (opt.api_key.empty()) return true;
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const std::string token = h.rfind(prefix, 0) == 0 ? h.substr(prefix.size()) : std::string();
    return constant_time_equals(token, opt.api_key);
  }

  std::optional<uint64_t> admission_budget() {
    if (opt.memory_limit_bytes) return opt.memory_limit_bytes;
    std::lock_guard<std::mutex> lock(mu);
    return device_budget;  // cuda; the cpu backend's host memory is checked by plan_run
  }

  void handle_create(const httplib::Request& req, httplib::Response& res) {
    std::string body = req.body;
    std::string upload;
    bool has_upload = false;
    if (req.is_multipart_form_data()) {
      for (const auto& [name, part] : req.files) {
        if (name != "request" && name != "text_embeddings") {
          return set_error(res, 400, quoted_input(name),
                           "unknown form part '" + quoted_input(name) + "' (known: request, text_embeddings)",
                           "invalid_request");
        }
      }
      body = req.has_file("request") ? req.get_file_value("request").content : "{}";
      if (req.has_file("text_embeddings")) {
        upload = req.get_file_value("text_embeddings").content;
        has_upload = true;
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
    if (ec) return set_error(res, 500, "", "cannot create the job directory: " + ec.message(), "io");
    if (has_upload) {
      const fs::path file = dir / "text_embeddings.safetensors";
      if (Status s = write_file_atomic(file, upload); !s.ok()) return set_error(res, 500, "", s.message(), "io");
      run.text_embeddings_path = file.string();
    }
    // Adapters are named in --lora-dir (request.cpp admits plain file names only); check_run_request checks them.
    json lora_names = json::array();
    for (LoraSpec& l : run.loras) {
      lora_names.push_back(l.scale ? l.path + ":" + std::to_string(*l.scale) : l.path);
      if (!opt.pipeline.lora_dir.empty()) l.path = (fs::path(opt.pipeline.lora_dir) / l.path).string();
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
                    {"memory_estimate_bytes", p.memory.total()}};
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
    res.set_content(json_text(out), "application/json");
  }

  std::shared_ptr<Job> find(const std::string& id) {  // under mu
    auto it = jobs.find(id);
    return it == jobs.end() ? nullptr : it->second;
  }

  void no_job(httplib::Response& res, const std::string& id) {
    set_error(res, 404, "id", "no job '" + id + "' (finished jobs are kept up to the retention limit)", "not_found");
  }

  void handle_get(const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<Job> j = find(id);
    if (!j) return no_job(res, id);
    res.set_content(json_text(job_json(*j)), "application/json");
  }

  void handle_list(const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    json data = json::array();
    for (const std::string& id : order) data.push_back(job_json(*jobs.at(id)));
    res.set_content(json_text(json{{"object", "list"}, {"data", data}}), "application/json");
  }

  void handle_delete(const httplib::Request& req, httplib::Response& res) {
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
    res.set_content(json_text(job_json(*j)), "application/json");
  }

  void handle_content(const httplib::Request& req, httplib::Response& res) {
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
    const std::string variant = req.has_param("variant") ? req.get_param_value("variant")
                                : media                  ? "video"
                                                         : "video_latents";
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
    std::ifstream f(out / it->second.first, std::ios::binary);
    if (!f) return set_error(res, 404, "id", "job " + id + "'s outputs were removed", "not_found");
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const bool latents = variant == "video_latents" || variant == "audio_latents";
    res.set_header("X-Vortex-Content-Kind", latents ? "latents" : variant);
    res.set_header("Content-Disposition", std::string("attachment; filename=\"") + id + "_" + it->second.first + "\"");
    res.set_content(std::move(bytes), it->second.second);
  }

  void handle_events(const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mu);
      job = find(id);
    }
    if (!job) return no_job(res, id);
    auto last = std::make_shared<uint64_t>(~0ull);
    res.set_header("Cache-Control", "no-cache");
    auto provider = [this, job, last](size_t, httplib::DataSink& sink) {
      std::unique_lock<std::mutex> lock(mu);
      changed.wait_for(lock, std::chrono::seconds(1), [&] { return stopping || job->version != *last; });
      if (stopping) {
        lock.unlock();
        sink.done();
        return true;
      }
      std::string event;
      if (job->version != *last) {
        *last = job->version;
        const bool end = terminal(job->state);
        event = std::string("event: ") + (end ? "done" : "progress") + "\ndata: " + json_text(job_json(*job)) + "\n\n";
        lock.unlock();
        if (!sink.write(event.data(), event.size())) return false;
        if (end) sink.done();
        return true;
      }
      lock.unlock();
      static const std::string kKeepAlive = ": keep-alive\n\n";
      return sink.write(kKeepAlive.data(), kKeepAlive.size());
    };
    res.set_chunked_content_provider("text/event-stream", total_provider(std::move(provider)));
  }

  void handle_health(const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    json h = {{"status", !world_error.empty() ? "failed"
                         : stopping           ? "stopping"
                                              : "ok"},
              {"model", cfg.name},
              {"backend", opt.pipeline.backend},
              {"precision", precision_name(exec.precision)},
              {"attention", attention_name(exec.attention)},
              {"queue_length", queue.size()},
              {"running", running ? json(running->id) : json(nullptr)},
              {"content_kind", decoders ? "video" : "latents"},
              {"world_size", world_size},
              {"world_error", world_error.empty() ? json(nullptr) : json(world_error)}};
    res.status = stopping || !world_error.empty() ? 503 : 200;
    res.set_content(json_text(h), "application/json");
  }

  void handle_metrics(const httplib::Request&, httplib::Response& res) {
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
    for (const char* r : {"invalid_request", "insufficient_memory", "queue_full"}) {
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

  // A 500 with a fixed message: the exception's text stays in the server's log, out of the response.
  void internal_error_response(httplib::Response& res, const char* where) noexcept {
    try {
      std::string what = "an exception that is not a std::exception";
      try {
        throw;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      log(std::string("internal error in ") + where + ": " + quoted_input(what, 200));
      res.status = 500;
      res.set_content(error_body("", "internal error (logged by the server)", "internal"), "application/json");
    } catch (...) {
    }
  }

  // Every handler is total: whatever it throws becomes that request's 500, never the process's end.
  using Route = void (Impl::*)(const httplib::Request&, httplib::Response&);
  httplib::Server::Handler guarded(Route route) {
    return [this, route](const httplib::Request& q, httplib::Response& r) {
      try {
        (this->*route)(q, r);
      } catch (...) {
        internal_error_response(r, "a route handler");
      }
    };
  }

  // A content provider that cannot end the process: an exception ends that one response.
  template <typename Provider>
  httplib::ContentProviderWithoutLength total_provider(Provider provider) {
    return [this, provider](size_t offset, httplib::DataSink& sink) {
      try {
        return provider(offset, sink);
      } catch (...) {
        log("internal error in a streamed response");
        return false;
      }
    };
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      try {
        if (req.path == "/health" || authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
        res.set_header("WWW-Authenticate", "Bearer");
        set_error(res, 401, "", "missing or wrong bearer token (Authorization: Bearer <key>)", "unauthorized");
      } catch (...) {
        internal_error_response(res, "the authorization check");
      }
      return httplib::Server::HandlerResponse::Handled;
    });
    const std::string id = "/v1/videos/([A-Za-z0-9_]{1,64})";
    http.Post("/v1/videos", guarded(&Impl::handle_create));
    http.Get("/v1/videos", guarded(&Impl::handle_list));
    http.Get(id, guarded(&Impl::handle_get));
    http.Delete(id, guarded(&Impl::handle_delete));
    http.Get(id + "/content", guarded(&Impl::handle_content));
    http.Get(id + "/events", guarded(&Impl::handle_events));
    http.Get("/health", guarded(&Impl::handle_health));
    http.Get("/metrics", guarded(&Impl::handle_metrics));
    // Statuses without a body (no route, 413 from the parser, a wrong method) get a JSON error too. The request
    // line is quoted escaped (quoted_input), never as raw bytes.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                       httplib::Response& res) {
      try {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg = res.status == 404 ? "no route " + quoted_input(req.method, 16) + " " + quoted_input(req.path)
                          : res.status == 413 ? std::string("the request is larger than the server accepts")
                          : res.status == 405 ? std::string("method not allowed")
                                              : std::string("bad request");
        res.set_content(error_body("", msg, res.status == 404 ? "not_found" : "invalid_request"), "application/json");
      } catch (...) {
        internal_error_response(res, "the error handler");
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      try {
        if (ep) std::rethrow_exception(ep);
        throw std::runtime_error("no exception object");
      } catch (...) {
        internal_error_response(res, "the HTTP layer");
      }
    });
    const int threads = std::max(2, opt.http_threads);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    http.set_payload_max_length(std::max(opt.limits.max_body_bytes, opt.max_upload_bytes) + (64u << 10));
    http.set_read_timeout(10, 0);
    http.set_write_timeout(10, 0);
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
    http.stop();
    if (listener.joinable()) listener.join();
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
    }
    if (worker.joinable()) worker.join();
  }
};

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
  VORTEX_RETURN_IF_ERROR(validate_pipeline_options(options.pipeline));
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  std::error_code ec;
  impl->jobs_dir = fs::absolute(fs::path(options.data_dir), ec).lexically_normal() / "jobs";
  fs::create_directories(impl->jobs_dir, ec);
  if (ec)
    return io_error("cannot create " + impl->jobs_dir.string() + ": " + ec.message() + "; choose a writable --data");

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
  s->routes();
  // httplib's default sets SO_REUSEPORT, which lets a second server bind a port in use and take half of its
  // connections; SO_REUSEADDR alone still refuses a port another socket listens on.
  s->http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  errno = 0;
  const bool bound = options.port == 0 ? (s->bound_port = s->http.bind_to_any_port(options.host)) > 0
                                       : s->http.bind_to_port(options.host, options.port);
  if (!bound) {
    const int err = errno;
    std::unique_ptr<Server> tmp(new Server(std::move(impl)));  // joins the worker
    const std::string port = std::to_string(options.port);
    return io_error("cannot listen on " + options.host + ":" + port + ": " +
                    (err == EADDRINUSE
                         ? "port " + port + " is in use by another process (another vortex serve?)"
                         : "port " + port + " is in use, or " + options.host + " is not an address of this machine (" +
                               (err != 0 ? std::strerror(err) : "bind failed") + ")"));
  }
  if (options.port != 0) s->bound_port = options.port;
  s->listener = std::thread([s] { s->http.listen_after_bind(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace vortex::serve
