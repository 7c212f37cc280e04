// ref2va request checks and the run.json record of references (see references.h).
#include "engine/references.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/clock.h"
#include "core/config_json.h"
#include "core/rng.h"
#include "engine/conditioning.h"
#include "engine/run_manifest.h"
#include "io/checkpoint.h"
#include "media/image_reader.h"
#include "vision/reference_video_vision.h"

namespace vortex {
namespace fs = std::filesystem;

namespace {

bool is_reference_transformer(const std::string& checkpoint_path) {
  return !checkpoint_path.empty() && !refuse_reference_transformer(checkpoint_path).ok();
}

}  // namespace

Status check_task_transformer(bool has_references, const std::string& checkpoint_path) {
  if (has_references || !is_reference_transformer(checkpoint_path)) return Status::Ok();
  return refuse_reference_transformer(checkpoint_path);
}

Result<std::vector<ReferenceProbe>> check_references(const std::vector<std::string>& specs, bool has_keyframes,
                                                     const std::string& checkpoint_path,
                                                     const ReferenceEncoders& encoders, const std::string& field,
                                                     const ReferenceLimits& limits) {
  std::vector<ReferenceProbe> probes;
  if (specs.empty()) return probes;
  if (has_keyframes)
    return invalid_argument(field +
                            ": references (ref2va) and keyframes (fl2va) are two tasks on two transformers; a request "
                            "has one or the other");
  // Headers only (milliseconds each): every file's refusal comes before anything is decoded or loaded.
  for (size_t i = 0; i < specs.size(); ++i) {
    Result<ReferenceSpec> spec = parse_reference_spec(specs[i]);
    if (!spec.ok()) return spec.status().with_context(field);
    Result<ReferenceProbe> probe = probe_reference(*spec, limits);
    if (!probe.ok()) return probe.status().with_context(field);
    probes.push_back(*probe);
  }
  VORTEX_RETURN_IF_ERROR(check_reference_set(probes, limits).with_context(field));
  if (!checkpoint_path.empty() && !is_reference_transformer(checkpoint_path))
    return invalid_argument(field + ": references (ref2va) run on H3's Ref2VA transformer, and " + checkpoint_path +
                            " is not it: pass --model with the snapshot root (its transformer_ref/) or its Ref2VA/ "
                            "partition");
  bool visual = false, sound = false;
  for (const ReferenceProbe& p : probes) {
    visual = visual || p.kind != ReferenceKind::kAudio;
    sound = sound || p.has_audio;
  }
  if (visual && encoders.video_vae_dir.empty())
    return invalid_argument(field +
                            ": image and video references are encoded by the video VAE's encoder: pass the model "
                            "folder (--model DIR, whose vae/ holds it) or --vae DIR");
  if (sound && encoders.audio_vae_dir.empty())
    return invalid_argument(field +
                            ": soundtracks and audio references are encoded by the audio VAE's encoder: pass the "
                            "model folder (--model DIR, whose audio_vae/ holds it) or --audio-vae DIR");
  return probes;
}

Result<nlohmann::json> reference_inputs_json(const std::vector<ReferenceProbe>& probes) {
  nlohmann::json out = nlohmann::json::array();
  int index = 0;
  for (const ReferenceProbe& p : probes) {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(p.path));
    std::error_code ec;
    const auto bytes = fs::file_size(p.path, ec);
    if (ec) return io_error("reference " + p.path + ": cannot read its size: " + ec.message());
    nlohmann::json e = {
        {"index", index++}, {"kind", reference_kind_name(p.kind)}, {"path", p.path}, {"bytes", bytes}, {"sha256", sha}};
    if (p.kind != ReferenceKind::kAudio) {
      e["width"] = p.width;
      e["height"] = p.height;
    }
    if (p.kind == ReferenceKind::kVideo) {
      e["fps"] = p.fps;
      e["has_audio"] = p.has_audio;
    }
    if (p.kind != ReferenceKind::kImage) e["duration_s"] = p.duration_s;
    if (p.has_audio) {
      e["sample_rate"] = p.sample_rate;
      e["channels"] = p.channels;
    }
    out.push_back(e);
  }
  return out;
}

namespace {

std::string describe_reference(const std::string& field, size_t index, const ReferenceProbe& p) {
  return field + " " + std::to_string(index + 1) + " (" + reference_kind_name(p.kind) + " " + p.path + ")";
}

// An image reference read (EXIF-oriented RGB, as load_image) and resized to `size` with Pillow's LANCZOS when it
// differs (VaeImageProcessor.resize).
Result<RgbImage> read_reference_image(const std::string& path, CanvasSize size) {
  VORTEX_ASSIGN_OR_RETURN(RgbImage image, read_image(path));
  if (image.width == size.width && image.height == size.height) return image;
  return lanczos_resize(image, size.width, size.height);
}

// u8 frames -> [3, F, H, W] u8 (the encoders' pixel layout).
Tensor planar_pixels(const std::vector<const RgbImage*>& frames) {
  const int64_t f = static_cast<int64_t>(frames.size()), h = frames[0]->height, w = frames[0]->width;
  Tensor pixels = Tensor::empty({3, f, h, w}, DType::kU8);  // [3, F, H, W] u8
  const size_t plane = static_cast<size_t>(h * w);
  uint8_t* dst = pixels.data<uint8_t>();
  for (int64_t t = 0; t < f; ++t)
    for (size_t i = 0; i < plane; ++i)
      for (size_t ch = 0; ch < 3; ++ch)
        dst[(ch * static_cast<size_t>(f) + static_cast<size_t>(t)) * plane + i] =
            frames[static_cast<size_t>(t)]->rgb[i * 3 + ch];
  return pixels;
}

// A soundtrack or an audio clip normalized as _normalize_audio_condition leaves it: [2, M] f32 at `rate`.
Result<Tensor> normalized_soundtrack(const std::string& path, int rate, int num_frames) {
  VORTEX_ASSIGN_OR_RETURN(DecodedAudio decoded, read_reference_audio(path));
  return normalize_reference_audio(decoded.waveform, decoded.sample_rate, rate, num_frames);
}

}  // namespace

Result<ReferenceSettings> reference_settings(const std::string& model_dir) {
  ReferenceSettings s;
  if (model_dir.empty()) return s;
  for (const char* name : {"model_index.json", "modular_model_index.json"}) {
    const fs::path p = fs::path(model_dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    VORTEX_ASSIGN_OR_RETURN(ConfigJson cfg, ConfigJson::read_file(p.string()));
    VORTEX_ASSIGN_OR_RETURN(s.image_short_edge, cfg.get_int({"reference_image_short_edge"}, s.image_short_edge));
    VORTEX_ASSIGN_OR_RETURN(s.canvas.short_edge, cfg.get_int({"canvas_short_edge"}, s.canvas.short_edge));
    VORTEX_ASSIGN_OR_RETURN(const double max_pixels,
                            cfg.get_number({"canvas_max_pixels"}, static_cast<double>(s.canvas.max_pixels)));
    s.canvas.max_pixels = static_cast<int64_t>(max_pixels);
    if (s.image_short_edge < 32 || s.canvas.short_edge < 32 || s.canvas.max_pixels < 32 * 32)
      return invalid_argument(p.string() +
                              ": reference_image_short_edge, canvas_short_edge and canvas_max_pixels "
                              "must be at least 32, 32 and 32 * 32");
    break;
  }
  return s;
}

Result<VisionProcessorConfig> video_processor_config(const std::string& text_encoder_dir) {
  const fs::path dir(text_encoder_dir);
  for (const fs::path& p :
       {dir / "video_preprocessor_config.json", dir.parent_path() / "processor" / "video_preprocessor_config.json"}) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    VORTEX_ASSIGN_OR_RETURN(ConfigJson cfg, ConfigJson::read_file(p.string()));
    return VisionProcessorConfig::from_json(cfg);
  }
  return not_found("video references need the video processor's video_preprocessor_config.json: looked in " +
                   dir.string() + " and " + (dir.parent_path() / "processor").string());
}

Result<ReferencePlan> plan_references(const std::vector<ReferenceProbe>& probes, int num_frames,
                                      const ReferenceSettings& settings, const std::string& audio_vae_dir,
                                      const ReferenceProcessors* processors, const std::string& field) {
  ReferencePlan plan;
  plan.settings = settings;
  bool sound = false;
  for (const ReferenceProbe& p : probes) sound = sound || p.has_audio;
  if (sound) {
    VORTEX_ASSIGN_OR_RETURN(ConfigJson cj, ConfigJson::read_file((fs::path(audio_vae_dir) / "config.json").string()));
    VORTEX_ASSIGN_OR_RETURN(AudioVaeEncoderConfig acfg, AudioVaeEncoderConfig::from_json(cj));
    plan.audio_rate = acfg.sampling_rate;
    plan.audio_hop = acfg.hop();
  }
  for (size_t i = 0; i < probes.size(); ++i) {
    const ReferenceProbe& p = probes[i];
    const std::string at = describe_reference(field, i, p);
    PlannedReference r;
    r.probe = p;
    r.block.kind = p.kind;
    r.presentation.kind = p.kind;
    r.presentation.has_audio = p.has_audio;
    if (p.kind == ReferenceKind::kImage) {
      Result<CanvasSize> size = reference_image_size(p.width, p.height, settings.image_short_edge);
      if (!size.ok()) return size.status().with_context(at);
      r.size = *size;
      r.block.latent_frames = 1;
      r.block.latent_h = r.size.height / 16;
      r.block.latent_w = r.size.width / 16;
      if (processors != nullptr) {
        VORTEX_ASSIGN_OR_RETURN(const auto hw, smart_resize(r.size.height, r.size.width, processors->image));
        if (hw.first != r.size.height || hw.second != r.size.width)
          return unsupported(at + ": the image processor would resize its " + std::to_string(r.size.width) + "x" +
                             std::to_string(r.size.height) + " pixels to " + std::to_string(hw.second) + "x" +
                             std::to_string(hw.first) + "; its bicubic resampling is not reproduced");
        r.presentation.grid = {r.size.height / processors->image.patch, r.size.width / processors->image.patch};
      }
    } else if (p.kind == ReferenceKind::kVideo) {
      // The 24 fps frame count and the upright size: a decode that converts only the first frame and stops two
      // seconds past the generated duration at the header's rate (a margin for a decoded rate that differs from it;
      // reference_frame_indices truncates to num_frames at the decoded rate).
      const double scale_fps = p.fps > 0.0 ? 24.0 / p.fps : 1.0;
      VideoDecodeFilter filter;
      filter.keep = [](int64_t k) { return k == 0; };
      filter.stop = [&](int64_t k) {
        return k > 0 && std::floor(static_cast<double>(k) * scale_fps + 0.5) >= static_cast<double>(num_frames) + 48.0;
      };
      Result<DecodedVideo> dec = read_reference_video_frames(p.path, filter);
      if (!dec.ok()) return dec.status().with_context(at);
      if (dec->frames.empty()) return invalid_argument(at + ": no video frame decodes");
      VORTEX_ASSIGN_OR_RETURN(const std::vector<int64_t> grid24,
                              reference_frame_indices(dec->decoded, dec->fps, num_frames));
      r.frames_24 = static_cast<int>(grid24.size());
      r.vae_frames = reference_vae_frames(r.frames_24);
      if (r.vae_frames > r.frames_24)
        return unsupported(at + ": " + std::to_string(r.frames_24) +
                           " frames at 24 fps; the video VAE encodes a reference of at least 22 (17n + 5): generate "
                           "at least 22 frames");
      Result<CanvasSize> canvas = reference_video_canvas(dec->frames[0].width, dec->frames[0].height, settings.canvas);
      if (!canvas.ok()) return canvas.status().with_context(at);
      r.size = *canvas;
      r.block.latent_frames = (r.vae_frames - 5) / 17 * 5 + 2;
      r.block.latent_h = r.size.height / 16;
      r.block.latent_w = r.size.width / 16;
      VORTEX_ASSIGN_OR_RETURN(SampledVideoFrames sampled, sample_reference_video_frames(r.frames_24));
      r.sampled_frames = sampled.indices;
      r.presentation.block_timestamps = sampled.block_timestamps;
      if (processors != nullptr) {
        VORTEX_ASSIGN_OR_RETURN(const auto hw, video_smart_resize(static_cast<int>(sampled.indices.size()),
                                                                  r.size.height, r.size.width, processors->video));
        if (hw.first != r.size.height || hw.second != r.size.width)
          return unsupported(at + ": the video processor would resize its " + std::to_string(r.size.width) + "x" +
                             std::to_string(r.size.height) + " frames to " + std::to_string(hw.second) + "x" +
                             std::to_string(hw.first) + "; its bicubic resampling is not reproduced");
        r.presentation.grid = {r.size.height / processors->video.patch, r.size.width / processors->video.patch};
      }
    }
    if (p.has_audio) {
      Result<Tensor> stereo = normalized_soundtrack(p.path, plan.audio_rate, num_frames);
      if (!stereo.ok()) return stereo.status().with_context(at);
      r.audio_samples = stereo->dim(1);
      r.block.audio_latents = static_cast<int>((r.audio_samples + plan.audio_hop - 1) / plan.audio_hop);
    }
    plan.refs.push_back(std::move(r));
  }
  return plan;
}

Result<ReferenceRows> encode_reference_rows(const ReferencePlan& plan, const VideoVaeEncoder* video,
                                            const AudioVaeEncoder* audio, const ModelConfig& cfg, int num_frames,
                                            uint64_t seed, uint64_t noise_offset) {
  using Clock = std::chrono::steady_clock;
  ReferenceRows out;
  int64_t nvc = 0, nac = 0;
  for (const PlannedReference& r : plan.refs) nvc += r.block.video_rows(), nac += r.block.audio_rows();
  if (nvc > 0 && video == nullptr) return invalid_argument("encode_reference_rows: no video VAE encoder");
  if (nac > 0 && audio == nullptr) return invalid_argument("encode_reference_rows: no audio VAE encoder");
  if (video != nullptr && video->config().latent_channels != cfg.in_channels)
    return invalid_argument("the video VAE encodes " + std::to_string(video->config().latent_channels) +
                            " latent channels but the transformer (" + cfg.name + ") reads " +
                            std::to_string(cfg.in_channels) + ": the parts belong to different models");
  if (audio != nullptr && audio->config().latent_channels != cfg.audio_in_channels)
    return invalid_argument("the audio VAE encodes " + std::to_string(audio->config().latent_channels) +
                            " latent channels but the transformer (" + cfg.name + ") reads " +
                            std::to_string(cfg.audio_in_channels) + ": the parts belong to different models");
  out.visual = Tensor::empty({nvc, int64_t{cfg.in_channels} * 4}, DType::kF32);                // [Nvc, 4C] f32
  if (nac > 0) out.audio = Tensor::empty({nac, int64_t{cfg.audio_in_channels}}, DType::kF32);  // [Nac, Ca] f32
  size_t visual_at = 0, audio_at = 0;
  uint64_t offset = noise_offset;
  for (size_t i = 0; i < plan.refs.size(); ++i) {
    const PlannedReference& r = plan.refs[i];
    const std::string at = std::string("reference ") + std::to_string(i + 1) + " (" + r.probe.path + ")";
    if (r.probe.kind != ReferenceKind::kAudio) {
      const auto t0 = Clock::now();
      Tensor pixels;
      if (r.probe.kind == ReferenceKind::kImage) {
        Result<RgbImage> image = read_reference_image(r.probe.path, r.size);
        if (!image.ok()) return image.status().with_context(at);
        pixels = planar_pixels({&*image});  // [3, 1, H, W] u8
      } else {
        Result<ReferenceVideo> v = read_reference_video(r.probe.path, num_frames, plan.settings.canvas);
        if (!v.ok()) return v.status().with_context(at);
        if (static_cast<int>(v->frames.size()) < r.vae_frames || v->canvas.width != r.size.width ||
            v->canvas.height != r.size.height)
          return internal_error(at + ": the decoded video differs from its plan");
        std::vector<const RgbImage*> frames;
        for (int k = 0; k < r.vae_frames; ++k) frames.push_back(&v->frames[static_cast<size_t>(k)]);
        pixels = planar_pixels(frames);  // [3, F, H, W] u8
      }
      VORTEX_ASSIGN_OR_RETURN(Tensor lat, video->encode_condition(pixels));  // [C, T, h, w] f32
      if (lat.ndim() != 4 || lat.dim(0) != cfg.in_channels || lat.dim(1) != r.block.latent_frames ||
          lat.dim(2) != r.block.latent_h || lat.dim(3) != r.block.latent_w)
        return invalid_argument(at + ": the video VAE encodes it to " + lat.describe() + ", not [" +
                                std::to_string(cfg.in_channels) + ", " + std::to_string(r.block.latent_frames) + ", " +
                                std::to_string(r.block.latent_h) + ", " + std::to_string(r.block.latent_w) +
                                "]: its compression is not the transformer's");
      Tensor noise = Tensor::empty(lat.shape(), DType::kF32);
      VORTEX_RETURN_IF_ERROR(gaussian_noise(seed, offset, noise));
      offset += static_cast<uint64_t>(lat.numel());
      VORTEX_ASSIGN_OR_RETURN(Tensor mixed, noise_condition_latents(lat, noise));
      VORTEX_ASSIGN_OR_RETURN(Tensor block, patchify_video(cfg, mixed));  // [T * h/2 * w/2, 4C] f32
      std::memcpy(static_cast<char*>(out.visual.raw_data()) + visual_at, block.raw_data(), block.nbytes());
      visual_at += static_cast<size_t>(block.nbytes());
      out.video_seconds += seconds_since(t0);
    }
    if (r.probe.has_audio) {
      const auto t0 = Clock::now();
      Result<Tensor> stereo = normalized_soundtrack(r.probe.path, plan.audio_rate, num_frames);
      if (!stereo.ok()) return stereo.status().with_context(at);
      VORTEX_ASSIGN_OR_RETURN(Tensor rows, audio->encode_condition(*stereo));  // [2T, Ca] f32
      if (rows.ndim() != 2 || rows.dim(0) != r.block.audio_rows() || rows.dim(1) != cfg.audio_in_channels)
        return invalid_argument(at + ": the audio VAE encodes its soundtrack to " + rows.describe() + ", not [" +
                                std::to_string(r.block.audio_rows()) + ", " + std::to_string(cfg.audio_in_channels) +
                                "]");
      std::memcpy(static_cast<char*>(out.audio.raw_data()) + audio_at, rows.raw_data(), rows.nbytes());
      audio_at += static_cast<size_t>(rows.nbytes());
      out.audio_seconds += seconds_since(t0);
    }
  }
  return out;
}

Result<nlohmann::json> reference_record_json(const ReferencePlan& plan) {
  std::vector<ReferenceProbe> probes;
  for (const PlannedReference& r : plan.refs) probes.push_back(r.probe);
  VORTEX_ASSIGN_OR_RETURN(nlohmann::json out, reference_inputs_json(probes));
  for (size_t i = 0; i < plan.refs.size(); ++i) {
    const PlannedReference& r = plan.refs[i];
    nlohmann::json used = nlohmann::json::object();
    if (r.probe.kind == ReferenceKind::kImage) {
      used["encoded_size"] = {{"width", r.size.width}, {"height", r.size.height}};
    } else if (r.probe.kind == ReferenceKind::kVideo) {
      used["canvas"] = {{"width", r.size.width}, {"height", r.size.height}};
      used["frames_24fps"] = r.frames_24;
      used["vae_frames"] = r.vae_frames;
      used["vision_frames"] = r.sampled_frames;
      used["vision_block_timestamps"] = r.presentation.block_timestamps;
    }
    if (r.probe.kind != ReferenceKind::kAudio)
      used["latent"] = {r.block.latent_frames, r.block.latent_h, r.block.latent_w};
    if (r.probe.has_audio)
      used["soundtrack"] = {{"samples", r.audio_samples},
                            {"sample_rate", plan.audio_rate},
                            {"latents_per_channel", r.block.audio_latents}};
    used["video_rows"] = r.block.video_rows();
    used["audio_rows"] = r.block.audio_rows();
    out[i]["used"] = used;
  }
  return out;
}

Result<VisionEmbeddings> reference_vision(const ReferencePlan& plan, const VisionTower& tower,
                                          const ReferenceProcessors& processors, const Ref2vaPresentation& text,
                                          int num_frames) {
  // The tower's outputs per kind, in presentation order: images, then every video's blocks.
  std::vector<VisionTower::Output> images, videos;
  for (size_t i = 0; i < plan.refs.size(); ++i) {
    const PlannedReference& r = plan.refs[i];
    const std::string at = std::string("reference ") + std::to_string(i + 1) + " (" + r.probe.path + ")";
    if (r.probe.kind == ReferenceKind::kImage) {
      Result<RgbImage> image = read_reference_image(r.probe.path, r.size);
      if (!image.ok()) return image.status().with_context(at);
      VORTEX_ASSIGN_OR_RETURN(VisionInput in, preprocess_image(*image, processors.image));
      VORTEX_ASSIGN_OR_RETURN(VisionTower::Output o, tower.forward(in));
      images.push_back(std::move(o));
    } else if (r.probe.kind == ReferenceKind::kVideo) {
      Result<ReferenceVideo> v = read_reference_video(r.probe.path, num_frames, plan.settings.canvas);
      if (!v.ok()) return v.status().with_context(at);
      std::vector<RgbImage> sampled;
      for (int64_t k : r.sampled_frames) {
        if (k >= static_cast<int64_t>(v->frames.size())) return internal_error(at + ": a sampled frame is missing");
        sampled.push_back(v->frames[static_cast<size_t>(k)]);
      }
      VORTEX_ASSIGN_OR_RETURN(std::vector<VisionInput> pairs, preprocess_video_pairs(sampled, processors.video));
      VORTEX_ASSIGN_OR_RETURN(VisionTower::Output o, encode_video_pairs(tower, pairs));
      videos.push_back(std::move(o));
    }
  }
  // Row-ordered merge: each pad row takes the next token of its kind.
  struct Source {
    const std::vector<VisionTower::Output>* outputs;
    const std::vector<int64_t>* rows;
  };
  const Source sources[2] = {{&images, &text.image_pad_rows}, {&videos, &text.video_pad_rows}};
  struct Pick {
    int64_t row;
    const VisionTower::Output* out;
    int64_t index;
  };
  std::vector<Pick> picks;
  for (const Source& src : sources) {
    size_t o = 0;
    int64_t within = 0;
    for (int64_t row : *src.rows) {
      while (o < src.outputs->size() && within >= (*src.outputs)[o].merged.dim(0)) ++o, within = 0;
      if (o >= src.outputs->size())
        return internal_error("reference_vision: more vision pad rows than the tower's tokens");
      picks.push_back({row, &(*src.outputs)[o], within++});
    }
    if (o + 1 < src.outputs->size() || (o < src.outputs->size() && within != (*src.outputs)[o].merged.dim(0)))
      return internal_error("reference_vision: fewer vision pad rows than the tower's tokens");
  }
  std::sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) { return a.row < b.row; });
  VisionEmbeddings v;
  if (picks.empty()) return v;
  const int64_t hidden = picks[0].out->merged.dim(1), n = static_cast<int64_t>(picks.size());
  const size_t taps = picks[0].out->deepstack.size();
  v.tokens = Tensor::empty({n, hidden}, DType::kF32);  // [rows, out_hidden] f32
  for (size_t k = 0; k < taps; ++k) v.deepstack.push_back(Tensor::empty({n, hidden}, DType::kF32));
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(float);
  for (int64_t i = 0; i < n; ++i) {
    const Pick& p = picks[static_cast<size_t>(i)];
    v.rows.push_back(p.row);
    std::memcpy(static_cast<char*>(v.tokens.raw_data()) + i * row_bytes,
                static_cast<const char*>(p.out->merged.raw_data()) + p.index * row_bytes, row_bytes);
    for (size_t k = 0; k < taps; ++k)
      std::memcpy(static_cast<char*>(v.deepstack[k].raw_data()) + i * row_bytes,
                  static_cast<const char*>(p.out->deepstack[k].raw_data()) + p.index * row_bytes, row_bytes);
  }
  return v;
}

}  // namespace vortex
