// Strict UTF-8 validation; see utf8.h.
#include "text/utf8.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace vortex {
namespace {

// Length of the well-formed sequence at p (Unicode Table 3-7), 0 when it is ill-formed; `why` says how.
size_t sequence_length(const uint8_t* p, size_t left, const char** why) {
  const uint8_t b = p[0];
  if (b < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // below: overlong
    if (b == 0xED) hi = 0x9F;  // above: UTF-16 surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;  // below: overlong
    if (b == 0xF4) hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    *why = (b < 0xC0)   ? "continuation byte without a lead byte"
           : (b < 0xC2) ? "overlong 2-byte encoding"
                        : "byte never valid in UTF-8 (0xF5..0xFF: beyond U+10FFFF or a 5/6-byte form)";
    return 0;
  }
  if (left < 2) {
    *why = "truncated sequence at the end of the input";
    return 0;
  }
  if (p[1] < lo || p[1] > hi) {
    if (p[1] < 0x80 || p[1] > 0xBF) *why = "truncated sequence (a lead byte not followed by enough continuation bytes)";
    else if (b == 0xED) *why = "UTF-16 surrogate (U+D800..U+DFFF) encoded in UTF-8";
    else if (b == 0xF4) *why = "code point beyond U+10FFFF";
    else *why = "overlong encoding";
    return 0;
  }
  for (size_t i = 2; i < n; ++i) {
    if (i >= left) {
      *why = "truncated sequence at the end of the input";
      return 0;
    }
    if (p[i] < 0x80 || p[i] > 0xBF) {
      *why = "truncated sequence (a lead byte not followed by enough continuation bytes)";
      return 0;
    }
  }
  return n;
}

size_t scan(std::string_view bytes, const char** why) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t size = bytes.size();
  size_t i = 0;
  while (i < size) {
    // ASCII runs 8 bytes at a time: prompts are mostly ASCII.
    while (i + 8 <= size) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= size) break;
    const size_t n = sequence_length(p + i, size - i, why);
    if (n == 0) return i;
    i += n;
  }
  return size;
}

}  // namespace

size_t first_invalid_utf8(std::string_view bytes) {
  const char* why = nullptr;
  return scan(bytes, &why);
}

Status validate_utf8(std::string_view bytes) {
  const char* why = nullptr;
  const size_t at = scan(bytes, &why);
  if (at == bytes.size()) return Status::Ok();
  std::string shown;
  for (size_t i = at; i < bytes.size() && i < at + 4; ++i) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "%s0x%02X", shown.empty() ? "" : " ", static_cast<uint8_t>(bytes[i]));
    shown += hex;
  }
  return invalid_argument("invalid UTF-8 at byte " + std::to_string(at) + " (" + shown + "): " + why +
                          "; the text must be UTF-8 encoded");
}

}  // namespace vortex
