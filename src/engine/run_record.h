// run.json of a generate run (docs/outputs.md): what Pipeline::run (engine/pipeline_run.cpp) sampled, from which
// inputs, and where its time went. RunRecord gathers the facts the run learned; run_record_json assembles every
// section but "timing" (hashing the request's input files), which the run adds last. Tested through
// tests/cli/cli_test.cpp (run.json fields, the sha256 values recomputed from the files) and tests/engine.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/exec_options.h"
#include "engine/planner.h"
#include "engine/request.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// What one run adds to its plan and its pipeline's options for run.json.
struct RunRecord {
  const PipelineOptions* options = nullptr;
  const RunPlan* plan = nullptr;
  const ModelConfig* config = nullptr;   // the loaded model's
  ExecOptions exec;                      // the switches the run sampled with
  std::string backend;                   // Backend::name()
  std::string adaln_weights = "device";  // where the AdaLN projections are read from: device, host or disk
  Shape text_shape;                      // the text conditioning the model was prepared with
  DType text_dtype = DType::kBF16;
  bool encoded = false;                // the prompt went through this pipeline's text encoder
  uint64_t audio_noise_offset = 0;     // the audio noise's offset in the seed's stream (the video's size)
  uint64_t keyframe_noise_offset = 0;  // fl2va: the keyframe rows' noise offset
  double keyframes_seconds = 0.0;      // fl2va: reading and encoding the keyframes
  double references_video_seconds = 0.0, references_audio_seconds = 0.0;  // ref2va: reading and encoding, per encoder
  nlohmann::ordered_json lora;                                            // the adapters in force ("lora")
  nlohmann::ordered_json world;                                           // world_json of the model's communicator
  nlohmann::ordered_json decode;   // the media decode ("decode"; null without media)
  nlohmann::ordered_json outputs;  // the files written, with their SHA-256 ("outputs")
};

// Every run.json section but "timing", in the schema's order; the SHA-256 of each input file the request names.
Result<nlohmann::ordered_json> run_record_json(const RunRecord& record);

}  // namespace vortex
