// ref2va request checks and the run.json record of references (see references.h).
#include "engine/references.h"

#include <filesystem>

#include "engine/conditioning.h"
#include "engine/run_manifest.h"
#include "io/checkpoint.h"

namespace vortex {
namespace fs = std::filesystem;

namespace {

bool is_reference_transformer(const std::string& checkpoint_path) {
  return !checkpoint_path.empty() && !refuse_reference_transformer(checkpoint_path).ok();
}

}  // namespace

Status check_task_transformer(bool has_references, const std::string& checkpoint_path) {
  if (has_references || !is_reference_transformer(checkpoint_path)) return Status::Ok();
  return refuse_reference_transformer(checkpoint_path);
}

Result<std::vector<ReferenceProbe>> check_references(const std::vector<std::string>& specs, bool has_keyframes,
                                                     const std::string& checkpoint_path,
                                                     const ReferenceEncoders& encoders, const std::string& field,
                                                     const ReferenceLimits& limits) {
  std::vector<ReferenceProbe> probes;
  if (specs.empty()) return probes;
  if (has_keyframes)
    return invalid_argument(field +
                            ": references (ref2va) and keyframes (fl2va) are two tasks on two transformers; a request "
                            "has one or the other");
  // Headers only (milliseconds each): every file's refusal comes before anything is decoded or loaded.
  for (size_t i = 0; i < specs.size(); ++i) {
    Result<ReferenceSpec> spec = parse_reference_spec(specs[i]);
    if (!spec.ok()) return spec.status().with_context(field);
    Result<ReferenceProbe> probe = probe_reference(*spec, limits);
    if (!probe.ok()) return probe.status().with_context(field);
    probes.push_back(*probe);
  }
  VORTEX_RETURN_IF_ERROR(check_reference_set(probes, limits).with_context(field));
  if (!checkpoint_path.empty() && !is_reference_transformer(checkpoint_path))
    return invalid_argument(field + ": references (ref2va) run on H3's Ref2VA transformer, and " + checkpoint_path +
                            " is not it: pass --model with the snapshot root (its transformer_ref/) or its Ref2VA/ "
                            "partition");
  bool visual = false, sound = false;
  for (const ReferenceProbe& p : probes) {
    visual = visual || p.kind != ReferenceKind::kAudio;
    sound = sound || p.has_audio;
  }
  if (visual && encoders.video_vae_dir.empty())
    return invalid_argument(field +
                            ": image and video references are encoded by the video VAE's encoder: pass the model "
                            "folder (--model DIR, whose vae/ holds it) or --vae DIR");
  if (sound && encoders.audio_vae_dir.empty())
    return invalid_argument(field +
                            ": soundtracks and audio references are encoded by the audio VAE's encoder: pass the "
                            "model folder (--model DIR, whose audio_vae/ holds it) or --audio-vae DIR");
  return probes;
}

Result<nlohmann::json> reference_inputs_json(const std::vector<ReferenceProbe>& probes) {
  nlohmann::json out = nlohmann::json::array();
  int index = 0;
  for (const ReferenceProbe& p : probes) {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(p.path));
    std::error_code ec;
    const auto bytes = fs::file_size(p.path, ec);
    if (ec) return io_error("reference " + p.path + ": cannot read its size: " + ec.message());
    nlohmann::json e = {
        {"index", index++}, {"kind", reference_kind_name(p.kind)}, {"path", p.path}, {"bytes", bytes}, {"sha256", sha}};
    if (p.kind != ReferenceKind::kAudio) {
      e["width"] = p.width;
      e["height"] = p.height;
    }
    if (p.kind == ReferenceKind::kVideo) {
      e["fps"] = p.fps;
      e["has_audio"] = p.has_audio;
    }
    if (p.kind != ReferenceKind::kImage) e["duration_s"] = p.duration_s;
    if (p.has_audio) {
      e["sample_rate"] = p.sample_rate;
      e["channels"] = p.channels;
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace vortex
