// Tokenizer: the byte-level BPE of a Hugging Face `tokenizer.json` (Qwen2 / Qwen2.5 / Qwen3 / Qwen3-VL
// format), producing the same ids as HF `tokenizers`. Pipeline per input: added tokens are cut out first
// (leftmost-longest, literal), each remaining span is NFC-normalized (ICU) when the file says so, split
// by the pre-tokenizer regex (PCRE2 with Unicode properties, JIT) and each piece BPE-merged by merge rank.
// Prompt validation (valid UTF-8, not empty, byte and token limits) lives here so every front end and
// the conditioner reject the same inputs. docs/tokenizer.md; tested in tests/text/tokenizer_test.cpp
// against HF `tokenizers` and tiktoken ids, and by fuzz/tokenizer_fuzz.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vortex/status.h"

namespace vortex {

// 1 MiB of prompt text: bounds host memory and time before any work (tokenizing it takes about 0.1 s on
// one core, docs/tokenizer.md) and is far beyond any real prompt.
inline constexpr size_t kMaxPromptBytes = size_t{1} << 20;
// Qwen3-VL's text_config.max_position_embeddings: the conditioner has no position for a later token.
inline constexpr size_t kMaxPromptTokens = 262144;

struct PromptLimits {
  size_t max_bytes = kMaxPromptBytes;
  size_t max_tokens = kMaxPromptTokens;
};

struct EncodeOptions {
  // HF `split_special_tokens`: encode `special` added tokens (<|im_start|> ...) as plain text instead
  // of their ids. Non-special added tokens (<think>, <tool_call> ...) are always matched, as in HF.
  bool split_special_tokens = false;
};

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;     // skipped by decode(skip_special=true); affected by split_special_tokens
  bool normalized = false;  // matched in the normalized text (true) or the raw input (false)
};

class Tokenizer {
 public:
  // Parses a tokenizer.json. Unsupported components (another model type, normalizer or pre-tokenizer,
  // added-token stripping) are refused with kUnsupported naming them, never silently ignored.
  static Result<Tokenizer> from_json_file(const std::string& path);
  static Result<Tokenizer> from_json(std::string_view json_text, std::string_view origin);
  // The tokenizer.json of a model snapshot folder: DIR/tokenizer.json, else DIR/tokenizer/tokenizer.json,
  // else DIR/text_encoder/tokenizer.json. kNotFound lists the paths tried.
  static Result<std::string> find_in_model_dir(const std::string& dir);

  // Token ids of UTF-8 text (no BOS/EOS: Qwen's post-processor adds none). Empty text -> no ids.
  // kInvalidArgument on invalid UTF-8, naming the byte offset.
  Result<std::vector<int32_t>> encode(std::string_view utf8, const EncodeOptions& options = {}) const;
  // validate_prompt + encode + the token limit: what the conditioner calls on a user prompt.
  Result<std::vector<int32_t>> encode_prompt(std::string_view utf8, const PromptLimits& limits = {},
                                             const EncodeOptions& options = {}) const;
  // The bytes the ids stand for (may end inside a UTF-8 sequence when the ids were cut mid-character).
  // kInvalidArgument for an id outside [0, vocab_size()) or one the file does not define.
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Id of an added token (e.g. "<|im_start|>") or of a vocabulary entry in its tokenizer.json
  // spelling (byte-level alphabet, e.g. "Ġcat"); nullopt when there is none.
  std::optional<int32_t> token_id(std::string_view token) const;
  // The tokenizer.json spelling of an id (what HF `convert_ids_to_tokens` returns); always valid UTF-8.
  Result<std::string> token_string(int32_t id) const;
  // One past the largest id (HF get_vocab_size(with_added_tokens=True)).
  int32_t vocab_size() const;
  const std::vector<AddedToken>& added_tokens() const;
  // "NFC" or "none"; and the pre-tokenizer regex.
  const std::string& normalizer_name() const;
  const std::string& pretokenizer_pattern() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // immutable after load: encode/decode are safe from many threads
};

// Valid UTF-8, not empty or whitespace only, at most limits.max_bytes. The messages say which rule
// failed and the limit.
Status validate_prompt(std::string_view utf8, const PromptLimits& limits = {});

// NFC of valid UTF-8 (ICU). kInvalidArgument on invalid UTF-8.
Result<std::string> nfc_normalize(std::string_view utf8);

}  // namespace vortex
