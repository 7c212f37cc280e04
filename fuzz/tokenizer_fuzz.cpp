// libFuzzer target for the tokenizer (UTF-8 validation, added-token cutting, NFC, the PCRE2 split, both
// BPE merge paths, decode). Invariants on every input: encode succeeds exactly when the bytes are valid
// UTF-8 (else the error names first_invalid_utf8's offset); every id is in range; NFC(decode(encode(x)))
// == NFC(x), with and without split_special_tokens; prompt validation never crashes.
// Tokenizer: VORTEX_FUZZ_TOKENIZER (env, else the compiled-in default: the tiny test tokenizer).
// Build: fuzz/CMakeLists.txt; replayed over tests/text/fuzz_corpus by CTest (tests/text/tests.cmake).
// Run: tokenizer_fuzz -max_total_time=60 tests/text/fuzz_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "text/tokenizer.h"
#include "text/utf8.h"

#ifndef VORTEX_FUZZ_TOKENIZER
#error "VORTEX_FUZZ_TOKENIZER must name a tokenizer.json"
#endif

namespace {

const vortex::Tokenizer& tokenizer() {
  static const vortex::Tokenizer* tok = [] {
    const char* env = std::getenv("VORTEX_FUZZ_TOKENIZER");
    vortex::Result<vortex::Tokenizer> t = vortex::Tokenizer::from_json_file(env ? env : VORTEX_FUZZ_TOKENIZER);
    if (!t.ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s\n", t.status().to_string().c_str());
      std::abort();
    }
    return new vortex::Tokenizer(std::move(t).value());
  }();
  return *tok;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

void round_trip(const vortex::Tokenizer& tok, std::string_view text, const std::string& nfc, bool split_special) {
  vortex::EncodeOptions options;
  options.split_special_tokens = split_special;
  vortex::Result<std::vector<int32_t>> ids = tok.encode(text, options);
  check(ids.ok(), "valid UTF-8 encodes");
  for (int32_t id : *ids) check(id >= 0 && id < tok.vocab_size(), "ids are in range");
  vortex::Result<std::string> back = tok.decode(*ids);
  check(back.ok(), "encoded ids decode");
  // Spans between added tokens are normalized separately, so compare after one more NFC.
  vortex::Result<std::string> back_nfc = vortex::nfc_normalize(*back);
  check(back_nfc.ok() && *back_nfc == nfc, "NFC(decode(encode(x))) == NFC(x)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const vortex::Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t bad = vortex::first_invalid_utf8(text);
  (void)vortex::validate_prompt(text);
  if (bad < size) {
    vortex::Result<std::vector<int32_t>> ids = tok.encode(text);
    check(!ids.ok() && ids.status().code() == vortex::ErrorCode::kInvalidArgument, "invalid UTF-8 is refused");
    check(ids.status().message().find("at byte " + std::to_string(bad) + " ") != std::string::npos,
          "the error names the first bad byte");
    return 0;
  }
  vortex::Result<std::string> nfc = vortex::nfc_normalize(text);
  check(nfc.ok(), "valid UTF-8 normalizes");
  round_trip(tok, text, *nfc, false);
  round_trip(tok, text, *nfc, true);
  return 0;
}
