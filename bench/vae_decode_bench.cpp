// vae_decode_bench: the canonical request's decode on the CUDA backend with deterministic synthetic VAE weights of
// the released shapes (VideoVae/AudioVae::synthetic): video latents [24, 37, 48, 84] (1344x768, released tiling on)
// and audio latents [2, 32, 207], timed end to end (host latents in, host FP32 pixels / samples out) over
// --reps runs after one warm-up, plus the CPU side of the output: RGB8 conversion and the MP4 encode + mux
// (write_mp4, H.264 CRF 18 + AAC) of the decoded clip. Appends evidence rows (commit, GPU, SM clock, p10/p50/p90,
// peak device memory) to OUT/<date>-<gpu>-vae-decode.jsonl and prints a table. The diffusers baseline of the same
// shape is bench/vae_decode_diffusers.py, which reads these rows for the ratio.
//   vae_decode_bench OUT_DIR [--reps N] [--audio-reps N] [--frames T] [--no-mux] [--seed S]
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/synthetic.h"
#include "media/mp4_writer.h"
#include "model/backend.h"
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: vae_decode_bench OUT_DIR [--reps N] [--audio-reps N] [--frames T] [--no-mux] [--seed S]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  int reps = 5, audio_reps = 20;
  int64_t latent_t = 37;
  uint64_t seed = 1;
  bool mux = true;
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
    else if (a == "--frames") latent_t = std::atoll(next());
    else if (a == "--seed") seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--no-mux") mux = false;
    else {
      std::fprintf(stderr, "vae_decode_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (reps < 1 || audio_reps < 1) {
    std::fprintf(stderr, "vae_decode_bench: --reps and --audio-reps must be >= 1\n");
    return 2;
  }
  auto backend = make_backend("cuda", 0);
  if (!backend.ok()) return fail(backend.status(), "CUDA backend");
  Backend& be = **backend;
  const Backend::DeviceInfo dev = be.device_info();
  RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);

  // Synthetic released-shape decoders (weights built on the host, uploaded once).
  auto t_load = Clock::now();
  auto vvae = VideoVae::synthetic(VideoVaeConfig::full(), be, seed);
  if (!vvae.ok()) return fail(vvae.status(), "synthetic video VAE");
  auto avae = AudioVae::synthetic(AudioVaeConfig::full(), be, seed + 1);
  if (!avae.ok()) return fail(avae.status(), "synthetic audio VAE");
  const double load_s = seconds_since(t_load);
  std::printf("synthetic VAEs: video %.3fB, audio %.1fM parameters, built and uploaded in %.1f s\n",
              static_cast<double>((*vvae)->parameter_count()) / 1e9,
              static_cast<double>((*avae)->parameter_count()) / 1e6, load_s);

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

  // Warm-up (cuBLASLt / cuDNN plans, allocator), then the timed runs.
  Tensor video, audio;
  {
    auto t0 = Clock::now();
    auto v = (*vvae)->decode(vlat);
    if (!v.ok()) return fail(v.status(), "video decode (warm-up)");
    std::printf("video warm-up decode %.3f s\n", seconds_since(t0));
    auto a = (*avae)->decode(alat);
    if (!a.ok()) return fail(a.status(), "audio decode (warm-up)");
  }
  std::vector<double> video_ms, audio_ms;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    auto v = (*vvae)->decode(vlat);
    if (!v.ok()) return fail(v.status(), "video decode");
    video_ms.push_back(seconds_since(t0) * 1e3);
    std::printf("video decode %d/%d: %.1f ms\n", r + 1, reps, video_ms.back());
    if (r == 0) refresh_clocks(env);
    video = *v;
  }
  const size_t peak_video = be.memory_peak();
  for (int r = 0; r < audio_reps; ++r) {
    auto t0 = Clock::now();
    auto a = (*avae)->decode(alat);
    if (!a.ok()) return fail(a.status(), "audio decode");
    audio_ms.push_back(seconds_since(t0) * 1e3);
    audio = *a;
  }
  const RunEnvironment env_decode = env;
  std::vector<nlohmann::json> rows;
  const std::string shape = "video " + shape_to_string(vlat.shape()) + ", audio " + shape_to_string(alat.shape());
  const Percentiles pv = percentiles(video_ms), pa = percentiles(audio_ms);
  rows.push_back(evidence_row(env_decode, "vae_decode_video", "vortex-cuda", shape_to_string(vlat.shape()), pv, {},
                              {{"latents", shape_to_string(vlat.shape())},
                               {"frames", frames},
                               {"tile_forwards", tiles},
                               {"tiling", vc.tiling},
                               {"weights", "synthetic (released shapes)"},
                               {"peak_device_bytes", peak_video},
                               {"target_ms", 2000.0},
                               {"reps", reps}}));
  rows.push_back(evidence_row(env_decode, "vae_decode_audio", "vortex-cuda", shape_to_string(alat.shape()), pa, {},
                              {{"latents", shape_to_string(alat.shape())},
                               {"samples", audio.dim(1)},
                               {"weights", "synthetic (released shapes)"},
                               {"peak_device_bytes", be.memory_peak()},
                               {"target_ms", 200.0},
                               {"reps", audio_reps}}));
  double rgb_ms = 0.0, mux_ms = 0.0;
  if (mux) {
    auto t0 = Clock::now();
    auto rgb = video_to_rgb8(video);
    if (!rgb.ok()) return fail(rgb.status(), "video_to_rgb8");
    rgb_ms = seconds_since(t0) * 1e3;
    // A scratch file this program creates and removes (the clip is noise; only the time is kept).
    const std::filesystem::path tmp =
        std::filesystem::temp_directory_path() / ("vae_decode_bench_" + std::to_string(::getpid()) + ".mp4");
    t0 = Clock::now();
    Status s = write_mp4(tmp.string(), *rgb, audio, (*avae)->config().sampling_rate);
    mux_ms = seconds_since(t0) * 1e3;
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(tmp, ec);
    std::filesystem::remove(tmp, ec);
    if (!s.ok()) return fail(s, "write_mp4");
    Percentiles pr = percentiles({rgb_ms}), pm = percentiles({mux_ms});
    rows.push_back(evidence_row(env, "video_to_rgb8", "vortex-cpu", std::to_string(frames) + " frames", pr, {},
                                {{"frames", frames}}));
    rows.push_back(evidence_row(env, "mp4_mux", "vortex-cpu",
                                "libx264 medium crf 18 + aac, " + std::to_string(frames) + " frames", pm, {},
                                {{"frames", frames},
                                 {"mp4_bytes", static_cast<int64_t>(ec ? 0 : bytes)},
                                 {"target_ms", 3000.0},
                                 {"note", "synthetic-weight output (noise): a worst case for x264"}}));
  }
  const std::string path = evidence_path(out_dir, env, "vae-decode");
  if (Status s = append_jsonl(path, rows); !s.ok()) return fail(s, "evidence");
  std::printf("\n| what | p10 ms | p50 ms | p90 ms | target ms |\n|---|---|---|---|---|\n");
  std::printf("| video decode (%lld tiles) | %.1f | %.1f | %.1f | 2000 |\n", static_cast<long long>(tiles), pv.p10,
              pv.p50, pv.p90);
  std::printf("| audio decode | %.1f | %.1f | %.1f | 200 |\n", pa.p10, pa.p50, pa.p90);
  if (mux) {
    std::printf("| RGB8 conversion (CPU) | %.1f | | | |\n", rgb_ms);
    std::printf("| MP4 encode + mux (CPU) | %.1f | | | 3000 |\n", mux_ms);
  }
  std::printf("peak device memory %.2f GiB (weights included); SM clock %d MHz; evidence %s\n",
              static_cast<double>(peak_video) / (1 << 30), env.clock_sm_mhz, path.c_str());
  return 0;
}
