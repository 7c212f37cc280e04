// The rank-0 -> followers protocol of multi-GPU `vortex serve` and the follower loop (see world.h).
#include "serve/world.h"

#include "engine/plan_codec.h"
#include "io/staging.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

namespace vortex::serve {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

// Broadcasts `bytes` (host, `n` of them) from rank 0 through a tensor on the backend's device; on the
// other ranks `bytes` receives rank 0's.
Status broadcast_bytes(Communicator& comm, Backend& backend, char* bytes, size_t n, const char* what) {
  if (n == 0) return Status::Ok();
  Tensor host = Tensor::empty({static_cast<int64_t>(n)}, DType::kU8);  // [n] u8
  std::memcpy(host.raw_data(), bytes, n);
  VORTEX_ASSIGN_OR_RETURN(Tensor on_device, backend.upload(host));
  VORTEX_RETURN_IF_ERROR(backend.synchronize());
  VORTEX_RETURN_IF_ERROR(comm.broadcast(on_device, 0).with_context(what));
  VORTEX_RETURN_IF_ERROR(backend.download(on_device, host));
  std::memcpy(bytes, host.raw_data(), n);
  return Status::Ok();
}

const char* message_name(WorldMessage kind) {
  switch (kind) {
    case WorldMessage::kIdle:
      return "heartbeat";
    case WorldMessage::kJob:
      return "job";
    case WorldMessage::kStop:
      return "stop";
  }
  return "unknown";
}

}  // namespace

Status send_world_message(Communicator& comm, Backend& backend, WorldMessage kind, const std::string& payload) {
  uint64_t header[2] = {static_cast<uint64_t>(kind), payload.size()};
  const std::string what = std::string("serve: broadcasting the ") + message_name(kind);
  VORTEX_RETURN_IF_ERROR(broadcast_bytes(comm, backend, reinterpret_cast<char*>(header), sizeof(header), what.c_str()));
  std::string copy = payload;
  return broadcast_bytes(comm, backend, copy.data(), copy.size(), what.c_str());
}

Result<ReceivedWorldMessage> receive_world_message(Communicator& comm, Backend& backend) {
  uint64_t header[2] = {0, 0};
  VORTEX_RETURN_IF_ERROR(broadcast_bytes(comm, backend, reinterpret_cast<char*>(header), sizeof(header),
                                         "serve: waiting for rank 0's next message"));
  if (header[0] < 1 || header[0] > 3 || header[1] > (uint64_t{1} << 34)) {
    return internal_error("serve: rank 0 sent a malformed message header (kind " + std::to_string(header[0]) + ", " +
                          std::to_string(header[1]) + " bytes)");
  }
  ReceivedWorldMessage m;
  m.kind = static_cast<WorldMessage>(header[0]);
  m.payload.resize(header[1]);
  VORTEX_RETURN_IF_ERROR(
      broadcast_bytes(comm, backend, m.payload.data(), m.payload.size(), "serve: receiving rank 0's job"));
  return m;
}

Result<std::string> encode_world_job(const RunPlan& plan) { return encode_plan(plan); }

Result<RunPlan> decode_world_job(const std::string& payload, const ModelConfig& cfg, const PipelineOptions& options) {
  Result<RunPlan> decoded = decode_plan(payload, cfg);
  if (!decoded.ok()) return internal_error("serve: rank 0's job: " + decoded.status().message());
  RunPlan plan = std::move(decoded).value();
  // Adapters by file name: each rank resolves them in its own --lora-dir (agree_request_loras compares the files).
  for (LoraSpec& l : plan.request.loras) {
    const std::string name = l.path;
    // request.cpp admits plain file names only; a follower never follows a path out of its folder.
    if (name.empty() || name != fs::path(name).filename().string() || name == "." || name == "..")
      return internal_error("serve: rank 0 named the adapter '" + name + "', not a plain file name");
    l.path = options.lora_dir.empty() ? name : (fs::path(options.lora_dir) / name).string();
  }
  plan.request.media = false;  // rank 0 decodes
  return plan;
}

PipelineOptions follower_pipeline_options(PipelineOptions o) {
  o.vae_dir.clear();
  o.audio_vae_dir.clear();
  o.synthetic_vae = SyntheticVae::kNone;
  o.text_encoder_dir.clear();
  o.tokenizer_path.clear();
  return o;
}

Status run_serve_follower(const FollowerOptions& fo) {
  auto log = [&](const std::string& line) {
    if (fo.log) fo.log(line);
  };
  const PipelineOptions options = follower_pipeline_options(fo.pipeline);
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> pipeline, Pipeline::open(options));
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, fo.join(pipeline->backend()));
  const std::string me = "rank " + std::to_string(comm->rank()) + " of " + std::to_string(comm->size());
  ProgressSink quiet;
  if (Status s = pipeline->load_weights(quiet); !s.ok()) {
    comm->abort(me + " could not load the weights: " + s.message());
    return s;
  }
  pipeline->model().set_communicator(comm.get());
  log(me + ": loaded, following rank 0");

  // A private folder for the outputs every rank writes (only rank 0's are published).
  std::string tmpl = (fs::temp_directory_path() / "vortex-serve-follower-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    const Status s = io_error("cannot create a temporary folder under " + fs::temp_directory_path().string());
    comm->abort(me + ": " + s.message());
    return s;
  }
  const fs::path scratch(tmpl);
  StagingGuard cleanup(scratch);  // the follower's scratch folder, removed however the loop ends (io/staging.h)

  const CancelToken never;  // rank 0's token is the one that counts (agreed_cancel)
  for (uint64_t jobs = 0;;) {
    Result<ReceivedWorldMessage> m = receive_world_message(*comm, pipeline->backend());
    if (!m.ok()) {
      comm->abort(me + ": " + m.status().message());
      return m.status().with_context(me);
    }
    if (m->kind == WorldMessage::kIdle) continue;
    if (m->kind == WorldMessage::kStop) {
      log(me + ": stop after " + std::to_string(jobs) + " jobs");
      return Status::Ok();
    }
    ++jobs;
    Result<RunPlan> plan = decode_world_job(m->payload, pipeline->config(), options);
    if (plan.ok() && !plan->request.loras.empty()) {
      // Rank 0 runs the same agreement; a failed verdict skips the job on every rank, the world goes on.
      Result<AdapterVerdict> verdict = pipeline->agree_request_loras(plan->request, quiet);
      if (!verdict.ok()) {
        comm->abort(me + ": " + verdict.status().message());
        return verdict.status().with_context(me);
      }
      if (!verdict->status.ok()) {
        log(me + ": job " + std::to_string(jobs) + " not run: " + verdict->status.message());
        continue;
      }
    }
    const fs::path dir = scratch / ("job" + std::to_string(jobs));
    std::error_code ec;
    fs::create_directories(dir, ec);
    Result<RunOutputs> ran = !plan.ok() ? Result<RunOutputs>(plan.status())
                             : ec ? Result<RunOutputs>(io_error("cannot create " + dir.string() + ": " + ec.message()))
                                  : pipeline->run(*plan, quiet, never, dir.string());
    fs::remove_all(dir, ec);
    if (!ran.ok() && ran.status().code() != ErrorCode::kCancelled) {
      comm->abort(me + " failed the job: " + ran.status().message());
      return ran.status().with_context(me);
    }
  }
}

}  // namespace vortex::serve
