// libFuzzer target for the HTTP/1.1 request parser of `vortex serve` (src/serve/http_parser.h): the head
// scanner fed in arbitrary splits, the head parser, query parameters and multipart bodies. Invariants on
// every input: no crash or sanitizer report; a refusal has a 4xx/5xx status and a fixed message that
// holds no input byte outside printable ASCII; an accepted head has a method, an origin-form path and at
// most one framing; splitting the input differently never changes the scanner's verdict.
// Build: fuzz/CMakeLists.txt. Run: http_parser_fuzz -max_total_time=60 fuzz/corpus/http_request.
// CI replays the corpus and mutations of it through tests/serve/http_parser_fuzz_replay_test.cpp.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "serve/http_parser.h"

namespace {

using vortex::serve::http::HeadScanner;

void check_error(const vortex::serve::http::HeadError& e) {
  if (e.status < 400 || e.status > 599 || e.message.empty()) std::abort();
  for (char c : e.message) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) std::abort();
  }
}

// The scanner's verdict on `in` fed in pieces of `step` bytes.
HeadScanner::Result scan_in_steps(std::string_view in, size_t step, const vortex::serve::http::HeadLimits& limits,
                                  size_t* head_len) {
  HeadScanner scanner(limits);
  HeadScanner::Result r = HeadScanner::Result::kNeedMore;
  for (size_t n = std::min(step, in.size()); r == HeadScanner::Result::kNeedMore; n = std::min(n + step, in.size())) {
    r = scanner.scan(in.substr(0, n));
    if (n == in.size()) break;
  }
  *head_len = scanner.head_length();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  vortex::serve::http::HeadLimits limits;
  limits.max_request_line = 256;
  limits.max_head_bytes = 1024;
  limits.max_headers = 16;
  size_t whole_len = 0, split_len = 0;
  const HeadScanner::Result whole = scan_in_steps(in, in.size() + 1, limits, &whole_len);
  const HeadScanner::Result split = scan_in_steps(in, 1 + size % 7, limits, &split_len);
  if (whole != split || whole_len != split_len) std::abort();  // verdict independent of how bytes arrive
  if (whole == HeadScanner::Result::kComplete) {
    vortex::serve::http::Request req;
    std::optional<vortex::serve::http::HeadError> e = parse_head(in.substr(0, whole_len), limits, req);
    if (e) {
      check_error(*e);
    } else {
      if (req.method.empty() || req.path.empty() || req.path[0] != '/') std::abort();
      if (req.header("transfer-encoding") != nullptr) std::abort();  // never accepted
      (void)req.param("variant");
      const std::string* type = req.header("content-type");
      const std::string_view body = in.substr(whole_len);
      std::string why;
      auto parts = vortex::serve::http::parse_multipart(type ? *type : std::string(), body, 4, &why);
      if (parts && parts->size() > 4) std::abort();
      if (!parts && why.empty()) std::abort();
    }
  } else if (whole == HeadScanner::Result::kError) {
    HeadScanner scanner(limits);
    (void)scanner.scan(in);
    check_error(scanner.error());
  }
  // The multipart parser on the raw input, under a fixed boundary.
  std::string why;
  (void)vortex::serve::http::parse_multipart("multipart/form-data; boundary=b", in, 4, &why);
  (void)vortex::serve::http::percent_decode(in, true);
  return 0;
}
