// The worker of `vortex serve` (server_impl.h): one thread owns the pipeline through the public API's Engine
// (src/api/engine_internal.h), loads it, and runs the queued jobs one at a time (GPU work is serialized), publishing
// each job's outputs by one rename. With a world of ranks (world.h) it broadcasts each job before running it,
// heartbeats while idle and stops the followers at shutdown. The watchdog thread cancels a job that runs past
// --max-job-seconds.
#include <algorithm>

#include "serve/server_impl.h"
#include "serve/world.h"

namespace vortex::serve {

// Forwards a running job's stages, notes and steps to its record and to the step metrics.
class Server::Impl::JobProgress : public ProgressSink {
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
    ++s_.metrics.steps_total;
    s_.metrics.step_seconds_sum += step_seconds;
    s_.metrics.step_seconds_last = step_seconds;
    s_.metrics.gpu_in_use = in_use;
    s_.metrics.gpu_peak = peak;
    s_.touch(j_);
  }

 private:
  Impl& s_;
  Job& j_;
};

// A job its cancel token stopped: failed with "time_limit" when --max-job-seconds stopped it, else cancelled.
// Under mu.
void Server::Impl::finish_stopped(Job& j) {
  if (!j.time_limited) return finish(j, JobState::kCancelled);
  j.error_type = "time_limit";
  j.error_message = j.error_message_raw = "the job ran past this server's --max-job-seconds (" +
                                          std::to_string(static_cast<long>(opt.cost.max_job_seconds)) +
                                          " s) and was stopped";
  finish(j, JobState::kFailed);
}

// Runs `job`; its error when it failed (OK when it succeeded or was cancelled).
Status Server::Impl::run_job(const std::shared_ptr<Job>& job) {
  const fs::path staging = job->dir / "output.partial";
  const fs::path out = job->dir / "output";
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  Result<RunOutputs> result = io_error("cannot create " + staging.string() + ": " + ec.message());
  if (!ec) {
    JobProgress progress(*this, *job);
    result = api::run_planned(*engine, *job->plan, progress, job->cancel, staging.string());
    if (result.ok()) {
      fs::rename(staging, out, ec);
      if (ec) result = io_error("cannot publish " + out.string() + ": " + ec.message());
    }
  }
  if (!result.ok()) fs::remove_all(staging, ec);
  const std::optional<size_t> free_now = pipeline->backend().free_device_memory();
  const size_t in_use = pipeline->backend().memory_in_use(), peak = pipeline->backend().memory_peak();

  std::lock_guard<std::mutex> lock(mu);
  metrics.gpu_free = free_now;
  metrics.gpu_in_use = in_use;
  metrics.gpu_peak = peak;
  if (result.ok()) {
    job->sampling_seconds = result->sampling_seconds;
    // The measured throughput prices the next requests (an even blend with the previous measurement).
    if (job->sampling_seconds > 0 && job->flops > 0) {
      const double r = job->flops / job->sampling_seconds;
      measured_flops_per_second = measured_flops_per_second ? 0.5 * (*measured_flops_per_second + r) : r;
    }
    job->files = result->files;
    finish(*job, JobState::kSucceeded);
  } else if (result.status().code() == ErrorCode::kCancelled || job->cancel.cancelled()) {
    // A cancel cuts long ops short (Backend::set_cancel_flag); whatever they then report is the cancel.
    finish_stopped(*job);
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
void Server::Impl::world_failed(const Status& why) {
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
bool Server::Impl::broadcast_job(const std::shared_ptr<Job>& job) {
  auto fail_job = [&](const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    job->error_type = error_type_for(st.code());
    job->error_message_raw = st.message();
    job->error_message = redact(job->error_message_raw);
    finish(*job, JobState::kFailed);
    running.reset();
  };
  JobProgress progress(*this, *job);
  // The encode stops at its next layer (load) boundary on a cancel (Pipeline::encode_prompt).
  const Status encoded = pipeline->encode_prompt(*job->plan, progress, &job->cancel);
  if (job->cancel.cancelled()) {  // not broadcast yet: the followers never see it
    std::lock_guard<std::mutex> lock(mu);
    finish_stopped(*job);
    running.reset();
    return false;
  }
  if (!encoded.ok()) {
    fail_job(encoded);
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
      fail_job(Status(st.code(), st.message() + "; the world of " + std::to_string(world_size) + " ranks has stopped"));
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

// Opens the pipeline, joins the world of ranks (ServeOptions::join) and loads the weights; the device
// memory left after the load is the admission budget on cuda.
Status Server::Impl::load_pipeline() {
  class LoadLog : public ProgressSink {
   public:
    explicit LoadLog(const Impl& s) : s_(s) {}
    void stage(std::string_view what) override { s_.log(std::string(what)); }
    void note(std::string_view what) override { s_.log("note: " + std::string(what)); }

   private:
    const Impl& s_;
  } load_log(*this);
  Outcome<std::unique_ptr<Engine>> e = api::open_engine(opt.pipeline, FieldStyle::kJson);
  if (!e.ok()) return e.status();
  engine = std::move(e.value());
  pipeline = &api::pipeline_of(*engine);
  if (opt.join) {  // joined before the weights load, as generate's ranks do
    load_log.stage("joining the world of ranks");
    Result<std::unique_ptr<Communicator>> c = opt.join(pipeline->backend());
    if (!c.ok()) return c.status();
    comm = std::move(*c);
    world_size = comm->size();
  }
  if (Status st = pipeline->load_weights(load_log); !st.ok()) {
    if (comm) comm->abort("rank 0 could not load the weights: " + st.message());
    return st;
  }
  if (comm) pipeline->model().set_communicator(comm.get());
  cfg = pipeline->config();
  planner = &pipeline->planner();
  decoders = pipeline->has_decoders();
  exec = pipeline->exec_options();
  {
    std::lock_guard<std::mutex> lock(mu);
    metrics.gpu_free = pipeline->backend().free_device_memory();
    device_budget = metrics.gpu_free;
    metrics.gpu_in_use = pipeline->backend().memory_in_use();
    metrics.gpu_peak = pipeline->backend().memory_peak();
  }
  return Status::Ok();
}

// The next queued job, marked running; nullptr when the worker stops (shutdown with an empty queue, or a
// failed world). With a world, heartbeats while idle and the stop message at the end are sent from here.
std::shared_ptr<Job> Server::Impl::next_job() {
  for (;;) {
    std::unique_lock<std::mutex> lock(mu);
    const auto ready = [&] { return stop_worker || !queue.empty(); };
    if (!comm) {
      work.wait(lock, ready);
    } else if (!work.wait_for(lock, opt.heartbeat, ready)) {
      lock.unlock();
      if (Status st = send_world_message(*comm, pipeline->backend(), WorldMessage::kIdle, ""); !st.ok()) {
        world_failed(st);
        return nullptr;
      }
      continue;
    }
    if (queue.empty()) {  // stop_worker and nothing left
      lock.unlock();
      if (comm) {
        Status st = send_world_message(*comm, pipeline->backend(), WorldMessage::kStop, "");
        if (!st.ok()) world_failed(st);
      }
      return nullptr;
    }
    std::shared_ptr<Job> job = jobs.at(queue.front());
    queue.pop_front();
    job->state = JobState::kRunning;
    job->phase = "starting";
    job->started_at = unix_now();
    job->started = Clock::now();
    job->queue_seconds = std::chrono::duration<double>(job->started - job->created).count();
    running = job;
    persist(*job);
    touch(*job);
    return job;
  }
}

void Server::Impl::worker_loop() {
  const Status load = load_pipeline();
  loaded.set_value(load);
  if (!load.ok()) return;
  for (;;) {
    std::shared_ptr<Job> job = next_job();
    if (!job) return;
    if (comm && !broadcast_job(job)) {
      if (!world_status().ok()) return;
      continue;
    }
    const Status failed = run_job(job);
    if (comm && !failed.ok()) return world_failed(failed.with_context("job " + job->id));
  }
}

Status Server::Impl::world_status() {
  std::lock_guard<std::mutex> lock(mu);
  return world_error.empty() ? Status::Ok() : internal_error("the world of ranks failed: " + world_error);
}

// --max-job-seconds while a job runs: past it, the job is cancelled and fails with "time_limit".
void Server::Impl::watchdog_loop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stop_worker) {
    watchdog_wake.wait_for(lock, std::chrono::milliseconds(100));
    if (running && opt.cost.max_job_seconds > 0 && !running->cancel_requested &&
        since(running->started) > opt.cost.max_job_seconds) {
      running->time_limited = true;
      request_cancel(*running);
      touch(*running);
    }
  }
}

}  // namespace vortex::serve
