// End-to-end decode (see decode.h).
#include "engine/decode.h"

#include "core/clock.h"
#include "engine/decode_frames.h"
#include "engine/stream_mux.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "engine/preview.h"
#include "io/publish.h"
#include "io/safetensors.h"
#include "media/wav_writer.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Files decode writes into --out; a folder holding only these is a previous decode, which --overwrite replaces.
const char* const kOwnFiles[] = {"video.mp4", "audio.wav", "decode.json"};

bool is_own_file(const fs::directory_entry& e) {
  const std::string n = e.path().filename().string();
  for (const char* f : kOwnFiles)
    if (n == f) return true;
  return false;
}

bool is_frame_file(const fs::directory_entry& e) {
  return e.path().filename().string().rfind("frame_", 0) == 0 && e.path().extension() == ".png";
}

// What decode writes into `path` (--out: its media files; --frames-dir: frame PNGs), for the publish policy.
OutputOwnership decode_ownership(const std::string& path, bool frames) {
  OutputOwnership own;
  own.flag = frames ? "--frames-dir" : "--out";
  own.shown = path;
  own.previous = frames ? "the frames of a previous decode" : "a previous decode";
  own.is_own = frames ? is_frame_file : is_own_file;
  own.check_replaceable = [flag = own.flag, path, is_own = own.is_own](const fs::path& dir) -> Status {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (!fs::is_regular_file(e.symlink_status(ec)) || !is_own(e))
        return invalid_argument(flag + " " + path + " holds files `vortex decode` did not write; " +
                                "--overwrite only replaces a previous decode. Choose another directory");
    }
    if (ec) return io_error("cannot list " + flag + " " + path + ": " + ec.message());
    return Status::Ok();
  };
  return own;
}

Status check_target(const std::string& path, bool frames, bool overwrite) {
  return check_publish_target(normalized_output_path(path), decode_ownership(path, frames), overwrite);
}

Result<Tensor> read_latents(const std::string& dir, const char* file, const char* name) {
  const std::string path = dir + "/" + file;
  std::error_code ec;
  if (!fs::exists(path, ec))
    return not_found(path + " does not exist; LATENTS_DIR must be a `vortex generate` output folder");
  VORTEX_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
  std::string tname = name;
  if (!f.contains(tname)) {
    if (f.entries().size() != 1)
      return invalid_argument(path + " has no tensor '" + tname + "' (and not exactly one tensor to take instead)");
    tname = f.entries().front().name;
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor t, f.tensor(tname));
  if (t.dtype() != DType::kF32)
    return invalid_argument(path + ": '" + tname + "' is " + t.describe() + "; latents must be F32");
  Tensor copy = Tensor::empty(t.shape(), DType::kF32);
  std::memcpy(copy.raw_data(), t.raw_data(), copy.nbytes());
  return copy;
}

}  // namespace

Result<DecodedMedia> decode_latents(const Tensor& video_latents, const Tensor& audio_latents, VideoVae& video_vae,
                                    AudioVae& audio_vae, const VaeProgressFn& progress) {
  // Validate both inputs before spending time on either decoder.
  VORTEX_RETURN_IF_ERROR(video_vae.check_latents(video_latents).with_context("video_latents"));
  VORTEX_RETURN_IF_ERROR(audio_vae.check_latents(audio_latents).with_context("audio_latents"));
  DecodedMedia media;
  VORTEX_ASSIGN_OR_RETURN(Tensor video, video_vae.decode(video_latents, progress));  // [3, F, H, W] f32
  media.frames = Tensor::empty({video.dim(1), video.dim(2), video.dim(3), 3}, DType::kU8);
  Tensor no_i420;
  VORTEX_RETURN_IF_ERROR(
      video_frames_to_rgb8_i420(video, 0, video.dim(1), media.frames, no_i420,
                                static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))));
  VORTEX_ASSIGN_OR_RETURN(media.audio, audio_vae.decode(audio_latents, progress));
  media.sample_rate = audio_vae.config().sampling_rate;
  return media;
}

Result<nlohmann::json> write_media_files(const DecodedMedia& media, const std::string& dir, const Mp4Options& opts,
                                         const Mp4EncoderInfo* mp4_written) {
  const fs::path d(dir);
  Mp4Options o = opts;
  o.fps = media.fps;
  Mp4EncoderInfo encoder;
  if (mp4_written) encoder = *mp4_written;
  else
    VORTEX_RETURN_IF_ERROR(
        write_mp4((d / "video.mp4").string(), media.frames, media.audio, media.sample_rate, o, &encoder));
  VORTEX_RETURN_IF_ERROR(write_wav_f32((d / "audio.wav").string(), media.audio, media.sample_rate));
  nlohmann::json m;
  m["video.mp4"] = describe_mp4(o, encoder, media.frames);
  m["audio.wav"] = {{"format", "IEEE float 32-bit"},
                    {"sample_rate", media.sample_rate},
                    {"channels", 2},
                    {"samples", media.audio.dim(1)}};
  return m;
}

namespace {

// This process's staging folder for the output folder `path` (io/publish.h).
Result<StagedDir> stage(const std::string& path, bool frames) {
  return StagedDir::create(normalized_output_path(path), decode_ownership(path, frames));
}

}  // namespace

Status check_frames_dir(const std::string& frames_dir, bool overwrite) {
  return check_target(frames_dir, /*frames=*/true, overwrite);
}

Status write_frames_dir(const DecodedMedia& media, const std::string& frames_dir) {
  VORTEX_ASSIGN_OR_RETURN(StagedDir staged, stage(frames_dir, /*frames=*/true));
  const fs::path fstaged = staged.path();
  const int64_t nf = media.frames.dim(0), h = media.frames.dim(1), w = media.frames.dim(2);
  PreviewImage img;
  img.width = static_cast<int>(w);
  img.height = static_cast<int>(h);
  for (int64_t i = 0; i < nf; ++i) {
    const uint8_t* src = media.frames.data<uint8_t>() + i * h * w * 3;
    img.rgb.assign(src, src + h * w * 3);
    char name[48];
    std::snprintf(name, sizeof(name), "frame_%05lld.png", static_cast<long long>(i));
    VORTEX_RETURN_IF_ERROR(write_png_rgb(img, (fstaged / name).string()));
  }
  return staged.publish(/*overwrite=*/true);  // the target was checked before the decode
}

namespace {

// audio.wav, decode.json (and video.mp4 unless `mp4_written`) into the staged --out folder, the frames into
// frames_dir, then publishes the folder.
Status finish_decoded_media(const DecodedMedia& media, StagedDir& stage_dir, const std::string& frames_dir,
                            bool overwrite, const Mp4Options& opts, const nlohmann::json& manifest,
                            const Mp4EncoderInfo* mp4_written, std::vector<std::string>* files) {
  const fs::path staged = stage_dir.path();
  VORTEX_ASSIGN_OR_RETURN(nlohmann::json described, write_media_files(media, staged.string(), opts, mp4_written));
  nlohmann::json m = manifest;
  m["schema"] = "vortex.decode/1";
  m["video"] = described["video.mp4"];
  m["video"]["file"] = "video.mp4";
  m["audio"] = described["audio.wav"];
  m["audio"]["file"] = "audio.wav";
  {
    const std::string path = (staged / "decode.json").string();
    std::ofstream out(path, std::ios::binary);
    out << m.dump(2) << "\n";
    if (!out) return io_error("cannot write " + path);
  }
  if (!frames_dir.empty()) VORTEX_RETURN_IF_ERROR(write_frames_dir(media, frames_dir));
  VORTEX_RETURN_IF_ERROR(stage_dir.publish(overwrite));
  if (files) *files = {"video.mp4", "audio.wav", "decode.json"};
  return Status::Ok();
}

}  // namespace

Status write_decoded_media(const DecodedMedia& media, const std::string& out_dir, const std::string& frames_dir,
                           bool overwrite, const Mp4Options& opts, const nlohmann::json& manifest,
                           std::vector<std::string>* files) {
  if (out_dir.empty()) return invalid_argument("--out is required");
  VORTEX_RETURN_IF_ERROR(check_target(out_dir, /*frames=*/false, overwrite));
  if (!frames_dir.empty()) VORTEX_RETURN_IF_ERROR(check_frames_dir(frames_dir, overwrite));
  VORTEX_ASSIGN_OR_RETURN(StagedDir stage_dir, stage(out_dir, /*frames=*/false));
  return finish_decoded_media(media, stage_dir, frames_dir, overwrite, opts, manifest, nullptr, files);
}

Result<DecodeResult> decode(const DecodeRequest& req, const VaeProgressFn& progress) {
  if (req.latents_dir.empty()) return invalid_argument("LATENTS_DIR is required");
  if (req.out_dir.empty()) return invalid_argument("--out is required");
  const bool synthetic = !req.synthetic_vae.empty();
  if (synthetic && req.synthetic_vae != "tiny" && req.synthetic_vae != "full")
    return invalid_argument("--synthetic-vae must be 'tiny' or 'full', got '" + req.synthetic_vae + "'");
  if (!synthetic && (req.vae_dir.empty() || req.audio_vae_dir.empty()))
    return invalid_argument("pass --vae DIR and --audio-vae DIR (the VAE folders), or --synthetic-vae tiny|full");
  if (synthetic && (!req.vae_dir.empty() || !req.audio_vae_dir.empty()))
    return invalid_argument("--synthetic-vae replaces --vae / --audio-vae; pass one or the other");
  VORTEX_RETURN_IF_ERROR(check_video_encoder(req.mp4.video_encoder));
  VORTEX_RETURN_IF_ERROR(check_x264_preset(req.mp4.preset));
  // Cheap checks first: inputs and the output folders, before loading gigabytes of weights.
  VORTEX_ASSIGN_OR_RETURN(Tensor video_latents,
                          read_latents(req.latents_dir, "video_latents.safetensors", "video_latents"));
  VORTEX_ASSIGN_OR_RETURN(Tensor audio_latents,
                          read_latents(req.latents_dir, "audio_latents.safetensors", "audio_latents"));
  VORTEX_RETURN_IF_ERROR(check_target(req.out_dir, /*frames=*/false, req.overwrite));
  if (!req.frames_dir.empty()) VORTEX_RETURN_IF_ERROR(check_target(req.frames_dir, /*frames=*/true, req.overwrite));
  VORTEX_RETURN_IF_ERROR(
      mp4_support());  // FFmpeg is loaded at run time: know before decoding that video.mp4 can be written
  nlohmann::json manifest;
  manifest["latents_dir"] = req.latents_dir;
  {
    std::ifstream in(req.latents_dir + "/run.json", std::ios::binary);
    if (in) {
      auto run = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}), nullptr, false);
      if (run.is_discarded()) return format_error(req.latents_dir + "/run.json is not valid JSON");
      if (run.contains("schema")) manifest["run_schema"] = run["schema"];
    }
  }
  VORTEX_ASSIGN_OR_RETURN(auto backend, make_backend(req.backend, req.threads));
  std::unique_ptr<VideoVae> vvae;
  std::unique_ptr<AudioVae> avae;
  if (synthetic) {
    const bool tiny = req.synthetic_vae == "tiny";
    VORTEX_ASSIGN_OR_RETURN(vvae, VideoVae::synthetic(tiny ? VideoVaeConfig::tiny() : VideoVaeConfig::full(), *backend,
                                                      req.synthetic_seed));
    VORTEX_ASSIGN_OR_RETURN(avae, AudioVae::synthetic(tiny ? AudioVaeConfig::tiny() : AudioVaeConfig::full(), *backend,
                                                      req.synthetic_seed));
    manifest["vae"] = "synthetic-" + req.synthetic_vae;
    manifest["synthetic_seed"] = req.synthetic_seed;
  } else {
    VORTEX_ASSIGN_OR_RETURN(vvae, VideoVae::load(req.vae_dir, *backend));
    VORTEX_ASSIGN_OR_RETURN(avae, AudioVae::load(req.audio_vae_dir, *backend));
    manifest["vae"] = req.vae_dir;
    manifest["audio_vae"] = req.audio_vae_dir;
  }
  vvae->mutable_config().tiling = req.tiling;
  manifest["tiling"] = req.tiling
                           ? nlohmann::json{{"tile", vvae->config().tile}, {"min_overlap", vvae->config().tile_overlap}}
                           : nlohmann::json(false);
  manifest["backend"] = req.backend;
  DecodeResult res;
  res.video_params = vvae->parameter_count();
  res.audio_params = avae->parameter_count();
  VORTEX_RETURN_IF_ERROR(
      vvae->check_latents(video_latents).with_context(req.latents_dir + "/video_latents.safetensors"));
  VORTEX_RETURN_IF_ERROR(
      avae->check_latents(audio_latents).with_context(req.latents_dir + "/audio_latents.safetensors"));
  // video.mp4 is encoded while the video decodes (the audio first; src/engine/stream_mux.h), into this process's
  // staging folder for --out, which is published with audio.wav and decode.json once all are written.
  VORTEX_ASSIGN_OR_RETURN(StagedDir stage_dir, stage(req.out_dir, /*frames=*/false));
  Mp4Options mp4 = req.mp4;
  const auto t0 = Clock::now();
  VORTEX_ASSIGN_OR_RETURN(StreamedDecode streamed,
                          decode_to_mp4(video_latents, audio_latents, *vvae, *avae,
                                        (stage_dir.path() / "video.mp4").string(), mp4, progress));
  res.decode_to_mp4_s = seconds_since(t0);
  res.video_decode_s = streamed.video_decode_s;
  res.audio_decode_s = streamed.audio_decode_s;
  res.mux_tail_s = streamed.mux_tail_s;
  res.encoder = streamed.encoder;
  const DecodedMedia& media = streamed.media;
  manifest["timings_s"] = {{"audio_decode", res.audio_decode_s},
                           {"video_decode", res.video_decode_s},
                           {"mux_tail", res.mux_tail_s},
                           {"mp4_open", streamed.mp4_open_s},
                           {"decode_to_mp4", res.decode_to_mp4_s}};
  manifest["timings_note"] =
      "video_decode runs while video.mp4 is opened (mp4_open) and encoded; mux_tail is the time from the end of the "
      "video decode to video.mp4 complete; decode_to_mp4 = audio decode + video decode + mux tail";
  const auto t_write = Clock::now();
  VORTEX_RETURN_IF_ERROR(finish_decoded_media(media, stage_dir, req.frames_dir, req.overwrite, mp4, manifest,
                                              &streamed.encoder, &res.files));
  res.write_s = seconds_since(t_write);
  res.out_dir = req.out_dir;
  res.frames_dir = req.frames_dir;
  res.frames = media.frames.dim(0);
  res.height = media.frames.dim(1);
  res.width = media.frames.dim(2);
  res.samples = media.audio.dim(1);
  res.sample_rate = media.sample_rate;
  return res;
}

}  // namespace vortex
