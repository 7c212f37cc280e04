// Per-request LoRA adapters on a loaded pipeline (see pipeline.h, docs/lora.md "Switching adapters per request"):
// attach a request's adapters as run-time branches, detach them, and with ranks agree on them across the world
// (every rank attaches from its own --lora-dir and the ranks compare the files' fingerprints). Tested in
// tests/serve/serve_lora_test.cpp and tests/serve/serve_world_test.cpp.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/pipeline.h"
#include "engine/run_manifest.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

// {"name", "bytes", "sha256", "adapter_config_sha256"} of an adapter file and of the adapter_config.json that
// load_lora may read beside it (null when there is none).
Result<nlohmann::ordered_json> adapter_fingerprint(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec) return io_error("cannot read the size of " + path + ": " + ec.message());
  VORTEX_ASSIGN_OR_RETURN(const std::string sha, sha256_file(path));
  nlohmann::ordered_json config_sha = nullptr;
  const fs::path config = fs::path(path).parent_path() / "adapter_config.json";
  if (fs::is_regular_file(config, ec)) {
    VORTEX_ASSIGN_OR_RETURN(const std::string c, sha256_file(config.string()));
    config_sha = c;
  }
  return nlohmann::ordered_json{{"name", fs::path(path).filename().string()},
                                {"bytes", bytes},
                                {"sha256", sha},
                                {"adapter_config_sha256", config_sha}};
}

std::string short_sha(const nlohmann::ordered_json& sha) {
  return sha.is_string() ? sha.get<std::string>().substr(0, 16) : std::string("none");
}

}  // namespace

bool Pipeline::request_loras_attached(const RunRequest& request) const {
  const std::vector<LoraSpec>& a = request.loras;
  const std::vector<LoraSpec>& b = attached_request_loras_;
  if (a.size() != b.size() || lora_manifest_.size() != a.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].path != b[i].path || a[i].scale != b[i].scale) return false;
  return true;
}

void Pipeline::detach_request_loras() {
  if (options_.lora_dir.empty()) return;  // nothing attached per request (load-time adapters stay)
  detach_lora_branches(model_->mutable_weights());
  attached_request_loras_.clear();
  lora_manifest_ = nlohmann::ordered_json::array();
  attached_fingerprints_ = nlohmann::ordered_json::array();
}

Status Pipeline::switch_request_loras(const RunRequest& request, ProgressSink& progress) {
  if (options_.lora_dir.empty()) {
    if (!request.loras.empty())
      return invalid_argument("this pipeline takes no per-request adapters (PipelineOptions::lora_dir is empty)");
    return Status::Ok();
  }
  if (request_loras_attached(request)) return Status::Ok();
  // With ranks, each file's fingerprint is taken as it is loaded, for agree_request_loras.
  nlohmann::ordered_json fingerprints = nlohmann::ordered_json::array();
  if (model_->communicator() != nullptr) {
    for (const LoraSpec& l : request.loras) {
      Result<nlohmann::ordered_json> f = adapter_fingerprint(l.path);
      if (!f.ok()) {
        detach_request_loras();
        return f.status();
      }
      fingerprints.push_back(std::move(*f));
    }
  }
  // Run-time branches only: the base weights stay the loaded bytes, so switching never reloads them.
  LoraApplyOptions lo;
  lo.allow_unmatched = options_.lora_allow_unmatched;
  lo.mode = "runtime";
  lo.precision = precision_name(exec_.precision);
  lo.refuse_symlinks = true;  // named in --lora-dir: a link swapped in after admission is refused at open
  if (!request.loras.empty()) progress.stage("attaching LoRA adapters");
  nlohmann::ordered_json manifest = nlohmann::ordered_json::array();
  Status s = apply_lora_adapters(
      model_->mutable_weights(), request.loras, lo, cfg_, *backend_, [&](std::string_view m) { progress.note(m); },
      [&](std::string_view m) { progress.warning(m); }, &manifest);
  if (!s.ok()) {  // nothing half-attached survives a bad adapter: the next request starts from the base
    detach_request_loras();
    return s;
  }
  attached_request_loras_ = request.loras;
  lora_manifest_ = std::move(manifest);
  attached_fingerprints_ = std::move(fingerprints);
  return Status::Ok();
}

Result<AdapterVerdict> Pipeline::agree_request_loras(const RunRequest& request, ProgressSink& progress) {
  if (!model_) return internal_error("Pipeline::agree_request_loras before load_weights");
  Communicator* world = model_->communicator();
  if (world == nullptr) return internal_error("Pipeline::agree_request_loras: the model has no communicator");
  const int me = world->rank(), u = world->size();
  const std::string who = "rank " + std::to_string(me);
  // This rank's part: attach (the names resolved in its own lora_dir), or why not.
  Status local = Status::Ok();
  if (options_.lora_dir.empty()) {
    if (!request.loras.empty()) local = invalid_argument(who + " was started without --lora-dir");
  } else {
    for (const LoraSpec& l : request.loras) {
      std::error_code ec;
      if (!fs::is_regular_file(l.path, ec)) {
        local = not_found(who + ": no adapter " + fs::path(l.path).filename().string() + " in its --lora-dir " +
                          options_.lora_dir);
        break;
      }
    }
    if (local.ok()) {
      if (Status s = switch_request_loras(request, progress); !s.ok())
        local = Status(s.code(), who + " could not attach the adapters: " + s.message());
    }
  }
  nlohmann::ordered_json mine = {
      {"code", static_cast<int>(local.code())},
      {"error", local.ok() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(local.message())},
      {"lora_dir", options_.lora_dir},
      {"adapters", local.ok() ? attached_fingerprints_ : nlohmann::ordered_json::array()}};
  VORTEX_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          all_gather_bytes(*world, *backend_, mine.dump(), "the adapters of the job (" + who + ")"));

  // Every rank judges the same bytes the same way.
  std::vector<nlohmann::ordered_json> ranks(u);
  for (int r = 0; r < u; ++r) {
    ranks[r] = nlohmann::ordered_json::parse(all[r], nullptr, /*allow_exceptions=*/false);
    if (!ranks[r].is_object() || !ranks[r].contains("error") || !ranks[r]["adapters"].is_array() ||
        !ranks[r]["code"].is_number_integer() || !ranks[r]["lora_dir"].is_string())
      return internal_error("the adapters of the job: rank " + std::to_string(r) + " sent a malformed report");
  }
  if (!ranks[0]["error"].is_null()) {  // the job's own adapters fail (as on one rank), with rank 0's error
    detach_request_loras();
    const int c = ranks[0]["code"].get<int>();
    const ErrorCode code =
        c > 0 && c <= static_cast<int>(ErrorCode::kCancelled) ? static_cast<ErrorCode>(c) : ErrorCode::kInternal;
    return AdapterVerdict{Status(code, ranks[0]["error"].get<std::string>())};
  }
  // A follower that differs from rank 0: the deployment's fault, not the request's.
  std::vector<std::string> reasons;
  const nlohmann::ordered_json& base = ranks[0]["adapters"];
  const std::string base_dir = ranks[0]["lora_dir"].get<std::string>();
  for (int r = 1; r < u; ++r) {
    const std::string rank = "rank " + std::to_string(r);
    if (!ranks[r]["error"].is_null()) {
      reasons.push_back(ranks[r]["error"].get<std::string>());
      continue;
    }
    const nlohmann::ordered_json& theirs = ranks[r]["adapters"];
    if (theirs.size() != base.size()) {
      reasons.push_back(rank + " attached " + std::to_string(theirs.size()) + " adapters, rank 0 " +
                        std::to_string(base.size()));
      continue;
    }
    const std::string dirs =
        " in its --lora-dir " + ranks[r]["lora_dir"].get<std::string>() + " than rank 0's (" + base_dir + ")";
    for (size_t i = 0; i < base.size(); ++i) {
      const nlohmann::ordered_json &a = base[i], &b = theirs[i];
      if (a == b) continue;
      const std::string name = a.value("name", std::string("?"));
      if (a["bytes"] != b["bytes"] || a["sha256"] != b["sha256"]) {
        reasons.push_back(rank + " has another " + name + dirs + ": " + b["bytes"].dump() + " bytes, sha256 " +
                          short_sha(b["sha256"]) + ".. vs rank 0's " + a["bytes"].dump() + " bytes, sha256 " +
                          short_sha(a["sha256"]) + "..");
      } else {
        reasons.push_back(rank + " has another adapter_config.json beside " + name + dirs + ": sha256 " +
                          short_sha(b["adapter_config_sha256"]) + " vs rank 0's " +
                          short_sha(a["adapter_config_sha256"]));
      }
    }
  }
  if (reasons.empty()) return AdapterVerdict{};
  detach_request_loras();  // on every rank: the next job attaches (and fingerprints) afresh
  std::string why;
  for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
  return AdapterVerdict{internal_error("the ranks do not agree on the job's adapters: " + why +
                                       "; every rank must serve the same --lora-dir files; the job was not run")};
}

}  // namespace vortex
