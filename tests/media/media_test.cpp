// Media writers: the WAV header and samples read back byte for byte; an MP4 re-opened with libavformat has
// the expected streams, codecs, frame count, sample rate and duration; failures leave no file behind.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>
#include <utility>
#include <vector>

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

// The H.264 encoder choice: "auto" takes h264_nvenc only where the driver opens it (a GPU with NVENC), else libx264
// with the reason recorded; forcing h264_nvenc where it does not open is an error, not a silent fallback.
TEST(Mp4, EncoderChoiceAndFallback) {
  const std::string dir = temp_dir("encoder");
  Mp4Options auto_opts;
  Mp4EncoderInfo info;
  ASSERT_TRUE(write_mp4(dir + "/auto.mp4", frames(4, 32, 32), Tensor(), 0, auto_opts, &info).ok());
  auto probed = probe_media(dir + "/auto.mp4");
  ASSERT_TRUE(probed.ok()) << probed.status().to_string();
  EXPECT_EQ(probed->video_codec, "h264");
  EXPECT_EQ(probed->video_frames, 4);
  Mp4Options nvenc = auto_opts;
  nvenc.video_encoder = "h264_nvenc";
  Mp4EncoderInfo forced;
  const Status st = write_mp4(dir + "/nvenc.mp4", frames(4, 32, 32), Tensor(), 0, nvenc, &forced);
  if (info.encoder == "h264_nvenc") {  // a machine whose driver offers NVENC
    EXPECT_NE(info.settings.find("cq 18"), std::string::npos) << info.settings;
    EXPECT_TRUE(info.fallback.empty());
    EXPECT_TRUE(st.ok()) << st.to_string();
  } else {  // this machine (CI, no GPU): the fallback, with why
    EXPECT_EQ(info.encoder, "libx264");
    EXPECT_NE(info.settings.find("crf 18"), std::string::npos) << info.settings;
    EXPECT_NE(info.fallback.find("h264_nvenc"), std::string::npos) << info.fallback;
    EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.to_string();
    EXPECT_FALSE(fs::exists(dir + "/nvenc.mp4"));
  }
  Mp4Options x264 = auto_opts;
  x264.video_encoder = "libx264";
  Mp4EncoderInfo plain;
  ASSERT_TRUE(write_mp4(dir + "/x264.mp4", frames(4, 32, 32), Tensor(), 0, x264, &plain).ok());
  EXPECT_EQ(plain.encoder, "libx264");
  EXPECT_TRUE(plain.fallback.empty());
  Mp4Options bad = auto_opts;
  bad.video_encoder = "h265";
  EXPECT_EQ(write_mp4(dir + "/bad.mp4", frames(4, 32, 32), Tensor(), 0, bad).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir + "/bad.mp4"));
}

// libx264's preset, threads and rc-lookahead reach the encoder and its recorded settings; names and ranges outside
// libx264's are refused before any file is written.
TEST(Mp4, X264PresetThreadsAndLookahead) {
  const std::string dir = temp_dir("x264opts");
  Mp4Options o;
  o.video_encoder = "libx264";
  EXPECT_EQ(o.preset, "veryfast");
  EXPECT_EQ(o.x264_rc_lookahead, 10);
  Mp4EncoderInfo info;
  ASSERT_TRUE(write_mp4(dir + "/default.mp4", frames(3, 32, 32), Tensor(), 0, o, &info).ok());
  EXPECT_EQ(info.settings, "preset veryfast, crf 18, threads " + std::to_string(resolved_x264_threads(o)) +
                               ", rc-lookahead 10, yuv420p bt709");
  o.preset = "medium";
  o.x264_threads = 3;
  o.x264_rc_lookahead = -1;
  ASSERT_TRUE(write_mp4(dir + "/medium.mp4", frames(3, 32, 32), Tensor(), 0, o, &info).ok());
  EXPECT_EQ(info.settings, "preset medium, crf 18, threads 3, yuv420p bt709");
  auto probed = probe_media(dir + "/medium.mp4");
  ASSERT_TRUE(probed.ok());
  EXPECT_EQ(probed->video_frames, 3);
  for (auto [preset, lookahead, threads] : std::vector<std::tuple<const char*, int, int>>{
           {"turbo", 10, 0}, {"medium", 251, 0}, {"medium", -2, 0}, {"medium", 10, -1}}) {
    Mp4Options b = o;
    b.preset = preset, b.x264_rc_lookahead = lookahead, b.x264_threads = threads;
    EXPECT_EQ(write_mp4(dir + "/bad.mp4", frames(3, 32, 32), Tensor(), 0, b).code(), ErrorCode::kInvalidArgument)
        << preset << " " << lookahead << " " << threads;
  }
  EXPECT_FALSE(fs::exists(dir + "/bad.mp4"));
  EXPECT_TRUE(check_x264_preset("ultrafast").ok());
  EXPECT_EQ(check_x264_preset("").code(), ErrorCode::kInvalidArgument);
}

// Frames written in pieces as they are produced give the file the one-call writer gives (same streams, frame
// count, durations); a stream dropped before finish() leaves neither the file nor its temp file.
TEST(Mp4, StreamInPiecesAndAbandoned) {
  const std::string dir = temp_dir("stream");
  const int rate = 32000, nf = 30;
  Tensor all = frames(nf, 48, 64), audio = tone(nf * rate / 24, rate);
  Mp4Options opts;
  opts.video_encoder = "libx264";
  ASSERT_TRUE(write_mp4(dir + "/whole.mp4", all, audio, rate, opts).ok());
  auto s = Mp4Stream::open(dir + "/pieces.mp4", 64, 48, audio, rate, opts);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_FALSE(fs::exists(dir + "/pieces.mp4"));  // only the temp file until finish()
  for (auto [b, e] : std::vector<std::pair<int, int>>{{0, 7}, {7, 8}, {8, 30}}) {
    auto part = all.narrow(0, b, e - b);
    ASSERT_TRUE(part.ok());
    ASSERT_TRUE((*s)->write(*part).ok());
  }
  EXPECT_EQ((*s)->write(frames(1, 48, 32)).code(), ErrorCode::kInvalidArgument);  // wrong size
  ASSERT_TRUE((*s)->finish().ok());
  EXPECT_FALSE((*s)->finish().ok());
  auto whole = probe_media(dir + "/whole.mp4"), pieces = probe_media(dir + "/pieces.mp4");
  ASSERT_TRUE(whole.ok() && pieces.ok());
  EXPECT_EQ(pieces->video_frames, nf);
  EXPECT_EQ(pieces->video_frames, whole->video_frames);
  EXPECT_EQ(pieces->audio_codec, "aac");
  EXPECT_NEAR(pieces->audio_duration_s, whole->audio_duration_s, 1e-9);
  EXPECT_NEAR(pieces->duration_s, whole->duration_s, 1e-9);
  {
    auto dropped = Mp4Stream::open(dir + "/dropped.mp4", 64, 48, audio, rate, opts);
    ASSERT_TRUE(dropped.ok());
    ASSERT_TRUE((*dropped)->write(all).ok());
  }
  EXPECT_FALSE(fs::exists(dir + "/dropped.mp4"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("dropped"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace vortex
