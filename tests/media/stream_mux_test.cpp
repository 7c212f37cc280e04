// decode_to_mp4 (src/engine/stream_mux.h) on the CPU backend with the fixture decoders: the frames it encodes
// while decoding are video_to_rgb8 of the one-shot decode byte for byte, the audio is the audio decode's, the
// MP4 holds every frame with the encoder recorded (libx264 with the NVENC fallback reason on a machine without
// NVENC), and an error or a cancel in the middle of the decode leaves no video.mp4. VideoVae::decode's on_frames
// ranges cover the frames once, in order.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/stream_mux.h"
#include "io/safetensors.h"

#ifndef VORTEX_VAE_FIXTURES
#error "VORTEX_VAE_FIXTURES must name tests/vae/fixtures"
#endif

namespace vortex {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<VideoVae> video;
  std::unique_ptr<AudioVae> audio;
  Tensor video_latents, audio_latents;
};

void load(Fixture& f) {
  auto be = make_backend("cpu", 0);
  ASSERT_TRUE(be.ok());
  f.backend = std::move(*be);
  auto v = VideoVae::load(std::string(VORTEX_VAE_FIXTURES) + "/video_vae", *f.backend);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  f.video = std::move(*v);
  f.video->mutable_config().tile = 16;
  f.video->mutable_config().tile_overlap = 4;
  auto a = AudioVae::load(std::string(VORTEX_VAE_FIXTURES) + "/audio_vae", *f.backend);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  f.audio = std::move(*a);
  auto vc = SafetensorsFile::open(std::string(VORTEX_VAE_FIXTURES) + "/video_cases.safetensors");
  ASSERT_TRUE(vc.ok());
  auto vl = vc->tensor("tiled_two_clips.latents");
  ASSERT_TRUE(vl.ok());
  f.video_latents = *vl;
  auto ac = SafetensorsFile::open(std::string(VORTEX_VAE_FIXTURES) + "/audio_cases.safetensors");
  ASSERT_TRUE(ac.ok());
  for (const auto& e : ac->entries())
    if (e.name.find("latents") != std::string::npos) {
      auto al = ac->tensor(e.name);
      ASSERT_TRUE(al.ok());
      f.audio_latents = *al;
      break;
    }
  ASSERT_TRUE(f.audio_latents.defined()) << "audio_cases.safetensors has no latents";
}

std::string temp_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / ("vortex_stream_mux_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

TEST(StreamMux, FramesEqualOneShotDecodeAndFileIsComplete) {
  Fixture f;
  load(f);
  const std::string dir = temp_dir("ok");
  auto got = decode_to_mp4(f.video_latents, f.audio_latents, *f.video, *f.audio, dir + "/video.mp4", Mp4Options{});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto pixels = f.video->decode(f.video_latents);
  ASSERT_TRUE(pixels.ok());
  auto want = video_to_rgb8(*pixels);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(got->media.frames.shape(), want->shape());
  EXPECT_EQ(std::memcmp(got->media.frames.raw_data(), want->raw_data(), want->nbytes()), 0);
  auto audio = f.audio->decode(f.audio_latents);
  ASSERT_TRUE(audio.ok());
  ASSERT_EQ(got->media.audio.shape(), audio->shape());
  EXPECT_EQ(std::memcmp(got->media.audio.raw_data(), audio->raw_data(), audio->nbytes()), 0);
  auto info = probe_media(dir + "/video.mp4");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->video_frames, want->dim(0));
  EXPECT_EQ(info->audio_codec, "aac");
  EXPECT_TRUE(got->encoder.encoder == "libx264" || got->encoder.encoder == "h264_nvenc") << got->encoder.encoder;
  if (got->encoder.encoder == "libx264") {
    EXPECT_FALSE(got->encoder.fallback.empty());
  }
  const nlohmann::json d = describe_mp4(Mp4Options{}, got->encoder, got->media.frames);
  EXPECT_EQ(d["encoder"], got->encoder.encoder);
  EXPECT_EQ(d["frames"], want->dim(0));
}

TEST(StreamMux, FrameRangesCoverTheVideoOnceInOrder) {
  Fixture f;
  load(f);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  auto v = f.video->decode(f.video_latents, nullptr, [&](const Tensor& video, int64_t b, int64_t e) {
    ranges.emplace_back(b, e);
    return video.dim(1) >= e ? Status::Ok() : internal_error("range past the end");
  });
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_GE(ranges.size(), 2u);  // two clips: frames are final before the decode ends
  int64_t next = 0;
  for (auto [b, e] : ranges) {
    EXPECT_EQ(b, next);
    EXPECT_GT(e, b);
    next = e;
  }
  EXPECT_EQ(next, v->dim(1));
}

TEST(StreamMux, ErrorMidDecodeLeavesNoFile) {
  Fixture f;
  load(f);
  int calls = 0;
  auto v = f.video->decode(f.video_latents, nullptr, [&](const Tensor&, int64_t, int64_t) {
    return ++calls == 1 ? Status::Ok() : cancelled("stop");
  });
  EXPECT_EQ(v.status().code(), ErrorCode::kCancelled);
  // Bad latents are refused before anything is written.
  const std::string dir = temp_dir("bad");
  Tensor bad = Tensor::zeros({3, 2, 2, 2}, DType::kF32);
  auto r = decode_to_mp4(bad, f.audio_latents, *f.video, *f.audio, dir + "/video.mp4", Mp4Options{});
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(dir));
}

// A cancel set from the progress callback at the first video tile stops the decode at the end of the first clip
// (its frames are not queued), one set during the audio decode before any video tile; neither leaves a file.
TEST(StreamMux, ACancelStopsTheDecodeBetweenClipsAndLeavesNoFile) {
  Fixture f;
  load(f);
  const int64_t total = f.video->tile_forwards(f.video_latents.shape());
  for (const char* at : {"video", "audio"}) {
    const std::string dir = temp_dir(at);
    std::atomic<bool> flag{false};
    int64_t video_done = 0;
    VaeProgressFn progress = [&](const VaeProgress& p) {
      if (p.stage == "video") video_done = std::max(video_done, p.done);
      if (p.stage == at) flag = true;
    };
    auto r = decode_to_mp4(f.video_latents, f.audio_latents, *f.video, *f.audio, dir + "/video.mp4", Mp4Options{},
                           progress, &flag);
    ASSERT_FALSE(r.ok()) << at;
    EXPECT_EQ(r.status().code(), ErrorCode::kCancelled) << r.status().to_string();
    if (std::string(at) == "video") {
      EXPECT_GE(video_done, 1);
      EXPECT_LT(video_done, total) << "every tile was stitched after a cancel at the first one";
    } else {
      EXPECT_EQ(video_done, 0);
    }
    EXPECT_TRUE(fs::is_empty(dir)) << at;
  }
  // An unset flag changes nothing.
  const std::string dir = temp_dir("flag_unset");
  std::atomic<bool> never{false};
  auto ok = decode_to_mp4(f.video_latents, f.audio_latents, *f.video, *f.audio, dir + "/video.mp4", Mp4Options{},
                          nullptr, &never);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_TRUE(fs::exists(dir + "/video.mp4"));
}

// The MP4 opens on the encoder's thread while the video decodes: an encoder that cannot open (h264_nvenc where
// NVENC is absent) stops the decode with FFmpeg's reason and leaves no file; options libx264 does not take are
// refused before any tile is decoded.
TEST(StreamMux, EncoderOpenFailureStopsTheDecodeAndBadOptionsFailFirst) {
  Fixture f;
  load(f);
  int64_t video_done = 0;
  VaeProgressFn progress = [&](const VaeProgress& p) {
    if (p.stage == "video") video_done = std::max(video_done, p.done);
  };
  Mp4Options nvenc;
  nvenc.video_encoder = "h264_nvenc";
  const std::string dir = temp_dir("nvenc");
  auto r = decode_to_mp4(f.video_latents, f.audio_latents, *f.video, *f.audio, dir + "/video.mp4", nvenc, progress);
  if (r.ok()) {  // a machine whose driver offers NVENC
    EXPECT_EQ(r->encoder.encoder, "h264_nvenc");
    EXPECT_GT(r->mp4_open_s, 0.0);
  } else {
    EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported) << r.status().to_string();
    EXPECT_NE(r.status().to_string().find("h264_nvenc"), std::string::npos) << r.status().to_string();
    EXPECT_TRUE(fs::is_empty(dir));
  }
  for (auto bad : {std::string("preset"), std::string("lookahead")}) {
    Mp4Options o;
    if (bad == "preset") o.preset = "turbo";
    else o.x264_rc_lookahead = 300;
    video_done = 0;
    const std::string d = temp_dir(bad.c_str());
    auto b = decode_to_mp4(f.video_latents, f.audio_latents, *f.video, *f.audio, d + "/video.mp4", o, progress);
    EXPECT_EQ(b.status().code(), ErrorCode::kInvalidArgument) << bad << ": " << b.status().to_string();
    EXPECT_EQ(video_done, 0) << bad << ": refused after a video tile was decoded";
    EXPECT_TRUE(fs::is_empty(d));
  }
}

}  // namespace
}  // namespace vortex
