// The step-graph planner; see step_graph.h.
#include "model/step_graph.h"

#include <utility>

namespace vortex {

bool cuda_graph_wanted(const ExecOptions& options, int64_t rows) {
  switch (options.cuda_graph) {
    case CudaGraphMode::kOff:
      return false;
    case CudaGraphMode::kOn:
      return true;
    case CudaGraphMode::kAuto:
      return rows <= options.cuda_graph_auto_max_rows;
  }
  return false;
}

const char* step_graph_action_name(StepGraphAction a) {
  switch (a) {
    case StepGraphAction::kEager:
      return "eager";
    case StepGraphAction::kWarmUp:
      return "warm-up";
    case StepGraphAction::kCapture:
      return "capture";
    case StepGraphAction::kReplay:
      return "replay";
  }
  return "?";
}

StepGraphAction StepGraphPlanner::next(const StepGraphKey& key, bool eligible, const std::string& why_not,
                                       bool graph_current) {
  if (!eligible) {
    holds_ = false;
    warmed_ = false;
    have_key_ = false;
    if (!why_not.empty()) stats_.fallback = why_not;
    ++stats_.eager;
    return StepGraphAction::kEager;
  }
  if (!have_key_ || !(key == key_)) {
    key_ = key;
    have_key_ = true;
    holds_ = false;
    failed_ = false;
    recaptures_ = 0;
    warmed_ = true;
    ++stats_.warm_ups;
    return StepGraphAction::kWarmUp;
  }
  if (failed_) {
    ++stats_.eager;
    return StepGraphAction::kEager;
  }
  if (holds_) {
    if (graph_current) {
      ++stats_.replays;
      return StepGraphAction::kReplay;
    }
    holds_ = false;
    ++stats_.invalidations;
    if (++recaptures_ > kMaxRecaptures) {
      failed_ = true;
      stats_.fallback = "the step graph was invalidated " + std::to_string(recaptures_) +
                        " times (device memory released between steps): eager from here on";
      ++stats_.eager;
      return StepGraphAction::kEager;
    }
    warmed_ = true;  // re-grow whatever was released before capturing again
    ++stats_.warm_ups;
    return StepGraphAction::kWarmUp;
  }
  if (warmed_) {
    ++stats_.captures;
    return StepGraphAction::kCapture;
  }
  warmed_ = true;
  ++stats_.warm_ups;
  return StepGraphAction::kWarmUp;
}

void StepGraphPlanner::captured() { holds_ = true; }

void StepGraphPlanner::capture_failed(std::string why) {
  holds_ = false;
  failed_ = true;
  ++stats_.failed_captures;
  stats_.fallback = std::move(why);
}

}  // namespace vortex
