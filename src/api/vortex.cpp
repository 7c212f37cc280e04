// The public API (include/vortex/vortex.h) over the engine: options become a RequestSpec through the flag table
// (request_flags.h), resolve.h checks them across fields, the planner refuses a bad request before any weight loads,
// and engine/generate.h runs and publishes. The callbacks reach the engine as a ProgressSink (CallbackSink).
#include <string>
#include <utility>

#include "api/engine_internal.h"
#include "api/resolve.h"
#include "engine/generate.h"
#include "vortex/build_info.h"

namespace vortex {
namespace api {
namespace {

// Parses `list` (keys: ids or flags) into `spec`; `scope` is where the list belongs.
Status apply_list(const OptionList& list, FlagScope scope, RequestSpec& spec, FieldStyle style, Field* failed) {
  for (const auto& [key, value] : list) {
    const RequestFlag* f = find_request_flag(key);
    if (f == nullptr) return invalid_argument("unknown option '" + key + "' (docs/api.md lists them)");
    if (f->scope != scope) {
      if (failed != nullptr) *failed = f->field;
      return invalid_argument(std::string(style == FieldStyle::kFlag ? f->flag() : f->id) +
                              (scope == FlagScope::kLoad ? " is a request option: set it in Request"
                                                         : " is fixed at load: set it in LoadOptions"));
    }
    if (Status s = apply_request_flag(*f, value, spec, style); !s.ok()) {
      if (failed != nullptr) *failed = f->field;
      return s;
    }
  }
  return Status::Ok();
}

// A plain field of the public structs, given through its table row like any other option.
Status apply_field(const char* flag, const std::string& text, RequestSpec& spec, FieldStyle style, Field* failed) {
  const RequestFlag* f = find_request_flag(flag);
  if (Status s = apply_request_flag(*f, text, spec, style); !s.ok()) {
    if (failed != nullptr) *failed = f->field;
    return s;
  }
  return Status::Ok();
}

Status load_spec(const LoadOptions& o, RequestSpec& spec, FieldStyle style, Field* failed) {
  const std::pair<const char*, std::string> texts[] = {{"--model", o.model_dir},
                                                       {"--checkpoint", o.checkpoint},
                                                       {"--config", o.config},
                                                       {"--backend", o.backend},
                                                       {"--precision", o.precision}};
  for (const auto& [flag, text] : texts)
    if (!text.empty()) VORTEX_RETURN_IF_ERROR(apply_field(flag, text, spec, style, failed));
  if (o.synthetic_weights) VORTEX_RETURN_IF_ERROR(apply_field("--synthetic", "1", spec, style, failed));
  if (o.threads != 0) VORTEX_RETURN_IF_ERROR(apply_field("--threads", std::to_string(o.threads), spec, style, failed));
  spec.load.device = o.device;
  return apply_list(o.set, FlagScope::kLoad, spec, style, failed);
}

Status run_spec(const Request& r, RequestSpec& spec, FieldStyle style, Field* failed) {
  const std::pair<const char*, std::string> texts[] = {
      {"--prompt", r.prompt}, {"--text-embeddings", r.text_embeddings}, {"--out", r.out_dir}};
  for (const auto& [flag, text] : texts)
    if (!text.empty()) VORTEX_RETURN_IF_ERROR(apply_field(flag, text, spec, style, failed));
  const std::pair<const char*, int> ints[] = {
      {"--width", r.width}, {"--height", r.height}, {"--frames", r.frames}, {"--steps", r.steps}};
  for (const auto& [flag, v] : ints)
    if (v != 0) VORTEX_RETURN_IF_ERROR(apply_field(flag, std::to_string(v), spec, style, failed));
  if (r.seed != -2) VORTEX_RETURN_IF_ERROR(apply_field("--seed", std::to_string(r.seed), spec, style, failed));
  if (r.overwrite) VORTEX_RETURN_IF_ERROR(apply_field("--overwrite", "1", spec, style, failed));
  return apply_list(r.set, FlagScope::kRun, spec, style, failed);
}

Outputs outputs_of(const GenerateResult& g, uint64_t seed) {
  Outputs o;
  o.out_dir = g.out_dir;
  o.files = g.files;
  o.width = g.geometry.width;
  o.height = g.geometry.height;
  o.frames = g.geometry.frames;
  o.latent_frames = g.geometry.latent_frames;
  o.rows = g.geometry.total_rows();
  o.seed = seed;
  o.step_seconds = g.step_seconds;
  o.sampling_seconds = g.sampling_seconds;
  o.total_seconds = g.total_seconds;
  return o;
}

// Registers `token` as the engine's running call for its lifetime (Engine::cancel).
class RunningCall {
 public:
  RunningCall(Engine::Impl& impl, CancelToken& token) : impl_(impl) {
    std::lock_guard<std::mutex> lock(impl_.mu);
    impl_.running = &token;
  }
  ~RunningCall() {
    std::lock_guard<std::mutex> lock(impl_.mu);
    impl_.running = nullptr;
  }
  RunningCall(const RunningCall&) = delete;
  RunningCall& operator=(const RunningCall&) = delete;

 private:
  Engine::Impl& impl_;
};

}  // namespace

void CallbackSink::emit_text(ProgressEvent::Kind kind, std::string_view text) {
  ProgressEvent e;
  e.kind = kind;
  e.text = text;
  emit(e);
}

void CallbackSink::emit(const ProgressEvent& e) {
  if (cb_.on_progress && !cb_.on_progress(e)) token_.cancel();
  if (cb_.cancelled && cb_.cancelled()) token_.cancel();
}

void CallbackSink::stage(std::string_view what) { emit_text(ProgressEvent::Kind::kStage, what); }

void CallbackSink::note(std::string_view what) { emit_text(ProgressEvent::Kind::kNote, what); }

void CallbackSink::warning(std::string_view what) { emit_text(ProgressEvent::Kind::kWarning, what); }

void CallbackSink::step(int done, int total, double step_seconds, double elapsed_seconds) {
  ProgressEvent e;
  e.kind = ProgressEvent::Kind::kStep;
  e.done = done;
  e.total = total;
  e.seconds = step_seconds;
  e.elapsed = elapsed_seconds;
  emit(e);
}

void CallbackSink::loading(std::string_view what, uint64_t bytes_done, uint64_t bytes_total, int layers_done,
                           int layers_total, double seconds) {
  ProgressEvent e;
  e.kind = ProgressEvent::Kind::kLoading;
  e.text = what;
  e.done = layers_done;
  e.total = layers_total;
  e.bytes_done = bytes_done;
  e.bytes_total = bytes_total;
  e.seconds = seconds;
  emit(e);
}

void CallbackSink::decode(std::string_view stage, int64_t done, int64_t total, double elapsed_seconds) {
  ProgressEvent e;
  e.kind = ProgressEvent::Kind::kDecode;
  e.text = stage;
  e.done = done;
  e.total = total;
  e.seconds = elapsed_seconds;
  emit(e);
}

void CallbackSink::frame(int index, int count, int width, int height, const uint8_t* rgb) {
  const Frame f{index, count, width, height, rgb};
  if (cb_.on_frame && !cb_.on_frame(f)) token_.cancel();
  if (cb_.cancelled && cb_.cancelled()) token_.cancel();
}

Failure field_failure(Status status, Field field) {
  Failure f;
  f.status = std::move(status);
  if (field != Field::kNone) {
    f.field = field_id(field);
    const char* flag = field_flag(field);
    f.flag = flag != nullptr ? flag : "";
  }
  return f;
}

FieldStyle style_of(const LoadOptions& options) {
  return options.names == LoadOptions::Names::kFlags ? FieldStyle::kFlag : FieldStyle::kJson;
}

Outcome<std::unique_ptr<Engine>> open_engine(const PipelineOptions& options, FieldStyle style) {
  Result<std::unique_ptr<Pipeline>> p = Pipeline::open(options);
  if (!p.ok()) return p.status();
  auto impl = std::make_unique<Engine::Impl>();
  impl->pipeline = std::move(*p);
  impl->style = style;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Pipeline& pipeline_of(Engine& engine) { return *engine.impl().pipeline; }

Result<RunOutputs> run_planned(Engine& engine, const RunPlan& plan, ProgressSink& progress, CancelToken& cancel,
                               const std::string& dir) {
  RunningCall call(engine.impl(), cancel);
  return engine.impl().pipeline->run(plan, progress, cancel, dir);
}

Outcome<Outputs> generate_ranked(const LoadOptions& options, const Request& request, const Callbacks& callbacks,
                                 const std::optional<RankEnv>& rank) {
  const FieldStyle style = style_of(options);
  RequestSpec spec;
  Field failed = Field::kNone;
  if (Status s = load_spec(options, spec, style, &failed); !s.ok()) return field_failure(s, failed);
  if (Status s = run_spec(request, spec, style, &failed); !s.ok()) return field_failure(s, failed);
  Result<ResolvedGenerate> resolved = resolve_generate(std::move(spec), style, &failed);
  if (!resolved.ok()) return field_failure(resolved.status(), failed);
  GenerateRequest& req = resolved->request;
  req.style = style;
  req.rank = rank;
  CancelToken token;
  CallbackSink sink(callbacks, token);
  for (const std::string& n : resolved->notes) sink.note(n);
  Result<GenerateResult> g = generate(req, sink, &token, &failed);
  if (!g.ok()) return field_failure(g.status(), failed);
  Outputs out = outputs_of(*g, req.run.seed);
  if (resolved->latents_only && resolved->folder_decoders.present()) {
    out.unused_vae_dir = resolved->folder_decoders.vae_dir;
    out.unused_audio_vae_dir = resolved->folder_decoders.audio_vae_dir;
  }
  return out;
}

}  // namespace api

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Outcome<std::unique_ptr<Engine>> Engine::open(const LoadOptions& options) {
  const FieldStyle style = api::style_of(options);
  api::RequestSpec spec;
  Field failed = Field::kNone;
  if (Status s = api::load_spec(options, spec, style, &failed); !s.ok()) return api::field_failure(s, failed);
  Result<PipelineOptions> load = api::resolve_load(spec, style, &failed);
  if (!load.ok()) return api::field_failure(load.status(), failed);
  return api::open_engine(*load, style);
}

bool Engine::loaded() const { return impl_->pipeline->weights_loaded(); }

Outcome<bool> Engine::load(const Callbacks& callbacks) {
  if (loaded()) return true;
  CancelToken token;
  api::CallbackSink sink(callbacks, token);
  if (Status s = impl_->pipeline->load_weights(sink); !s.ok()) return s;
  return true;
}

Outcome<bool> Engine::check(const Request& request) const {
  api::RequestSpec spec;
  spec.load = impl_->pipeline->options();
  Field failed = Field::kNone;
  if (Status s = api::run_spec(request, spec, impl_->style, &failed); !s.ok()) return api::field_failure(s, failed);
  Result<RunRequest> run = api::resolve_run(std::move(spec), impl_->style, nullptr, &failed);
  if (!run.ok()) return api::field_failure(run.status(), failed);
  ProgressSink quiet;
  Result<RunPlan> plan = impl_->pipeline->plan(*run, quiet, impl_->style, &failed);
  if (!plan.ok()) return api::field_failure(plan.status(), failed);
  return true;
}

Outcome<Outputs> Engine::generate(const Request& request, const Callbacks& callbacks) {
  Pipeline& pipeline = *impl_->pipeline;
  const FieldStyle style = impl_->style;
  api::RequestSpec spec;
  spec.load = pipeline.options();
  Field failed = Field::kNone;
  if (Status s = api::run_spec(request, spec, style, &failed); !s.ok()) return api::field_failure(s, failed);
  const std::string out_dir = spec.out_dir;
  const bool overwrite = spec.overwrite;
  CancelToken token;
  api::CallbackSink sink(callbacks, token);
  api::RunningCall call(*impl_, token);
  std::vector<std::string> notes;
  Result<RunRequest> run = api::resolve_run(std::move(spec), style, &notes, &failed);
  if (!run.ok()) return api::field_failure(run.status(), failed);
  for (const std::string& n : notes) sink.note(n);
  // Every check before any weight loads: the request, its memory, the output folder.
  Result<RunPlan> plan = pipeline.plan(*run, sink, style, &failed);
  if (!plan.ok()) return api::field_failure(plan.status(), failed);
  if (Status s = check_out_dir(out_dir, overwrite); !s.ok()) return api::field_failure(s, Field::kOut);
  if (!pipeline.weights_loaded()) {
    pipeline.reserve_for(*plan);
    if (Status s = pipeline.load_decoders(sink); !s.ok()) return s;
    if (Status s = pipeline.planner().check_decodable(*plan, style); !s.ok())
      return api::field_failure(s, Field::kFrames);
    if (Status s = pipeline.load_weights(sink); !s.ok()) return s;
  }
  Result<GenerateResult> g = generate_on(pipeline, *plan, out_dir, overwrite, sink, token);
  if (!g.ok()) return g.status();
  return api::outputs_of(*g, run->seed);
}

void Engine::cancel() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->running != nullptr) impl_->running->cancel();
}

Outcome<Outputs> generate(const LoadOptions& options, const Request& request, const Callbacks& callbacks) {
  return api::generate_ranked(options, request, callbacks, std::nullopt);
}

const char* version() { return VORTEX_VERSION_STRING; }

}  // namespace vortex
