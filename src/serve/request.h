// The request body of `POST /v1/videos` (docs/serve.md): JSON -> RunRequest. Checks what the body alone
// decides (it is an object of known fields, each of the right type and range, exclusive fields not
// mixed) and names the field at fault; what depends on the loaded model (sizes, names, memory) is
// checked afterwards by the same functions `vortex generate` uses (engine/pipeline.h).
// Tested in tests/serve/request_test.cpp and fuzzed by fuzz/serve_request_fuzz.cpp (replayed over
// fuzz/corpus/serve_request in CI by tests/serve/request_fuzz_replay_test.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "engine/pipeline.h"
#include "vortex/status.h"

namespace vortex::serve {

struct RequestLimits {
  size_t max_body_bytes = 1 << 20;  // a JSON body; larger is refused before parsing
  size_t max_prompt_bytes = 16384;
  int max_json_depth = 16;             // nesting; the body is flat, so any depth beyond this is an attack
  bool allow_fault_injection = false;  // accept `fail_alloc_after` (vortex serve --allow-fault-injection)
};

// JSON nesting depth of `text` (brackets outside strings), stopping early once above `limit`.
int json_depth(std::string_view text, int limit);

// Parses `body` into a RunRequest starting from `defaults`. On failure, kInvalidArgument with
// `*field` set to the field at fault ("" when it is the body itself).
Result<RunRequest> parse_video_request(std::string_view body, const RequestLimits& limits, const RunRequest& defaults,
                                       std::string* field);

}  // namespace vortex::serve
