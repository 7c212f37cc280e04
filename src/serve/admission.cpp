// POST /v1/videos of `vortex serve` (server_impl.h): the body (JSON, or multipart with a text_embeddings
// upload), the request's fields and per-field limits, then admission (the adapters, the run plan, the
// memory budget and the price of cost.h), then the job is queued or refused (429, 503). Every refusal is a
// JSON error naming its field and counts in /metrics by reason. The job folder exists before admission
// only to hold an upload, and is removed again when the request is refused. A ref2va request's references are
// checked on the loaded transformer first, then file by file (engine probes), then as a set by the planner.
#include <algorithm>
#include <cmath>

#include "engine/memory_estimate.h"
#include "io/checkpoint.h"
#include "media/reference_media.h"
#include "serve/server_impl.h"

namespace vortex::serve {
namespace {

// Collects plan notes (frames snapped up, slow-run warnings) for the job's status.
class NoteSink : public ProgressSink {
 public:
  void note(std::string_view what) override { notes.emplace_back(what); }
  void warning(std::string_view what) override { notes.push_back("warning: " + std::string(what)); }
  std::vector<std::string> notes;
};

// A refusal of a ref2va request: the JSON field at fault and why.
struct ReferenceRefusal {
  std::string field;
  Status status;
};

// ref2va on this server's transformer, before any file is read: references run on H3's Ref2VA transformer
// (refuse_reference_transformer recognizes it). The built-in synthetic configs (no checkpoint) stand in for either.
std::optional<ReferenceRefusal> check_ref2va_model(const std::string& checkpoint_path) {
  if (checkpoint_path.empty() || !refuse_reference_transformer(checkpoint_path).ok()) return std::nullopt;
  return ReferenceRefusal{
      "task",
      invalid_argument("task \"ref2va\" runs on H3's Ref2VA transformer, and this server loaded " + checkpoint_path +
                       " (FL2VA: t2va and fl2va); send it to a server started on the snapshot's "
                       "transformer_ref/ or Ref2VA/ partition")};
}

// Each reference file through the engine's probe (media/reference_media.h: existence, kind, size, duration, frame
// rate, channels), naming conditions[i]; a "video_audio" reference must have a soundtrack. The set's durations, the
// transformer and the encoders are the planner's (check_references, engine/references.h).
std::optional<ReferenceRefusal> check_ref2va_files(const RunRequest& run, const ReferenceInputs& inputs) {
  for (size_t i = 0; i < run.references.size(); ++i) {
    const std::string at = "conditions[" + std::to_string(i) + "]";
    Result<ReferenceSpec> spec = parse_reference_spec(run.references[i]);
    if (!spec.ok()) return ReferenceRefusal{at + ".uri", spec.status().with_context(at + ".uri")};
    Result<ReferenceProbe> probe = probe_reference(*spec);
    if (!probe.ok()) return ReferenceRefusal{at + ".uri", probe.status().with_context(at + ".uri")};
    const bool needs_sound =
        std::find(inputs.with_soundtrack.begin(), inputs.with_soundtrack.end(), i) != inputs.with_soundtrack.end();
    if (needs_sound && !probe->has_audio)
      return ReferenceRefusal{at + ".type", invalid_argument(at + ".type is \"video_audio\" but the video has no "
                                                                  "audio stream; send type \"video\" for a silent "
                                                                  "clip")};
  }
  return std::nullopt;
}

}  // namespace

// The request JSON and the optional upload of a POST /v1/videos.
struct Server::Impl::CreateBody {
  std::string json;
  std::string upload;
  bool has_upload = false;
};

// An admitted request: its plan, its price and what its status shows of it.
struct Server::Impl::Admission {
  RunPlan plan;
  Price price;
  json lora_names = json::array();  // as the request named them
  std::vector<std::string> notes;
};

void Server::Impl::handle_create(const http::Request& req, http::Response& res) {
  CreateBody body;
  if (!read_create_body(req, res, body)) return;
  std::string field;
  RunRequest defaults;
  std::vector<KeyframeUpload> keyframes;  // fl2va keyframes sent as data URLs
  ReferenceInputs references;             // ref2va references sent as data URLs, and those declared video_audio
  Result<RunRequest> parsed = parse_video_request(body.json, opt.limits, defaults, &field, &keyframes, &references);
  if (!parsed.ok()) return reject(res, 400, field, parsed.status(), "invalid_request");
  RunRequest run = std::move(*parsed);
  if (!body.has_upload && run.prompt.empty()) {
    return reject(res, 400, "prompt", invalid_argument("give a prompt, or upload text_embeddings (multipart)"),
                  "invalid_request");
  }
  if (std::optional<CostRefusal> over = check_request_fields(run, opt.cost)) {
    return reject(res, over->status, over->field, invalid_argument(over->message), "limit_exceeded");
  }
  if (!run.references.empty()) {
    if (std::optional<ReferenceRefusal> r = check_ref2va_model(opt.pipeline.checkpoint_path))
      return reject(res, 400, r->field, r->status, "invalid_request");
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!refuse_unless_accepting(res)) return;
  }
  // The job directory exists before validation only when an upload (text embeddings, keyframes) is read from it.
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu);
    do id = new_id();
    while (jobs.count(id));
  }
  const fs::path dir = jobs_dir / id;
  StagingGuard guard(dir);  // removes the job folder of a refused request (io/staging.h)
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return internal_failure(req, res, "cannot create " + dir.string() + ": " + ec.message());
  if (body.has_upload) {
    const fs::path file = dir / "text_embeddings.safetensors";
    if (Status s = write_file_atomic(file.string(), body.upload); !s.ok())
      return internal_failure(req, res, s.message());
    run.text_embeddings_path = file.string();
  }
  for (const KeyframeUpload& k : keyframes) {  // read by admission's checks as the CLI reads --first-frame
    const fs::path file = dir / (k.anchor + "_frame." + k.ext);
    if (Status s = write_file_atomic(file, k.bytes); !s.ok()) return internal_failure(req, res, s.message());
    (k.anchor == "last" ? run.keyframes.last : run.keyframes.first) = file.string();
  }
  for (const ReferenceUpload& u : references.uploads) {  // probed below as the CLI probes --ref
    const fs::path file = dir / ("reference_" + std::to_string(u.index) + "." + u.ext);
    if (Status s = write_file_atomic(file, u.bytes); !s.ok()) return internal_failure(req, res, s.message());
    run.references[u.index] = u.kind + ":" + file.string();
  }
  if (!run.references.empty()) {
    if (std::optional<ReferenceRefusal> r = check_ref2va_files(run, references))
      return reject(res, 400, r->field, r->status, "invalid_request");
  }
  std::optional<Admission> admitted = admit(run, body.has_upload, res);
  if (!admitted) return;
  auto job = std::make_shared<Job>();
  job->id = id;
  job->dir = dir;
  job->created_at = unix_now();
  job->created = Clock::now();
  job->total_steps = run.steps;
  job->notes = admitted->notes;
  job->request = job_request_json(run, *admitted);
  job->flops = admitted->price.flops;
  job->plan = std::make_unique<RunPlan>(std::move(admitted->plan));
  json out;
  if (!enqueue(job, res, out)) return;
  guard.release();
  work.notify_one();
  res.status = 201;
  res.set_content(dump(out), "application/json");
}

// The request JSON (the body, or the multipart part "request") and the upload (part "text_embeddings"),
// each checked against its limit; false with `res` set when refused.
bool Server::Impl::read_create_body(const http::Request& req, http::Response& res, CreateBody& body) {
  body.json = req.body;
  const std::string* content_type = req.header("content-type");
  const std::string media = content_type ? http::media_type(*content_type) : std::string();
  if (media != "multipart/form-data") {
    if (body.json.size() <= opt.limits.max_body_bytes) return true;
    set_error(res, 413, "",
              "the body is " + std::to_string(body.json.size()) + " bytes; the limit is " +
                  std::to_string(opt.limits.max_body_bytes),
              "too_large");
    return false;
  }
  std::string why;
  std::optional<std::vector<http::FormPart>> parts = http::parse_multipart(*content_type, req.body, 4, &why);
  if (!parts) {
    set_error(res, 400, "", "malformed multipart/form-data body: " + why, "invalid_request");
    return false;
  }
  bool has_request = false;
  for (http::FormPart& part : *parts) {
    if (part.name == "request" && !has_request) {
      body.json = std::move(part.content);
      has_request = true;
    } else if (part.name == "text_embeddings" && !body.has_upload) {
      body.upload = std::move(part.content);
      body.has_upload = true;
    } else {
      set_error(res, 400, quoted_input(part.name),
                "unknown or repeated form part '" + quoted_input(part.name) + "' (known: request, text_embeddings)",
                "invalid_request");
      return false;
    }
  }
  if (!has_request) body.json = "{}";
  if (body.has_upload && body.upload.size() > opt.max_upload_bytes) {
    set_error(res, 413, "text_embeddings",
              "the upload is " + std::to_string(body.upload.size()) + " bytes; the limit is " +
                  std::to_string(opt.max_upload_bytes),
              "too_large");
    return false;
  }
  return true;
}

// A refused submission: counted by reason for /metrics, answered with the error.
void Server::Impl::reject(http::Response& res, int status, const std::string& field, const Status& s,
                          const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++metrics.rejected[reason];
  }
  set_error(res, status, field, s.message(), reason);
}

// 503 + Retry-After once the server drains or its world failed; true while it takes work. Under mu.
bool Server::Impl::refuse_unless_accepting(http::Response& res) {
  if (accepting) return true;
  res.set_header("Retry-After", "30");
  set_error(res, 503, "",
            world_error.empty() ? "the server is shutting down"
                                : "the world of ranks failed (" + world_error + "); the server is stopping",
            "unavailable");
  return false;
}

std::optional<uint64_t> Server::Impl::admission_budget() {
  if (opt.memory_limit_bytes) return opt.memory_limit_bytes;
  std::lock_guard<std::mutex> lock(mu);
  return device_budget;  // cuda; the cpu backend's host memory is checked by the planner
}

// The checks that need the loaded model: adapters (named in --lora-dir), the run plan, the world's split,
// decodable frames, the memory budget and the price (docs/serve.md "Cost limits"). nullopt with `res` set
// when refused.
std::optional<Server::Impl::Admission> Server::Impl::admit(RunRequest& run, bool has_upload, http::Response& res) {
  Admission a;
  // request.cpp admits plain file names only; the planner checks them.
  for (LoraSpec& l : run.loras) {
    a.lora_names.push_back(l.scale ? l.path + ":" + std::to_string(*l.scale) : l.path);
    if (!opt.pipeline.lora_dir.empty()) l.path = (fs::path(opt.pipeline.lora_dir) / l.path).string();
    std::error_code lec;
    if (fs::is_symlink(fs::symlink_status(l.path, lec))) {
      reject(res, 400, "lora",
             invalid_argument("lora: adapters in --lora-dir must be regular files, not symbolic links"),
             "invalid_request");
      return std::nullopt;
    }
  }
  // The pipeline's planner (engine/planner.h): const, and it reads only what the load fixed (the decoders
  // included), so this HTTP thread may call it. It names the field at fault; Field::kMemory is the whole request.
  NoteSink notes;
  Field failed = Field::kNone;
  Result<RunPlan> plan = planner->plan(run, notes, FieldStyle::kJson, &failed);
  if (!plan.ok()) {
    reject(res, 400, field_name(failed, FieldStyle::kJson), plan.status(),
           failed == Field::kMemory ? "insufficient_memory" : "invalid_request");
    return std::nullopt;
  }
  if (run.canvas_from_keyframe) {  // the canvas a keyframe resolved, against the same cost limits
    if (std::optional<CostRefusal> over = check_request_fields(plan->request, opt.cost)) {
      reject(res, over->status, "conditions", invalid_argument(over->message), "limit_exceeded");
      return std::nullopt;
    }
  }
  if (Status s = check_request_loras(run.loras, cfg, opt.pipeline.lora_allow_unmatched); !s.ok()) {
    reject(res, 400, "lora", s, "invalid_request");
    return std::nullopt;
  }
  // A world larger than the request's packed rows cannot split it (one row per rank at least).
  if (world_size > 1) {
    if (Status sp = check_sequence_parallel(cfg, world_size, plan->geo.total_rows()); !sp.ok()) {
      reject(res, 400, "width", sp, "invalid_request");
      return std::nullopt;
    }
  }
  if (const std::optional<uint64_t> budget = admission_budget(); budget && plan->memory.total() > *budget) {
    reject(res, 400, "",
           invalid_argument("not enough memory: this request needs about " + format_gb(plan->memory.total()) + " (" +
                            plan->memory.largest(3) + ") but the server admits " + format_gb(*budget) +
                            "; reduce the size, frames or text rows"),
           "insufficient_memory");
    return std::nullopt;
  }
  // The price: refused when over a limit, else recorded with the job.
  std::optional<double> rate;
  {
    std::lock_guard<std::mutex> lock(mu);
    rate = measured_flops_per_second;
  }
  if (opt.cost.flops_per_second > 0) rate = opt.cost.flops_per_second;
  if (!rate && opt.pipeline.backend == BackendKind::kCpu) rate = kCpuFlopsPerThread * std::max(1, plan->workers);
  a.price = price_of(*plan, rate);
  if (std::optional<CostRefusal> over = check_price(*plan, a.price, has_upload, opt.cost)) {
    reject(res, over->status, over->field, invalid_argument(over->message), "limit_exceeded");
    return std::nullopt;
  }
  a.plan = std::move(*plan);
  a.notes = std::move(notes.notes);
  return a;
}

// The request as the job runs it (after defaults and snapping), with its price: the status's "request".
json Server::Impl::job_request_json(const RunRequest& run, const Admission& a) const {
  const RunPlan& p = a.plan;
  const Price& price = a.price;
  return {{"text_source", text_source_name(p.text_source)},
          {"text_rows", p.geo.text_rows},
          {"width", p.geo.width},
          {"height", p.geo.height},
          {"frames", p.geo.frames},
          {"steps", run.steps},
          {"seed", run.seed},
          {"schedule", av_schedule_mode_name(p.spec.mode)},
          {"sampler", sampler_kind_name(p.spec.kind)},
          {"attention", attention_name(run.attention.value_or(exec.attention))},
          {"precision", precision_name(exec.precision)},
          {"media", decoders && run.media.value_or(true)},
          {"lora", a.lora_names},
          {"memory_estimate_bytes", p.memory.total()},
          {"price",
           {{"rows", price.rows},
            {"steps", price.steps},
            {"memory_bytes", price.memory_bytes},
            {"flops", price.flops},
            {"estimated_seconds", price.seconds ? json(*price.seconds) : json(nullptr)}}}};
}

// Queues `job` (its status in `out`), or refuses it: 503 while draining, 429 + Retry-After when the queue
// is full. False with `res` set when refused.
bool Server::Impl::enqueue(const std::shared_ptr<Job>& job, http::Response& res, json& out) {
  std::lock_guard<std::mutex> lock(mu);
  if (!refuse_unless_accepting(res)) return false;
  if (static_cast<int>(queue.size()) >= opt.queue_limit) {
    ++metrics.rejected["queue_full"];
    // About one job's time per queued job ahead, from the jobs run so far (at least a second).
    const double per_job = metrics.jobs_timed > 0 ? metrics.job_wall_sum / metrics.jobs_timed : 10.0;
    res.set_header("Retry-After", std::to_string(std::max<long>(1, std::lround(per_job))));
    set_error(res, 429, "", "the queue is full (" + std::to_string(opt.queue_limit) + " jobs waiting); retry later",
              "queue_full");
    return false;
  }
  jobs[job->id] = job;
  order.push_back(job->id);
  queue.push_back(job->id);
  ++metrics.submitted;
  persist(*job);
  touch(*job);
  out = job_json(*job);
  return true;
}

}  // namespace vortex::serve
