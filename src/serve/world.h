// `vortex serve` over several GPUs as one pipeline (docs/multi_gpu.md "vortex serve with N GPUs"): rank 0
// runs the HTTP server, the queue and the outputs (server.h, ServeOptions::join); ranks 1..N-1 are
// followers (run_serve_follower). Everything rank 0 says goes through Communicator::broadcast from rank 0:
// a header [kind, payload bytes] (two u64), then the payload. For each job it takes from its queue, rank 0
// broadcasts its plan (encode_world_job: engine/plan_codec.h); every rank then
// runs the same sequence-parallel sampling; only rank 0 writes and publishes the outputs. A job with
// per-request LoRA adapters names them by file name; before sampling every rank attaches them from its own
// --lora-dir and the ranks compare what they loaded (Pipeline::agree_request_loras): a rank that cannot
// attach, or whose file differs from rank 0's, fails that job on every rank, and the world serves on.
// While idle, rank 0 broadcasts a heartbeat (kIdle) so a follower's wait never reaches the communicator
// timeout and a dead follower is noticed without a job; at shutdown it broadcasts kStop and the followers
// return OK.
// Tested on the CPU backend with threads as ranks in tests/serve/serve_world_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "engine/pipeline.h"
#include "vortex/status.h"

namespace vortex::serve {

// Makes this rank's communicator once the backend exists and before any weight is loaded: join_world
// (engine/generate.h) over NCCL for `vortex serve --gpus N`, an InProcessWorld's communicator in tests.
using WorldJoin = std::function<Result<std::unique_ptr<Communicator>>(Backend& backend)>;

enum class WorldMessage : uint64_t { kIdle = 1, kJob = 2, kStop = 3 };

// Rank 0: broadcasts the header, then (when not empty) the payload, through tensors on `backend`'s device.
Status send_world_message(Communicator& comm, Backend& backend, WorldMessage kind, const std::string& payload);
struct ReceivedWorldMessage {
  WorldMessage kind = WorldMessage::kIdle;
  std::string payload;
};
// Ranks 1..N-1: the next message of rank 0 (waits up to the communicator's timeout).
Result<ReceivedWorldMessage> receive_world_message(Communicator& comm, Backend& backend);

// A job as rank 0 planned it: the plan itself (engine/plan_codec.h: the request, the resolved geometry, the
// sampler spec and schedule, the text rows already encoded when a text encoder conditions on the prompt, the
// adapters by file name). kInternal when the text rows are not resolved yet.
Result<std::string> encode_world_job(const RunPlan& plan);
// A follower's plan: rank 0's plan decoded (no planning of its own), for latents only (media off, no frames
// folder), the adapters resolved in `options.lora_dir`; kInternal when the bytes are malformed or its packed rows
// differ from rank 0's.
Result<RunPlan> decode_world_job(const std::string& payload, const ModelConfig& cfg, const PipelineOptions& options);

// What a follower loads: rank 0's options without the decoders and the text encoder (rank 0 decodes and
// encodes prompts; followers receive the text rows).
PipelineOptions follower_pipeline_options(PipelineOptions options);

struct FollowerOptions {
  PipelineOptions pipeline;  // rank 0's; follower_pipeline_options is applied here
  WorldJoin join;
  std::function<void(const std::string&)> log;  // may be empty
};
// One follower rank: opens the backend, joins, loads the weights, then runs every job rank 0 broadcasts
// (outputs into a private temporary folder, removed after each job) until kStop (OK). A job whose adapters
// the ranks do not agree on is skipped (every rank skips it). A failure (a job error, a collective that
// fails or times out) aborts the communicator, so rank 0 fails the job instead of waiting, and is returned.
Status run_serve_follower(const FollowerOptions& options);

}  // namespace vortex::serve
