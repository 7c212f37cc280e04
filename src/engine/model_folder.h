// ModelFolder: the official MiniMax-H3 Hugging Face snapshot (or a part of it) given as one argument, as
// `vortex generate --model DIR`, `vortex encode-text --model DIR` and `vortex inspect DIR` take it. Detects
// the layout, resolves each part's path and lists every missing part in one message (docs/checkpoints.md
// "Model folders"). Layouts, first that applies:
//   diffusers    DIR/model_index.json (or modular_model_index.json) of a MiniMaxH3 pipeline without a
//                `_minimax_h3` block: the snapshot root. transformer/ (the FL2VA partition, diffusers keys),
//                text_encoder/, tokenizer/tokenizer.json, vae/, audio_vae/ (transformer_ref/ is Ref2VA's).
//   partition    DIR/model_index.json with `_minimax_h3.partition` (the snapshot's FL2VA/ folder):
//                transformer/ (original keys), text_encoder/, tokenizer/, video_vae/ and audio_vae/ in the
//                release's own format, which `vortex decode` does not read (it reads the root's vae/,
//                audio_vae/; taken from DIR/.. when present). FL2VA/ runs t2va and fl2va, Ref2VA/ runs
//                ref2va (`_minimax_h3.tasks`); a task on the other partition is refused naming the right one.
//   transformers DIR/config.json of Qwen3-VL: a text encoder alone (tokenizer.json beside it).
// Only existence is checked here (files, and every shard an index names); the loaders check the contents.
// Tested in tests/engine/model_folder_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "engine/pipeline.h"
#include "vortex/status.h"

namespace vortex {

enum class ModelFolderLayout { kDiffusers, kPartition, kTransformers };
const char* model_folder_layout_name(ModelFolderLayout layout);  // "diffusers" | "partition" | "transformers"

// One part of a model folder: where it is expected, and whether it is complete there.
struct ModelPart {
  std::string name;  // "transformer" | "transformer_ref" | "text_encoder" | "tokenizer" | "vae" | "audio_vae"
  std::string path;  // the folder (or tokenizer.json) used, or where it was expected
  bool present = false;
  std::string problem;   // why it is not usable (missing files), empty when present
  uint64_t bytes = 0;    // bytes of its weight files, when present
  bool damaged = false;  // its files exist but do not parse (verify_model_folder_files)
};

struct ModelFolder {
  std::string dir;  // as given
  ModelFolderLayout layout = ModelFolderLayout::kDiffusers;
  std::string pipeline_class;  // model_index.json `_class_name` ("" for a transformers folder)
  std::string partition;       // "fl2va" or "ref2va" for a partition folder, "" otherwise
  std::vector<ModelPart> parts;
  int text_layer = -1;             // hidden-state index from the pipeline config (pipeline_text_layer); -1: none
  std::vector<std::string> notes;  // e.g. VAEs taken from the snapshot root
  // H3 tasks the folder's transformers are for: "t2va" and "fl2va" (FL2VA: transformer/, or a partition's
  // `_minimax_h3.tasks`), "ref2va" (Ref2VA: transformer_ref/ beside it). Empty for a text-encoder folder.
  std::vector<std::string> tasks;

  const ModelPart* part(const std::string& name) const;
  // The part's path when present, else "".
  std::string path_of(const std::string& name) const;
};

// Recognizes `dir` and resolves its parts; missing parts are recorded, not errors. kNotFound when `dir`
// does not exist, kInvalidArgument when it is none of the layouts above (the message says what each holds).
Result<ModelFolder> open_model_folder(const std::string& dir);

// OK when every part in `needed` is present; otherwise one kNotFound message listing each missing part,
// where it was expected and why (e.g. "transformer: transformer/diffusion_pytorch_model-00003-of-00014.safetensors
// is missing (named by its index)"), then `purpose`.
Status require_parts(const ModelFolder& folder, const std::vector<std::string>& needed, const std::string& purpose);

// The text-to-video parts: transformer, text_encoder, tokenizer.
std::vector<std::string> generate_parts();

// The transformer part a task ("t2va" | "fl2va" | "ref2va") runs on: the snapshot root's transformer/ (FL2VA) or
// transformer_ref/ (Ref2VA), a partition's transformer/. A task on the other partition is kInvalidArgument naming the
// partition (or root) to pass; ref2va on a root without transformer_ref/ is kNotFound.
Result<std::string> task_transformer_part(const ModelFolder& folder, const std::string& task);
// Every part a task loads: its transformer, text_encoder and tokenizer; fl2va adds vae (the keyframes' encoder),
// ref2va adds vae and audio_vae (the references' encoders).
std::vector<std::string> task_parts(const ModelFolder& folder, const std::string& task);

// Points `options` at the folder's transformer for `task` (checkpoint_path; task_transformer_part), text encoder,
// tokenizer and text layer (`text_layer_override` >= 0 replaces the pipeline config's).
Status apply_model_folder(const ModelFolder& folder, int text_layer_override, PipelineOptions& options,
                          const std::string& task = "t2va");

// The decoders a folder brings, for `generate --vae/--audio-vae` and `vortex decode`: both folders when both
// are present, else both empty.
struct DecoderPaths {
  std::string vae_dir, audio_vae_dir;
  bool present() const { return !vae_dir.empty() && !audio_vae_dir.empty(); }
};
DecoderPaths decoder_paths(const ModelFolder& folder);

// The tasks Vortex can run on the folder as it is: t2va with the transformer, text encoder and tokenizer; fl2va
// with those and vae/ (the keyframes' encoder). ref2va is checked but not sampled (docs/ref2va.md).
std::vector<std::string> runnable_tasks(const ModelFolder& folder);

// `vortex inspect DIR` for a model folder: layout, each part with its path and size, the text layer, the tasks
// (declared and runnable), and the missing parts.
std::string describe_model_folder(const ModelFolder& folder);

// Opens every present part's files (each .safetensors header against the file size, the tokenizer.json as a
// tokenizer): a truncated or malformed one marks its part damaged (not present, `problem` says why). Returns the
// number of damaged parts. `vortex inspect` runs it; generate finds the same faults when it loads the part.
int verify_model_folder_files(ModelFolder& folder);
// True when `dir` looks like a model folder (model_index.json / modular_model_index.json of a MiniMaxH3
// pipeline, or a Qwen3-VL config.json); cheap, for inspect's dispatch.
bool is_model_folder(const std::string& dir);

}  // namespace vortex
