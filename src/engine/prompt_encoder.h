// Prompt -> conditioning, as diffusers' MiniMax-H3 t2va encode step presents it
// (modular_pipelines/minimax_h3/encoders.py, MiniMaxH3TextEncoderStep): the prompt verbatim, tokenized with
// `add_special_tokens=False` (no chat template, no BOS/EOS; special-token text such as "<|im_start|>" is
// matched as that token, HF's default), one sequence without padding or truncation, attention mask all ones
// (so no padded rows exist), text positions (i, i, i), and `hidden_states[text_encoder_layer]` (50 for H3) of
// the Qwen3-VL conditioner. The checkpoint is guidance-distilled: no negative prompt, no unconditional branch.
// The pipeline sets no maximum length; the conditioner's positions (text_config.max_position_embeddings)
// and the tokenizer's byte limit are the limits, checked before anything heavy is loaded.
// Tested in tests/engine/prompt_encoder_test.cpp (against diffusers on a tiny random model, fixtures made by
// tests/engine/make_prompt_fixtures.py) and end to end in tests/engine/model_folder_cli_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "text_encoder/text_encoder_config.h"
#include "vortex/status.h"

namespace vortex {

// The tokenizer at `path`, parsed once per process (tokenizers are immutable; shared by every Pipeline).
Result<std::shared_ptr<const Tokenizer>> shared_tokenizer(const std::string& path);

// The prompt limits a conditioner imposes: the tokenizer's byte limit, and at most
// `config.max_positions` tokens (kMaxPromptTokens when the config does not say).
PromptLimits conditioner_prompt_limits(const TextEncoderConfig& config);

// validate_prompt (text/tokenizer.h) with its message put under `field` ("--prompt: the prompt is empty").
Status validate_prompt_field(std::string_view prompt, const PromptLimits& limits, const std::string& field);

// The t2va presentation's token ids, or a clear error: an empty or whitespace-only prompt, invalid UTF-8
// (with the byte offset), more bytes than the limit, more tokens than the conditioner has positions for
// (the message states the limit and where it comes from), or an id outside the conditioner's vocabulary
// (a tokenizer that does not belong to the model). `field` names the prompt in messages ("--prompt").
Result<std::vector<int32_t>> present_t2va_prompt(const Tokenizer& tokenizer, const TextEncoderConfig& config,
                                                 std::string_view prompt, const std::string& field);

}  // namespace vortex
