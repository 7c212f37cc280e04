// libFuzzer target for the POST /v1/videos body parser (src/serve/request.h: depth pre-check, JSON,
// known fields, types, ranges, exclusive fields). Invariants on every input: a rejection says why, and an
// accepted request has every field inside the ranges the parser promises.
// Build: fuzz/CMakeLists.txt. Run: serve_request_fuzz -max_total_time=60 fuzz/corpus/serve_request.
// CI replays the corpus (and mutations of it) through tests/serve/request_fuzz_replay_test.cpp.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  vortex::serve::RequestLimits limits;
  limits.allow_fault_injection = size > 0 && (data[0] & 1);
  std::string field = "unset";
  vortex::Result<vortex::RunRequest> r = vortex::serve::parse_video_request(body, limits, vortex::RunRequest{}, &field);
  if (!r.ok()) {
    if (r.status().message().empty()) std::abort();  // every rejection must say why
    if (field == "unset") std::abort();              // and name a field (or "" for the body)
    return 0;
  }
  if (!field.empty()) std::abort();
  const vortex::RunRequest& q = *r;
  if (q.width < 1 || q.height < 1 || q.frames < 1 || q.steps < 1 || q.steps > 1000) std::abort();
  if (q.seconds < 0.0 || q.prompt.size() > limits.max_prompt_bytes) std::abort();
  if (q.fail_alloc_after != -1 && !limits.allow_fault_injection) std::abort();
  return 0;
}
