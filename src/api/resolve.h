// From a parsed RequestSpec (request_flags.h) to what the engine runs: the checks between fields (exclusions, the
// preset, a random seed), the model folder (its transformer, text encoder, tokenizer and decoders) and the decoder
// choice. One path for `vortex generate` and the public API (include/vortex/vortex.h), so both refuse the same
// requests with the same messages, naming the field in their dialect. Tested in tests/api/request_flags_test.cpp and,
// through the CLI, tests/cli/cli_errors_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "api/request_flags.h"
#include "engine/generate.h"
#include "engine/model_folder.h"

namespace vortex::api {

struct ResolvedGenerate {
  GenerateRequest request;
  DecoderPaths folder_decoders;  // the model folder's vae/ and audio_vae/ (empty without a folder)
  bool latents_only = false;
  std::vector<std::string> notes;  // for the caller's progress: the random seed drawn, a folder without decoders
};

// The one-shot request (load options and one run): on failure `failed` (when given) names the field at fault.
Result<ResolvedGenerate> resolve_generate(RequestSpec spec, FieldStyle style, Field* failed = nullptr);

// The load options alone, for a pipeline that serves many requests: a model folder brings its transformer, its text
// encoder when present, and its decoders unless --latents-only or decoders are named.
Result<PipelineOptions> resolve_load(const RequestSpec& spec, FieldStyle style, Field* failed = nullptr);

// One request on a loaded pipeline: the prompt file, exclusions, the random seed and the preset.
Result<RunRequest> resolve_run(RequestSpec spec, FieldStyle style, std::vector<std::string>* notes,
                               Field* failed = nullptr);

// The name `flag` ("--config") has in `style`: the flag itself, or the option's id ("config").
std::string flag_name(const char* flag, FieldStyle style);

}  // namespace vortex::api
