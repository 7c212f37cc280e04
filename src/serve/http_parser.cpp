// The strict HTTP/1.1 request parser (see http_parser.h). Every refusal carries a fixed message; no byte
// of the input is copied into one.
#include "serve/http_parser.h"

#include <algorithm>

namespace vortex::serve::http {
namespace {

bool is_tchar(unsigned char c) {  // RFC 9110 token characters
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

HeadError err(int status, const char* message) { return HeadError{status, message}; }

std::optional<HeadError> parse_request_line(std::string_view line, Request& out) {
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 16) return err(400, "malformed request line");
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return err(400, "malformed request line");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  for (char c : method) {
    if (c < 'A' || c > 'Z') return err(400, "malformed method");
  }
  if (target.front() != '/') return err(400, "the request target must be an absolute path (origin form)");
  // Visible ASCII, and bytes >= 0x80 (clients send raw UTF-8 paths; they reach the router, which answers
  // 404 for any it does not know, and no message ever quotes them).
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u == 0x7f || c == '#') return err(400, "the request target has a space or a control byte");
  }
  if (version == "HTTP/1.1") {
    out.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    out.minor_version = 0;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[5] >= '0' && version[5] <= '9' &&
             version[6] == '.' && version[7] >= '0' && version[7] <= '9') {
    return err(505, "only HTTP/1.0 and HTTP/1.1 are served");
  } else {
    return err(400, "malformed HTTP version");
  }
  out.method = std::string(method);
  out.target = std::string(target);
  const size_t q = target.find('?');
  out.path = std::string(target.substr(0, q));
  out.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  return std::nullopt;
}

std::optional<HeadError> parse_header_line(std::string_view line, Request& out) {
  if (line.front() == ' ' || line.front() == '\t') return err(400, "obsolete header line folding is refused");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return err(400, "malformed header line");
  for (size_t i = 0; i < colon; ++i) {
    if (!is_tchar(static_cast<unsigned char>(line[i]))) return err(400, "malformed header name");
  }
  const std::string_view value = trim(line.substr(colon + 1));
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return err(400, "a header value has a control character");
  }
  out.headers.emplace_back(lowered(line.substr(0, colon)), std::string(value));
  return std::nullopt;
}

// Content-Length, Transfer-Encoding, Host, Connection and Expect, once every header is read.
std::optional<HeadError> check_framing(Request& out) {
  int lengths = 0, codings = 0, hosts = 0;
  out.keep_alive = out.minor_version == 1;
  for (const auto& [name, value] : out.headers) {
    if (name == "content-length") {
      if (++lengths > 1) return err(400, "more than one Content-Length");
      if (value.empty() || value.size() > 18) return err(400, "malformed Content-Length");
      uint64_t n = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return err(400, "malformed Content-Length (digits only)");
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      out.content_length = n;
    } else if (name == "transfer-encoding") {
      ++codings;
    } else if (name == "host") {
      ++hosts;
    } else if (name == "connection") {
      std::string_view rest = value;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view token = trim(rest.substr(0, comma));
        if (iequals(token, "close")) out.keep_alive = false;
        if (iequals(token, "keep-alive") && out.minor_version == 0) out.keep_alive = true;
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    } else if (name == "expect") {
      if (!iequals(value, "100-continue")) return err(417, "only Expect: 100-continue is understood");
      out.expect_continue = true;
    }
  }
  if (codings > 0 && lengths > 0) return err(400, "both Transfer-Encoding and Content-Length");
  if (codings > 1) return err(400, "more than one Transfer-Encoding");
  if (codings == 1) {
    const std::string* te = out.header("transfer-encoding");
    if (te == nullptr || !iequals(*te, "chunked")) return err(400, "unknown Transfer-Encoding");
    return err(411, "chunked request bodies are not accepted; send the body with a Content-Length");
  }
  if (hosts > 1) return err(400, "more than one Host");
  if (hosts == 0 && out.minor_version == 1) return err(400, "HTTP/1.1 needs a Host header");
  const bool body_method = out.method == "POST" || out.method == "PUT" || out.method == "PATCH";
  if (body_method && !out.content_length) return err(411, "a request body needs a Content-Length");
  return std::nullopt;
}

}  // namespace

const std::string* Request::header(std::string_view name) const {
  const std::string* found = nullptr;
  for (const auto& [n, v] : headers) {
    if (iequals(n, name)) {
      if (found) return nullptr;  // repeated: ambiguous, treated as absent
      found = &v;
    }
  }
  return found;
}

std::optional<std::string> Request::param(std::string_view name) const {
  std::string_view rest = query;
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    const std::optional<std::string> key = percent_decode(pair.substr(0, eq), true);
    if (!key || *key != name) continue;
    if (eq == std::string_view::npos) return std::string();
    return percent_decode(pair.substr(eq + 1), true);
  }
  return std::nullopt;
}

HeadScanner::Result HeadScanner::scan(std::string_view buf) {
  if (head_end_ > 0) return Result::kComplete;
  // Every check is made at the byte that breaks it, so the verdict never depends on how the bytes were split.
  for (; pos_ < buf.size(); ++pos_) {
    const char c = buf[pos_];
    if (pos_ >= limits_.max_head_bytes) {
      error_ = err(431, "the request head is larger than the server accepts");
      return Result::kError;
    }
    if (!line_done_ && pos_ >= limits_.max_request_line + 2) {  // the line, its CR and LF
      error_ = err(414, "the request line is longer than the server accepts");
      return Result::kError;
    }
    if (c == '\0') {
      error_ = err(400, "a NUL byte in the request head");
      return Result::kError;
    }
    if (c != '\n') continue;
    if (pos_ == 0 || buf[pos_ - 1] != '\r') {
      error_ = err(400, "a bare LF in the request head (lines end with CRLF)");
      return Result::kError;
    }
    if (!line_done_) {
      if (pos_ - 1 > limits_.max_request_line) {
        error_ = err(414, "the request line is longer than the server accepts");
        return Result::kError;
      }
      if (pos_ == 1) {
        error_ = err(400, "an empty request line");
        return Result::kError;
      }
      line_done_ = true;
    } else if (pos_ >= 3 && buf[pos_ - 2] == '\n' && buf[pos_ - 3] == '\r') {
      head_end_ = pos_ + 1;
      ++pos_;
      return Result::kComplete;
    }
    if (++lines_ > limits_.max_headers + 1) {
      error_ = err(431, "too many header lines");
      return Result::kError;
    }
  }
  return Result::kNeedMore;
}

std::optional<HeadError> parse_head(std::string_view head, const HeadLimits& limits, Request& out) {
  if (head.size() > limits.max_head_bytes) return err(431, "the request head is larger than the server accepts");
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") return err(400, "an incomplete request head");
  head.remove_suffix(2);  // each line now ends with CRLF
  size_t start = 0;
  int line_no = 0;
  while (start < head.size()) {
    const size_t end = head.find("\r\n", start);
    if (end == std::string_view::npos) return err(400, "malformed request head");
    const std::string_view line = head.substr(start, end - start);
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos)
      return err(400, "a bare CR or LF in the request head");
    if (line.empty()) return err(400, "an empty line inside the request head");
    if (line_no == 0) {
      if (line.size() > limits.max_request_line) return err(414, "the request line is longer than the server accepts");
      if (auto e = parse_request_line(line, out)) return e;
    } else {
      if (line_no > limits.max_headers) return err(431, "too many header lines");
      if (auto e = parse_header_line(line, out)) return e;
    }
    ++line_no;
    start = end + 2;
  }
  if (line_no == 0) return err(400, "an empty request line");
  return check_framing(out);
}

std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string media_type(std::string_view content_type) {
  return lowered(trim(content_type.substr(0, content_type.find(';'))));
}

namespace {

// `key=value` or `key="value"` parameters after the first ';' of a header value.
std::optional<std::string> header_param(std::string_view value, std::string_view key) {
  constexpr size_t npos = std::string_view::npos;
  auto skip_ows = [&](size_t i) {
    while (i < value.size() && (value[i] == ' ' || value[i] == '\t')) ++i;
    return i;
  };
  size_t i = value.find(';');
  while (i != npos) {
    i = skip_ows(i + 1);
    const size_t eq = value.find('=', i);
    const size_t semi = value.find(';', i);
    if (eq == npos || (semi != npos && semi < eq)) {
      i = semi;
      continue;
    }
    const std::string_view k = trim(value.substr(i, eq - i));
    const size_t j = skip_ows(eq + 1);
    std::string_view v;
    size_t after = value.size();
    if (j < value.size() && value[j] == '"') {
      const size_t close = value.find('"', j + 1);
      if (close == npos) return std::nullopt;
      v = value.substr(j + 1, close - j - 1);
      after = close + 1;
    } else {
      const size_t end = value.find(';', j);
      v = trim(value.substr(j, end == npos ? npos : end - j));
      after = end == npos ? value.size() : end;
    }
    if (iequals(k, key)) return std::string(v);
    i = value.find(';', after);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<FormPart>> parse_multipart(std::string_view content_type, std::string_view body,
                                                     size_t max_parts, std::string* why) {
  auto fail = [&](const char* message) -> std::optional<std::vector<FormPart>> {
    if (why) *why = message;
    return std::nullopt;
  };
  if (media_type(content_type) != "multipart/form-data") return fail("not multipart/form-data");
  const std::optional<std::string> boundary = header_param(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 70) return fail("a missing or malformed boundary");
  const std::string delimiter = "--" + *boundary;
  if (body.substr(0, delimiter.size()) != delimiter) return fail("the body does not start with the boundary");
  size_t pos = delimiter.size();
  std::vector<FormPart> parts;
  const std::string next_delimiter = "\r\n" + delimiter;
  for (;;) {
    if (body.substr(pos, 2) == "--") {
      const std::string_view tail = body.substr(pos + 2);
      if (!tail.empty() && tail != "\r\n") return fail("bytes after the closing boundary");
      return parts;
    }
    if (body.substr(pos, 2) != "\r\n") return fail("malformed boundary line");
    pos += 2;
    if (parts.size() >= max_parts) return fail("too many parts");
    const size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == std::string_view::npos || head_end - pos > 4096) return fail("a malformed part head");
    FormPart part;
    std::string_view head = body.substr(pos, head_end - pos);
    while (!head.empty()) {
      const size_t eol = head.find("\r\n");
      const std::string_view line = head.substr(0, eol);
      head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) return fail("a malformed part header");
      const std::string_view name = line.substr(0, colon);
      const std::string_view value = trim(line.substr(colon + 1));
      if (iequals(name, "content-disposition")) {
        if (media_type(value) != "form-data") return fail("a part that is not form-data");
        part.name = header_param(value, "name").value_or("");
        part.filename = header_param(value, "filename").value_or("");
      } else if (iequals(name, "content-type")) {
        part.content_type = std::string(value);
      }
    }
    if (part.name.empty()) return fail("a part without a name");
    const size_t content_start = head_end + 4;
    const size_t content_end = body.find(next_delimiter, content_start);
    if (content_end == std::string_view::npos) return fail("a part without its closing boundary");
    part.content = std::string(body.substr(content_start, content_end - content_start));
    parts.push_back(std::move(part));
    pos = content_end + next_delimiter.size();
  }
}

}  // namespace vortex::serve::http
