// decode_mux_bench: from the last denoising step to a finished video.mp4 against the video decode alone, per H.264
// encoder. Synthetic decoders (VideoVae/AudioVae::synthetic, released shapes with --vae full, the narrow CLI ones with
// --vae tiny) on --backend cuda|cpu and uniform latents of the canonical request (1344x768, 37 latent frames = 124
// video frames, audio [2, 32, 207]). Timed after one warm-up of both decoders: the video decode alone
// (VideoVae::decode), the whole decode alone (audio + video + RGB8 conversion, no encoder), and decode_to_mp4
// (src/engine/stream_mux.h: the audio, then the video with video.mp4 encoded while later clips decode) once per
// --encoders entry (ENCODER or ENCODER@X264_PRESET, e.g. libx264@medium; --preset is the rest's x264 preset, default
// Mp4Options'); an encoder that cannot open (h264_nvenc without NVENC) gives a row with its error, not an exit.
// Appends evidence rows (commit, device, clocks, p10/p50/p90, the video decode alone as the same-run baseline and
// the ratio, peak device memory) to OUT/<date>-<device>-decode-mux.jsonl and prints a table; bench/decode_mux_bench.sh
// wraps it for the H200 run.
//   decode_mux_bench OUT_DIR [--backend cuda|cpu] [--vae full|tiny] [--frames LATENT_T] [--width W] [--height H]
//                    [--reps N] [--encoders auto,libx264,h264_nvenc,libx264@medium] [--preset P] [--seed S]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/synthetic.h"
#include "engine/decode_frames.h"
#include "engine/stream_mux.h"
#include "media/mp4_writer.h"
#include "media/yuv420.h"
#include "profiling/evidence.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"

namespace {

using namespace vortex;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int fail(const Status& s, const char* what) {
  std::fprintf(stderr, "decode_mux_bench: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: decode_mux_bench OUT_DIR [--backend cuda|cpu] [--vae full|tiny] [--frames LATENT_T] "
                 "[--width W] [--height H] [--reps N] [--encoders auto,libx264,h264_nvenc] [--preset P] [--seed S]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  std::string backend_name = "cuda", vae = "full", encoders_arg = "libx264,h264_nvenc,auto",
              preset = Mp4Options{}.preset;
  int64_t latent_t = 37, width = 1344, height = 768;
  int reps = 3;
  uint64_t seed = 7;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "decode_mux_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") backend_name = next();
    else if (a == "--vae") vae = next();
    else if (a == "--frames") latent_t = std::atoll(next().c_str());
    else if (a == "--width") width = std::atoll(next().c_str());
    else if (a == "--height") height = std::atoll(next().c_str());
    else if (a == "--reps") reps = std::atoi(next().c_str());
    else if (a == "--encoders") encoders_arg = next();
    else if (a == "--preset") preset = next();
    else if (a == "--seed") seed = std::strtoull(next().c_str(), nullptr, 10);
    else {
      std::fprintf(stderr, "decode_mux_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const std::vector<std::string> encoders = split_list(encoders_arg);
  if (reps < 1 || latent_t < 1 || (vae != "full" && vae != "tiny") || encoders.empty()) {
    std::fprintf(stderr, "decode_mux_bench: need --reps >= 1, --frames >= 1, --vae full|tiny and an encoder\n");
    return 2;
  }
  // ENCODER[@X264_PRESET] -> (encoder, preset)
  auto parse_encoder = [&](const std::string& e) {
    const size_t at = e.find('@');
    return at == std::string::npos ? std::make_pair(e, preset) : std::make_pair(e.substr(0, at), e.substr(at + 1));
  };
  for (const std::string& e : encoders) {
    if (Status s = check_video_encoder(parse_encoder(e).first); !s.ok()) return fail(s, "--encoders");
    if (Status s = check_x264_preset(parse_encoder(e).second); !s.ok()) return fail(s, "--encoders / --preset");
  }
  // MP4 output needs FFmpeg's libraries: know before building the decoders.
  if (Status s = mp4_support(); !s.ok()) return fail(s, "MP4 output");
  auto backend = make_backend(backend_name, 0);
  if (!backend.ok()) return fail(backend.status(), "backend");
  Backend& be = **backend;
  const Backend::DeviceInfo dev = be.device_info();
  RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);
  const std::string path = evidence_path(out_dir, env, "decode-mux");
  Status record_status = Status::Ok();
  auto record = [&](nlohmann::json row) {
    if (Status s = append_jsonl(path, {std::move(row)}); !s.ok() && record_status.ok()) record_status = s;
  };

  const bool tiny = vae == "tiny";
  auto vvae = VideoVae::synthetic(tiny ? VideoVaeConfig::tiny() : VideoVaeConfig::full(), be, seed);
  if (!vvae.ok()) return fail(vvae.status(), "synthetic video VAE");
  auto avae = AudioVae::synthetic(tiny ? AudioVaeConfig::tiny() : AudioVaeConfig::full(), be, seed + 1);
  if (!avae.ok()) return fail(avae.status(), "synthetic audio VAE");
  const VideoVaeConfig& vc = (*vvae)->config();
  if (width % vc.patch != 0 || height % vc.patch != 0) {
    std::fprintf(stderr, "decode_mux_bench: --width / --height must be multiples of %d\n", vc.patch);
    return 2;
  }
  Tensor vlat = Tensor::empty({vc.latent_channels, latent_t, height / vc.patch, width / vc.patch}, DType::kF32);
  if (Status s = fill_synthetic_host(vlat, seed + 2, 1.0f, 0.0f); !s.ok()) return fail(s, "video latents");
  const int64_t frames = (*vvae)->frames_for(latent_t);
  const int64_t audio_t = (5 * frames + 1) / 3;  // 40 audio latent frames per 24 video frames
  Tensor alat = Tensor::empty({2, (*avae)->config().latent_channels, audio_t}, DType::kF32);
  if (Status s = fill_synthetic_host(alat, seed + 3, 1.0f, 0.0f); !s.ok()) return fail(s, "audio latents");
  const std::string config = "video " + shape_to_string(vlat.shape()) + " audio " + shape_to_string(alat.shape()) +
                             " " + vae + " synthetic decoders on " + backend_name;
  std::printf("decode_mux_bench: %s -> %lld frames %lldx%lld; evidence %s\n", config.c_str(),
              static_cast<long long>(frames), static_cast<long long>(width), static_cast<long long>(height),
              path.c_str());

  // Warm-up (plans, workspaces, pinned buffers), then the decode alone.
  {
    auto a = (*avae)->decode(alat);
    if (!a.ok()) return fail(a.status(), "audio decode (warm-up)");
    auto v = (*vvae)->decode(vlat);
    if (!v.ok()) return fail(v.status(), "video decode (warm-up)");
  }
  std::vector<double> video_ms, alone_ms;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    auto a = (*avae)->decode(alat);
    if (!a.ok()) return fail(a.status(), "audio decode");
    auto t1 = Clock::now();
    auto v = (*vvae)->decode(vlat);
    if (!v.ok()) return fail(v.status(), "video decode");
    video_ms.push_back(ms_since(t1));
    // The mux path's conversion (RGB8 + I420 on all host threads), without an encoder.
    Tensor rgb = Tensor::empty({v->dim(1), v->dim(2), v->dim(3), 3}, DType::kU8);
    Tensor i420 = Tensor::empty({v->dim(1), i420_frame_bytes(v->dim(3), v->dim(2))}, DType::kU8);
    if (Status s = video_frames_to_rgb8_i420(*v, 0, v->dim(1), rgb, i420,
                                             static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
        !s.ok())
      return fail(s, "RGB8 + I420 conversion");
    alone_ms.push_back(ms_since(t0));
    if (r == 0) refresh_clocks(env);
    std::printf("[decode alone %d/%d] video %.1f ms, audio + video + RGB8/I420 %.1f ms\n", r + 1, reps, video_ms.back(),
                alone_ms.back());
  }
  const Percentiles pv = percentiles(video_ms), pall = percentiles(alone_ms);
  const nlohmann::json common = {{"video_latents", shape_to_string(vlat.shape())},
                                 {"audio_latents", shape_to_string(alat.shape())},
                                 {"frames", frames},
                                 {"width", width},
                                 {"height", height},
                                 {"decoders", vae + " (synthetic weights)"},
                                 {"backend", backend_name},
                                 {"reps", reps}};
  auto with = [&](const nlohmann::json& extra) {
    nlohmann::json j = common;
    if (extra.is_object()) j.update(extra);
    j["peak_device_bytes"] = be.memory_peak();
    return j;
  };
  record(evidence_row(env, "video_decode_alone", "vortex-" + backend_name, config, pv, {}, with({})));
  record(evidence_row(env, "decode_alone", "vortex-" + backend_name, config, pall, {"video decode alone", pv.p50, 0.0},
                      with({{"what", "audio decode + video decode + RGB8 and I420 conversion, no encoder"}})));
  std::vector<std::pair<std::string, std::string>> table;  // what, cells
  char cell[256];
  std::snprintf(cell, sizeof(cell), "%.1f | %.1f | %.1f | 1.00 | -", pv.p10, pv.p50, pv.p90);
  table.push_back({"video decode alone", cell});
  std::snprintf(cell, sizeof(cell), "%.1f | %.1f | %.1f | %.2f | -", pall.p10, pall.p50, pall.p90, pall.p50 / pv.p50);
  table.push_back({"audio + video decode + RGB8/I420, no encoder", cell});

  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("decode_mux_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  bool check_failed = false;
  for (const std::string& enc_arg : encoders) {
    const auto [enc, enc_preset] = parse_encoder(enc_arg);
    Mp4Options o;
    o.video_encoder = enc;
    o.preset = enc_preset;
    std::vector<double> ms, tail_ms, video_in_mux_ms;
    std::string used, settings, fallback, error, check;
    std::vector<double> open_ms;
    int64_t bytes = 0;
    for (int r = 0; r < reps && error.empty(); ++r) {
      const std::string mp4 = (tmp / (enc + "_" + enc_preset + ".mp4")).string();
      auto t0 = Clock::now();
      auto res = decode_to_mp4(vlat, alat, **vvae, **avae, mp4, o);
      if (!res.ok()) {  // h264_nvenc without NVENC: FFmpeg's reason becomes the row
        error = res.status().to_string();
        break;
      }
      ms.push_back(ms_since(t0));
      tail_ms.push_back(res->mux_tail_s * 1e3);
      video_in_mux_ms.push_back(res->video_decode_s * 1e3);
      used = res->encoder.encoder;
      settings = res->encoder.settings;
      fallback = res->encoder.fallback;
      std::error_code ec;
      bytes = static_cast<int64_t>(std::filesystem::file_size(mp4, ec));
      // The file re-opened with libavformat: every frame, the audio stream.
      auto probed = probe_media(mp4);
      const bool good = probed.ok() && probed->video_frames == frames && probed->audio_codec == "aac" &&
                        probed->width == width && probed->height == height;
      check = probed.ok() ? "probe: " + std::to_string(probed->video_frames) + " of " + std::to_string(frames) +
                                " video frames, " + probed->audio_codec + " audio, " + std::to_string(probed->width) +
                                "x" + std::to_string(probed->height) + (good ? ": ok" : ": FAILED")
                          : "probe failed: " + probed.status().to_string();
      if (!good) check_failed = true;
      open_ms.push_back(res->mp4_open_s * 1e3);
      std::filesystem::remove(mp4, ec);
      std::printf(
          "[decode_to_mp4 --video-encoder %s -> %s, %s] %.1f ms (video decode with the encode alongside %.1f ms, "
          "mux tail %.1f ms)\n",
          enc.c_str(), used.c_str(), settings.c_str(), ms.back(), video_in_mux_ms.back(), tail_ms.back());
    }
    if (!error.empty()) {
      std::printf("[decode_to_mp4 --video-encoder %s] failed: %s\n", enc.c_str(), error.c_str());
      record(evidence_row(env, "decode_to_mp4", "vortex-" + backend_name + "+" + enc, config, Percentiles{}, {},
                          with({{"encoder_requested", enc}, {"status", "failed"}, {"error", error}})));
      table.push_back({"decode + mux to video.mp4, --video-encoder " + enc, "failed | | | | " + error});
      continue;
    }
    const Percentiles pm = percentiles(ms), pt = percentiles(tail_ms), pvm = percentiles(video_in_mux_ms);
    nlohmann::json extra = {{"encoder_requested", enc},
                            {"encoder", used},
                            {"encoder_settings", settings},
                            {"x264_preset", enc_preset},
                            {"status", "ok"},
                            {"video_decode_in_mux_ms_p50", pvm.p50},
                            {"mux_tail_ms_p50", pt.p50},
                            {"mp4_open_ms_p50", percentiles(open_ms).p50},
                            {"check", check},
                            {"target_over_video_decode", 1.2},
                            {"mp4_bytes", bytes},
                            {"note", "synthetic-weight output (noise): a worst case for the encoders"}};
    if (!fallback.empty()) extra["encoder_fallback"] = fallback;
    record(evidence_row(env, "decode_to_mp4", "vortex-" + backend_name + "+" + enc + "->" + used, config, pm,
                        {"video decode alone", pv.p50, 0.0}, with(extra)));
    std::snprintf(cell, sizeof(cell), "%.1f | %.1f | %.1f | %.2f | %.1f", pm.p10, pm.p50, pm.p90, pm.p50 / pv.p50,
                  pt.p50);
    table.push_back({"decode + mux to video.mp4, --video-encoder " + enc + " -> " + used +
                         (used == "libx264" ? " --x264-preset " + enc_preset : std::string()) +
                         (fallback.empty() ? "" : " (fallback: " + fallback + ")"),
                     cell});
  }
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (Status s = record_status; !s.ok()) return fail(s, "evidence");
  if (check_failed)
    std::printf("CHECK FAILED: an MP4 did not probe as %lld frames + AAC\n", static_cast<long long>(frames));
  std::printf(
      "\n| what | p10 ms | p50 ms | p90 ms | / video decode alone | mux tail p50 ms |\n|---|---|---|---|---|---|\n");
  for (const auto& [what, cells] : table) std::printf("| %s | %s |\n", what.c_str(), cells.c_str());
  std::printf("target: decode + mux <= 1.2x the video decode alone; peak device memory %.2f GiB; evidence %s\n",
              static_cast<double>(be.memory_peak()) / (1 << 30), path.c_str());
  return check_failed ? 1 : 0;
}
