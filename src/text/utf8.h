// Strict UTF-8 validation (RFC 3629): rejects lone continuation bytes, overlong forms, surrogates
// (U+D800..U+DFFF), code points above U+10FFFF and truncated sequences, naming the first bad byte's
// offset. Prompts reach the tokenizer as bytes, so this is where malformed input is caught.
// Tested in tests/text/utf8_test.cpp and by the tokenizer fuzz target.
#pragma once

#include <cstddef>
#include <string_view>

#include "vortex/status.h"

namespace vortex {

// Offset of the first byte that is not part of a well-formed sequence, or bytes.size() when all are.
size_t first_invalid_utf8(std::string_view bytes);

// Ok, or kInvalidArgument "invalid UTF-8 at byte N (0xXX ...): <what>".
Status validate_utf8(std::string_view bytes);

}  // namespace vortex
