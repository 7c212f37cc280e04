// End-to-end decode (see decode.h).
#include "engine/decode.h"

#include "core/clock.h"
#include "engine/generate.h"
#include "engine/stream_mux.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/preview.h"
#include "io/safetensors.h"
#include "io/staging.h"
#include "media/atomic_file.h"
#include "media/wav_writer.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Files decode writes; a folder holding only these (and frames) is recognised as ours.
const char* const kOwnFiles[] = {"video.mp4", "audio.wav", "decode.json"};

bool is_own_output(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    bool own = false;
    for (const char* f : kOwnFiles) own = own || n == f;
    if (!own) return false;
  }
  return !ec;
}

bool is_frames_output(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("frame_", 0) != 0 || e.path().extension() != ".png") return false;
  }
  return !ec;
}

// The target may not exist, may be empty, or (overwrite) may hold only our own outputs.
Status check_target(const std::string& path, const char* flag, bool overwrite, bool (*own)(const fs::path&)) {
  const fs::path p = fs::absolute(path).lexically_normal();
  VORTEX_RETURN_IF_ERROR(check_output_location(p, flag, path));
  std::error_code ec;
  if (!fs::exists(p, ec)) return Status::Ok();
  if (!fs::is_directory(p, ec))
    return invalid_argument(std::string(flag) + " " + path + " exists and is not a directory");
  if (fs::is_empty(p, ec)) return Status::Ok();
  if (!overwrite)
    return invalid_argument(std::string(flag) + " " + path + " exists and is not empty; pass --overwrite to replace " +
                            "a previous decode there, or choose another directory");
  if (!own(p))
    return invalid_argument(std::string(flag) + " " + path + " holds files `vortex decode` did not write; " +
                            "--overwrite only replaces a previous decode. Choose another directory");
  return Status::Ok();
}

// Deletes from a replaced folder only the files decode writes (its outputs and frame PNGs), then the
// folder if that left it empty: anything that appeared there meanwhile stays.
void remove_own_outputs(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> own;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    bool mine = n.rfind("frame_", 0) == 0 && e.path().extension() == ".png";
    for (const char* f : kOwnFiles) mine = mine || n == f;
    if (mine && fs::is_regular_file(fs::symlink_status(e.path(), ec))) own.push_back(e.path());
  }
  for (const fs::path& f : own) fs::remove(f, ec);
  fs::remove(dir, ec);  // fails, harmlessly, when something else is left
}

// Moves `staged` to `out`, replacing an existing (checked) `out`.
Status publish(const fs::path& staged, const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out.parent_path(), ec);
  return replace_with_staged(staged, out, remove_own_outputs);
}

// `<target>.partial-<pid>`, after removing the staging folders of `target` left by processes that are gone.
fs::path staging_path(const std::string& target) {
  fs::path p = fs::absolute(target).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  sweep_stale_staging(p, ".partial-", /*folders=*/true);
  fs::path s = p;
  s += ".partial-" + std::to_string(::getpid());
  return s;
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
  VORTEX_ASSIGN_OR_RETURN(Tensor video, video_vae.decode(video_latents, progress));
  VORTEX_ASSIGN_OR_RETURN(media.frames, video_to_rgb8(video));
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

// This process's staging folder for `target`, empty: a stale one of this pid can only be ours, so it goes first.
Result<fs::path> fresh_staging_dir(const std::string& target) {
  const fs::path staged = staging_path(target);
  std::error_code ec;
  fs::remove_all(staged, ec);
  fs::create_directories(staged, ec);
  if (ec) return io_error("cannot create " + staged.string() + ": " + ec.message());
  return staged;
}

}  // namespace

Status check_frames_dir(const std::string& frames_dir, bool overwrite) {
  return check_target(frames_dir, "--frames-dir", overwrite, is_frames_output);
}

Status write_frames_dir(const DecodedMedia& media, const std::string& frames_dir) {
  VORTEX_ASSIGN_OR_RETURN(const fs::path fstaged, fresh_staging_dir(frames_dir));
  StagingGuard cleanup(fstaged);
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
  auto hold = hold_staging();  // an interrupt waits until the frames are in place
  VORTEX_RETURN_IF_ERROR(publish(fstaged, fs::absolute(frames_dir).lexically_normal()));
  cleanup.release();
  return Status::Ok();
}

Status write_decoded_media(const DecodedMedia& media, const std::string& out_dir, const std::string& frames_dir,
                           bool overwrite, const Mp4Options& opts, const nlohmann::json& manifest,
                           std::vector<std::string>* files) {
  if (out_dir.empty()) return invalid_argument("--out is required");
  VORTEX_RETURN_IF_ERROR(check_target(out_dir, "--out", overwrite, is_own_output));
  if (!frames_dir.empty()) VORTEX_RETURN_IF_ERROR(check_frames_dir(frames_dir, overwrite));
  VORTEX_ASSIGN_OR_RETURN(const fs::path staged, fresh_staging_dir(out_dir));
  StagingGuard cleanup(staged);
  VORTEX_ASSIGN_OR_RETURN(nlohmann::json described, write_media_files(media, staged.string(), opts));
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
  auto hold = hold_staging();  // an interrupt waits until the outputs are in place
  VORTEX_RETURN_IF_ERROR(publish(staged, fs::absolute(out_dir).lexically_normal()));
  cleanup.release();
  if (files) *files = {"video.mp4", "audio.wav", "decode.json"};
  return Status::Ok();
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
  // Cheap checks first: inputs and the output folders, before loading gigabytes of weights.
  VORTEX_ASSIGN_OR_RETURN(Tensor video_latents,
                          read_latents(req.latents_dir, "video_latents.safetensors", "video_latents"));
  VORTEX_ASSIGN_OR_RETURN(Tensor audio_latents,
                          read_latents(req.latents_dir, "audio_latents.safetensors", "audio_latents"));
  VORTEX_RETURN_IF_ERROR(check_target(req.out_dir, "--out", req.overwrite, is_own_output));
  if (!req.frames_dir.empty())
    VORTEX_RETURN_IF_ERROR(check_target(req.frames_dir, "--frames-dir", req.overwrite, is_frames_output));
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
  auto t0 = Clock::now();
  DecodedMedia media;
  VORTEX_ASSIGN_OR_RETURN(Tensor video, vvae->decode(video_latents, progress));
  VORTEX_ASSIGN_OR_RETURN(media.frames, video_to_rgb8(video));
  res.video_decode_s = seconds_since(t0);
  t0 = Clock::now();
  VORTEX_ASSIGN_OR_RETURN(media.audio, avae->decode(audio_latents, progress));
  media.sample_rate = avae->config().sampling_rate;
  media.fps = req.mp4.fps;
  res.audio_decode_s = seconds_since(t0);
  manifest["timings_s"] = {{"video_decode", res.video_decode_s}, {"audio_decode", res.audio_decode_s}};
  t0 = Clock::now();
  VORTEX_RETURN_IF_ERROR(
      write_decoded_media(media, req.out_dir, req.frames_dir, req.overwrite, req.mp4, manifest, &res.files));
  res.write_s = seconds_since(t0);
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
