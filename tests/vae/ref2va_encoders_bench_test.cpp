// bench/ref2va_encoders_bench.cpp on the cpu backend with the tiny configs the parity tests ship (the Qwen3-VL vision
// config of tests/vision/fixtures/model, tests/vae/fixtures' video and audio encoders) and tiny raw references in
// the layout of `bench/ref2va_encoders_peer.py make-inputs --tiny` (written here, random bytes): it runs, appends one
// evidence row per step with its timings, and takes a peer's JSONL rows as the same-run baselines (ratio =
// p50 / the peer's p50). Bounded: about half a minute on two busy cores.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

void write_random(const fs::path& p, size_t bytes, uint32_t seed, bool floats) {
  std::mt19937 rng(seed);
  std::ofstream out(p, std::ios::binary);
  if (floats) {
    std::normal_distribution<float> n(0.0f, 0.1f);
    for (size_t i = 0; i < bytes / sizeof(float); ++i) {
      const float v = n(rng);
      out.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
  } else {
    for (size_t i = 0; i < bytes; ++i) out.put(static_cast<char>(rng() & 0xff));
  }
}

TEST(Ref2vaEncodersBench, RunsOnTheCpuBackendWithTinyConfigsAndTakesPeerBaselines) {
  const fs::path dir = fs::temp_directory_path() / ("vortex_ref2va_bench_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path in = dir / "inputs";
  fs::create_directories(in);
  const int ih = 64, iw = 96, frames = 26, vh = 32, vw = 64, samples = 3200;
  json manifest = {{"fps", 24},
                   {"sample_rate", 32000},
                   {"images", json::array()},
                   {"video", {{"file", "video.rgb"}, {"frames", frames}, {"height", vh}, {"width", vw}}},
                   {"soundtrack", {{"file", "soundtrack.f32"}, {"channels", 2}, {"samples", samples}}},
                   {"audio", {{"file", "audio.f32"}, {"channels", 2}, {"samples", samples}}},
                   {"processor", {{"min_pixels", 1024}, {"max_pixels", 16777216}}},
                   {"video_processor", {{"min_pixels", 256}, {"max_pixels", 25165824}}},
                   {"tiny", true}};
  for (int i = 0; i < 2; ++i) {
    const std::string name = "image" + std::to_string(i) + ".rgb";
    write_random(in / name, size_t{3} * ih * iw, 10 + i, false);
    manifest["images"].push_back({{"file", name}, {"height", ih}, {"width", iw}});
  }
  write_random(in / "video.rgb", size_t{3} * frames * vh * vw, 20, false);
  write_random(in / "soundtrack.f32", sizeof(float) * 2 * samples, 30, true);
  write_random(in / "audio.f32", sizeof(float) * 2 * samples, 31, true);
  std::ofstream(in / "manifest.json") << manifest.dump();
  // A peer's rows for two of the steps (the others have no baseline).
  std::ofstream(dir / "peer.jsonl")
      << json{{"workload", "audio_encode"}, {"impl", "peer audio"}, {"ms_p50", 4.0}}.dump() << "\n"
      << json{{"workload", "vae_encode_video"}, {"impl", "peer vae"}, {"ms_p50", 8.0}}.dump() << "\n";

  const std::string src = VORTEX_SOURCE_DIR;
  const std::string cmd = std::string(VORTEX_REF2VA_BENCH) + " " + (dir / "out").string() + " --inputs " + in.string() +
                          " --text-encoder-config " + src + "/tests/vision/fixtures/model/config.json" +
                          " --vae-config " + src + "/tests/vae/fixtures/video_encoder/vae/config.json" +
                          " --audio-vae-config " + src + "/tests/vae/fixtures/audio_encoder/audio_vae/config.json" +
                          " --peer " + (dir / "peer.jsonl").string() + " --backend cpu --threads 2 --reps 2 > " +
                          (dir / "log.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log_in(dir / "log.txt");
  const std::string log((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("| step | vortex p50 ms | peer p50 ms | ratio |"), std::string::npos) << log;

  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "out")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << log;
  EXPECT_NE(files[0].filename().string().find("ref2va-encoders"), std::string::npos);
  std::ifstream rows_in(files[0]);
  std::set<std::string> workloads;
  std::string line;
  while (std::getline(rows_in, line)) {
    const json r = json::parse(line);
    const std::string w = r["workload"];
    workloads.insert(w);
    EXPECT_EQ(r["ms"].size(), 2u) << w;
    EXPECT_GT(r["ms_p50"].get<double>(), 0.0) << w;
    EXPECT_TRUE(r.contains("commit")) << w;
    if (w == "audio_encode" || w == "vae_encode_video") {
      const double base = w == "audio_encode" ? 4.0 : 8.0;
      EXPECT_EQ(r["baseline_ms_p50"].get<double>(), base) << w;
      EXPECT_NEAR(r["ratio"].get<double>(), r["ms_p50"].get<double>() / base, 1e-9) << w;
    } else {
      EXPECT_TRUE(r["baseline_ms_p50"].is_null()) << w;
    }
    if (w == "vae_encode_video") {
      EXPECT_EQ(r["frames"], 22);  // 26 frames snapped down to 17n + 5
    }
    if (w == "vision_tower_video") {
      EXPECT_EQ(r["blocks"], 2);  // 2 fps: frames 0, 12, 24 and 24 again
    }
  }
  EXPECT_EQ(workloads, (std::set<std::string>{"vision_preprocess", "vision_tower_images", "vision_tower_video",
                                              "vae_encode_images", "vae_encode_video", "audio_encode"}));
  fs::remove_all(dir);
}

}  // namespace
