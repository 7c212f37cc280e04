// Cross-field request checks and the model folder (see resolve.h). The order of the checks is the order of the
// messages a user meets: the text source, the exclusions, then the folder's parts, then the decoders.
#include "api/resolve.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "engine/prompt_encoder.h"
#include "sampler/sampler.h"

namespace vortex::api {
namespace {

namespace fs = std::filesystem;

Status fail(Field f, Status s, Field* failed) {
  if (failed != nullptr && !s.ok()) *failed = f;
  return s;
}

// --prompt-file FILE: the prompt as UTF-8 text (one trailing newline dropped), for prompts too long for argv.
Status read_prompt_file(const std::string& path, std::string& prompt, const std::string& name) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return invalid_argument(name + " " + path + " does not exist");
  if (!fs::is_regular_file(path, ec)) return invalid_argument(name + " " + path + " is not a regular file");
  if (fs::file_size(path, ec) > PromptLimits{}.max_bytes)
    return invalid_argument(name + " " + path + " is larger than the prompt limit of " +
                            std::to_string(PromptLimits{}.max_bytes) + " bytes");
  std::ifstream f(path, std::ios::binary);
  prompt.assign(std::istreambuf_iterator<char>(f), {});
  if (!f.good() && !f.eof()) return invalid_argument(name + " " + path + " could not be read");
  if (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
  if (!prompt.empty() && prompt.back() == '\r') prompt.pop_back();
  return Status::Ok();
}

// The request's own checks, in the CLI's order; `loras`: the adapters loaded with the pipeline (for the preset).
Status resolve_run_fields(RequestSpec& s, FieldStyle st, std::vector<std::string>* notes, Field* failed) {
  auto n = [st](const char* flag) { return flag_name(flag, st); };
  if (s.has("--prompt-file")) {
    if (s.has("--prompt"))
      return fail(
          Field::kPromptFile,
          invalid_argument(n("--prompt") + " and " + n("--prompt-file") + " exclude each other: give one prompt"),
          failed);
    VORTEX_RETURN_IF_ERROR(
        fail(Field::kPromptFile, read_prompt_file(s.prompt_file, s.run.prompt, n("--prompt-file")), failed));
    s.given.insert("--prompt");
  }
  if (!s.run.text_embeddings_path.empty() && s.has("--synthetic-text"))
    return fail(Field::kTextEmbeddings,
                invalid_argument(n("--text-embeddings") + " and " + n("--synthetic-text") + " exclude each other"),
                failed);
  if (s.has("--seconds") && s.has("--frames"))
    return fail(Field::kSeconds,
                invalid_argument(n("--seconds") + " and " + n("--frames") + " exclude each other: " + n("--seconds") +
                                 " S means ceil(24 S) frames, snapped up"),
                failed);
  // --seed -1: a random seed, noted and recorded in run.json like any other.
  if (s.random_seed) {
    std::random_device rd;
    s.run.seed = (static_cast<uint64_t>(rd()) << 32 | rd()) & ((uint64_t{1} << 53) - 1);  // exact in JSON doubles
    if (notes != nullptr)
      notes->push_back(n("--seed") + " -1: random seed " + std::to_string(s.run.seed) + " (recorded in run.json)");
  }
  if (s.preset == Preset::kTurbo4) {
    if (s.load.loras.empty())
      return fail(
          Field::kPreset,
          invalid_argument(n("--preset") + " turbo4 is the 4-step schedule of the Turbo LoRA: pass the adapter with " +
                           n("--lora") + " FILE (docs/lora.md names the files)"),
          failed);
    // SamplerSpec::turbo4: the adapter's published settings (4 steps, shift 6 / 3, euler, simple schedule).
    const SamplerSpec turbo = SamplerSpec::turbo4();
    if (!s.has("--steps")) s.run.steps = turbo.steps;
    if (!s.has("--sampler")) s.run.sampler = turbo.kind;
    if (!s.has("--schedule")) s.run.schedule = turbo.mode;
    s.run.video_shift = turbo.video_shift;
    s.run.audio_shift = turbo.audio_shift;
  }
  // fl2va without --width/--height: the canvas follows the first keyframe (resolved by the planner); one of the
  // two alone is refused, as diffusers refuses it.
  if (s.run.keyframes.any() && s.has("--width") != s.has("--height")) {
    const bool width_only = s.has("--width");
    return fail(width_only ? Field::kWidth : Field::kHeight,
                invalid_argument(n(width_only ? "--width" : "--height") + ": with keyframes, " + n("--width") +
                                 " and " + n("--height") +
                                 " go together (or give neither: the canvas follows the first keyframe's aspect "
                                 "ratio)"),
                failed);
  }
  s.run.canvas_from_keyframe = s.run.keyframes.any() && !s.has("--width") && !s.has("--height");
  s.run.frames_overwrite = s.overwrite;
  return Status::Ok();
}

// The load options' own checks: a checkpoint brings its config; --cuda-graph joins the switches.
Status resolve_load_fields(RequestSpec& s, FieldStyle st, Field* failed) {
  auto n = [st](const char* flag) { return flag_name(flag, st); };
  if (s.has("--config") && !s.load.checkpoint_path.empty())
    return fail(Field::kConfig,
                invalid_argument(n("--config") + " and " + n("--checkpoint") +
                                 " exclude each other: a checkpoint brings its own config"),
                failed);
  if (s.cuda_graph) {  // appends: GCC 12 warns -Wrestrict on "," + std::string
    if (!s.load.switches.empty()) s.load.switches.append(",");
    s.load.switches.append("cuda_graph=").append(cuda_graph_name(*s.cuda_graph));
  }
  return Status::Ok();
}

// A model folder brings the transformer and its config: the other weight sources are refused beside it.
Status check_model_excludes(const RequestSpec& s, FieldStyle st, Field* failed) {
  auto n = [st](const char* flag) { return flag_name(flag, st); };
  for (const char* flag : {"--checkpoint", "--config", "--synthetic", "--weights-seed"})
    if (s.has(flag))
      return fail(Field::kModel,
                  invalid_argument(n("--model") + " and " + n(flag) +
                                   " exclude each other: the model folder brings the transformer and its config"),
                  failed);
  return Status::Ok();
}

// --model DIR (the snapshot: transformer, text encoder, tokenizer) with the request's text source: every part
// resolved and every missing one named before anything is loaded. `decoders`: the folder's vae/ and audio_vae/.
Status apply_model_args(RequestSpec& s, FieldStyle st, DecoderPaths& decoders, Field* failed) {
  auto n = [st](const char* flag) { return flag_name(flag, st); };
  const bool has_prompt = s.has("--prompt");
  if (s.model_dir.empty()) {
    if (has_prompt)
      return fail(
          Field::kPrompt,
          invalid_argument(n("--prompt") + " needs the text encoder: pass " + n("--model") + " DIR (the model folder)"),
          failed);
    if (s.text_layer >= 0)
      return fail(
          Field::kTextLayer,
          invalid_argument(n("--text-layer") + " K chooses the text encoder's layer: pass " + n("--model") + " DIR"),
          failed);
    return Status::Ok();
  }
  VORTEX_RETURN_IF_ERROR(check_model_excludes(s, st, failed));
  if (!has_prompt && s.run.text_embeddings_path.empty())
    return fail(Field::kModel,
                invalid_argument(n("--model") + " DIR needs the text: pass " + n("--prompt") + " \"...\" (or " +
                                 n("--text-embeddings") + " FILE)"),
                failed);
  if (has_prompt && (!s.run.text_embeddings_path.empty() || s.has("--synthetic-text")))
    return fail(Field::kPrompt,
                invalid_argument(n("--prompt") + " excludes " + n("--text-embeddings") + " and " +
                                 n("--synthetic-text") + ": give one text source"),
                failed);
  // Empty, whitespace-only, invalid UTF-8 or oversized: refused before any file is opened.
  if (has_prompt)
    VORTEX_RETURN_IF_ERROR(
        fail(Field::kPrompt, validate_prompt_field(s.run.prompt, PromptLimits{}, n("--prompt")), failed));
  Result<ModelFolder> folder = open_model_folder(s.model_dir);
  if (!folder.ok()) return fail(Field::kModel, folder.status(), failed);
  decoders = decoder_paths(*folder);
  // The task picks the transformer: references run on Ref2VA's, everything else on FL2VA's.
  const std::string task = !s.run.references.empty() ? "ref2va" : s.run.keyframes.any() ? "fl2va" : "t2va";
  if (!has_prompt) {  // --text-embeddings: the folder's transformer alone
    if (s.text_layer >= 0)
      return fail(Field::kTextLayer,
                  invalid_argument(n("--text-layer") + " K applies to " + n("--prompt") + "; " +
                                   n("--text-embeddings") + " are already encoded"),
                  failed);
    Result<std::string> transformer = task_transformer_part(*folder, task);
    if (!transformer.ok()) return fail(Field::kModel, transformer.status(), failed);
    VORTEX_RETURN_IF_ERROR(fail(Field::kModel, require_parts(*folder, {*transformer}, "needed to generate"), failed));
    s.load.model_dir = folder->dir;
    s.load.checkpoint_path = folder->path_of(*transformer);
    return Status::Ok();
  }
  return fail(Field::kModel, apply_model_folder(*folder, s.text_layer, s.load, task), failed);
}

// The decoders: named ones, else the folder's unless --latents-only; fl2va's keyframe encoder.
Status choose_decoders(RequestSpec& s, FieldStyle st, const DecoderPaths& folder, Field* failed) {
  auto n = [st](const char* flag) { return flag_name(flag, st); };
  const bool named = s.has("--vae") || s.has("--audio-vae") || s.has("--synthetic-vae");
  if (s.latents_only && named)
    return fail(Field::kVae,
                invalid_argument(n("--latents-only") + " excludes " + n("--vae") + ", " + n("--audio-vae") + " and " +
                                 n("--synthetic-vae")),
                failed);
  const std::string explicit_vae = s.load.vae_dir;
  const std::string explicit_keyframe_vae = s.load.keyframe_vae_dir;  // --keyframe-vae DIR
  const std::string explicit_audio_vae = s.load.audio_vae_dir;
  if (!s.latents_only && !named && folder.present()) {
    s.load.vae_dir = folder.vae_dir;
    s.load.audio_vae_dir = folder.audio_vae_dir;
  }
  // fl2va: the keyframes, encoded by the video VAE's encoder (--vae DIR, else the model folder's vae/, which
  // --latents-only keeps for the encoder).
  if (s.run.keyframes.any())
    s.load.keyframe_vae_dir = !explicit_keyframe_vae.empty() ? explicit_keyframe_vae
                              : !explicit_vae.empty()        ? explicit_vae
                                                             : folder.vae_dir;
  // ref2va: the references, encoded by both VAEs' encoders (--vae / --audio-vae, else the folder's).
  if (!s.run.references.empty()) {
    s.load.keyframe_vae_dir = !explicit_vae.empty() ? explicit_vae : folder.vae_dir;
    s.load.reference_audio_vae_dir = !explicit_audio_vae.empty() ? explicit_audio_vae : folder.audio_vae_dir;
  }
  return Status::Ok();
}

}  // namespace

std::string flag_name(const char* flag, FieldStyle style) {
  if (style == FieldStyle::kFlag) return flag;
  const RequestFlag* f = find_request_flag(flag);
  return f != nullptr ? f->id : flag;
}

Result<ResolvedGenerate> resolve_generate(RequestSpec s, FieldStyle st, Field* failed) {
  auto n = [st](const char* flag) { return flag_name(flag, st); };
  ResolvedGenerate out;
  VORTEX_RETURN_IF_ERROR(resolve_load_fields(s, st, failed));
  VORTEX_RETURN_IF_ERROR(resolve_run_fields(s, st, &out.notes, failed));
  VORTEX_RETURN_IF_ERROR(apply_model_args(s, st, out.folder_decoders, failed));
  VORTEX_RETURN_IF_ERROR(choose_decoders(s, st, out.folder_decoders, failed));
  if (!s.model_dir.empty() && !s.latents_only && !s.has("--vae") && !s.has("--audio-vae") &&
      !s.has("--synthetic-vae") && !out.folder_decoders.present())
    out.notes.push_back(s.model_dir +
                        " has no vae/ and audio_vae/: the run stops at the latents (add the VAE folders, or pass " +
                        n("--vae") + " DIR " + n("--audio-vae") + " DIR, to get video.mp4 and audio.wav)");
  out.latents_only = s.latents_only;
  out.request.pipeline = std::move(s.load);
  out.request.run = std::move(s.run);
  out.request.out_dir = std::move(s.out_dir);
  out.request.overwrite = s.overwrite;
  if (s.comm_timeout_seconds > 0.0)
    out.request.comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(s.comm_timeout_seconds * 1000.0));
  return out;
}

Result<PipelineOptions> resolve_load(const RequestSpec& spec, FieldStyle st, Field* failed) {
  RequestSpec s = spec;
  VORTEX_RETURN_IF_ERROR(resolve_load_fields(s, st, failed));
  DecoderPaths folder_decoders;
  if (!s.model_dir.empty()) {
    VORTEX_RETURN_IF_ERROR(check_model_excludes(s, st, failed));
    Result<ModelFolder> folder = open_model_folder(s.model_dir);
    if (!folder.ok()) return fail(Field::kModel, folder.status(), failed);
    folder_decoders = decoder_paths(*folder);
    if (folder->path_of("text_encoder").empty() || folder->path_of("tokenizer").empty()) {
      VORTEX_RETURN_IF_ERROR(
          fail(Field::kModel, require_parts(*folder, {"transformer"}, "needed to generate"), failed));
      s.load.model_dir = folder->dir;
      s.load.checkpoint_path = folder->path_of("transformer");
    } else {
      VORTEX_RETURN_IF_ERROR(fail(Field::kModel, apply_model_folder(*folder, s.text_layer, s.load), failed));
    }
  }
  VORTEX_RETURN_IF_ERROR(choose_decoders(s, st, folder_decoders, failed));
  return s.load;
}

Result<RunRequest> resolve_run(RequestSpec s, FieldStyle st, std::vector<std::string>* notes, Field* failed) {
  VORTEX_RETURN_IF_ERROR(resolve_run_fields(s, st, notes, failed));
  return s.run;
}

}  // namespace vortex::api
