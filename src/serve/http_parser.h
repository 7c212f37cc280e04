// The HTTP/1.1 request parser of `vortex serve` (http_server.h): a strict, bounded reader of request heads,
// query strings and multipart/form-data bodies. Nothing here allocates more than the limits allow, throws,
// or echoes raw input into messages. HeadScanner finds the end of a head incrementally (each byte seen
// once), parse_head then checks the whole head in one pass. Fuzzed by fuzz/http_parser_fuzz.cpp (replayed
// in CI by tests/serve/http_parser_fuzz_replay_test.cpp); tested in tests/serve/http_parser_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vortex::serve::http {

struct HeadLimits {
  size_t max_request_line = 8192;  // bytes before the first CRLF; beyond: 414
  size_t max_head_bytes = 32768;   // request line + headers + the blank line; beyond: 431
  int max_headers = 64;            // header lines; beyond: 431
};

struct Request {
  std::string method;  // upper-case token: GET, POST, ...
  std::string target;  // as sent: path [ "?" query ]
  std::string path;    // the target before '?', not percent-decoded
  std::string query;   // after '?', raw
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::optional<uint64_t> content_length;
  bool keep_alive = true;
  bool expect_continue = false;
  std::string body;
  std::vector<std::string> matches;  // the route's captures (set by the router)
  std::string id;                    // request id, for logs and error bodies

  // The value of a header that occurs once (names are compared case-insensitively); nullptr if absent.
  const std::string* header(std::string_view name) const;
  // A query parameter, percent-decoded; nullopt when absent or badly encoded.
  std::optional<std::string> param(std::string_view name) const;
};

// A refusal: the status to answer and why (a fixed text; never the client's bytes).
struct HeadError {
  int status = 400;
  std::string message;
};

// Finds the end of a head ("\r\n\r\n") as bytes arrive, checking the size limits and refusing bare LF and
// NUL early, so a slow client costs one pass over its bytes.
class HeadScanner {
 public:
  explicit HeadScanner(const HeadLimits& limits) : limits_(limits) {}
  enum class Result { kNeedMore, kComplete, kError };
  // `buf` is every byte received for this request so far (it only grows between calls).
  Result scan(std::string_view buf);
  size_t head_length() const { return head_end_; }  // with kComplete: the bytes of the head
  const HeadError& error() const { return error_; }
  void reset() { *this = HeadScanner(limits_); }

 private:
  HeadLimits limits_;
  size_t pos_ = 0, head_end_ = 0;
  bool line_done_ = false;
  int lines_ = 0;
  HeadError error_;
};

// Parses a complete head (as delimited by HeadScanner; ends with "\r\n\r\n") into `out`. Strict: one
// request line `METHOD SP origin-form SP HTTP/1.x` (the target without spaces or control bytes), header names of token
// characters directly followed by
// ':', no obsolete line folding, no control characters, exactly one Host on HTTP/1.1, Content-Length only
// as digits and at most once, no Transfer-Encoding (request bodies carry a Content-Length), and a body
// method (POST, PUT, PATCH) must say its Content-Length (411).
std::optional<HeadError> parse_head(std::string_view head, const HeadLimits& limits, Request& out);

// Percent-decodes `in` ('+' is a space in queries); nullopt on a bad escape.
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);

struct FormPart {
  std::string name;
  std::string filename;
  std::string content_type;
  std::string content;
};

// Splits a multipart/form-data body (RFC 7578) whose Content-Type is `content_type`. Refuses a missing or
// over-long boundary, parts without a name, more than `max_parts` parts, and a body that does not end
// with the closing delimiter. On failure returns nullopt and sets `*why`.
std::optional<std::vector<FormPart>> parse_multipart(std::string_view content_type, std::string_view body,
                                                     size_t max_parts, std::string* why);

// The media type of a Content-Type value, lower-cased, without parameters ("application/json").
std::string media_type(std::string_view content_type);

}  // namespace vortex::serve::http
