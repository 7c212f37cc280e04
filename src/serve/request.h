// The request body of `POST /v1/videos` (docs/serve.md): JSON -> RunRequest. Checks what the body alone
// decides (it is an object of known fields, each of the right type and range, exclusive fields not
// mixed) and names the field at fault; what depends on the loaded model (sizes, names, memory) is
// checked afterwards by the same functions `vortex generate` uses (engine/pipeline.h).
// The SGLang minimax_h3 dialect (`task`, `conditions`, `target`, `num_inference_steps`, ...) is read too; its fl2va
// part takes keyframes, its ref2va part references (image, video, video_audio, audio), each as a file:// URI under the
// server's input folder or a data URL (docs/serve.md).
// Tested in tests/serve/request_test.cpp, tests/serve/fl2va_request_test.cpp and tests/serve/ref2va_request_test.cpp,
// fuzzed by fuzz/serve_request_fuzz.cpp
// (replayed over fuzz/corpus/serve_request in CI by tests/serve/request_fuzz_replay_test.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/pipeline.h"
#include "vortex/status.h"

namespace vortex::serve {

struct RequestLimits {
  size_t max_body_bytes = 1 << 20;  // a JSON body; larger is refused before parsing
  // fl2va keyframes in the body (conditions[].uri): a data URL counts toward max_body_bytes and its decoded image is
  // at most max_keyframe_bytes (the CLI's file limit, ImageLimits::max_file_bytes); a file:// URI must name a file
  // under input_dir (empty: none accepted), for keyframes larger than the body allows.
  size_t max_keyframe_bytes = size_t{64} << 20;
  std::string input_dir;
  size_t max_prompt_bytes = 16384;
  int max_json_depth = 16;             // nesting; the body is flat, so any depth beyond this is an attack
  bool allow_fault_injection = false;  // accept `fail_alloc_after` (vortex serve --allow-fault-injection)
};

// JSON nesting depth of `text` (brackets outside strings), stopping early once above `limit`.
int json_depth(std::string_view text, int limit);

// An fl2va keyframe sent in the body as a data URL: the decoded file, written into the job's folder before
// admission (whose checks then read it as the CLI reads --first-frame).
struct KeyframeUpload {
  std::string anchor;  // "first" or "last"
  std::string ext;     // "png", "jpg" or "webp", from the data URL's media type
  std::string bytes;
};

// What a ref2va body leaves for the server to do after parsing: references sent as data URLs to write into the job's
// folder (RunRequest::references[index] is then "KIND:" + the file's path), and the references declared
// "video_audio", whose soundtrack admission checks (probe_reference, media/reference_media.h).
struct ReferenceUpload {
  size_t index = 0;  // in conditions[] and in RunRequest::references
  std::string kind;  // "image", "video" or "audio"
  std::string ext;   // from the data URL's media type ("png", "mp4", "wav", ...)
  std::string bytes;
};
struct ReferenceInputs {
  std::vector<ReferenceUpload> uploads;
  std::vector<size_t> with_soundtrack;  // indices of "video_audio" conditions
};

// Parses `body` into a RunRequest starting from `defaults`. On failure, kInvalidArgument with
// `*field` set to the field at fault ("" when it is the body itself). Keyframes given as data URLs go to
// `*uploads` (their RunRequest paths are left empty for the caller to fill); without `uploads` they are refused.
// ref2va references fill RunRequest::references in the order of conditions[]; their data URLs and soundtrack checks
// go to `*references` (without it, data URLs and "video_audio" are refused).
Result<RunRequest> parse_video_request(std::string_view body, const RequestLimits& limits, const RunRequest& defaults,
                                       std::string* field, std::vector<KeyframeUpload>* uploads = nullptr,
                                       ReferenceInputs* references = nullptr);

}  // namespace vortex::serve
