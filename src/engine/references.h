// ref2va requests in the engine: the checks a request with references (vortex generate --ref, serve's reference
// conditions) passes before any weight loads, and the run.json record of its reference files. The media rules are
// diffusers 0.42.1's MiniMaxH3Ref2VASetupStep (src/media/reference_media.h); the task rules are the release's: the
// Ref2VA transformer (transformer_ref/ of the snapshot, or the Ref2VA/ partition's transformer/) runs ref2va and
// nothing else, references run on nothing else. Tested in tests/engine/references_test.cpp and through the binary in
// tests/cli/cli_ref2va_test.cpp.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "media/reference_media.h"
#include "vortex/status.h"

namespace vortex {

// The parts a request's references need, besides the transformer.
struct ReferenceEncoders {
  std::string video_vae_dir;  // the video VAE (diffusers layout) whose encoder encodes image and video references
  std::string audio_vae_dir;  // the audio VAE whose encoder encodes soundtracks and audio clips
};

// The request's references probed and checked, in packed order: each `spec` ("image:" / "video:" / "audio:" prefix
// or none, then a path) parsed and probed from its header (probe_reference: existence, kind, size, duration, frame
// rate, channels), then the set (check_reference_set: counts, audio never alone, total durations). Also refused:
// references together with keyframes (fl2va), a transformer that is not H3's Ref2VA one (`checkpoint_path` empty:
// the built-in synthetic configs, which stand in for either), and a missing encoder folder. Every message starts
// with `field` ("--ref" or "conditions") and names the file.
Result<std::vector<ReferenceProbe>> check_references(const std::vector<std::string>& specs, bool has_keyframes,
                                                     const std::string& checkpoint_path,
                                                     const ReferenceEncoders& encoders, const std::string& field,
                                                     const ReferenceLimits& limits = {});

// A request without references on the Ref2VA transformer: refused naming the FL2VA transformer to use
// (refuse_reference_transformer's message); OK for any other transformer.
Status check_task_transformer(bool has_references, const std::string& checkpoint_path);

// run.json's record of the references, in packed order: per reference its index, kind, path, bytes and SHA-256,
// what its header says (an image's size; a video's size, frame rate, duration and soundtrack; an audio clip's rate,
// channels and duration). A file that cannot be read fails the whole record.
Result<nlohmann::json> reference_inputs_json(const std::vector<ReferenceProbe>& probes);

}  // namespace vortex
