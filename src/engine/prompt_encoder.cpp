// The t2va prompt presentation and the process-wide tokenizer cache (see prompt_encoder.h).
#include "engine/prompt_encoder.h"

#include <map>
#include <mutex>

namespace vortex {

Result<std::shared_ptr<const Tokenizer>> shared_tokenizer(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(path); it != cache.end()) return it->second;
  VORTEX_ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::from_json_file(path));
  auto shared = std::make_shared<const Tokenizer>(std::move(t));
  cache.emplace(path, shared);
  return std::shared_ptr<const Tokenizer>(shared);
}

PromptLimits conditioner_prompt_limits(const TextEncoderConfig& config) {
  PromptLimits limits;
  if (config.max_positions > 0) limits.max_tokens = static_cast<size_t>(config.max_positions);
  return limits;
}

Status validate_prompt_field(std::string_view prompt, const PromptLimits& limits, const std::string& field) {
  Status s = validate_prompt(prompt, limits);
  if (s.ok()) return s;
  std::string m = s.message();
  if (m.rfind("prompt: ", 0) == 0) m = "the prompt has " + m.substr(8);  // "prompt: invalid UTF-8 at byte 2 ..."
  return Status(s.code(), field + ": " + m);
}

Result<std::vector<int32_t>> present_t2va_prompt(const Tokenizer& tokenizer, const TextEncoderConfig& config,
                                                 std::string_view prompt, const std::string& field) {
  const PromptLimits limits = conditioner_prompt_limits(config);
  VORTEX_RETURN_IF_ERROR(validate_prompt_field(prompt, limits, field));
  // HF tokenizer(prompt, add_special_tokens=False): Qwen's post-processor adds nothing either way, and
  // split_special_tokens stays False, so "<|im_start|>" typed in a prompt is that one token, as in diffusers.
  VORTEX_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(prompt));
  if (ids.size() > limits.max_tokens) {
    return invalid_argument(
        field + ": the prompt is " + std::to_string(ids.size()) + " tokens; the conditioner has " +
        "positions for at most " + std::to_string(limits.max_tokens) +
        " (text_config.max_position_embeddings of the text encoder; diffusers' MiniMax-H3 "
        "pipeline neither truncates nor pads, so Vortex refuses instead of cutting it). Shorten it");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= config.vocab) {
      return invalid_argument(field + ": token " + std::to_string(i) + " has id " + std::to_string(ids[i]) +
                              ", outside the text encoder's vocabulary of " + std::to_string(config.vocab) +
                              ": the tokenizer.json does not belong to this text encoder");
    }
  }
  return ids;
}

}  // namespace vortex
