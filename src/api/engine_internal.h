// The inside of the public Engine (include/vortex/vortex.h) for the library's own front ends above it: `vortex serve`
// owns its pipeline through an Engine and runs planned jobs with run_planned; `vortex generate` ranks call
// generate_ranked. Also the bridge from the public callbacks to the engine's ProgressSink and CancelToken.
// Not installed with include/: it exposes src/ types. Tested through tests/api/api_test.cpp and the serve tests.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "api/request_flags.h"
#include "dist/launcher.h"
#include "engine/pipeline.h"
#include "vortex/vortex.h"

namespace vortex {

struct Engine::Impl {
  std::unique_ptr<Pipeline> pipeline;
  FieldStyle style = FieldStyle::kJson;
  std::mutex mu;                   // guards `running`
  CancelToken* running = nullptr;  // the token of the call in progress (Engine::cancel)
};

namespace api {

// The public callbacks as a ProgressSink: every event goes to on_progress, every decoded frame to on_frame; a
// callback returning false, or `cancelled` returning true, fires `token`.
class CallbackSink : public ProgressSink {
 public:
  CallbackSink(const Callbacks& callbacks, CancelToken& token) : cb_(callbacks), token_(token) {}
  void stage(std::string_view what) override;
  void note(std::string_view what) override;
  void warning(std::string_view what) override;
  void step(int done, int total, double step_seconds, double elapsed_seconds) override;
  void loading(std::string_view what, uint64_t bytes_done, uint64_t bytes_total, int layers_done, int layers_total,
               double seconds) override;
  void decode(std::string_view stage, int64_t done, int64_t total, double elapsed_seconds) override;
  void frame(int index, int count, int width, int height, const uint8_t* rgb) override;

 private:
  void emit(const ProgressEvent& e);
  void emit_text(ProgressEvent::Kind kind, std::string_view text);
  const Callbacks& cb_;
  CancelToken& token_;
};

// A failure naming `field` (its id and flag; none for Field::kNone).
Failure field_failure(Status status, Field field);
// The field style the options ask for.
FieldStyle style_of(const LoadOptions& options);

// An Engine over load options already typed (serve parses its flags itself).
Outcome<std::unique_ptr<Engine>> open_engine(const PipelineOptions& options, FieldStyle style);
// The engine's pipeline: the planner for admission, the backend for metrics, the world for ranks.
Pipeline& pipeline_of(Engine& engine);
// One planned request into `dir` (an existing empty folder the caller publishes), with `cancel` registered for
// Engine::cancel while it runs.
Result<RunOutputs> run_planned(Engine& engine, const RunPlan& plan, ProgressSink& progress, CancelToken& cancel,
                               const std::string& dir);
// The one-shot generate, as one rank of a multi-GPU world when `rank` is set (`vortex generate` under --gpus).
Outcome<Outputs> generate_ranked(const LoadOptions& options, const Request& request, const Callbacks& callbacks,
                                 const std::optional<RankEnv>& rank);

}  // namespace api
}  // namespace vortex
