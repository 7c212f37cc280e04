// The decode's frame conversion: video_frames_to_rgb8_i420 gives video_to_rgb8's bytes (random values, NaN, inf,
// out of range, rounding ties) for any frame range and thread count, and its I420 is rgb8_to_i420 of those bytes;
// rgb8_to_i420 equals an independent per-pixel evaluation of the BT.709 limited-range program and is within half
// a level of the exact real-valued conversion; an MP4 written from RGB frames decodes back (FFmpeg) to them within
// the tolerance of H.264 at CRF 18 and 4:2:0 chroma; bad arguments are errors.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/decode_frames.h"
#include "media/ffmpeg_module.h"
#include "media/mp4_writer.h"
#include "media/yuv420.h"
#include "vae/video_vae.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

// [3, F, H, W] f32: mostly values in the clamp range, plus NaN, +-inf, out-of-range values and exact ties.
Tensor random_decoded(int64_t f, int64_t h, int64_t w, uint32_t seed) {
  Tensor t = Tensor::empty({3, f, h, w}, DType::kF32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.5f, 2.5f);
  float* p = t.data<float>();
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int c = static_cast<int>(i / (f * h * w));
    switch (rng() % 16) {
      case 0:
        p[i] = std::nanf("");
        break;
      case 1:
        p[i] = (rng() & 1) ? INFINITY : -INFINITY;
        break;
      case 2:
        p[i] = (rng() & 1) ? 50.0f : -50.0f;
        break;
      case 3:
        p[i] = ((static_cast<float>(rng() % 255) + 0.5f) / 255.0f - mean[c]) / stdv[c];
        break;  // near ties
      default:
        p[i] = u(rng);
    }
  }
  return t;
}

TEST(DecodeFrames, RgbIsVideoToRgb8AndI420IsItsConversion) {
  const int64_t f = 5, h = 6, w = 38;
  Tensor dec = random_decoded(f, h, w, 7u + static_cast<uint32_t>(std::random_device{}() % 1000));
  auto want = video_to_rgb8(dec);  // [F, H, W, 3] u8
  ASSERT_TRUE(want.ok());
  for (int threads : {1, 3}) {
    for (auto [b, e] : std::vector<std::pair<int64_t, int64_t>>{{0, f}, {1, 4}, {4, 5}}) {
      Tensor rgb = Tensor::empty({e - b, h, w, 3}, DType::kU8),
             i420 = Tensor::empty({e - b, i420_frame_bytes(w, h)}, DType::kU8);
      std::memset(rgb.raw_data(), 0xA5, rgb.nbytes());  // poison
      std::memset(i420.raw_data(), 0xA5, i420.nbytes());
      ASSERT_TRUE(video_frames_to_rgb8_i420(dec, b, e, rgb, i420, threads).ok());
      EXPECT_EQ(std::memcmp(rgb.raw_data(), want->data<uint8_t>() + b * h * w * 3, rgb.nbytes()), 0)
          << "threads " << threads << " frames [" << b << ", " << e << ")";
      auto ref = rgb8_to_i420(rgb);
      ASSERT_TRUE(ref.ok());
      EXPECT_EQ(std::memcmp(i420.raw_data(), ref->raw_data(), i420.nbytes()), 0) << "threads " << threads;
    }
  }
  // RGB only, into a narrow of a larger frame tensor.
  Tensor all = Tensor::empty({f, h, w, 3}, DType::kU8), none;
  std::memset(all.raw_data(), 0xA5, all.nbytes());
  auto part = all.narrow(0, 2, 3);
  ASSERT_TRUE(part.ok());
  ASSERT_TRUE(video_frames_to_rgb8_i420(dec, 2, 5, *part, none, 2).ok());
  EXPECT_EQ(std::memcmp(all.data<uint8_t>() + 2 * h * w * 3, want->data<uint8_t>() + 2 * h * w * 3, 3 * h * w * 3), 0);
  EXPECT_EQ(all.data<uint8_t>()[0], 0xA5);  // frames outside the range untouched
}

TEST(DecodeFrames, BadArgumentsAreErrors) {
  Tensor dec = random_decoded(2, 4, 4, 3), rgb = Tensor::empty({2, 4, 4, 3}, DType::kU8), none;
  EXPECT_EQ(video_frames_to_rgb8_i420(dec, 1, 3, rgb, none, 1).code(), ErrorCode::kInvalidArgument);  // past the end
  Tensor small = Tensor::empty({1, 4, 4, 3}, DType::kU8);
  EXPECT_EQ(video_frames_to_rgb8_i420(dec, 0, 2, small, none, 1).code(), ErrorCode::kInvalidArgument);
  Tensor bad_yuv = Tensor::empty({2, 10}, DType::kU8);
  EXPECT_EQ(video_frames_to_rgb8_i420(dec, 0, 2, rgb, bad_yuv, 1).code(), ErrorCode::kInvalidArgument);
  Tensor odd = random_decoded(1, 3, 4, 5), odd_rgb = Tensor::empty({1, 3, 4, 3}, DType::kU8),
         odd_yuv = Tensor::empty({1, 18}, DType::kU8);
  EXPECT_EQ(video_frames_to_rgb8_i420(odd, 0, 1, odd_rgb, odd_yuv, 1).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(video_frames_to_rgb8_i420(odd, 0, 1, odd_rgb, none, 1).ok());  // RGB only: any size
  EXPECT_EQ(rgb8_to_i420(odd_rgb).status().code(), ErrorCode::kInvalidArgument);
}

// The documented program evaluated per pixel, coefficients derived here from BT.709's Kr, Kb.
struct Bt709 {
  int32_t y[3], u[3], v[3];
  Bt709() {
    const double kr = 0.2126, kb = 0.0722, kg = 1 - kr - kb;
    auto fix = [](double x) { return static_cast<int32_t>(std::lround(x * 65536.0)); };
    y[0] = fix(kr * 219 / 255), y[1] = fix(kg * 219 / 255), y[2] = fix(kb * 219 / 255);
    u[0] = fix(-kr / (2 * (1 - kb)) * 224 / 255), u[2] = fix(0.5 * 224 / 255), u[1] = -u[0] - u[2];
    v[0] = fix(0.5 * 224 / 255), v[2] = fix(-kb / (2 * (1 - kr)) * 224 / 255), v[1] = -v[0] - v[2];
  }
};

TEST(Yuv420, EqualsPerPixelProgramAndIsNearTheExactConversion) {
  const int64_t f = 2, h = 10, w = 14;
  Tensor rgb = Tensor::empty({f, h, w, 3}, DType::kU8);
  std::mt19937 rng(11u + static_cast<uint32_t>(std::random_device{}() % 1000));
  for (int64_t i = 0; i < rgb.numel(); ++i) rgb.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  for (int c = 0; c < 3; ++c) rgb.data<uint8_t>()[c] = 128;  // a grey pixel
  auto got1 = rgb8_to_i420(rgb, 1), got3 = rgb8_to_i420(rgb, 3);
  ASSERT_TRUE(got1.ok() && got3.ok());
  ASSERT_EQ(got1->shape(), (Shape{f, h * w * 3 / 2}));
  EXPECT_EQ(std::memcmp(got1->raw_data(), got3->raw_data(), got1->nbytes()), 0);
  const Bt709 k;
  const double kr = 0.2126, kb = 0.0722, kg = 1 - kr - kb;
  auto px = [&](int64_t fi, int64_t y, int64_t x, int c) {
    return static_cast<int32_t>(rgb.data<uint8_t>()[((fi * h + y) * w + x) * 3 + c]);
  };
  for (int64_t fi = 0; fi < f; ++fi) {
    const uint8_t* base = got1->data<uint8_t>() + fi * h * w * 3 / 2;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const int32_t r = px(fi, y, x, 0), g = px(fi, y, x, 1), b = px(fi, y, x, 2);
        const int want = (k.y[0] * r + k.y[1] * g + k.y[2] * b + (16 << 16) + (1 << 15)) >> 16;
        ASSERT_EQ(base[y * w + x], want) << fi << " " << y << " " << x;
        const double exact = 16 + 219.0 * (kr * r + kg * g + kb * b) / 255.0;
        EXPECT_LE(std::abs(base[y * w + x] - exact), 0.5 + 1e-3);
      }
    for (int64_t y = 0; y < h / 2; ++y)
      for (int64_t x = 0; x < w / 2; ++x) {
        int32_t s[3] = {0, 0, 0};
        for (int c = 0; c < 3; ++c)
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx) s[c] += px(fi, 2 * y + dy, 2 * x + dx, c);
        const int u = (k.u[0] * s[0] + k.u[1] * s[1] + k.u[2] * s[2] + (128 << 18) + (1 << 17)) >> 18;
        const int v = (k.v[0] * s[0] + k.v[1] * s[1] + k.v[2] * s[2] + (128 << 18) + (1 << 17)) >> 18;
        ASSERT_EQ(base[h * w + y * (w / 2) + x], u);
        ASSERT_EQ(base[h * w + (h / 2) * (w / 2) + y * (w / 2) + x], v);
        const double r = s[0] / 4.0, g = s[1] / 4.0, b = s[2] / 4.0, yy = kr * r + kg * g + kb * b;
        EXPECT_LE(std::abs(u - (128 + 224.0 * (b - yy) / (2 * (1 - kb)) / 255.0)), 0.5 + 1e-3);
        EXPECT_LE(std::abs(v - (128 + 224.0 * (r - yy) / (2 * (1 - kr)) / 255.0)), 0.5 + 1e-3);
      }
  }
  // grey stays neutral, black and white hit the limited range's ends
  Tensor flat = Tensor::empty({1, 2, 2, 3}, DType::kU8);
  for (uint8_t level : {uint8_t{0}, uint8_t{128}, uint8_t{255}}) {
    std::memset(flat.raw_data(), level, flat.nbytes());
    auto o = rgb8_to_i420(flat);
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->data<uint8_t>()[0], level == 0 ? 16 : (level == 255 ? 235 : 126));
    EXPECT_EQ(o->data<uint8_t>()[4], 128);
    EXPECT_EQ(o->data<uint8_t>()[5], 128);
  }
}

// An MP4 of smooth frames (the yuv420p round trip loses chroma detail, so noise would not test the colours)
// decodes back to the RGB it was written from within a few levels. A wrong matrix (BT.601 for BT.709) or range
// (full for limited) moves these saturated colours by 10 levels or more.
TEST(Yuv420, Mp4DecodesBackToTheFrames) {
  if (Status s = mp4_support(); !s.ok()) GTEST_SKIP() << "no FFmpeg here: " << s.to_string();
  const int64_t f = 6, h = 64, w = 96;
  Tensor rgb = Tensor::empty({f, h, w, 3}, DType::kU8);
  for (int64_t fi = 0; fi < f; ++fi)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        uint8_t* p = rgb.data<uint8_t>() + ((fi * h + y) * w + x) * 3;
        p[0] = static_cast<uint8_t>(40 + 2 * x + fi);
        p[1] = static_cast<uint8_t>(200 - 2 * y);
        p[2] = static_cast<uint8_t>(x < w / 2 ? 60 : 190);  // a vertical edge in blue
      }
  const fs::path dir = fs::temp_directory_path() / ("vortex_decode_frames_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // CRF 0 (lossless H.264): only the colour program and 4:2:0 remain; CRF 18 (the default) adds the codec's loss.
  for (auto [crf, mean_max] : std::vector<std::pair<int, double>>{{0, 1.6}, {18, 2.0}}) {
    const std::string path = (dir / (std::to_string(crf) + ".mp4")).string();
    Mp4Options o;
    o.video_encoder = "libx264";
    o.crf = crf;
    ASSERT_TRUE(write_mp4(path, rgb, Tensor(), 0, o).ok());
    struct Sink {
      const Tensor* want;
      int64_t frame = 0;
      double sum = 0, sum_flat = 0;
      int max = 0, max_flat = 0;
    } sink{&rgb};
    VortexVideoDecode req{};
    req.path = path.c_str();
    req.max_pixels = int64_t{1} << 20;
    req.user = &sink;
    req.sink = [](void* user, const uint8_t* got, int width, int height) -> int {
      auto* s = static_cast<Sink*>(user);
      const uint8_t* want = s->want->data<uint8_t>() + s->frame * width * height * 3;
      for (int64_t i = 0; i < int64_t{width} * height * 3; ++i) {
        const int d = std::abs(int{got[i]} - int{want[i]});
        const int64_t x = (i / 3) % width;
        const bool edge = std::abs(x - width / 2) <= 2;  // the blue step and its chroma neighbours
        s->sum += d;
        s->max = std::max(s->max, d);
        if (!edge) s->sum_flat += d, s->max_flat = std::max(s->max_flat, d);
      }
      ++s->frame;
      return 0;
    };
    ASSERT_TRUE(ffmpeg_decode_video(req).ok());
    ASSERT_EQ(sink.frame, f);
    const double mean = sink.sum / static_cast<double>(rgb.numel());
    std::printf("crf %d: mean %.3f max %d; away from the edge max %d\n", crf, mean, sink.max, sink.max_flat);
    EXPECT_LE(mean, mean_max) << "crf " << crf << ": mean absolute error per value";
    EXPECT_LE(sink.max_flat, crf == 0 ? 5 : 12) << "crf " << crf << ": largest error away from the blue edge";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vortex
