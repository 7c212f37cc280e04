// Media writers: the WAV header and samples read back byte for byte; an MP4 re-opened with libavformat has
// the expected streams, codecs, frame count, sample rate and duration; failures leave no file behind.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "media/mp4_writer.h"
#include "media/wav_writer.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / ("vortex_media_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

Tensor tone(int64_t samples, int rate) {
  Tensor a = Tensor::empty({2, samples}, DType::kF32);
  for (int64_t i = 0; i < samples; ++i) {
    a.data<float>()[i] = 0.5f * std::sin(2.0 * M_PI * 440.0 * i / rate);
    a.data<float>()[samples + i] = 0.25f * std::sin(2.0 * M_PI * 660.0 * i / rate);
  }
  return a;
}

Tensor frames(int f, int h, int w) {
  Tensor t = Tensor::empty({f, h, w, 3}, DType::kU8);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  return t;
}

TEST(Wav, Float32HeaderAndInterleavedSamples) {
  const std::string path = temp_dir("wav") + "/a.wav";
  Tensor a = tone(1000, 32000);
  ASSERT_TRUE(write_wav_f32(path, a, 32000).ok());
  const std::vector<uint8_t> b = read_all(path);
  ASSERT_EQ(b.size(), 56u + 8000u);  // RIFF 12 + fmt 24 + fact 12 + data header 8
  auto u16 = [&](size_t o) { return static_cast<uint16_t>(b[o] | (b[o + 1] << 8)); };
  auto u32 = [&](size_t o) {
    return static_cast<uint32_t>(b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24));
  };
  EXPECT_EQ(std::memcmp(b.data(), "RIFF", 4), 0);
  EXPECT_EQ(u32(4), b.size() - 8);
  EXPECT_EQ(std::memcmp(b.data() + 8, "WAVEfmt ", 8), 0);
  EXPECT_EQ(u16(20), 3);  // IEEE float
  EXPECT_EQ(u16(22), 2);
  EXPECT_EQ(u32(24), 32000u);
  EXPECT_EQ(u16(34), 32);
  EXPECT_EQ(std::memcmp(b.data() + 36, "fact", 4), 0);
  EXPECT_EQ(u32(44), 1000u);
  EXPECT_EQ(std::memcmp(b.data() + 48, "data", 4), 0);
  EXPECT_EQ(u32(52), 8000u);
  float s[2];
  std::memcpy(s, b.data() + 56 + 8 * 7, 8);
  EXPECT_EQ(s[0], a.data<float>()[7]);
  EXPECT_EQ(s[1], a.data<float>()[1000 + 7]);
  EXPECT_FALSE(write_wav_f32(path + "2", Tensor::empty({2, 0}, DType::kF32), 32000).ok());
  EXPECT_FALSE(fs::exists(path + "2"));
}

TEST(Mp4, StreamsCodecsFramesAndDuration) {
  const std::string dir = temp_dir("mp4");
  const std::string path = dir + "/video.mp4";
  const int nf = 48, rate = 32000;
  ASSERT_TRUE(write_mp4(path, frames(nf, 48, 64), tone(2 * rate, rate), rate).ok());
  auto info = probe_media(path);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->streams, 2);
  EXPECT_EQ(info->video_codec, "h264");
  EXPECT_EQ(info->pixel_format, "yuv420p");
  EXPECT_EQ(info->width, 64);
  EXPECT_EQ(info->height, 48);
  EXPECT_NEAR(info->fps, 24.0, 1e-9);
  EXPECT_EQ(info->video_frames, nf);
  EXPECT_EQ(info->audio_codec, "aac");
  EXPECT_EQ(info->sample_rate, rate);
  EXPECT_EQ(info->channels, 2);
  EXPECT_NEAR(info->duration_s, 2.0, 0.1);
  EXPECT_NEAR(info->audio_duration_s, 2.0, 0.1);
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "video.mp4");  // no temp left
}

TEST(Mp4, VideoOnlyAndFailuresLeaveNoFile) {
  const std::string dir = temp_dir("mp4_bad");
  ASSERT_TRUE(write_mp4(dir + "/silent.mp4", frames(5, 16, 16), Tensor(), 0).ok());
  auto info = probe_media(dir + "/silent.mp4");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->streams, 1);
  EXPECT_EQ(info->video_frames, 5);
  // Odd sizes cannot be yuv420p: an error, and an existing file is left as it was.
  { std::ofstream(dir + "/keep.mp4") << "mine"; }
  EXPECT_FALSE(write_mp4(dir + "/keep.mp4", frames(3, 15, 16), Tensor(), 0).ok());
  EXPECT_EQ(read_all(dir + "/keep.mp4").size(), 4u);
  EXPECT_FALSE(write_mp4(dir + "/none.mp4", frames(3, 16, 16), Tensor::empty({1, 10}, DType::kF32), 32000).ok());
  EXPECT_FALSE(fs::exists(dir + "/none.mp4"));
  EXPECT_FALSE(probe_media(dir + "/keep.mp4").ok());
}

}  // namespace
}  // namespace vortex
