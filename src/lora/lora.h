// LoRA adapters for H3 (docs/lora.md): files in every key style users have, normalised to Vortex's layer
// names (h3_spec: "blocks.3.attn.qkv_proj", "blocks.3.adaln_proj.linear", "final_layer.adaln_proj.linear"),
// alpha resolution that refuses to guess, the merge at load (one rounding; a PEFT-compatible variant) with an
// optional exact unmerge, and the run-time branch attached to the model's linear layers.
// Tested in tests/lora/ (key styles and merge bytes against diffusers/PEFT fixtures, run-time vs merged,
// bad files, end-to-end generate).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/h3_weights.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// `--lora FILE[:SCALE]`: SCALE multiplies the file's alpha / rank (default 1). For a file whose alpha is
// ambiguous, SCALE is required and is the whole effective scale of B @ A.
struct LoraSpec {
  std::string path;
  std::optional<double> scale;
};
// The largest SCALE magnitude accepted (ComfyUI's LoraLoader strength range is [-100, 100]).
constexpr double kMaxLoraScale = 100.0;
// "FILE", "FILE:0.8". When ARG is not itself an existing file, the text after the last ':' is the scale: a
// number outside [-kMaxLoraScale, kMaxLoraScale] (or inf/nan) is refused, and so is a non-number after the
// name of an existing file ("F:abc"); otherwise the whole ARG is the path ("c:/x.safetensors").
Result<LoraSpec> parse_lora_spec(std::string_view arg);

struct LoraLoadOptions {
  bool allow_unmatched = false;  // keys that match no layer: a warning (listed in the adapter) instead of an error
  bool explicit_scale = false;   // the user gave SCALE: an ambiguous alpha is then resolved as alpha = rank
  bool request_dialect = false;  // errors advise the serve request's "lora": ["NAME:SCALE"] instead of --lora
  // The file and the adapter_config.json beside it are opened with O_NOFOLLOW: a symbolic link is refused
  // whenever it was put there (per-request adapters named in --lora-dir).
  bool refuse_symlinks = false;
};

// One low-rank part of one layer: W[row_offset : row_offset + rows] += scale * B @ A.
// A fused layer gets one part per file module: q/k/v of a split file are three parts over the thirds of the
// [q | k | v] rows; a fused qkv_proj, out_proj, fc1 ([gate | value] rows), fc2 or AdaLN module is one part.
struct LoraPart {
  std::string layer;  // canonical layer name, e.g. "blocks.0.attn.qkv_proj"
  int64_t row_offset = 0;
  Tensor a;                  // [r, in] f32 host
  Tensor b;                  // [rows, r] f32 host, rows in Vortex's order (QKV de-interleaved, fc1 [gate | value])
  double alpha_scale = 1.0;  // alpha / r as resolved (1 when alpha = rank, or for an explicitly scaled file)
  std::string source;        // the file's module name, e.g. "transformer_blocks.0.attn.to_q"
  int64_t rank() const { return a.dim(0); }
};

struct LoraAdapter {
  std::string path;
  std::string key_style;         // "native" (release/ComfyUI names) | "diffusers" (PEFT split names)
  std::string prefix;            // the key prefix found: "", "diffusion_model.", "lora_unet_", "transformer.", ...
  std::string factor_names;      // "lora_A/lora_B" | "lora_down/lora_up"
  std::string alpha_source;      // how alpha was resolved (printed and recorded in run.json)
  bool qkv_interleaved = false;  // native qkv_proj B rows per-head interleaved (DiffSynth's .default. files)
  std::vector<LoraPart> parts;   // in h3_spec layer order
  std::vector<std::string> unmatched_keys;  // only with allow_unmatched
  int64_t tensors = 0;                      // tensors read from the file
};

// Reads a LoRA safetensors file for `config`. One error lists every key that matches no layer (unless
// allow_unmatched); shape and rank errors name the layer; NaN/Inf, a missing A or B half, an ambiguous
// alpha without an explicit scale are errors. Alpha rules (first that applies), docs/lora.md:
//   1. per-module `.alpha` tensors (every module must have one): alpha / r;
//   2. a numeric `alpha` / `lora_alpha` / `ss_network_alpha` in __metadata__: alpha / r of each module;
//   3. adapter_config.json beside the file (PEFT): lora_alpha / r, when every module's rank is r and the
//      file has no rank_pattern / alpha_pattern;
//   4. none of these, native key style: alpha = rank (scale 1; ComfyUI's and diffusers' rule);
//   5. otherwise (PEFT keys without alpha, a non-numeric or conflicting alpha, an adapter_config whose r
//      is not the modules' rank): ambiguous -> kInvalidArgument unless options.explicit_scale.
Result<LoraAdapter> load_lora(const std::string& path, const ModelConfig& config, const LoraLoadOptions& options = {});

// Original bytes of every weight a merge touched, so unmerge restores them exactly (host copies).
struct LoraMergeBackup {
  std::vector<std::pair<std::string, Tensor>> weights;  // (layer, host copy of its BF16 weight before the first merge)
};

// Merges every part into `weights` on `backend` (scale = strength * part.alpha_scale). The weights must
// be BF16 (merge before apply_precision: fp8/nvfp4 then quantize the merged weight). Uses
// Backend::lora_merge where provided, else the CPU reference on a host copy (same bytes). With `backup`,
// the original weights are kept so unmerge_lora can restore them bit for bit.
Status merge_lora(H3Weights& weights, const LoraAdapter& adapter, double strength, Backend& backend,
                  LoraMergeProgram program = LoraMergeProgram::kSingleRounding, LoraMergeBackup* backup = nullptr);
Status unmerge_lora(H3Weights& weights, LoraMergeBackup& backup, Backend& backend);

// Run-time path: attaches each adapter (with its strength) as LoraBranch parts on the model's linear
// layers (A and B rounded to BF16 and uploaded; several adapters add up). Replaces any branches attached
// before, so a server switches adapters per request without touching the base weights.
Status attach_lora_branches(H3Weights& weights, const std::vector<std::pair<const LoraAdapter*, double>>& adapters,
                            Backend& backend);
void detach_lora_branches(H3Weights& weights);

// What generate calls after loading the weights (and before apply_precision when merging).
struct LoraApplyOptions {
  bool allow_unmatched = false;
  std::string mode = "merge";  // "merge" | "runtime"
  // The weight precision the run uses: the run-time branch needs BF16 weights (merge works for every mode,
  // because generate merges before apply_precision quantizes).
  std::string precision = "bf16";
  bool refuse_symlinks = false;  // LoraLoadOptions::refuse_symlinks for every adapter
};
// Loads each spec, reports the effective scales through `note` (and unmatched keys through `warn`), merges
// or attaches, and writes the run.json entry (an array, one object per adapter) to `manifest_out`.
Status apply_lora_adapters(H3Weights& weights, const std::vector<LoraSpec>& specs, const LoraApplyOptions& options,
                           const ModelConfig& config, Backend& backend,
                           const std::function<void(std::string_view)>& note,
                           const std::function<void(std::string_view)>& warn, nlohmann::ordered_json* manifest_out);

// The canonical layers a LoRA may target, in h3_spec order (for tests and messages).
// A serve request's adapters checked at admission for what the request itself must fix: an adapter whose alpha
// is ambiguous and that was named without SCALE (load_lora's one kInvalidArgument) is refused, advising
// "lora": ["NAME:SCALE"]. Faults of the file itself (shapes, values) stay the job's failure, as the run reports
// them. `specs` hold the adapters' full paths.
Status check_request_loras(const std::vector<LoraSpec>& specs, const ModelConfig& config, bool allow_unmatched);

std::vector<std::string> lora_target_layers(const ModelConfig& config);

}  // namespace vortex
