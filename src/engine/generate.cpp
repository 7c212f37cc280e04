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
#include "io/staging.h"
#if defined(VORTEX_WITH_NCCL)
#include "dist/nccl.h"
#define VORTEX_GENERATE_HAS_NCCL 1
#endif

namespace vortex {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Absolute, normalized, without a trailing separator ("out/" -> "/abs/out"), so that the staging
// directory "<out>.partial-<pid>" is a sibling of out, never a child.
fs::path normalized_out_path(const std::string& out_dir) {
  fs::path out = fs::absolute(fs::path(out_dir)).lexically_normal();
  while (out.has_parent_path() && out.filename().empty() && out != out.root_path()) out = out.parent_path();
  return out;
}

bool is_same_or_ancestor(const fs::path& a, const fs::path& b) {  // a == b, or a is a parent of b
  auto ai = a.begin(), bi = b.begin();
  for (; ai != a.end(); ++ai, ++bi) {
    if (ai->empty()) continue;  // trailing separator
    if (bi == b.end() || *ai != *bi) return false;
  }
  return true;
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

}  // namespace

Status replace_with_staged(const std::filesystem::path& staged, const std::filesystem::path& out,
                           const std::function<void(const std::filesystem::path&)>& remove_replaced) {
  std::error_code ec;
  fs::path aside;
  if (fs::exists(fs::symlink_status(out, ec))) {
    aside = out;
    aside += ".old-" + std::to_string(::getpid());
    if (fs::exists(fs::symlink_status(aside, ec))) {
      return io_error("cannot move the existing " + out.string() + " aside: " + aside.string() + " exists");
    }
    fs::rename(out, aside, ec);
    if (ec) return io_error("cannot move the existing " + out.string() + " aside: " + ec.message());
  }
  fs::rename(staged, out, ec);
  if (ec) {
    std::error_code ec2;
    if (!aside.empty()) fs::rename(aside, out, ec2);
    return io_error("cannot rename " + staged.string() + " to " + out.string() + ": " + ec.message());
  }
  if (!aside.empty()) remove_replaced(aside);  // best effort: the new outputs are already in place
  return Status::Ok();
}

// Places an output folder may never name, even with --overwrite: replacing one would take the caller's own
// files.
Status check_output_location(const std::filesystem::path& out, const std::string& flag, const std::string& shown) {
  const fs::path target = resolved(out);
  if (target == target.root_path())
    return invalid_argument(flag + " " + shown + " is the root directory; choose a new directory");
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0' && target == resolved(home)) {
    return invalid_argument(flag + " " + shown + " is your home directory; choose a new directory");
  }
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec && is_same_or_ancestor(target, resolved(cwd))) {
    return invalid_argument(
        flag + " " + shown +
        (target == resolved(cwd) ? " is the current directory" : " is an ancestor of the current directory") +
        "; choose a new directory, e.g. " + flag + " out/run1");
  }
  return Status::Ok();
}

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

// The out directory may not exist, may be empty, or (with --overwrite) may hold a previous Vortex run.
Status check_out_dir(const std::string& out_dir, bool overwrite) {
  if (out_dir.empty()) return invalid_argument("--out is required: the directory the outputs are written to");
  const fs::path out = normalized_out_path(out_dir);
  VORTEX_RETURN_IF_ERROR(check_output_location(out, "--out", out_dir));
  std::error_code ec;
  const auto st = fs::symlink_status(out, ec);
  if (fs::is_symlink(st)) {
    return invalid_argument("--out " + out_dir + " is a symbolic link; pass the directory itself or a new path");
  }
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      return invalid_argument("--out " + out_dir + " exists and is not a directory; choose another path");
    }
    if (!fs::is_empty(out, ec)) {
      if (!overwrite) {
        return invalid_argument("--out " + out_dir +
                                " exists and is not empty; pass --overwrite to replace a "
                                "previous Vortex run there, or choose another directory");
      }
      VORTEX_RETURN_IF_ERROR(check_replaceable_run_dir(out.string()));
    }
  }
  const fs::path parent = out.parent_path();
  if (!parent.empty() && !fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) {
      return invalid_argument("--out " + out_dir + ": cannot create the parent directory " + parent.string() + " (" +
                              ec.message() + "); choose a writable location");
    }
  }
  return Status::Ok();
}

namespace {

// Creates the staging directory `<out>.partial-<pid>[-n]` next to --out: this is also the check that
// --out's parent is writable, made before any weight is loaded. Never reuses an existing directory; first
// removes the staging folders of --out left by processes that are gone (io/staging.h).
Result<fs::path> create_staging_dir(const fs::path& out, const std::string& shown) {
  sweep_stale_staging(out, ".partial-", /*folders=*/true);
  for (int n = 0; n < 100; ++n) {
    std::string suffix = ".partial-";  // (appends: GCC 12 warns -Wrestrict on "-" + std::string)
    suffix.append(std::to_string(::getpid()));
    if (n > 0) suffix.append("-").append(std::to_string(n));
    fs::path p = out;
    p += suffix;
    std::error_code ec;
    if (fs::create_directory(p, ec)) return p;
    if (ec) {
      return invalid_argument("--out " + shown + " cannot be written: creating " + p.string() + " failed (" +
                              ec.message() + "); choose a writable location");
    }
  }
  return invalid_argument("--out " + shown + ": 100 staging directories " + out.string() +
                          ".partial-* already exist; remove the stale ones");
}

// Removes a replaced run directory: only the files its check allowed (run.json and what it lists), then
// the directory itself if nothing else appeared in the meantime.
void remove_replaced_run(const fs::path& aside) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(aside, ec)) {
    if (fs::is_regular_file(e.symlink_status(ec))) files.push_back(e.path());
  }
  for (const fs::path& f : files) fs::remove(f, ec);
  fs::remove(aside, ec);  // fails, keeping it, if it is not empty
}

// Puts `staged` at `out`. An existing `out` is checked again (empty, or a Vortex run with --overwrite),
// moved aside, and deleted only once the new directory is in place; restored if the final rename fails.
Status publish_outputs(const fs::path& staged, const fs::path& out, bool overwrite) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) {
    if (!fs::is_empty(out, ec)) {
      if (!overwrite)
        return invalid_argument(out.string() + " was filled by something else during the run; not replacing it");
      VORTEX_RETURN_IF_ERROR(check_replaceable_run_dir(out.string()));
    }
  }
  return replace_with_staged(staged, out, remove_replaced_run);
}

}  // namespace

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
  const fs::path out = normalized_out_path(req.out_dir);
  VORTEX_ASSIGN_OR_RETURN(const fs::path staged, create_staging_dir(out, req.out_dir));
  StagingGuard guard(staged);
  // The memory plan: the conditioner is loaded, run and freed before the transformer is loaded, so a device
  // smaller than the two together works.
  VORTEX_RETURN_IF_ERROR(pipeline->encode_prompt(plan, progress, cancel));
  std::unique_ptr<Communicator> comm;
  if (req.rank) {
    progress.stage("joining the world of " + std::to_string(req.rank->world) + " ranks");
    VORTEX_ASSIGN_OR_RETURN(comm, join_world(*req.rank, req.comm, pipeline->backend()));
  }
  pipeline->reserve_for(plan);  // the weights are placed around this request's activations
  VORTEX_RETURN_IF_ERROR(pipeline->load_weights(progress));
  if (comm) pipeline->model().set_communicator(comm.get());

  // ---- 3. the run, then the staged outputs renamed into place (rank 0 only: the others hold the same bytes) ----
  const CancelToken never;
  Result<RunOutputs> ran =
      pipeline->run(plan, progress, cancel != nullptr ? *cancel : never, staged.string(), seconds_since(t_start));
  if (!ran.ok()) {
    if (comm) comm->abort(ran.status().message());  // peers fail at their next collective instead of waiting
    return ran.status();
  }
  RunOutputs run = std::move(ran).value();
  if (comm) VORTEX_RETURN_IF_ERROR(comm->barrier().with_context("final barrier"));
  if (!req.rank || req.rank->rank == 0) {
    auto hold = hold_staging();  // an interrupt waits until the outputs are in place
    VORTEX_RETURN_IF_ERROR(publish_outputs(staged, out, req.overwrite));
    guard.release();
  }
  return make_result(out, run, seconds_since(t_start));
}

Result<GenerateResult> generate_on(Pipeline& pipeline, RunPlan& plan, const std::string& out_dir, bool overwrite,
                                   ProgressSink& progress, const CancelToken& cancel) {
  const auto t_start = Clock::now();
  const fs::path out = normalized_out_path(out_dir);
  VORTEX_ASSIGN_OR_RETURN(const fs::path staged, create_staging_dir(out, out_dir));
  StagingGuard guard(staged);
  VORTEX_RETURN_IF_ERROR(pipeline.encode_prompt(plan, progress, &cancel));
  VORTEX_ASSIGN_OR_RETURN(RunOutputs run,
                          pipeline.run(plan, progress, cancel, staged.string(), seconds_since(t_start)));
  {
    auto hold = hold_staging();  // an interrupt waits until the outputs are in place
    VORTEX_RETURN_IF_ERROR(publish_outputs(staged, out, overwrite));
    guard.release();
  }
  return make_result(out, run, seconds_since(t_start));
}

}  // namespace vortex
