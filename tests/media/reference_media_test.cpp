// ref2va reference media against diffusers 0.42.1's MiniMaxH3Ref2VASetupStep and torchaudio 2.11's Resample
// (fixtures from tests/media/make_reference_fixtures.py): the resampling kernels bit for bit, the normalized
// soundtracks (truncation, upmix, resampling) within a stated tolerance, the 24 fps frame selection and the image
// reference sizes exactly; the probes of small video and audio files, and every refusal of the set's limits.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/run_manifest.h"  // sha256_hex
#include "io/safetensors.h"
#include "media/reference_media.h"

#ifndef VORTEX_REFERENCE_FIXTURES
#error "VORTEX_REFERENCE_FIXTURES must name tests/media/fixtures/reference"
#endif

namespace vortex {
namespace {

std::string dir() { return VORTEX_REFERENCE_FIXTURES; }

const nlohmann::json& meta() {
  static const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir() + "/meta.json"));
  return j;
}

const SafetensorsFile& audio() {
  static const SafetensorsFile f = [] {
    auto r = SafetensorsFile::open(dir() + "/audio.safetensors");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(*r);
  }();
  return f;
}

Tensor get(const std::string& name) {
  auto t = audio().tensor(name);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

TEST(ReferenceAudio, ResamplingKernelsBitIdentical) {
  int checked = 0;
  for (const auto& c : meta()["audio"]) {
    if (!c.contains("kernel_sha256")) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    auto r = SincResampler::create(c["rate"].get<int>(), 32000);
    ASSERT_TRUE(r.ok());
    const auto shape = c["kernel_shape"].get<std::vector<int64_t>>();
    EXPECT_EQ(r->target(), shape[0]);
    EXPECT_EQ(2 * r->width() + r->orig(), shape[2]);
    EXPECT_EQ(sha256_hex(r->kernel().data(), r->kernel().size() * sizeof(float)),
              c["kernel_sha256"].get<std::string>());
    if (audio().contains(c["name"].get<std::string>() + ".kernel")) {  // readable on a mismatch
      const Tensor want = get(c["name"].get<std::string>() + ".kernel");
      int64_t diff = 0;
      for (int64_t i = 0; i < want.numel(); ++i) diff += want.data<float>()[i] != r->kernel()[static_cast<size_t>(i)];
      EXPECT_EQ(diff, 0);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(ReferenceAudio, NormalizedSoundtracksMatchTheSetupStep) {
  // torch's conv1d sums each output in FP32, Vortex in FP64 over the same FP32 kernel: the stated tolerance is
  // 1e-6 absolute on waveforms in [-1, 1] (a few FP32 ulps of the partial sums; measured at most 2.4e-7).
  int checked = 0;
  for (const auto& c : meta()["audio"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const Tensor in = get(name + ".in"), want = get(name + ".out");
    auto got = normalize_reference_audio(in, c["rate"].get<int>(), 32000, c["num_frames"].get<int>());
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->shape(), want.shape());
    double max_abs = 0.0;
    int64_t equal = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float w = want.data<float>()[i], g = got->data<float>()[i];
      max_abs = std::max(max_abs, std::abs(static_cast<double>(w) - g));
      equal += w == g;
    }
    std::printf("%s: %s, max |Vortex - diffusers| %.3g, %lld of %lld equal\n", name.c_str(), got->describe().c_str(),
                max_abs, static_cast<long long>(equal), static_cast<long long>(want.numel()));
    if (c["rate"].get<int>() == 32000) {
      EXPECT_EQ(equal, want.numel());  // no resampling: the samples themselves
    }
    EXPECT_LE(max_abs, 1e-6);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(ReferenceAudio, DecodedSoundtracksEqualPyAV) {
  // references.py decodes with PyAV into planar float at the stream's own rate; Vortex through FFmpeg's decoders
  // in libvortex_ffmpeg.so with libswresample's conversions: the same samples, byte for byte.
  int checked = 0;
  for (const auto& c : meta()["decoded_audio"]) {
    const std::string file = c["file"].get<std::string>();
    auto got = read_reference_audio(dir() + "/media/" + file);
    ASSERT_TRUE(got.ok()) << file << ": " << got.status().to_string();
    EXPECT_EQ(got->sample_rate, c["sample_rate"].get<int>()) << file;
    EXPECT_EQ(got->waveform.shape(), Shape(c["shape"].get<std::vector<int64_t>>())) << file;
    EXPECT_EQ(sha256_hex(got->waveform.raw_data(), static_cast<size_t>(got->waveform.numel()) * sizeof(float)),
              c["sha256"].get<std::string>())
        << file;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
  auto capped = read_reference_audio(dir() + "/media/voice_mono.wav", 2.0);  // a 3 s clip
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("runs past"), std::string::npos) << capped.status().to_string();
  EXPECT_FALSE(read_reference_audio(dir() + "/media/clip_silent.mkv").ok());  // no audio stream
}

TEST(ReferenceVideo, FrameSelectionAt24FpsMatchesTheSetupStep) {
  int checked = 0;
  for (const auto& c : meta()["frames"]) {
    auto got = reference_frame_indices(c["decoded"].get<int64_t>(), c["fps"].get<double>(), c["num_frames"].get<int>());
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, c["indices"].get<std::vector<int64_t>>())
        << "fps " << c["fps"] << ", " << c["decoded"] << " frames";
    ++checked;
  }
  EXPECT_EQ(checked, 10);
  EXPECT_FALSE(reference_frame_indices(0, 30.0, 124).ok());
  EXPECT_FALSE(reference_frame_indices(10, 0.0, 124).ok());
  EXPECT_FALSE(reference_frame_indices(10, NAN, 124).ok());
}

const nlohmann::json& video_meta() {
  static const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir() + "/video.json"));
  return j;
}

// How many frames hash to the fixture's SHA-256s (the frames [H, W, 3] u8 in order).
int64_t equal_frames(const std::vector<RgbImage>& got, const nlohmann::json& sha) {
  EXPECT_EQ(got.size(), sha.size());
  int64_t equal = 0;
  for (size_t i = 0; i < got.size() && i < sha.size(); ++i)
    equal += sha256_hex(got[i].rgb.data(), got[i].rgb.size()) == sha[i].get<std::string>();
  return equal;
}

TEST(ReferenceVideo, DecodedFramesMatchPyAV) {
  // _decode_video_file: PyAV's rgb24 conversion (its own FFmpeg's swscale, SWS_BILINEAR) and the display matrix's
  // quarter turns. Vortex converts with the system FFmpeg's swscale under the same flags and colorspace: the same
  // bytes, frame for frame.
  int checked = 0;
  for (const auto& c : video_meta()["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    auto got = read_reference_video_frames(dir() + "/media/" + c["file"].get<std::string>());
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->fps, c["fps"].get<double>());
    EXPECT_EQ(got->quarter_turns, ((c["rotation"].get<int>() / 90) % 4 + 4) % 4);
    const auto shape = c["decoded_shape"].get<std::vector<int64_t>>();
    ASSERT_FALSE(got->frames.empty());
    EXPECT_EQ(got->frames[0].height, shape[1]);
    EXPECT_EQ(got->frames[0].width, shape[2]);
    EXPECT_EQ(got->decoded, shape[0]);
    EXPECT_EQ(equal_frames(got->frames, c["decoded_sha256"]), shape[0]);
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(ReferenceVideo, NormalizedFramesMatchTheSetupStep) {
  // _normalize_video_condition on the decoded frames: the 24 fps drops and repeats, the truncation and the LANCZOS
  // canvas. Only the frames the 24 fps grid reaches are decoded.
  int checked = 0;
  for (const auto& c : video_meta()["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    CanvasRule rule;
    rule.multiple = c["canvas_multiple"].get<int>();
    rule.short_edge = c["canvas_short_edge"].get<int>();
    rule.max_pixels = c["canvas_max_pixels"].get<int64_t>();
    auto got = read_reference_video(dir() + "/media/" + c["file"].get<std::string>(), c["num_frames"].get<int>(), rule);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const auto shape = c["normalized_shape"].get<std::vector<int64_t>>();
    EXPECT_EQ(got->canvas.height, shape[1]);
    EXPECT_EQ(got->canvas.width, shape[2]);
    EXPECT_EQ(equal_frames(got->frames, c["normalized_sha256"]), shape[0]);
    // Frames after the last one the 24 fps grid reaches are not decoded.
    EXPECT_LE(got->source_frames, c["decoded_shape"][0].get<int64_t>());
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(ReferenceVideo, QuarterTurnsAsNumpyRot90) {
  RgbImage src;
  src.width = 3;
  src.height = 2;
  for (int i = 0; i < 18; ++i) src.rgb.push_back(static_cast<uint8_t>(i));
  auto px = [](const RgbImage& im, int r, int c) { return im.rgb[(static_cast<size_t>(r) * im.width + c) * 3]; };
  const RgbImage cw = rotate_quarter_turns(src, 1);  // np.rot90(m, k=-1)[r][c] = m[h-1-c][r]
  ASSERT_EQ(cw.width, 2);
  ASSERT_EQ(cw.height, 3);
  EXPECT_EQ(px(cw, 0, 0), px(src, 1, 0));
  EXPECT_EQ(px(cw, 0, 1), px(src, 0, 0));
  EXPECT_EQ(px(cw, 2, 1), px(src, 0, 2));
  const RgbImage half = rotate_quarter_turns(src, 2);
  EXPECT_EQ(px(half, 0, 0), px(src, 1, 2));
  const RgbImage ccw = rotate_quarter_turns(src, -1);  // k=1: m[c][w-1-r]
  EXPECT_EQ(px(ccw, 0, 0), px(src, 0, 2));
  EXPECT_EQ(px(ccw, 2, 1), px(src, 1, 0));
  EXPECT_EQ(rotate_quarter_turns(src, 4).rgb, src.rgb);
}

TEST(ReferenceVideo, RefusesAFileWithoutVideo) {
  auto r = read_reference_video_frames(dir() + "/media/voice_mono.wav");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no video stream"), std::string::npos) << r.status().to_string();
}

TEST(ReferenceVideo, VaeFramesSnapDown) {
  EXPECT_EQ(reference_vae_frames(124), 124);
  EXPECT_EQ(reference_vae_frames(120), 107);
  EXPECT_EQ(reference_vae_frames(48), 39);
  EXPECT_EQ(reference_vae_frames(22), 22);
  EXPECT_EQ(reference_vae_frames(21), 22);  // max(1, 0) * 17 + 5: the encoder step's own floor
}

TEST(ReferenceImage, SizesMatchTheSetupStep) {
  for (const auto& c : meta()["image_sizes"]) {
    auto s = reference_image_size(c["width"].get<int>(), c["height"].get<int>());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->width, c["out_width"].get<int>()) << c;
    EXPECT_EQ(s->height, c["out_height"].get<int>()) << c;
  }
  EXPECT_GE(meta()["image_sizes"].size(), 9u);
  EXPECT_FALSE(reference_image_size(401, 100).ok());  // beyond 4:1
  EXPECT_FALSE(reference_image_size(0, 100).ok());
}

std::string media(const char* name) { return dir() + "/media/" + name; }

TEST(ReferenceProbe, VideoAndAudioFiles) {
  auto v = probe_reference({media("clip_sound.mkv"), ReferenceKind::kImage, false});
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->kind, ReferenceKind::kVideo);
  EXPECT_EQ(v->width, 64);
  EXPECT_EQ(v->height, 48);
  EXPECT_DOUBLE_EQ(v->fps, 10.0);
  EXPECT_NEAR(v->duration_s, 2.5, 1e-9);
  EXPECT_TRUE(v->has_audio);
  EXPECT_EQ(v->sample_rate, 8000);
  EXPECT_EQ(v->channels, 2);
  auto silent = probe_reference({media("clip_silent.mkv"), ReferenceKind::kImage, false});
  ASSERT_TRUE(silent.ok()) << silent.status().to_string();
  EXPECT_EQ(silent->kind, ReferenceKind::kVideo);
  EXPECT_FALSE(silent->has_audio);
  auto a = probe_reference({media("voice_mono.wav"), ReferenceKind::kImage, false});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->kind, ReferenceKind::kAudio);
  EXPECT_NEAR(a->duration_s, 3.0, 1e-3);
  EXPECT_EQ(a->channels, 1);
  // audio: on a video takes its soundtrack.
  auto track = probe_reference({media("clip_sound.mkv"), ReferenceKind::kAudio, true});
  ASSERT_TRUE(track.ok()) << track.status().to_string();
  EXPECT_EQ(track->kind, ReferenceKind::kAudio);
}

void expect_refused(const Result<ReferenceProbe>& r, const std::string& words) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().to_string();
}

TEST(ReferenceProbe, Refusals) {
  expect_refused(probe_reference({media("voice_short.wav"), ReferenceKind::kImage, false}), "2.00 s to 15.00 s");
  expect_refused(probe_reference({media("voice_5ch.wav"), ReferenceKind::kImage, false}), "5 audio channels");
  expect_refused(probe_reference({media("clip_silent.mkv"), ReferenceKind::kAudio, true}), "no audio stream");
  expect_refused(probe_reference({media("voice_mono.wav"), ReferenceKind::kVideo, true}), "no video stream");
  expect_refused(probe_reference({media("clip_sound.mkv"), ReferenceKind::kImage, true}), "clip_sound.mkv");
  auto missing = probe_reference({media("nothing_here.mp4"), ReferenceKind::kImage, false});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  ReferenceLimits tight;
  tight.max_media_file_bytes = 1000;
  expect_refused(probe_reference({media("voice_mono.wav"), ReferenceKind::kImage, false}, tight), "MiB");
  tight = ReferenceLimits{};
  tight.max_video_side = 32;
  expect_refused(probe_reference({media("clip_sound.mkv"), ReferenceKind::kImage, false}, tight), "64x48");
  const std::filesystem::path junk = std::filesystem::temp_directory_path() / "vortex_reference_junk.bin";
  std::ofstream(junk) << "not a media file at all";
  expect_refused(probe_reference({junk.string(), ReferenceKind::kImage, false}), "not an image");
  std::filesystem::remove(junk);
}

TEST(ReferenceSpec, KindPrefixes) {
  auto s = parse_reference_spec("video:clip.mp4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->path, "clip.mp4");
  EXPECT_EQ(s->kind, ReferenceKind::kVideo);
  EXPECT_TRUE(s->kind_given);
  s = parse_reference_spec("face.png");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->kind_given);
  EXPECT_EQ(s->path, "face.png");
  EXPECT_FALSE(parse_reference_spec("audio:").ok());
}

ReferenceProbe ref(ReferenceKind kind, double seconds = 0.0) {
  ReferenceProbe p;
  p.kind = kind;
  p.duration_s = seconds;
  return p;
}

TEST(ReferenceSet, Limits) {
  using K = ReferenceKind;
  EXPECT_TRUE(check_reference_set({ref(K::kImage), ref(K::kVideo, 5), ref(K::kAudio, 4)}).ok());
  auto refuse = [](const std::vector<ReferenceProbe>& refs, const std::string& words) {
    const Status s = check_reference_set(refs);
    ASSERT_FALSE(s.ok()) << words;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.to_string();
  };
  refuse({}, "at least one reference");
  refuse(std::vector<ReferenceProbe>(10, ref(K::kImage)), "at most 9 image references, got 10");
  refuse(std::vector<ReferenceProbe>(4, ref(K::kVideo, 3)), "at most 3 video references, got 4");
  std::vector<ReferenceProbe> four_audio(4, ref(K::kAudio, 2));
  four_audio.push_back(ref(K::kImage));
  refuse(four_audio, "at most 3 audio references, got 4");
  std::vector<ReferenceProbe> thirteen(9, ref(K::kImage));
  for (int i = 0; i < 3; ++i) thirteen.push_back(ref(K::kVideo, 2));
  thirteen.push_back(ref(K::kAudio, 2));
  refuse(thirteen, "at most 12 references in total, got 13");
  refuse({ref(K::kAudio, 3), ref(K::kAudio, 3)}, "paired with at least one image or video");
  refuse({ref(K::kVideo, 8), ref(K::kVideo, 8)}, "video references last 16.00 s in total");
  refuse({ref(K::kImage), ref(K::kAudio, 8), ref(K::kAudio, 7.5)}, "audio references last 15.50 s in total");
}

}  // namespace
}  // namespace vortex
