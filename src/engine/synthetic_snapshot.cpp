// The tiny synthetic snapshot writer (see synthetic_snapshot.h).
#include "engine/synthetic_snapshot.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/synth_checkpoint.h"
#include "ref/cpu_backend.h"
#include "text/tokenizer.h"
#include "text_encoder/text_encoder_weights.h"
#include "vae/audio_vae.h"
#include "vae/audio_vae_encoder.h"
#include "vae/video_vae.h"
#include "vae/video_vae_encoder.h"
#include "vision/vision_tower.h"
#include "vortex/config.h"
#include "vortex/tiny_tokenizer_json.h"

namespace vortex {
namespace fs = std::filesystem;

TextEncoderConfig tiny_text_encoder_config(int vocab) {
  TextEncoderConfig c;
  c.hidden = 128;  // ModelConfig::h3_tiny().text_dim
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.ffn = 192;
  c.vocab = (vocab + 63) / 64 * 64;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 5e6;
  c.mrope_section = {6, 5, 5};
  c.max_positions = 4096;
  return c;
}

namespace {

Status copy_folder(const fs::path& from, const fs::path& to, std::vector<std::string>& written) {
  std::error_code ec;
  if (!fs::is_directory(from, ec)) return not_found(from.string() + " is not a folder");
  fs::create_directories(to, ec);
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    if (!e.is_regular_file(ec)) continue;
    fs::copy_file(e.path(), to / e.path().filename(), ec);
    if (ec) return io_error("cannot copy " + e.path().string() + " to " + to.string() + ": " + ec.message());
    written.push_back((to / e.path().filename()).string());
  }
  if (ec) return io_error("cannot list " + from.string() + ": " + ec.message());
  return Status::Ok();
}

// Runs `build` over `source`, recording each tensor it reads (first read of a name), and writes them with
// `config` into `dir` as a diffusers VAE folder: config.json + diffusion_pytorch_model.safetensors.
Status write_recorded_vae(const fs::path& dir, const nlohmann::ordered_json& config, const VaeTensorSource& source,
                          const std::function<Status(const VaeTensorSource&)>& build, uint64_t seed,
                          std::vector<std::string>& written) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::set<std::string> seen;
  const VaeTensorSource recording = [&](const std::string& name, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, source(name, shape));
    if (seen.insert(name).second) tensors.emplace_back(name, t);
    return t;
  };
  VORTEX_RETURN_IF_ERROR(build(recording));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir.string() + ": " + ec.message());
  VORTEX_RETURN_IF_ERROR(write_text_atomic((dir / "config.json").string(), config.dump(2) + "\n"));
  written.push_back((dir / "config.json").string());
  const std::string weights = (dir / "diffusion_pytorch_model.safetensors").string();
  VORTEX_RETURN_IF_ERROR(
      write_safetensors(weights, tensors, {{"format", "pt"}, {"vortex.synthetic_seed", std::to_string(seed)}}));
  written.push_back(weights);
  return Status::Ok();
}

// vae/ and audio_vae/ with the tiny decoders' synthetic weights: the tensors of VideoVae::synthetic and
// AudioVae::synthetic for `seed` (so decoding with them equals --synthetic-vae tiny --vae-seed `seed`), the audio
// VAE's anti-aliasing filters written as the Kaiser-sinc filters the synthetic decoder computes.
Status write_synthetic_vae_folders(const fs::path& out, uint64_t seed, std::vector<std::string>& written) {
  CpuBackend cpu(1);
  const VideoVaeConfig video = VideoVaeConfig::tiny();
  nlohmann::ordered_json vcfg = {{"_class_name", "AutoencoderKLMiniMaxH3"},
                                 {"latent_channels", video.latent_channels},
                                 {"decoder_num_layers", video.num_layers},
                                 {"decoder_num_attention_heads", video.heads},
                                 {"decoder_attention_head_dim", video.head_dim},
                                 {"vortex.written_by", "vortex synth --snapshot tiny (synthetic weights: noise)"}};
  // The encoder (fl2va keyframes): the released downsampling at 8 channels per level, one ResNet block each.
  VideoVaeEncoderConfig encoder;
  encoder.latent_channels = video.latent_channels;
  encoder.block_out_channels = std::vector<int>(encoder.spatial_down.size(), 8);
  encoder.layers_per_block = 1;
  encoder.groups = 4;
  vcfg["block_out_channels"] = encoder.block_out_channels;
  vcfg["layers_per_block"] = encoder.layers_per_block;
  vcfg["norm_num_groups"] = encoder.groups;
  vcfg["spatial_downsample_factors"] = encoder.spatial_down;
  vcfg["temporal_downsample_factors"] = encoder.temporal_down;
  VORTEX_RETURN_IF_ERROR(write_recorded_vae(
      out / "vae", vcfg, VideoVae::synthetic_source(seed),
      [&](const VaeTensorSource& src) {
        VORTEX_RETURN_IF_ERROR(VideoVae::from_source(video, src, cpu).status());
        return VideoVaeEncoder::from_source(encoder, src).status();
      },
      seed, written));
  const AudioVaeConfig audio = AudioVaeConfig::tiny();
  nlohmann::ordered_json acfg = {{"_class_name", "AutoencoderKLMiniMaxH3Audio"},
                                 {"latent_channels", audio.latent_channels},
                                 {"latent_dim", audio.latent_dim},
                                 {"decoder_dim", audio.decoder_dim},
                                 {"sampling_rate", audio.sampling_rate},
                                 {"vortex.written_by", "vortex synth --snapshot tiny (synthetic weights: noise)"}};
  // The encoder (ref2va soundtracks): the released rates (hop 800) at widths 4 to 64, two attention heads whose
  // 32-wide outputs pool exactly onto the 32 latent channels.
  AudioVaeEncoderConfig audio_encoder;
  audio_encoder.encoder_dim = 2;
  audio_encoder.latent_dim = audio.latent_dim;
  audio_encoder.latent_channels = audio.latent_channels;
  audio_encoder.num_attention_heads = 2;
  audio_encoder.sampling_rate = audio.sampling_rate;
  audio_encoder.latents_mean.assign(static_cast<size_t>(audio.latent_channels), 0.0f);
  audio_encoder.latents_std.assign(static_cast<size_t>(audio.latent_channels), 1.0f);
  acfg["encoder_dim"] = audio_encoder.encoder_dim;
  acfg["encoder_rates"] = audio_encoder.encoder_rates;
  acfg["num_attention_heads"] = audio_encoder.num_attention_heads;
  const VaeTensorSource weights = AudioVae::synthetic_source(seed);
  const double r = audio.act_ratio;
  const VaeTensorSource with_filters = [&](const std::string& name, const Shape& shape) -> Result<Tensor> {
    const auto ends_with = [&](const std::string& suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (!ends_with(".upsample.filter") && !ends_with(".downsample.lowpass.filter")) return weights(name, shape);
    const std::vector<float> f = kaiser_sinc_filter(0.5 / r, 0.6 / r, audio.act_kernel);
    Tensor t = Tensor::empty(shape, DType::kF32);  // [1, 1, act_kernel]
    if (t.numel() != static_cast<int64_t>(f.size())) return internal_error(name + ": unexpected filter shape");
    std::memcpy(t.raw_data(), f.data(), f.size() * sizeof(float));
    return t;
  };
  return write_recorded_vae(
      out / "audio_vae", acfg, with_filters,
      [&](const VaeTensorSource& src) {
        VORTEX_RETURN_IF_ERROR(AudioVae::from_source(audio, src, cpu, false).status());
        return AudioVaeEncoder::from_source(audio_encoder, src).status();
      },
      seed, written);
}

// The given VAE folders must decode what the tiny transformer makes: video latents of in_channels and audio
// latents [2, audio_in_channels, Ta] (two stereo channels, each decoded by the audio VAE).
Status check_vae_folders(const SyntheticSnapshotOptions& o) {
  const ModelConfig tiny = ModelConfig::h3_tiny();
  CpuBackend cpu(1);
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<VideoVae> video, VideoVae::load(o.vae_dir, cpu));
  if (video->config().latent_channels != tiny.in_channels)
    return invalid_argument("--vae " + o.vae_dir + " decodes " + std::to_string(video->config().latent_channels) +
                            " latent channels; the tiny transformer makes " + std::to_string(tiny.in_channels) +
                            ", so its latents could never be decoded");
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<AudioVae> audio, AudioVae::load(o.audio_vae_dir, cpu));
  if (audio->config().latent_channels != tiny.audio_in_channels)
    return invalid_argument(
        "--audio-vae " + o.audio_vae_dir + " takes " + std::to_string(audio->config().latent_channels) +
        " latent channels; the tiny transformer's audio latents are [2, " + std::to_string(tiny.audio_in_channels) +
        ", Ta], two stereo channels it would not decode as 2 channels");
  return Status::Ok();
}

// The tiny text encoder's vision tower (fl2va keyframes through the conditioner): a Qwen3-VL vision_config in its
// config.json and synthetic model.visual.* tensors (BF16, the release's layout and names) added to its
// model.safetensors, and the image processor's processor/preprocessor_config.json. The tower: 2 blocks of width 32
// (2 heads of 16), the release's 16-pixel patches, temporal patch 2 and 2x2 merge, a 4x4 learned position grid, one
// DeepStack tap after block 0, merged to the conditioner's width; the processor accepts canvases from 32x32 pixels.
Status add_synthetic_vision_tower(const fs::path& out, const TextEncoderConfig& te, uint64_t seed,
                                  std::vector<std::string>& written) {
  VisionConfig vc;
  vc.depth = 2;
  vc.hidden = 32;
  vc.heads = 2;
  vc.intermediate = 64;
  vc.out_hidden = te.hidden;
  vc.num_positions = 16;
  vc.deepstack = {0};
  const fs::path dir = out / "text_encoder";
  std::ifstream in(dir / "config.json", std::ios::binary);
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return format_error((dir / "config.json").string() + " is not a JSON object");
  config["vision_config"] = {{"model_type", "qwen3_vl"},
                             {"depth", vc.depth},
                             {"hidden_size", vc.hidden},
                             {"num_heads", vc.heads},
                             {"intermediate_size", vc.intermediate},
                             {"in_channels", vc.in_channels},
                             {"patch_size", vc.patch},
                             {"temporal_patch_size", vc.temporal_patch},
                             {"spatial_merge_size", vc.merge},
                             {"out_hidden_size", vc.out_hidden},
                             {"num_position_embeddings", vc.num_positions},
                             {"deepstack_visual_indexes", vc.deepstack},
                             {"hidden_act", "gelu_pytorch_tanh"}};
  // Weights at a trained network's scales: norm weights near 1, biases small, matrices 1 / sqrt(fan_in).
  const VaeTensorSource source = synthetic_tensor_source(seed, [](const std::string& name, const Shape& shape) {
    const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (name.find("norm") != std::string::npos) return bias ? std::pair{0.02f, 0.0f} : std::pair{0.1f, 1.0f};
    if (bias || name.find("pos_embed") != std::string::npos) return std::pair{0.02f, 0.0f};
    int64_t fan_in = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
    return std::pair{static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in))), 0.0f};
  });
  std::vector<std::pair<std::string, Tensor>> tensors;
  const VaeTensorSource recording = [&](const std::string& name, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, source(name, shape));
    tensors.emplace_back(name, to_bf16_host(t));
    return t;
  };
  VORTEX_RETURN_IF_ERROR(VisionTower::from_source(vc, recording).status());
  // The text encoder's own tensors, then the vision tower's, rewritten into one model.safetensors.
  const std::string weights = (dir / "model.safetensors").string();
  {
    VORTEX_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(weights));
    std::vector<std::pair<std::string, Tensor>> all;
    for (const SafetensorsEntry& e : file.entries()) {
      const std::string& name = e.name;
      VORTEX_ASSIGN_OR_RETURN(Tensor t, file.tensor(name));
      Tensor owned = Tensor::empty(t.shape(), t.dtype());  // not a view of the file being replaced
      std::memcpy(owned.raw_data(), t.raw_data(), t.nbytes());
      all.emplace_back(name, std::move(owned));
    }
    all.insert(all.end(), tensors.begin(), tensors.end());
    tensors = std::move(all);
  }
  VORTEX_RETURN_IF_ERROR(write_safetensors(weights, tensors, {{"vortex.synthetic_seed", std::to_string(seed)}}));
  VORTEX_RETURN_IF_ERROR(write_text_atomic((dir / "config.json").string(), config.dump(2) + "\n"));
  // The release's processor (FL2VA/processor/preprocessor_config.json) with a smaller minimum area.
  const nlohmann::ordered_json processor = {{"image_processor_type", "Qwen2VLImageProcessorFast"},
                                            {"do_resize", true},
                                            {"do_rescale", true},
                                            {"do_normalize", true},
                                            {"image_mean", {0.5, 0.5, 0.5}},
                                            {"image_std", {0.5, 0.5, 0.5}},
                                            {"patch_size", vc.patch},
                                            {"temporal_patch_size", vc.temporal_patch},
                                            {"merge_size", vc.merge},
                                            {"size", {{"shortest_edge", 1024}, {"longest_edge", 16777216}}}};
  std::error_code ec;
  fs::create_directories(out / "processor", ec);
  if (ec) return io_error("cannot create " + (out / "processor").string() + ": " + ec.message());
  VORTEX_RETURN_IF_ERROR(
      write_text_atomic((out / "processor" / "preprocessor_config.json").string(), processor.dump(2) + "\n"));
  written.push_back((out / "processor" / "preprocessor_config.json").string());
  // The video processor (ref2va video references; the release's processor/video_preprocessor_config.json) with the
  // same smaller minimum area: its range holds a whole video's pixels, frames included.
  const nlohmann::ordered_json video_processor = {{"video_processor_type", "Qwen3VLVideoProcessor"},
                                                  {"do_resize", true},
                                                  {"do_rescale", true},
                                                  {"do_normalize", true},
                                                  {"image_mean", {0.5, 0.5, 0.5}},
                                                  {"image_std", {0.5, 0.5, 0.5}},
                                                  {"patch_size", vc.patch},
                                                  {"temporal_patch_size", vc.temporal_patch},
                                                  {"merge_size", vc.merge},
                                                  {"size", {{"shortest_edge", 1024}, {"longest_edge", 25165824}}}};
  VORTEX_RETURN_IF_ERROR(write_text_atomic((out / "processor" / "video_preprocessor_config.json").string(),
                                           video_processor.dump(2) + "\n"));
  written.push_back((out / "processor" / "video_preprocessor_config.json").string());
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> write_synthetic_snapshot(const SyntheticSnapshotOptions& o) {
  if (o.out.empty()) return invalid_argument("--out DIR is required");
  if (o.vae_dir.empty() != o.audio_vae_dir.empty())
    return invalid_argument("pass both --vae DIR and --audio-vae DIR, or neither");
  const fs::path out(o.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    return invalid_argument("--out " + o.out +
                            " exists and is not an empty folder; the snapshot is written only into a new one");
  // Checked before anything is written: the vocabulary sizes the text encoder; the VAEs decode what it makes.
  const bool bundled = o.tokenizer_json.empty();
  VORTEX_ASSIGN_OR_RETURN(Tokenizer tok, bundled
                                             ? Tokenizer::from_json(kTinyTokenizerJson, "the bundled tiny tokenizer")
                                             : Tokenizer::from_json_file(o.tokenizer_json));
  if (!o.vae_dir.empty()) VORTEX_RETURN_IF_ERROR(check_vae_folders(o));
  fs::create_directories(out, ec);
  if (ec) return io_error("cannot create " + o.out + ": " + ec.message());
  std::vector<std::string> written;

  const TextEncoderConfig te = tiny_text_encoder_config(tok.vocab_size());
  nlohmann::ordered_json index = {{"_class_name", "MiniMaxH3ModularPipeline"},
                                  {"_blocks_class_name", "MiniMaxH3Blocks"},
                                  {"text_encoder_layer", kTinyTextLayer},
                                  {"text_encoder", {"transformers", "Qwen3VLForConditionalGeneration"}},
                                  {"tokenizer", {"transformers", "Qwen2TokenizerFast"}},
                                  {"transformer", {"diffusers", "MiniMaxH3Transformer3DModel"}},
                                  {"transformer_ref", {"diffusers", "MiniMaxH3Transformer3DModel"}},
                                  // MiniMaxH3Ref2VASetupStep's ConfigSpecs at the tiny model's scale (the release
                                  // keeps diffusers' defaults: 2048, 768, 768 * 1344): image references at a 64-pixel
                                  // short edge, video references on a canvas of at most 64 x 112.
                                  {"reference_image_short_edge", 64},
                                  {"canvas_short_edge", 64},
                                  {"canvas_max_pixels", 64 * 112},
                                  {"vortex.written_by", "vortex synth --snapshot tiny"},
                                  {"vortex.synthetic_seed", o.seed}};
  index["vae"] = {"diffusers", "AutoencoderKLMiniMaxH3"};
  index["audio_vae"] = {"diffusers", "AutoencoderKLMiniMaxH3Audio"};
  {
    std::ofstream f(out / "model_index.json", std::ios::binary);
    f << index.dump(2) << "\n";
    if (!f) return io_error("cannot write " + (out / "model_index.json").string());
    written.push_back((out / "model_index.json").string());
  }

  SynthCheckpointOptions ck;
  ck.config = ModelConfig::h3_tiny();
  ck.out = (out / "transformer" / "diffusion_pytorch_model.safetensors").string();
  ck.seed = o.seed;
  ck.layout = CheckpointLayout::kDiffusers;
  fs::create_directories(out / "transformer", ec);
  VORTEX_ASSIGN_OR_RETURN(std::vector<std::string> transformer, write_synthetic_checkpoint(ck));
  written.insert(written.end(), transformer.begin(), transformer.end());
  // The Ref2VA transformer (references to video): the same config, other weights (seed + 1), as the release's
  // transformer_ref/ beside transformer/.
  ck.out = (out / "transformer_ref" / "diffusion_pytorch_model.safetensors").string();
  ck.seed = o.seed + 1;
  fs::create_directories(out / "transformer_ref", ec);
  VORTEX_ASSIGN_OR_RETURN(std::vector<std::string> transformer_ref, write_synthetic_checkpoint(ck));
  written.insert(written.end(), transformer_ref.begin(), transformer_ref.end());

  VORTEX_RETURN_IF_ERROR(write_synthetic_text_encoder((out / "text_encoder").string(), te, o.seed));
  VORTEX_RETURN_IF_ERROR(add_synthetic_vision_tower(out, te, o.seed, written));
  written.push_back((out / "text_encoder" / "config.json").string());
  written.push_back((out / "text_encoder" / "model.safetensors").string());

  fs::create_directories(out / "tokenizer", ec);
  if (bundled) {
    std::ofstream f(out / "tokenizer" / "tokenizer.json", std::ios::binary);
    f << kTinyTokenizerJson;
    if (!f) return io_error("cannot write " + (out / "tokenizer" / "tokenizer.json").string());
  } else {
    fs::copy_file(o.tokenizer_json, out / "tokenizer" / "tokenizer.json", ec);
    if (ec) return io_error("cannot copy " + o.tokenizer_json + ": " + ec.message());
  }
  written.push_back((out / "tokenizer" / "tokenizer.json").string());

  if (!o.vae_dir.empty()) {
    VORTEX_RETURN_IF_ERROR(copy_folder(o.vae_dir, out / "vae", written));
    VORTEX_RETURN_IF_ERROR(copy_folder(o.audio_vae_dir, out / "audio_vae", written));
  } else {
    VORTEX_RETURN_IF_ERROR(write_synthetic_vae_folders(out, o.seed, written));
  }
  return written;
}

}  // namespace vortex
