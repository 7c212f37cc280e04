// ref2va_encoders_bench: Vortex's reference encoding of the canonical ref2va references on one backend (cuda, or cpu
// for a tiny check), with deterministic synthetic weights of the given configs' shapes (the release's for the H200):
// the references come as raw decoded media written by `bench/ref2va_encoders_peer.py make-inputs DIR` (two images at
// their 2048-pixel short edge, a 24 fps video on its canvas, its soundtrack and an audio clip: no FFmpeg needed), and
// each step of MiniMaxH3Ref2VATextEncoderStep's vision part and MiniMaxH3Ref2VAReferenceEncoderStep is timed as the
// peer times it: the processors (preprocess_image, the 2 fps frame choice and preprocess_video_pairs), the vision
// tower on the images and on the video's temporal pairs (forward_device, BF16 outputs left on the device), the video
// VAE encoder on each image and on the video's first 17n + 5 frames (encode_condition), and the audio VAE encoder on
// the soundtrack and the clip (encode_condition). Appends evidence rows to OUT_DIR/<date>-<gpu>-ref2va-encoders.jsonl
// with the peer's same-run p50 as each row's baseline (--peer, the peer's JSONL) and prints the ratio table.
//   ref2va_encoders_bench OUT_DIR --inputs DIR --text-encoder-config PATH --vae-config PATH --audio-vae-config PATH
//                         [--peer PEER.jsonl] [--backend cuda|cpu] [--reps N] [--seed S] [--threads N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/config_json.h"
#include "media/lanczos_resize.h"
#include "media/reference_media.h"
#include "profiling/evidence.h"
#include "vae/audio_vae_encoder.h"
#include "vae/vae_checkpoint.h"
#include "vae/video_vae_encoder.h"
#include "vision/ref2va_presentation.h"
#include "vision/reference_video_vision.h"
#include "vision/vision_tower.h"

namespace {

using namespace vortex;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int fail(const Status& s, const char* what) {
  std::fprintf(stderr, "ref2va_encoders_bench: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

// Scales of a trained-like network for the synthetic weights: norms near 1, small biases and position tables,
// matrices and kernels at 1/sqrt(fan_in).
std::pair<float, float> weight_scale(const std::string& name, const Shape& shape) {
  auto has = [&name](const char* s) { return name.find(s) != std::string::npos; };
  const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  if (has("norm") && !bias) return {0.1f, 1.0f};
  if (bias || has("pos_embed") || has("alpha")) return {0.02f, has("alpha") ? 1.0f : 0.0f};
  int64_t fan_in = 1;
  for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
  return {static_cast<float>(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)))), 0.0f};
}

Result<std::string> read_file(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path);
  std::string s(bytes, '\0');
  in.read(s.data(), static_cast<std::streamsize>(bytes));
  if (static_cast<size_t>(in.gcount()) != bytes)
    return invalid_argument(path + " holds fewer than the manifest's " + std::to_string(bytes) + " bytes");
  return s;
}

// The references of make-inputs: u8 HxWx3 images, a u8 FxHxWx3 video, f32 [2, N] soundtrack and clip.
struct Inputs {
  json manifest;
  std::vector<RgbImage> images;
  std::vector<RgbImage> video;  // 24 fps frames on the video's canvas
  Tensor soundtrack, audio;     // [2, N] f32
};

Result<Inputs> load_inputs(const std::string& dir) {
  Inputs in;
  std::ifstream m(dir + "/manifest.json");
  if (!m) return not_found(dir + "/manifest.json: run bench/ref2va_encoders_peer.py make-inputs " + dir);
  in.manifest = json::parse(m, nullptr, false);
  if (in.manifest.is_discarded()) return invalid_argument(dir + "/manifest.json is not JSON");
  for (const json& i : in.manifest["images"]) {
    RgbImage img;
    img.height = i["height"];
    img.width = i["width"];
    VORTEX_ASSIGN_OR_RETURN(std::string bytes,
                            read_file(dir + "/" + i["file"].get<std::string>(), size_t{3} * img.width * img.height));
    img.rgb.assign(bytes.begin(), bytes.end());
    in.images.push_back(std::move(img));
  }
  const json& v = in.manifest["video"];
  const int frames = v["frames"], h = v["height"], w = v["width"];
  const size_t frame_bytes = size_t{3} * h * w;
  VORTEX_ASSIGN_OR_RETURN(std::string bytes, read_file(dir + "/" + v["file"].get<std::string>(), frame_bytes * frames));
  for (int f = 0; f < frames; ++f) {
    RgbImage img;
    img.height = h;
    img.width = w;
    img.rgb.assign(bytes.begin() + static_cast<std::ptrdiff_t>(f * frame_bytes),
                   bytes.begin() + static_cast<std::ptrdiff_t>((f + 1) * frame_bytes));
    in.video.push_back(std::move(img));
  }
  for (const auto& [key, dst] : {std::pair<const char*, Tensor*>{"soundtrack", &in.soundtrack}, {"audio", &in.audio}}) {
    const json& a = in.manifest[key];
    const int64_t c = a["channels"], n = a["samples"];
    VORTEX_ASSIGN_OR_RETURN(std::string raw,
                            read_file(dir + "/" + a["file"].get<std::string>(), sizeof(float) * c * n));
    *dst = Tensor::empty({c, n}, DType::kF32);  // [2, N]
    std::copy(raw.begin(), raw.end(), reinterpret_cast<char*>(dst->data<float>()));
  }
  return in;
}

// RGB frames -> u8 [3, F, H, W] (the encoder's pixels).
Tensor planar_u8(const std::vector<const RgbImage*>& frames) {
  const int64_t f = static_cast<int64_t>(frames.size()), h = frames[0]->height, w = frames[0]->width;
  Tensor t = Tensor::empty({3, f, h, w}, DType::kU8);  // [3, F, H, W]
  uint8_t* d = t.data<uint8_t>();
  for (int64_t k = 0; k < f; ++k)
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t c = 0; c < 3; ++c) d[(c * f + k) * h * w + p] = frames[static_cast<size_t>(k)]->rgb[p * 3 + c];
  return t;
}

// The peer's rows by workload (bench/ref2va_encoders_peer.py run --out).
std::map<std::string, json> read_peer(const std::string& path) {
  std::map<std::string, json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    json r = json::parse(line, nullptr, false);
    if (r.is_object() && r.contains("workload")) rows[r["workload"].get<std::string>()] = r;  // the last run's
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: ref2va_encoders_bench OUT_DIR --inputs DIR --text-encoder-config PATH --vae-config PATH "
                 "--audio-vae-config PATH [--peer PEER.jsonl] [--backend cuda|cpu] [--reps N] [--seed S] "
                 "[--threads N]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  std::string inputs_dir, te_path, vae_path, audio_path, peer_path, backend_name = "cuda";
  int reps = 10, threads = 0;
  uint64_t seed = 1;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ref2va_encoders_bench: %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--inputs") inputs_dir = v;
    else if (a == "--text-encoder-config") te_path = v;
    else if (a == "--vae-config") vae_path = v;
    else if (a == "--audio-vae-config") audio_path = v;
    else if (a == "--peer") peer_path = v;
    else if (a == "--backend") backend_name = v;
    else if (a == "--reps") reps = std::atoi(v);
    else if (a == "--threads") threads = std::atoi(v);
    else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
    else {
      std::fprintf(stderr, "ref2va_encoders_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (inputs_dir.empty() || te_path.empty() || vae_path.empty() || audio_path.empty() || reps < 1) {
    std::fprintf(stderr,
                 "ref2va_encoders_bench: --inputs, --text-encoder-config, --vae-config and --audio-vae-config are "
                 "required, --reps >= 1\n");
    return 2;
  }
  auto inputs = load_inputs(inputs_dir);
  if (!inputs.ok()) return fail(inputs.status(), "inputs");
  auto backend = make_backend(backend_name, threads);
  if (!backend.ok()) return fail(backend.status(), "backend");
  Backend& be = **backend;
  const Backend::DeviceInfo dev = be.device_info();
  RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);
  const std::map<std::string, json> peer = peer_path.empty() ? std::map<std::string, json>{} : read_peer(peer_path);
  const std::string config = std::string(inputs->manifest.value("tiny", false) ? "tiny" : "canonical") + " inputs (" +
                             inputs_dir + "), " + backend_name + " backend";
  std::vector<json> rows;

  // Times `run` (one warm-up, then --reps runs, each ended by a backend synchronize) and records the row.
  auto measure = [&](const std::string& workload, const std::string& impl, const std::function<Status()>& run,
                     json extra) -> Status {
    auto once = [&]() -> Status {
      VORTEX_RETURN_IF_ERROR(run());
      return be.synchronize();
    };
    VORTEX_RETURN_IF_ERROR(once());
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      const auto t = Clock::now();
      VORTEX_RETURN_IF_ERROR(once());
      ms.push_back(ms_since(t));
      if (r == 0) refresh_clocks(env);
    }
    const Percentiles p = percentiles(ms);
    EvidenceBaseline base;
    if (auto it = peer.find(workload); it != peer.end()) {
      base.what =
          it->second.value("impl", std::string("peer")) + " (" + it->second.value("config", std::string()) + ")";
      base.ms_p50 = it->second.value("ms_p50", 0.0);
    }
    extra["ms"] = ms;
    extra["peak_device_bytes"] = be.memory_peak();
    rows.push_back(evidence_row(env, workload, impl, config, p, base, extra));
    std::printf("%-22s p10 %10.2f p50 %10.2f p90 %10.2f ms\n", workload.c_str(), p.p10, p.p50, p.p90);
    return Status::Ok();
  };

  // ---- vision: the processors, then the tower on the images and on the video's temporal pairs ----
  {
    auto te = ConfigJson::read_file(te_path);
    if (!te.ok()) return fail(te.status(), "text encoder config");
    auto cfg = VisionConfig::from_json(*te);
    if (!cfg.ok()) return fail(cfg.status(), "vision config");
    VisionProcessorConfig image_proc, video_proc;
    for (VisionProcessorConfig* p : {&image_proc, &video_proc}) {
      p->patch = cfg->patch;
      p->temporal_patch = cfg->temporal_patch;
      p->merge = cfg->merge;
    }
    image_proc.min_pixels = inputs->manifest["processor"]["min_pixels"];
    image_proc.max_pixels = inputs->manifest["processor"]["max_pixels"];
    video_proc.min_pixels = inputs->manifest["video_processor"]["min_pixels"];
    video_proc.max_pixels = inputs->manifest["video_processor"]["max_pixels"];
    auto sampled =
        sample_reference_video_frames(static_cast<int64_t>(inputs->video.size()), 24.0, 2.0, cfg->temporal_patch);
    if (!sampled.ok()) return fail(sampled.status(), "2 fps frame choice");
    std::vector<VisionInput> images, pairs;
    auto preprocess = [&]() -> Status {
      images.clear();
      for (const RgbImage& img : inputs->images) {
        VORTEX_ASSIGN_OR_RETURN(VisionInput in, preprocess_image(img, image_proc));
        images.push_back(std::move(in));
      }
      std::vector<RgbImage> frames;
      for (int64_t i : sampled->indices) frames.push_back(inputs->video[static_cast<size_t>(i)]);
      VORTEX_ASSIGN_OR_RETURN(pairs, preprocess_video_pairs(frames, video_proc));
      return Status::Ok();
    };
    if (Status s = measure("vision_preprocess", "vortex preprocess_image + preprocess_video_pairs (host)", preprocess,
                           {{"sampled_frames", sampled->indices.size()}});
        !s.ok())
      return fail(s, "vision preprocess");
    auto t0 = Clock::now();
    auto tower = VisionTower::from_source(*cfg, synthetic_tensor_source(seed, weight_scale), &be);
    if (!tower.ok()) return fail(tower.status(), "vision tower");
    std::printf("vision tower built and uploaded in %.1f s\n", ms_since(t0) / 1e3);
    const std::string impl = "vortex-" + backend_name + " VisionTower::forward_device (bf16 outputs on the device)";
    for (const auto& [name, batch] : {std::pair<const char*, std::vector<VisionInput>*>{"vision_tower_images", &images},
                                      {"vision_tower_video", &pairs}}) {
      int64_t patches = 0;
      for (const VisionInput& in : *batch) patches += in.pixel_values.shape()[0];
      auto run = [&, batch = batch]() -> Status { return tower->forward_device(*batch).status(); };
      if (Status s = measure(name, impl, run, {{"patches", patches}, {"blocks", batch->size()}}); !s.ok())
        return fail(s, name);
    }
  }

  // ---- the video VAE encoder: each image, then the video's first 17n + 5 frames ----
  {
    auto vc = ConfigJson::read_file(vae_path);
    if (!vc.ok()) return fail(vc.status(), "vae config");
    auto cfg = VideoVaeEncoderConfig::from_json(*vc);
    if (!cfg.ok()) return fail(cfg.status(), "vae encoder config");
    auto t0 = Clock::now();
    auto enc = VideoVaeEncoder::from_source(*cfg, synthetic_tensor_source(seed + 1, weight_scale), &be);
    if (!enc.ok()) return fail(enc.status(), "vae encoder");
    std::printf("video VAE encoder built and uploaded in %.1f s\n", ms_since(t0) / 1e3);
    std::vector<Tensor> image_px;
    for (const RgbImage& img : inputs->images) image_px.push_back(planar_u8({&img}));
    const int n = reference_vae_frames(static_cast<int>(inputs->video.size()));
    std::vector<const RgbImage*> clip;
    for (int i = 0; i < n; ++i) clip.push_back(&inputs->video[static_cast<size_t>(i)]);
    const Tensor video_px = planar_u8(clip);  // [3, n, H, W] u8
    Tensor latent;
    auto images = [&]() -> Status {
      for (const Tensor& px : image_px) {
        VORTEX_ASSIGN_OR_RETURN(latent, enc->encode_condition(px, 42));
      }
      return Status::Ok();
    };
    const std::string impl = "vortex-" + backend_name + " VideoVaeEncoder::encode_condition";
    if (Status s = measure("vae_encode_images", impl, images, {}); !s.ok()) return fail(s, "vae images");
    rows.back()["latent_shape"] = shape_to_string(latent.shape());
    auto video = [&]() -> Status {
      VORTEX_ASSIGN_OR_RETURN(latent, enc->encode_condition(video_px, 42));
      return Status::Ok();
    };
    if (Status s = measure("vae_encode_video", impl, video, {{"frames", n}}); !s.ok()) return fail(s, "vae video");
    rows.back()["latent_shape"] = shape_to_string(latent.shape());
  }

  // ---- the audio VAE encoder: the soundtrack and the clip ----
  {
    auto ac = ConfigJson::read_file(audio_path);
    if (!ac.ok()) return fail(ac.status(), "audio vae config");
    auto cfg = AudioVaeEncoderConfig::from_json(*ac);
    if (!cfg.ok()) return fail(cfg.status(), "audio encoder config");
    auto enc = AudioVaeEncoder::from_source(*cfg, synthetic_tensor_source(seed + 2, weight_scale), &be);
    if (!enc.ok()) return fail(enc.status(), "audio encoder");
    std::vector<std::string> shapes;
    auto run = [&]() -> Status {
      shapes.clear();
      for (const Tensor* w : {&inputs->soundtrack, &inputs->audio}) {
        VORTEX_ASSIGN_OR_RETURN(Tensor rows_out, enc->encode_condition(*w));  // [2T, C]
        shapes.push_back(shape_to_string(rows_out.shape()));
      }
      return Status::Ok();
    };
    if (Status s = measure("audio_encode", "vortex-" + backend_name + " AudioVaeEncoder::encode_condition", run, {});
        !s.ok())
      return fail(s, "audio encode");
    rows.back()["rows_shapes"] = shapes;
  }

  // ---- the ratio table (Vortex p50 / the peer's same-run p50) ----
  double ours = 0.0, theirs = 0.0;
  bool complete = !peer.empty();
  std::printf("\n| step | vortex p50 ms | peer p50 ms | ratio |\n| --- | ---: | ---: | ---: |\n");
  for (const json& r : rows) {
    const double p50 = r["ms_p50"].get<double>();
    ours += p50;
    if (r["baseline_ms_p50"].is_number()) {
      const double b = r["baseline_ms_p50"].get<double>();
      theirs += b;
      std::printf("| %s | %.2f | %.2f | %.3f |\n", r["workload"].get<std::string>().c_str(), p50, b, p50 / b);
    } else {
      complete = false;
      std::printf("| %s | %.2f | - | - |\n", r["workload"].get<std::string>().c_str(), p50);
    }
  }
  if (complete) std::printf("| all steps (sum of p50) | %.2f | %.2f | %.3f |\n", ours, theirs, ours / theirs);
  const std::string path = evidence_path(out_dir, env, "ref2va-encoders");
  if (Status s = append_jsonl(path, rows); !s.ok()) return fail(s, "evidence");
  std::printf("evidence %s\n", path.c_str());
  return 0;
}
