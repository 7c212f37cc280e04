// vae_decode_bench: the canonical request's decode on the CUDA backend with deterministic synthetic VAE weights of
// the released shapes (VideoVae/AudioVae::synthetic): video latents [24, 37, 48, 84] (1344x768, released tiling on)
// and audio latents [2, 32, 207], timed end to end (host latents in, host FP32 pixels / samples out) over --reps
// runs after one warm-up. Video programs: the default (a clip's tiles batched into one forward, batched attention
// through the policy's kernel: the owned sm_90a BF16 kernel at head_dim 64 on the H200, fused LayerScale residual +
// RMSNorm), cuDNN SDPA attention (--cudnn-attention, or with the variants; its frames' PSNR against the default's),
// the unfused norms, batches of half a clip, and with --all-variants one attention call per tile and one tile per
// forward (the unbatched program). --breakdown adds one
// decode with the forward's CUDA-event regions: device time per op family against the wall time; --fp8 the opt-in
// FP8 linears (VideoVaeLinears::kFp8Blockwise) with their PSNR against the default program's frames.
// Then the last-step-to-file path, decode_to_mp4 (src/engine/stream_mux.h: audio decode, video decode with the
// MP4 encoded while later clips decode), per H.264 encoder (auto = h264_nvenc where the driver offers it, else
// libx264; libx264 at presets medium, the default, and veryfast), against the video decode alone. Appends evidence rows
// (commit, GPU, SM clock, p10/p50/p90, peak device memory) to OUT/<date>-<gpu>-vae-decode.jsonl and prints a table. The
// diffusers baseline of the same shape is bench/vae_decode_diffusers.py, which reads the default program's rows (impl
// vortex-cuda) for the ratio.
//   vae_decode_bench OUT_DIR [--reps N] [--audio-reps N] [--mux-reps N] [--frames T] [--no-mux] [--no-mux-auto]
//                    [--no-variants] [--all-variants] [--cudnn-attention] [--breakdown] [--fp8] [--seed S]
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/synthetic.h"
#include "engine/stream_mux.h"
#include "media/mp4_writer.h"
#include "profiling/evidence.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"

namespace {

using namespace vortex;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int fail(const Status& s, const char* what) {
  std::fprintf(stderr, "vae_decode_bench: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

// PSNR in dB of two decoded videos [3, F, H, W] over the shown pixels (ImageNet de-normalized, clamped to [0, 1]).
double shown_psnr(const Tensor& a, const Tensor& b) {
  constexpr float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};
  const int64_t plane = a.numel() / 3;
  double se = 0.0;
  for (int ch = 0; ch < 3; ++ch)
    for (int64_t i = 0; i < plane; ++i) {
      const double x = std::clamp(a.data<float>()[ch * plane + i] * kStd[ch] + kMean[ch], 0.0f, 1.0f);
      const double y = std::clamp(b.data<float>()[ch * plane + i] * kStd[ch] + kMean[ch], 0.0f, 1.0f);
      se += (x - y) * (x - y);
    }
  return 10.0 * std::log10(1.0 / std::max(se / static_cast<double>(a.numel()), 1e-20));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: vae_decode_bench OUT_DIR [--reps N] [--audio-reps N] [--mux-reps N] [--frames T] [--no-mux] "
                 "[--no-mux-auto] [--no-variants] [--all-variants] [--cudnn-attention] [--breakdown] [--fp8] "
                 "[--seed S]\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF,
               0);  // each line reaches a log file at once, also when a time limit ends the run
  const std::string out_dir = argv[1];
  int reps = 5, audio_reps = 20, mux_reps = 2;
  int64_t latent_t = 37;
  uint64_t seed = 1;
  bool mux = true, mux_auto = true, variants = true, all_variants = false, breakdown = false, fp8 = false;
  bool cudnn_attention = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "vae_decode_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--reps") reps = std::atoi(next());
    else if (a == "--audio-reps") audio_reps = std::atoi(next());
    else if (a == "--mux-reps") mux_reps = std::atoi(next());
    else if (a == "--frames") latent_t = std::atoll(next());
    else if (a == "--seed") seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--no-mux") mux = false;
    else if (a == "--no-mux-auto") mux_auto = false;
    else if (a == "--no-variants") variants = false;
    else if (a == "--all-variants") all_variants = true;
    else if (a == "--breakdown") breakdown = true;
    else if (a == "--cudnn-attention") cudnn_attention = true;
    else if (a == "--fp8") fp8 = true;
    else {
      std::fprintf(stderr, "vae_decode_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (reps < 1 || audio_reps < 1 || mux_reps < 1) {
    std::fprintf(stderr, "vae_decode_bench: --reps, --audio-reps and --mux-reps must be >= 1\n");
    return 2;
  }
  auto backend = make_backend("cuda", 0);
  if (!backend.ok()) return fail(backend.status(), "CUDA backend");
  Backend& be = **backend;
  const Backend::DeviceInfo dev = be.device_info();
  RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);
  // Each evidence row is appended as soon as it is measured, so a run cut short keeps the rows it finished.
  const std::string path = evidence_path(out_dir, env, "vae-decode");
  Status record_status = Status::Ok();
  auto record = [&](nlohmann::json row) {
    if (Status s = append_jsonl(path, {std::move(row)}); !s.ok() && record_status.ok()) record_status = s;
  };

  // Synthetic released-shape decoders (weights built on the host, uploaded once).
  auto t_load = Clock::now();
  auto vvae = VideoVae::synthetic(VideoVaeConfig::full(), be, seed);
  if (!vvae.ok()) return fail(vvae.status(), "synthetic video VAE");
  auto avae = AudioVae::synthetic(AudioVaeConfig::full(), be, seed + 1);
  if (!avae.ok()) return fail(avae.status(), "synthetic audio VAE");
  const double load_s = seconds_since(t_load);
  const size_t weights_bytes = be.memory_in_use();
  std::printf(
      "synthetic VAEs: video %.3fB, audio %.1fM parameters, built and uploaded in %.1f s (%.2f GiB on device)\n",
      static_cast<double>((*vvae)->parameter_count()) / 1e9, static_cast<double>((*avae)->parameter_count()) / 1e6,
      load_s, static_cast<double>(weights_bytes) / (1 << 30));

  // The canonical latents: [24, T, 48, 84] (1344x768) and [2, 32, round(frames / 24 * 40)], uniform in [-1, 1).
  const VideoVaeConfig& vc = (*vvae)->config();
  Tensor vlat = Tensor::empty({vc.latent_channels, latent_t, 768 / vc.patch, 1344 / vc.patch}, DType::kF32);
  if (Status s = fill_synthetic_host(vlat, seed + 2, 1.0f, 0.0f); !s.ok()) return fail(s, "video latents");
  const int64_t frames = (*vvae)->frames_for(latent_t);
  const int64_t audio_t = (5 * frames + 1) / 3;
  Tensor alat = Tensor::empty({2, (*avae)->config().latent_channels, audio_t}, DType::kF32);
  if (Status s = fill_synthetic_host(alat, seed + 3, 1.0f, 0.0f); !s.ok()) return fail(s, "audio latents");
  const int64_t tiles = (*vvae)->tile_forwards(vlat.shape());
  std::printf("video latents %s -> %lld frames, %lld tile forwards; audio latents %s\n", vlat.describe().c_str(),
              static_cast<long long>(frames), static_cast<long long>(tiles), alat.describe().c_str());

  struct Program {
    const char* impl;
    const char* what;
    VideoVae::Batching batching;
  };
  std::vector<Program> programs = {
      {"vortex-cuda", "batched tiles, batched attention (the policy's kernel)", VideoVae::Batching{}}};
  if (variants || cudnn_attention) {
    VideoVae::Batching cudnn;
    cudnn.policy_attention = false;
    programs.push_back({"vortex-cuda-cudnn-attention", "batched tiles, batched cuDNN SDPA attention", cudnn});
  }
  if (variants) {
    VideoVae::Batching unfused, half_clip, looped, per_tile;
    unfused.fused_residual_norm = false;
    half_clip.max_batch_tiles = 14;
    looped.batched_attention = false;
    per_tile.max_batch_tiles = 1;
    programs.push_back(
        {"vortex-cuda-unfused-norms", "batched tiles, LayerScale residual and RMSNorm as two ops", unfused});
    if (all_variants) {
      programs.push_back({"vortex-cuda-half-clip-batches", "batches of 14 tiles (half a clip)", half_clip});
      programs.push_back(
          {"vortex-cuda-attention-per-tile", "batched tiles, one cuDNN attention call per tile", looped});
      programs.push_back({"vortex-cuda-per-tile", "one tile per forward (unbatched)", per_tile});
    }
  }
  std::vector<std::pair<std::string, Percentiles>> table;
  Tensor video, audio;
  double video_p50 = 0.0;
  size_t peak_video = 0;
  for (const Program& prog : programs) {
    if (Status s = (*vvae)->set_batching(prog.batching); !s.ok()) return fail(s, "batching");
    auto t0 = Clock::now();
    auto v = (*vvae)->decode(vlat);  // warm-up: cuBLASLt / cuDNN plans, workspace, pinned buffers
    if (!v.ok()) return fail(v.status(), "video decode (warm-up)");
    std::printf("[%s] warm-up decode %.3f s (workspace %.2f GiB)\n", prog.impl, seconds_since(t0),
                static_cast<double>((*vvae)->workspace_bytes()) / (1 << 30));
    std::vector<double> ms;
    Tensor frames_out;  // this program's frames (the last rep)
    for (int r = 0; r < reps; ++r) {
      t0 = Clock::now();
      auto vr = (*vvae)->decode(vlat);
      if (!vr.ok()) return fail(vr.status(), "video decode");
      ms.push_back(seconds_since(t0) * 1e3);
      std::printf("[%s] video decode %d/%d: %.1f ms\n", prog.impl, r + 1, reps, ms.back());
      if (r == 0) refresh_clocks(env);
      frames_out = std::move(*vr);
    }
    if (&prog == &programs.front()) video = frames_out;
    const size_t peak = be.memory_peak();
    if (&prog == &programs.front()) peak_video = peak;
    nlohmann::json psnr_vs_default = nullptr;  // null for the default program itself
    if (&prog != &programs.front()) {
      const double psnr = shown_psnr(frames_out, video);
      psnr_vs_default = psnr;
      std::printf("[%s] PSNR %.2f dB against the default program's frames\n", prog.impl, psnr);
    }
    const Percentiles p = percentiles(ms);
    if (&prog == &programs.front()) video_p50 = p.p50;
    record(evidence_row(env, "vae_decode_video", prog.impl, shape_to_string(vlat.shape()), p, {},
                        {{"latents", shape_to_string(vlat.shape())},
                         {"program", prog.what},
                         {"frames", frames},
                         {"tile_forwards", tiles},
                         {"tiling", vc.tiling},
                         {"weights", "synthetic (released shapes)"},
                         {"weights_device_bytes", weights_bytes},
                         {"peak_device_bytes", peak},
                         {"peak_note",
                          "backend peak since start (weights included; later programs include "
                          "earlier workspaces)"},
                         {"workspace_bytes", (*vvae)->workspace_bytes()},
                         {"psnr_db_vs_default_program", psnr_vs_default},
                         {"target_ms", 3000.0},
                         {"reps", reps}}));
    table.push_back({std::string("video decode: ") + prog.what, p});
  }
  if (Status s = (*vvae)->set_batching(VideoVae::Batching{}); !s.ok()) return fail(s, "batching");
  if (breakdown) {
    // One default decode with the forward's level-1 regions (CUDA events on the compute stream): device time per
    // op family, summed over every batch and block; the rest of the wall time is host work the device waited for.
    be.set_region_level(1);
    auto t0 = Clock::now();
    auto vr = (*vvae)->decode(vlat);
    const double wall_ms = seconds_since(t0) * 1e3;
    be.set_region_level(-1);
    if (!vr.ok()) return fail(vr.status(), "video decode (breakdown)");
    auto regions = be.take_regions();
    if (!regions.ok()) return fail(regions.status(), "regions");
    std::vector<std::pair<std::string, double>> sums;
    double device_ms = 0.0;
    for (const auto& [name, ms] : *regions) {
      auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& e) { return e.first == name; });
      if (it == sums.end()) sums.push_back({name, ms});
      else it->second += ms;
      device_ms += ms;
    }
    nlohmann::json parts = nlohmann::json::object();
    std::printf("\n| video decode op family (one decode, device time) | ms | share of wall |\n|---|---|---|\n");
    for (const auto& [name, ms] : sums) {
      parts[name] = ms;
      std::printf("| %s | %.1f | %.1f%% |\n", name.c_str(), ms, 100.0 * ms / wall_ms);
    }
    std::printf("| sum of regions | %.1f | %.1f%% |\n| wall (regions on) | %.1f | |\n", device_ms,
                100.0 * device_ms / wall_ms, wall_ms);
    Percentiles one;
    one.p10 = one.p50 = one.p90 = wall_ms;
    record(evidence_row(env, "vae_decode_video_breakdown", "vortex-cuda", shape_to_string(vlat.shape()), one, {},
                        {{"latents", shape_to_string(vlat.shape())},
                         {"device_ms_by_op", parts},
                         {"device_ms_sum", device_ms},
                         {"wall_ms", wall_ms},
                         {"note",
                          "one decode with CUDA-event regions around each op family of the forward; the "
                          "region events add a little time; wall - sum = time the compute stream was idle "
                          "(host tokens, the last clip's frames copied into the output, gaps)"}}));
  }
  {
    auto a = (*avae)->decode(alat);  // warm-up
    if (!a.ok()) return fail(a.status(), "audio decode (warm-up)");
  }
  std::vector<double> audio_ms;
  for (int r = 0; r < audio_reps; ++r) {
    auto t0 = Clock::now();
    auto a = (*avae)->decode(alat);
    if (!a.ok()) return fail(a.status(), "audio decode");
    audio_ms.push_back(seconds_since(t0) * 1e3);
    audio = *a;
  }
  const Percentiles pa = percentiles(audio_ms);
  record(evidence_row(env, "vae_decode_audio", "vortex-cuda", shape_to_string(alat.shape()), pa, {},
                      {{"latents", shape_to_string(alat.shape())},
                       {"program", "both stereo channels in one pass, FP32-chain convolutions"},
                       {"samples", audio.dim(1)},
                       {"weights", "synthetic (released shapes)"},
                       {"peak_device_bytes", be.memory_peak()},
                       {"target_ms", 30.0},
                       {"reps", audio_reps}}));
  table.push_back({"audio decode (stereo batched)", pa});
  if (mux) {
    if (Status ms = mp4_support(); !ms.ok()) {  // no FFmpeg here: the decode rows stand, the MP4 rows are skipped
      std::printf("MP4 rows skipped: %s\n", ms.to_string().c_str());
      mux = false;
    }
  }
  if (mux) {
    // Last denoising step -> finished video.mp4: decode_to_mp4 per encoder, vs the video decode alone.
    const std::filesystem::path tmp =
        std::filesystem::temp_directory_path() / ("vae_decode_bench_" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp);
    struct MuxCase {
      const char* encoder;
      const char* preset;  // libx264 preset
    };
    const std::vector<MuxCase> mux_cases = {{"auto", "medium"}, {"libx264", "medium"}, {"libx264", "veryfast"}};
    for (const MuxCase& mc : mux_cases) {
      const std::string enc = mc.encoder;
      if (!mux_auto && enc == "auto") continue;
      Mp4Options o;
      o.video_encoder = enc;
      o.preset = mc.preset;
      std::vector<double> ms, tail_ms;
      std::string used, settings, fallback;
      int64_t bytes = 0;
      for (int r = 0; r < mux_reps; ++r) {
        const std::string path = (tmp / (enc + "-" + mc.preset + ".mp4")).string();
        auto t0 = Clock::now();
        auto res = decode_to_mp4(vlat, alat, **vvae, **avae, path, o);
        if (!res.ok()) return fail(res.status(), "decode_to_mp4");
        ms.push_back(seconds_since(t0) * 1e3);
        tail_ms.push_back(res->mux_tail_s * 1e3);
        used = res->encoder.encoder;
        settings = res->encoder.settings;
        fallback = res->encoder.fallback;
        std::error_code ec;
        bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
        std::filesystem::remove(path, ec);
        std::printf("[decode_to_mp4 %s %s -> %s] %.1f ms (mux tail after the video decode %.1f ms)\n", enc.c_str(),
                    mc.preset, used.c_str(), ms.back(), tail_ms.back());
      }
      const Percentiles pm = percentiles(ms), pt = percentiles(tail_ms);
      nlohmann::json extra = {{"latents", shape_to_string(vlat.shape())},
                              {"encoder_requested", enc},
                              {"encoder", used},
                              {"encoder_settings", settings},
                              {"mux_tail_ms_p50", pt.p50},
                              {"video_decode_ms_p50", video_p50},
                              {"over_video_decode", pm.p50 / video_p50},
                              {"target_over_video_decode", 1.2},
                              {"mp4_bytes", bytes},
                              {"frames", frames},
                              {"reps", mux_reps},
                              {"note", "synthetic-weight output (noise): a worst case for the encoders"}};
      if (!fallback.empty()) extra["encoder_fallback"] = fallback;
      record(evidence_row(env, "decode_to_mp4", "vortex-cuda+" + enc + "-" + mc.preset + "->" + used,
                          shape_to_string(vlat.shape()), pm, {}, extra));
      table.push_back({"decode + mux to video.mp4 (" + enc + " " + mc.preset + " -> " + used + ")", pm});
    }
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
  }
  if (fp8) {
    // The opt-in FP8 linears (E2) on the same synthetic weights: time, and PSNR against the default program's frames.
    auto f8 = VideoVae::synthetic(VideoVaeConfig::full(), be, seed, VideoVaeLinears::kFp8Blockwise);
    if (!f8.ok()) return fail(f8.status(), "synthetic video VAE (fp8)");
    auto t0 = Clock::now();
    auto v = (*f8)->decode(vlat);
    if (!v.ok()) return fail(v.status(), "video decode fp8 (warm-up)");
    std::printf("[vortex-cuda-fp8] warm-up decode %.3f s\n", seconds_since(t0));
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      t0 = Clock::now();
      auto vr = (*f8)->decode(vlat);
      if (!vr.ok()) return fail(vr.status(), "video decode fp8");
      ms.push_back(seconds_since(t0) * 1e3);
      std::printf("[vortex-cuda-fp8] video decode %d/%d: %.1f ms\n", r + 1, reps, ms.back());
      v = std::move(vr);
    }
    const double psnr = shown_psnr(*v, video);
    std::printf("[vortex-cuda-fp8] PSNR %.2f dB against the BF16 program's frames\n", psnr);
    const Percentiles p = percentiles(ms);
    record(evidence_row(env, "vae_decode_video", "vortex-cuda-fp8", shape_to_string(vlat.shape()), p, {},
                        {{"latents", shape_to_string(vlat.shape())},
                         {"program",
                          "fp8-blockwise linears (E2 opt-in): FP8 E4M3, 128x128 weight / 1x128 activation "
                          "block scales; stem, head, attention as the default"},
                         {"psnr_db_vs_bf16_program", psnr},
                         {"frames", frames},
                         {"tile_forwards", tiles},
                         {"weights", "synthetic (released shapes)"},
                         {"peak_device_bytes", be.memory_peak()},
                         {"target_ms", 2000.0},
                         {"reps", reps}}));
    table.push_back({"video decode: fp8-blockwise linears (opt-in, E2)", p});
  }
  if (Status s = record_status; !s.ok()) return fail(s, "evidence");
  std::printf("\n| what | p10 ms | p50 ms | p90 ms |\n|---|---|---|---|\n");
  for (const auto& [what, p] : table) std::printf("| %s | %.1f | %.1f | %.1f |\n", what.c_str(), p.p10, p.p50, p.p90);
  std::printf(
      "peak device memory in the default video decode %.2f GiB (weights %.2f GiB included); SM clock %d MHz; "
      "evidence %s\n",
      static_cast<double>(peak_video) / (1 << 30), static_cast<double>(weights_bytes) / (1 << 30), env.clock_sm_mhz,
      path.c_str());
  return 0;
}
