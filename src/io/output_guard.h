// Which existing files a writing command (`vortex synth`, `vortex quantize`) may replace: none without
// --overwrite, and with it only files Vortex itself wrote, recognised by the marks its writers leave
// (safetensors __metadata__ keys, a config.json key). Tested through the CLI in tests/cli/cli_test.cpp
// (synth and quantize refusals, replacement of their own outputs).
#pragma once

#include <string>

#include "vortex/status.h"

namespace vortex {

// Key in the config.json that `vortex synth` writes beside a checkpoint (ModelConfig ignores it).
constexpr const char* kConfigWrittenByKey = "vortex.written_by";

enum class OutputKind { kSafetensors, kIndex, kConfigJson };

// True when `path` is a safetensors file whose __metadata__ carries "vortex.synthetic_seed" (synth) or
// "vortex.quantize" (quantize).
bool is_vortex_safetensors(const std::string& path);

// OK when `path` does not exist, or when `overwrite` is set and Vortex wrote it:
//   kSafetensors: is_vortex_safetensors;  kIndex: every shard it lists is;
//   kConfigJson: it holds kConfigWrittenByKey, or `vortex_sibling` (the checkpoint beside it that this
//   command replaces is Vortex's). Otherwise kInvalidArgument saying why.
Status check_output_replaceable(const std::string& path, OutputKind kind, bool overwrite, bool vortex_sibling = false);

// OK when the file system that will hold `path` (its nearest existing ancestor folder) has room for `bytes`
// plus a 1% margin; otherwise kInvalidArgument naming the size, the free space and the folder. `what` names the
// output ("--out h3.safetensors").
Status check_free_space(const std::string& path, uint64_t bytes, const std::string& what);

// "66.3 GB", "512.0 MB": sizes in messages.
std::string format_size(uint64_t bytes);

}  // namespace vortex
