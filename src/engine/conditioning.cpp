// fl2va conditioning (see conditioning.h): keyframe checks before any weight loads, the keyframes' latent rows, and
// their presentation to the conditioner with the vision tower's tokens.
#include "engine/conditioning.h"

#include <cstring>
#include <filesystem>

#include "core/config_json.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "vae/vae_checkpoint.h"
#include "vision/keyframe_presentation.h"

namespace vortex {
namespace fs = std::filesystem;

std::vector<KeyframeAnchor> KeyframeFiles::anchors() const {
  std::vector<KeyframeAnchor> a;
  if (!first.empty()) a.push_back(KeyframeAnchor::kFirst);
  if (!last.empty()) a.push_back(KeyframeAnchor::kLast);
  return a;
}

std::vector<std::string> KeyframeFiles::paths() const {
  std::vector<std::string> p;
  if (!first.empty()) p.push_back(first);
  if (!last.empty()) p.push_back(last);
  return p;
}

Status check_keyframes(const KeyframeFiles& files, const std::string& checkpoint_path, const std::string& vae_dir,
                       const std::string& first_field, const std::string& last_field) {
  if (!files.any()) return Status::Ok();
  for (const auto& [path, field] : {std::pair{files.first, first_field}, std::pair{files.last, last_field}}) {
    if (path.empty()) continue;
    // The whole decode (milliseconds for a keyframe), so damaged pixel data in an intact container is refused here
    // too, not only what the header shows.
    Result<RgbImage> image = read_image(path);
    if (!image.ok()) {
      const ErrorCode code = image.status().code();
      if (code == ErrorCode::kNotFound || code == ErrorCode::kFormat || code == ErrorCode::kUnsupported ||
          code == ErrorCode::kInvalidArgument)
        return image.status().with_context(field);
      return invalid_argument(field + ": " + image.status().message());  // e.g. a decoder's corrupt-data error
    }
  }
  if (!checkpoint_path.empty()) {
    if (Status ref = refuse_reference_transformer(checkpoint_path); !ref.ok())
      return unsupported(first_field + "/" + last_field +
                         ": keyframe conditioning (fl2va) runs on H3's FL2VA transformer, not on the Ref2VA one "
                         "(reference-to-video is another task): " +
                         ref.message());
  }
  if (vae_dir.empty())
    return invalid_argument(first_field + "/" + last_field +
                            ": keyframes are encoded by the video VAE's encoder: pass the model folder (--model DIR, "
                            "whose vae/ holds it) or --vae DIR");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(vae_dir) / "config.json", ec))
    return not_found(first_field + "/" + last_field + ": the keyframes' video VAE folder " + vae_dir +
                     " has no config.json");
  return Status::Ok();
}

std::vector<std::string> transformer_tasks(const std::string& checkpoint_path) {
  if (!checkpoint_path.empty() && !refuse_reference_transformer(checkpoint_path).ok()) return {"ref2va"};
  return {"t2va", "fl2va"};
}

Result<CanvasSize> keyframe_canvas(const KeyframeFiles& files, const std::string& field) {
  const std::string& path = files.first.empty() ? files.last : files.first;
  if (path.empty()) return invalid_argument(field + ": no keyframe to take the canvas from");
  VORTEX_ASSIGN_OR_RETURN(const ImageHeader header, probe_image(path));
  const bool swapped = header.orientation >= 5;  // transpose, rotations by 90 degrees, transverse
  const int width = swapped ? header.height : header.width, height = swapped ? header.width : header.height;
  Result<CanvasSize> canvas = resolve_canvas_size(width, height);
  if (!canvas.ok())
    return invalid_argument(field + ": the canvas follows the keyframe " + path + " (" + std::to_string(width) + "x" +
                            std::to_string(height) +
                            ") when no width and height are given: " + canvas.status().message());
  return canvas;
}

Result<PlacedKeyframes> read_keyframes(const KeyframeFiles& files, int width, int height) {
  std::optional<RgbImage> first, last;
  if (!files.first.empty()) {
    VORTEX_ASSIGN_OR_RETURN(first, read_image(files.first));
  }
  if (!files.last.empty()) {
    VORTEX_ASSIGN_OR_RETURN(last, read_image(files.last));
  }
  CanvasSize canvas;
  canvas.width = width;
  canvas.height = height;
  return place_keyframes(first ? &*first : nullptr, last ? &*last : nullptr, canvas);
}

Result<Tensor> keyframe_condition_rows(const VideoVaeEncoder& encoder, const ModelConfig& cfg,
                                       const PlacedKeyframes& placed, uint64_t seed, uint64_t noise_offset,
                                       std::vector<Tensor>* latents) {
  if (encoder.config().latent_channels != cfg.in_channels)
    return invalid_argument("the video VAE encodes " + std::to_string(encoder.config().latent_channels) +
                            " latent channels but the transformer (" + cfg.name + ") reads " +
                            std::to_string(cfg.in_channels) + ": the parts belong to different models");
  const CanvasSize c = placed.canvas;
  const int64_t lh = c.height / 16, lw = c.width / 16;
  const int64_t block_rows = (lh / 2) * (lw / 2), cols = int64_t{cfg.in_channels} * 4;
  Tensor rows = Tensor::empty({static_cast<int64_t>(placed.keyframes.size()) * block_rows, cols}, DType::kF32);
  uint64_t offset = noise_offset;
  for (size_t k = 0; k < placed.keyframes.size(); ++k) {
    const RgbImage& img = placed.keyframes[k];
    Tensor pixels = Tensor::empty({3, 1, img.height, img.width}, DType::kU8);  // [3, 1, H, W] u8
    const size_t plane = static_cast<size_t>(img.width) * img.height;
    for (size_t i = 0; i < plane; ++i)
      for (size_t ch = 0; ch < 3; ++ch) pixels.data<uint8_t>()[ch * plane + i] = img.rgb[i * 3 + ch];
    VORTEX_ASSIGN_OR_RETURN(Tensor lat, encoder.encode_condition(pixels));  // [C, 1, h, w] f32
    if (lat.ndim() != 4 || lat.dim(0) != cfg.in_channels || lat.dim(1) != 1 || lat.dim(2) != lh || lat.dim(3) != lw)
      return invalid_argument("the video VAE encodes a " + std::to_string(img.width) + "x" +
                              std::to_string(img.height) + " keyframe to " + lat.describe() + ", not [" +
                              std::to_string(cfg.in_channels) + ", 1, " + std::to_string(lh) + ", " +
                              std::to_string(lw) + "]: its spatial compression is not the transformer's 16");
    Tensor noise = Tensor::empty(lat.shape(), DType::kF32);
    VORTEX_RETURN_IF_ERROR(gaussian_noise(seed, offset, noise));
    offset += static_cast<uint64_t>(lat.numel());
    VORTEX_ASSIGN_OR_RETURN(Tensor mixed, noise_condition_latents(lat, noise));
    VORTEX_ASSIGN_OR_RETURN(Tensor block, patchify_video(cfg, mixed));  // [h/2 * w/2, 4C] f32
    std::memcpy(static_cast<char*>(rows.raw_data()) + k * block.nbytes(), block.raw_data(), block.nbytes());
    if (latents != nullptr) latents->push_back(lat);
  }
  return rows;
}

Result<KeyframeText> present_keyframes(const Tokenizer& tokenizer, const VisionProcessorConfig& processor, int merge,
                                       int width, int height, int keyframes, const std::string& prompt) {
  KeyframeText t;
  VORTEX_ASSIGN_OR_RETURN(const auto resized, smart_resize(height, width, processor));
  if (resized.first != height || resized.second != width)
    return unsupported("the image processor would resize the " + std::to_string(width) + "x" + std::to_string(height) +
                       " canvas to " + std::to_string(resized.second) + "x" + std::to_string(resized.first) +
                       "; keyframes need a canvas it passes through unresized");
  for (int k = 0; k < keyframes; ++k) t.grids.push_back({height / processor.patch, width / processor.patch});
  VORTEX_ASSIGN_OR_RETURN(KeyframePresentation p, build_keyframe_presentation(tokenizer, t.grids, merge, prompt));
  t.ids = std::move(p.ids);
  t.tags = std::move(p.tags);
  t.positions = p.positions;
  t.image_pad_rows = std::move(p.image_pad_rows);
  return t;
}

Result<VisionProcessorConfig> keyframe_processor_config(const std::string& text_encoder_dir) {
  const fs::path dir(text_encoder_dir);
  for (const fs::path& p :
       {dir / "preprocessor_config.json", dir.parent_path() / "processor" / "preprocessor_config.json"}) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    VORTEX_ASSIGN_OR_RETURN(ConfigJson cfg, ConfigJson::read_file(p.string()));
    return VisionProcessorConfig::from_json(cfg);
  }
  return not_found("keyframes need the image processor's preprocessor_config.json: looked in " + dir.string() +
                   " and " + (dir.parent_path() / "processor").string());
}

Result<VisionTower> load_vision_tower(const std::string& text_encoder_dir, Backend* backend) {
  const fs::path dir(text_encoder_dir);
  VORTEX_ASSIGN_OR_RETURN(ConfigJson root, ConfigJson::read_file((dir / "config.json").string()));
  VORTEX_ASSIGN_OR_RETURN(VisionConfig vcfg, VisionConfig::from_json(root));
  VORTEX_ASSIGN_OR_RETURN(std::string weights, resolve_checkpoint_path(text_encoder_dir));
  VORTEX_ASSIGN_OR_RETURN(SafetensorsSet set, SafetensorsSet::open(weights));
  auto shared = std::make_shared<SafetensorsSet>(std::move(set));
  return VisionTower::from_source(
      vcfg,
      [shared](const std::string& name, const Shape& shape) -> Result<Tensor> {
        if (!shared->find(name)) return not_found("the text encoder has no vision tensor " + name);
        VORTEX_ASSIGN_OR_RETURN(Tensor t, shared->tensor(name));
        if (t.shape() != shape) return format_error(name + " is " + t.describe());
        return to_f32_host(t, name);
      },
      backend);
}

Result<VisionEmbeddings> keyframe_vision(const VisionTower& tower, const VisionProcessorConfig& processor,
                                         const PlacedKeyframes& placed, const KeyframeText& text) {
  if (placed.keyframes.size() != text.grids.size() || placed.keyframes.empty())
    return invalid_argument("keyframe_vision: " + std::to_string(placed.keyframes.size()) + " keyframes for " +
                            std::to_string(text.grids.size()) + " vision blocks");
  std::vector<VisionInput> inputs;
  for (size_t k = 0; k < placed.keyframes.size(); ++k) {
    // The u8 keyframe itself: the tower builds the processor's rows where it runs (on the GPU for cuda).
    VORTEX_ASSIGN_OR_RETURN(VisionInput in, image_input(placed.keyframes[k], processor));
    if (in.grid_h != text.grids[k].first || in.grid_w != text.grids[k].second)
      return internal_error("keyframe_vision: the processor's grid differs from the presentation's");
    inputs.push_back(std::move(in));
  }
  // All keyframes in one tower call; its outputs are stacked in keyframe order (the blocks' last hidden rows are
  // not read here). On a device backend they stay there as BF16 for the text encoder on the same backend; else
  // FP32 host rows (the same bytes once the text encoder rounds them to BF16).
  const bool on_device = tower.backend() != nullptr && tower.backend()->device() != Device::kCpu;
  VORTEX_ASSIGN_OR_RETURN(VisionTower::Output out,
                          on_device ? tower.forward_device(inputs) : tower.forward(inputs, /*with_last_hidden=*/false));
  VisionEmbeddings v;
  v.rows = text.image_pad_rows;
  v.tokens = std::move(out.merged);  // [sum N / merge^2, out_hidden]
  v.deepstack = std::move(out.deepstack);
  if (v.tokens.dim(0) != static_cast<int64_t>(v.rows.size()))
    return internal_error("keyframe_vision: " + std::to_string(v.tokens.dim(0)) + " vision tokens for " +
                          std::to_string(v.rows.size()) + " image-pad rows");
  return v;
}

}  // namespace vortex
