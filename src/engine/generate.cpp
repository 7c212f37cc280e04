// `generate` (see generate.h): validate -> plan (text, geometry, memory estimate) -> out dir -> backend ->
// weights -> Pipeline::run -> publish. Every check that can fail cheaply (arguments, text finiteness,
// memory, whether --out may be written or replaced) runs before weights are loaded. Outputs go to a
// sibling directory `<out>.partial-<pid>`, created up front (it proves --out writable) and renamed onto
// `<out>` only when all four files are written, so a failed run never leaves half a result. --overwrite
// replaces only a directory that holds a Vortex run and nothing else. Tested end to end in
// tests/cli/cli_test.cpp.
#include "engine/generate.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "dist/rendezvous.h"
#include "io/publish.h"
#if defined(VORTEX_WITH_NCCL)
#include "dist/nccl.h"
#define VORTEX_GENERATE_HAS_NCCL 1
#endif

namespace vortex {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Status check_replaceable_run_dir(const std::string& dir) {
  const fs::path d(dir);
  const fs::path manifest = d / "run.json";
  std::error_code ec;
  const auto manifest_status = fs::symlink_status(manifest, ec);
  const std::string refuse =
      "; --overwrite replaces only a directory written by vortex generate (a run.json and "
      "the files it lists, nothing else). Move your files or choose another --out";
  if (!fs::is_regular_file(manifest_status)) {
    return invalid_argument("--out " + dir + " is not empty and has no run.json: Vortex did not write it" + refuse);
  }
  std::ifstream f(manifest, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const nlohmann::json run = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto schema = run.is_object() ? run.find("schema") : run.end();
  if (!run.is_object() || schema == run.end() || !schema->is_string() ||
      schema->get<std::string>().rfind("vortex.run/", 0) != 0) {
    return invalid_argument("--out " + dir +
                            "/run.json is not a Vortex run manifest (no \"schema\": \"vortex.run/...\")" + refuse);
  }
  const auto outputs = run.find("outputs");
  for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
    const std::string name = e.path().filename().string();
    const bool listed = name == "run.json" || (outputs != run.end() && outputs->is_object() && outputs->contains(name));
    if (!listed)
      return invalid_argument("--out " + dir + " holds '" + name + "', which its run.json does not list" + refuse);
    if (!fs::is_regular_file(e.symlink_status(ec))) {
      return invalid_argument("--out " + dir + ": '" + name + "' is not a regular file" + refuse);
    }
  }
  if (ec) return io_error("cannot list --out " + dir + ": " + ec.message());
  return Status::Ok();
}

namespace {

// What generate writes into --out: a run.json and the files it lists (check_replaceable_run_dir), nothing else.
OutputOwnership run_ownership(const std::string& shown) {
  OutputOwnership own;
  own.flag = "--out";
  own.shown = shown;
  own.previous = "a previous Vortex run";
  own.check_replaceable = [](const fs::path& dir) { return check_replaceable_run_dir(dir.string()); };
  own.is_own = [](const fs::directory_entry& e) {
    const std::string name = e.path().filename().string();
    if (name == "run.json") return true;
    std::ifstream f(e.path().parent_path() / "run.json", std::ios::binary);
    const nlohmann::json run = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    const auto outputs = run.is_object() ? run.find("outputs") : run.end();
    return outputs != run.end() && outputs->is_object() && outputs->contains(name);
  };
  return own;
}

}  // namespace

// The out directory may not exist, may be empty, or (with --overwrite) may hold a previous Vortex run
// (io/publish.h check_publish_target).
Status check_out_dir(const std::string& out_dir, bool overwrite) {
  if (out_dir.empty()) return invalid_argument("--out is required: the directory the outputs are written to");
  return check_publish_target(normalized_output_path(out_dir), run_ownership(out_dir), overwrite);
}

Result<std::unique_ptr<Communicator>> join_world(const RankEnv& rank, const CommOptions& comm, Backend& backend) {
#if defined(VORTEX_GENERATE_HAS_NCCL)
  CUstream_st* stream = backend.device_stream();
  if (stream == nullptr)
    return invalid_argument("multi-GPU ranks (--gpus, VORTEX_RANK/RANK) need --backend cuda; got --backend " +
                            std::string(backend.name()));
  NcclUniqueIdBytes id;
  if (rank.rank == 0) {
    VORTEX_ASSIGN_OR_RETURN(id, nccl_unique_id());
    VORTEX_RETURN_IF_ERROR(publish_rendezvous(rank.rendezvous, std::string(id.data(), id.size())));
  } else {
    VORTEX_ASSIGN_OR_RETURN(std::string bytes, await_rendezvous(rank.rendezvous, id.size(), comm.timeout));
    std::copy(bytes.begin(), bytes.end(), id.begin());
  }
  return make_nccl_communicator(id, rank.rank, rank.world, stream, comm);
#else
  (void)rank, (void)comm;
  return unsupported(
      "multi-GPU ranks need the CUDA backend with NCCL; this build has " +
      std::string(
#if defined(VORTEX_WITH_CUDA)
          "no NCCL (nccl.h was not found at configure time: install libnccl-dev or the nvidia-nccl-cu13 wheel)"
#else
          "no CUDA backend"
#endif
          ) +
      " (--backend " + std::string(backend.name()) + ")");
#endif
}

namespace {

// Step 1, the cheap checks: arguments, config, text, geometry, memory, out dir. The planner comes back too: the
// pipeline is opened from it, so nothing is validated or resolved twice.
Result<std::pair<Planner, RunPlan>> validate_and_plan(const GenerateRequest& req, ProgressSink& progress,
                                                      Field* failed_field) {
  if (req.out_dir.empty()) {
    if (failed_field != nullptr) *failed_field = Field::kOut;
    return invalid_argument("--out is required: the directory the outputs are written to");
  }
  VORTEX_ASSIGN_OR_RETURN(Planner planner, Planner::create(req.pipeline));
  VORTEX_ASSIGN_OR_RETURN(RunPlan plan, planner.plan(req.run, progress, req.style, failed_field));
  if (Status s = check_out_dir(req.out_dir, req.overwrite); !s.ok()) {
    if (failed_field != nullptr) *failed_field = Field::kOut;
    return s;
  }
  return std::make_pair(std::move(planner), std::move(plan));
}

GenerateResult make_result(const fs::path& out, const RunOutputs& run, double total_seconds) {
  GenerateResult result;
  result.out_dir = out.string();
  result.files = run.files;
  result.geometry = run.geo;
  result.step_seconds = run.step_seconds;
  result.sampling_seconds = run.sampling_seconds;
  result.total_seconds = total_seconds;
  return result;
}

}  // namespace

Result<GenerateResult> generate(const GenerateRequest& req, ProgressSink& progress, const CancelToken* cancel,
                                Field* failed_field) {
  const auto t_start = Clock::now();
  // ---- 1. cheap checks: arguments, config, text, geometry, memory, out dir ----
  VORTEX_ASSIGN_OR_RETURN(auto planned, validate_and_plan(req, progress, failed_field));
  RunPlan plan = std::move(planned.second);

  // ---- 2. backend, then the device-memory check and the staging directory before any weight ----
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> pipeline, Pipeline::open(std::move(planned.first)));
  VORTEX_RETURN_IF_ERROR(pipeline->check_device_fit(plan));
  // The decoders (when asked for) load first: a bad --vae / --audio-vae, or latents they cannot decode, fail
  // before the transformer's weights and any sampling.
  VORTEX_RETURN_IF_ERROR(pipeline->load_decoders(progress));
  VORTEX_RETURN_IF_ERROR(pipeline->planner().check_decodable(plan, req.style));
  // Created now so an unwritable --out fails before the weights are loaded.
  const fs::path out = normalized_output_path(req.out_dir);
  VORTEX_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::create(out, run_ownership(req.out_dir)));
  // The load order (docs/memory.md "Overlapped loading"): the transformer loads on a thread of its own beside the
  // run when the plan allows it, and the conditioner runs beside that load only when the budget holds both; else it
  // is loaded, run and freed before the transformer is loaded, so a device smaller than the two together works.
  pipeline->reserve_for(plan);  // the weights are placed around this request's activations
  VORTEX_RETURN_IF_ERROR(pipeline->begin_load(plan, progress, req.rank.has_value()));
  VORTEX_RETURN_IF_ERROR(pipeline->encode_prompt(plan, progress, cancel));
  std::unique_ptr<Communicator> comm;
  if (req.rank) {
    progress.stage("joining the world of " + std::to_string(req.rank->world) + " ranks");
    VORTEX_ASSIGN_OR_RETURN(comm, join_world(*req.rank, req.comm, pipeline->backend()));
  }
  VORTEX_RETURN_IF_ERROR(pipeline->load_weights(progress));
  if (comm) pipeline->model().set_communicator(comm.get());

  // ---- 3. the run, then the staged outputs renamed into place (rank 0 only: the others hold the same bytes) ----
  const CancelToken never;
  Result<RunOutputs> ran = pipeline->run(plan, progress, cancel != nullptr ? *cancel : never, staged.path().string(),
                                         seconds_since(t_start));
  if (!ran.ok()) {
    if (comm) comm->abort(ran.status().message());  // peers fail at their next collective instead of waiting
    return ran.status();
  }
  RunOutputs run = std::move(ran).value();
  if (comm) VORTEX_RETURN_IF_ERROR(comm->barrier().with_context("final barrier"));
  if (!req.rank || req.rank->rank == 0) {
    VORTEX_RETURN_IF_ERROR(staged.publish(req.overwrite));  // io/publish.h
  }
  return make_result(out, run, seconds_since(t_start));
}

Result<GenerateResult> generate_on(Pipeline& pipeline, RunPlan& plan, const std::string& out_dir, bool overwrite,
                                   ProgressSink& progress, const CancelToken& cancel) {
  const auto t_start = Clock::now();
  const fs::path out = normalized_output_path(out_dir);
  VORTEX_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::create(out, run_ownership(out_dir)));
  VORTEX_RETURN_IF_ERROR(pipeline.encode_prompt(plan, progress, &cancel));
  VORTEX_ASSIGN_OR_RETURN(RunOutputs run,
                          pipeline.run(plan, progress, cancel, staged.path().string(), seconds_since(t_start)));
  VORTEX_RETURN_IF_ERROR(staged.publish(overwrite));  // io/publish.h
  return make_result(out, run, seconds_since(t_start));
}

}  // namespace vortex
