// When a denoiser step runs as a captured graph (ExecOptions::cuda_graph): the host-side decision, kept
// apart from the backend so that it is tested without a GPU (tests/model/step_graph_test.cpp). H3Model asks
// the planner before every step: the first step of a key runs eagerly (it creates engines and grows
// scratch), the next is captured and replayed, later ones replay. A key change (shape, timestep slots,
// options, weights, a new prepare()) drops the graph and starts over; a graph the backend no longer vouches
// for (device memory released since its capture) is re-captured after an eager step, at most
// kMaxRecaptures times per key; a capture that fails leaves the key eager, with the reason kept.
#pragma once

#include <cstdint>
#include <string>

#include "backend/exec_options.h"

namespace vortex {

// Everything a captured step bakes in besides tensor contents.
struct StepGraphKey {
  uint64_t workspace_generation = 0;  // H3Model::prepare() count: every buffer of the step
  uint64_t weights_generation = 0;    // mutable_weights() count: adapters attached or detached
  int64_t rows = 0;                   // packed rows S
  int slots = 0;                      // distinct timesteps (AdaLN table rows / 3)
  int video_slot = 0, audio_slot = 0;
  int condition_slot = 0;        // visual conditioning rows (the video slot without any)
  int reference_audio_slot = 0;  // ref2va reference audio rows (the audio slot without any)
  bool tables_ahead = false;     // the AdaLN tables were copied in (no adaln GEMMs in the step)
  ExecOptions options;
  bool operator==(const StepGraphKey&) const = default;
};

// Whether `options` ask for a graph for a request of `rows` packed rows (kAuto: rows <= the auto limit).
bool cuda_graph_wanted(const ExecOptions& options, int64_t rows);

enum class StepGraphAction : uint8_t {
  kEager,    // no graph for this step (switch off, backend without graphs, or this key's capture failed)
  kWarmUp,   // eager, the first step of a new key (or after an invalidation)
  kCapture,  // capture this step, then replay it
  kReplay,   // replay the held graph
};
const char* step_graph_action_name(StepGraphAction a);

struct StepGraphStats {
  uint64_t eager = 0, warm_ups = 0, captures = 0, replays = 0;
  uint64_t invalidations = 0;  // graphs dropped because the backend no longer vouched for them
  uint64_t failed_captures = 0;
  std::string fallback;  // why the last step that wanted a graph ran eagerly ("" when none did)
};

class StepGraphPlanner {
 public:
  static constexpr int kMaxRecaptures = 3;

  // What the next step runs. `eligible`: the step could be captured at all (the switch asks for it and the
  // backend supports graphs; `why_not` says otherwise); `graph_current`: the held graph, if any, is still
  // valid on the backend.
  StepGraphAction next(const StepGraphKey& key, bool eligible, const std::string& why_not, bool graph_current);
  void captured();                       // the kCapture step produced a graph: it is held from now on
  void capture_failed(std::string why);  // the kCapture step did not: this key stays eager
  bool holds_graph() const { return holds_; }
  const StepGraphStats& stats() const { return stats_; }

 private:
  bool have_key_ = false;
  StepGraphKey key_;
  bool warmed_ = false;  // an eager step of key_ ran since the last (re)start
  bool holds_ = false;
  bool failed_ = false;
  int recaptures_ = 0;
  StepGraphStats stats_;
};

}  // namespace vortex
