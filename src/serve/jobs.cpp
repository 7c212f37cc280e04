// The job table of `vortex serve` (server_impl.h): the job record and its status JSON, ids, persistence
// (job.json and the store row of job_store.h), the terminal transition and retention (the last `keep_jobs`
// finished jobs; only their own folders are deleted), and the jobs restored from the store at start after
// the reconciliation of reconcile.h.
#include <algorithm>
#include <regex>

#include "serve/reconcile.h"
#include "serve/server_impl.h"

namespace vortex::serve {

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

std::string quoted_input(const std::string& raw, size_t max) {
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

std::string dump(const json& j, int indent) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }

std::string error_body(const std::string& field, const std::string& message, const std::string& type,
                       const std::string& request_id) {
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

bool is_job_id(const std::string& id) {
  static const std::regex re("video_[0-9a-f]{24}");
  return std::regex_match(id, re);
}

std::string Server::Impl::new_id() {
  static const char* hex = "0123456789abcdef";
  std::string id = "video_";
  uint64_t a = rng(), b = rng();
  for (int i = 0; i < 16; ++i) id += hex[(a >> (4 * i)) & 15];
  for (int i = 0; i < 8; ++i) id += hex[(b >> (4 * i)) & 15];
  return id;
}

void Server::Impl::touch(Job& j) {
  ++j.version;
  changed.notify_all();
  if (http) http->wake();  // SSE streams
}

// The job's state in the store and in job.json (written atomically); under mu.
void Server::Impl::persist(const Job& j) {
  const json status = job_json(j);
  Status s = write_file_atomic((j.dir / "job.json").string(), dump(status, 2) + "\n");
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
void Server::Impl::finish(Job& j, JobState state) {
  j.state = state;
  j.phase = state_name(state);
  j.finished_at = unix_now();
  if (j.started_at > 0) j.wall_seconds = since(j.started);
  if (j.cancel_requested) {
    j.cancel_latency = seconds_since(j.cancel_time);
    ++metrics.cancels_timed;
    metrics.cancel_latency_sum += j.cancel_latency;
    metrics.cancel_latency_max = std::max(metrics.cancel_latency_max, j.cancel_latency);
  }
  if (j.started_at > 0) {
    ++metrics.jobs_timed;
    metrics.job_wall_sum += j.wall_seconds;
    metrics.job_sampling_sum += j.sampling_seconds;
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

std::shared_ptr<Job> Server::Impl::find(const std::string& id) {
  auto it = jobs.find(id);
  return it == jobs.end() ? nullptr : it->second;
}

void Server::Impl::request_cancel(Job& j) {
  j.cancel_requested = true;
  j.cancel_time = Clock::now();
  if (j.state == JobState::kRunning) j.cancel_step = j.step;
  j.cancel.cancel();
}

// Retention of one job: its store row and its folder (only a real folder named by a generated id).
void Server::Impl::forget(const std::string& id) {
  if (store) {
    if (Status s = store->remove(id); !s.ok()) log(s.message());
  }
  const fs::path dir = jobs_dir / id;
  std::error_code ec;
  if (is_job_id(id) && fs::is_directory(fs::symlink_status(dir, ec))) fs::remove_all(dir, ec);
}

// At start, before any request: the store reconciled with <data>/jobs (reconcile.h), retention applied
// to every stored job, and the jobs kept loaded (terminal, served from their stored status).
Status Server::Impl::restore_jobs() {
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

}  // namespace vortex::serve
