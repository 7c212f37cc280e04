// Keyframe images against diffusers 0.42.1 + Pillow (fixtures from tests/media/make_image_fixtures.py):
// decoded RGB equal to load_image's bytes for every lossless input (PNG colour types, EXIF orientations,
// lossless WebP) and within a stated bound for JPEG / lossy WebP; MiniMaxH3ResizeStep's canvases and
// resolve_canvas_size bit for bit; refusals (16-bit, CMYK, animated, corrupt, empty, bomb) before decoding.
#include <openssl/sha.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "media/image_reader.h"
#include "media/keyframe_canvas.h"
#include "media/lanczos_resize.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kDir = VORTEX_IMAGE_FIXTURES;

json manifest() {
  std::ifstream in(kDir / "manifest.json");
  return json::parse(in);
}

std::string sha256_hex(const std::vector<uint8_t>& bytes) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(bytes.data(), bytes.size(), md);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return hex;
}

std::vector<uint8_t> read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

RgbImage must_read(const std::string& name) {
  auto img = read_image((kDir / name).string());
  EXPECT_TRUE(img.ok()) << name << ": " << img.status().message();
  return img.ok() ? *img : RgbImage{};
}

TEST(ImageRead, LosslessInputsEqualLoadImage) {
  const json m = manifest();
  int checked = 0;
  for (const auto& [name, e] : m["images"].items()) {
    if (e.contains("rgb")) continue;  // lossy: next test
    SCOPED_TRACE(name);
    const RgbImage img = must_read(name);
    EXPECT_EQ(img.width, e["width"].get<int>());
    EXPECT_EQ(img.height, e["height"].get<int>());
    EXPECT_EQ(sha256_hex(img.rgb), e["sha256"].get<std::string>()) << "mode " << e["mode"];
    ++checked;
  }
  EXPECT_GE(checked, 19);
}

// Lossy WebP is bit for bit (VP8 decoding is normative; the upsampling and conversion are libwebp's
// integer program). JPEG differs by FFmpeg's IDCT (FFmpeg's port of the IJG integer IDCT runs rows
// first, libjpeg-turbo's columns first, so intermediate rounding differs): the bound is what these
// fixtures measure (printed) plus one level; the mean shows the differences are rare rounding steps.
TEST(ImageRead, LossyInputsNearLoadImage) {
  const json m = manifest();
  int checked = 0;
  for (const auto& [name, e] : m["images"].items()) {
    if (!e.contains("rgb")) continue;
    SCOPED_TRACE(name);
    const RgbImage img = must_read(name);
    const std::vector<uint8_t> want = read_all(kDir / e["rgb"].get<std::string>());
    ASSERT_EQ(img.width, e["width"].get<int>());
    ASSERT_EQ(img.height, e["height"].get<int>());
    ASSERT_EQ(img.rgb.size(), want.size());
    int max_diff = 0;
    double sum = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const int d = std::abs(int{img.rgb[i]} - int{want[i]});
      max_diff = std::max(max_diff, d);
      sum += d;
    }
    const double mean = sum / static_cast<double>(want.size());
    std::printf("%s: max |FFmpeg - Pillow| = %d, mean %.3f (uint8 levels)\n", name.c_str(), max_diff, mean);
    if (name.ends_with(".webp")) {
      EXPECT_EQ(max_diff, 0);
    } else {
      EXPECT_LE(max_diff, 4);
      EXPECT_LE(mean, 0.1);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(ImageRead, HeaderFacts) {
  auto h = probe_image((kDir / "exif6.jpg").string());
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->format, ImageFormat::kJpeg);
  EXPECT_EQ(h->orientation, 6);
  EXPECT_EQ(h->width, 97);
  EXPECT_EQ(h->height, 61);
  h = probe_image((kDir / "rgba.png").string());
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->alpha);
  h = probe_image((kDir / "palette.png").string());
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->alpha);  // tRNS
  EXPECT_EQ(h->color, "palette");
  h = probe_image((kDir / "lossless_alpha.webp").string());
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->alpha);
  h = probe_image((kDir / "lossy.webp").string());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->color, "ycbcr");
}

TEST(ImageRead, RefusalsNameTheReasonBeforeDecoding) {
  const json m = manifest();
  std::map<std::string, std::string> expect = {{"gray16.png", "16 bits"},
                                               {"rgb16.png", "16 bits"},
                                               {"cmyk.jpg", "CMYK"},
                                               {"animated.png", "animated"},
                                               {"animated.webp", "animated"},
                                               {"empty.png", "empty"},
                                               {"text.png", "not a PNG, JPEG or WebP"},
                                               {"bomb.png", "over the limit"}};
  for (const auto& [name, why] : expect) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(m["refused"].contains(name));
    auto h = probe_image((kDir / name).string());
    ASSERT_FALSE(h.ok());
    EXPECT_NE(h.status().message().find(why), std::string::npos) << h.status().message();
    EXPECT_NE(h.status().message().find(name), std::string::npos) << "the message names the file";
    auto img = read_image((kDir / name).string());
    ASSERT_FALSE(img.ok());
    EXPECT_EQ(img.status().message(), h.status().message());
  }
  // A truncated PNG is refused from its chunk structure, before decoding.
  auto cut = probe_image((kDir / "truncated.png").string());
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
  // Damaged pixel data in an intact container: the header passes, the decoder refuses (CRC, zlib).
  std::vector<uint8_t> png = read_all(kDir / "rgb.png");
  for (size_t i = 100; i < 140; ++i) png[i] ^= 0x5a;  // inside IDAT (IHDR ends at byte 33)
  const fs::path bad = fs::temp_directory_path() / ("vortex_image_test_" + std::to_string(::getpid()) + ".png");
  std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), png.size());
  EXPECT_TRUE(probe_image(bad.string()).ok());
  auto img = read_image(bad.string());
  fs::remove(bad);
  ASSERT_FALSE(img.ok());
  EXPECT_NE(img.status().message().find("corrupt"), std::string::npos) << img.status().message();
  // Missing, a directory, over the file-size limit.
  auto missing = probe_image((kDir / "no_such.png").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(probe_image(kDir.string()).ok());
  ImageLimits small;
  small.max_file_bytes = 1000;
  auto big = probe_image((kDir / "rgb.png").string(), small);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("over the limit of 1000"), std::string::npos) << big.status().message();
  ImageLimits few;
  few.max_pixels = 97 * 61 - 1;
  EXPECT_FALSE(probe_image((kDir / "rgb.png").string(), few).ok());
  few.max_pixels = 97 * 61;
  EXPECT_TRUE(probe_image((kDir / "rgb.png").string(), few).ok());
}

TEST(ImageRead, TruncatedHeadersAreFormatErrors) {
  const std::vector<uint8_t> png = read_all(kDir / "rgb.png");
  const std::vector<uint8_t> jpg = read_all(kDir / "photo420.jpg");
  const std::vector<uint8_t> webp = read_all(kDir / "lossless.webp");
  for (const auto* file : {&png, &jpg, &webp}) {
    for (size_t n : {size_t{0}, size_t{3}, size_t{9}, size_t{14}, size_t{20}, size_t{25}}) {
      auto h = parse_image_header(file->data(), std::min(n, file->size()));
      EXPECT_FALSE(h.ok() && h->width > 0 && n < 16) << "a " << n << "-byte prefix cannot hold a full header";
    }
  }
  // Random bytes after a valid signature never crash the parser.
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> bytes = trial % 3 == 0 ? png : trial % 3 == 1 ? jpg : webp;
    for (int k = 0; k < 8; ++k) bytes[12 + rng() % (bytes.size() - 12)] = static_cast<uint8_t>(rng());
    bytes.resize(12 + rng() % (bytes.size() - 12));
    (void)parse_image_header(bytes.data(), bytes.size());
  }
}

TEST(ImageOrientation, AllEightAgainstExifTranspose) {
  // exif1.png .. exif8.png hold the same pixels; load_image transposes by the tag.
  const json m = manifest();
  for (int o = 1; o <= 8; ++o) {
    const std::string name = "exif" + std::to_string(o) + ".png";
    SCOPED_TRACE(name);
    const RgbImage img = must_read(name);
    EXPECT_EQ(sha256_hex(img.rgb), m["images"][name]["sha256"].get<std::string>());
    EXPECT_EQ(img.width, m["images"][name]["width"].get<int>());
  }
}

RgbImage random_image(int w, int h, std::mt19937& rng) {
  RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  for (auto& v : img.rgb) v = static_cast<uint8_t>(rng());
  return img;
}

TEST(LanczosResize, IdentityAndCrop) {
  std::mt19937 rng(std::random_device{}());
  const RgbImage img = random_image(13, 7, rng);
  EXPECT_EQ(lanczos_resize(img, 13, 7).rgb, img.rgb);
  const RgbImage c = crop(img, 2, 1, 5, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x)
      for (int ch = 0; ch < 3; ++ch) ASSERT_EQ(c.rgb[(y * 5 + x) * 3 + ch], img.rgb[((y + 1) * 13 + x + 2) * 3 + ch]);
  // A constant image stays constant through both passes (the coefficients sum to 1 in fixed point).
  RgbImage flat{40, 30, std::vector<uint8_t>(40 * 30 * 3, 173)};
  for (auto [w, h] : {std::pair{17, 11}, {96, 64}, {40, 7}, {5, 30}}) {
    const RgbImage r = lanczos_resize(flat, w, h);
    for (uint8_t v : r.rgb) ASSERT_EQ(v, 173) << w << "x" << h;
  }
}

TEST(KeyframeCanvas, ResolveCanvasSizeEqualsDiffusers) {
  const json m = manifest();
  for (const auto& e : m["canvas_sizes"]) {
    auto c = resolve_canvas_size(e["aspect"][0].get<double>(), e["aspect"][1].get<double>());
    ASSERT_TRUE(c.ok()) << e.dump();
    EXPECT_EQ(c->height, e["canvas"][0].get<int>()) << e.dump();
    EXPECT_EQ(c->width, e["canvas"][1].get<int>()) << e.dump();
  }
  EXPECT_GE(m["canvas_sizes"].size(), 18u);
  EXPECT_FALSE(resolve_canvas_size(401, 100).ok());
  EXPECT_FALSE(resolve_canvas_size(100, 401).ok());
  EXPECT_TRUE(resolve_canvas_size(400, 100).ok());
  EXPECT_FALSE(resolve_canvas_size(0, 100).ok());
}

TEST(KeyframeCanvas, ResizeStepBitExact) {
  const json m = manifest();
  std::map<std::string, RgbImage> cache;
  auto load = [&](const json& v) -> const RgbImage* {
    if (v.is_null()) return nullptr;
    const std::string name = v.get<std::string>();
    if (!cache.count(name)) cache[name] = must_read(name);
    return &cache[name];
  };
  int checked = 0;
  for (const auto& c : m["canvases"]) {
    SCOPED_TRACE(c.dump());
    const RgbImage* first = load(c["first"]);
    const RgbImage* last = load(c["last"]);
    CanvasSize given;
    if (!c["height"].is_null()) given = {c["height"].get<int>(), c["width"].get<int>()};
    std::vector<RgbImage> got;
    if (given.height % 32 || given.width % 32) {
      // Canvases off the 32 grid, which Vortex refuses but diffusers' step takes: the stretch alone.
      ASSERT_EQ(last, nullptr);
      EXPECT_FALSE(place_keyframes(first, nullptr, given).ok());
      got.push_back(lanczos_resize(*first, given.width, given.height));
    } else {
      auto placed = place_keyframes(first, last, given);
      ASSERT_TRUE(placed.ok()) << placed.status().message();
      EXPECT_EQ(placed->canvas.height, c["canvas"][0].get<int>());
      EXPECT_EQ(placed->canvas.width, c["canvas"][1].get<int>());
      EXPECT_EQ(placed->anchors, c["anchors"].get<std::vector<std::string>>());
      got = placed->keyframes;
    }
    ASSERT_EQ(got.size(), c["keyframes"].size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].height, c["keyframes"][i]["size"][0].get<int>());
      EXPECT_EQ(got[i].width, c["keyframes"][i]["size"][1].get<int>());
      EXPECT_EQ(sha256_hex(got[i].rgb), c["keyframes"][i]["sha256"].get<std::string>()) << "keyframe " << i;
      ++checked;
    }
  }
  EXPECT_GE(checked, 15);
}

TEST(KeyframeCanvas, ArgumentErrors) {
  std::mt19937 rng(std::random_device{}());
  const RgbImage img = random_image(64, 32, rng);
  EXPECT_FALSE(place_keyframes(nullptr, nullptr).ok());
  EXPECT_FALSE(place_keyframes(&img, nullptr, {64, 0}).ok());
  EXPECT_FALSE(place_keyframes(&img, nullptr, {64, 48}).ok());
  RgbImage narrow = random_image(10, 50, rng);  // 1:5
  auto r = place_keyframes(&narrow, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("1:4 to 4:1"), std::string::npos) << r.status().message();
  // As the follower it is cover-cropped, whatever its aspect ratio.
  EXPECT_TRUE(place_keyframes(&img, &narrow, {64, 128}).ok());
}

}  // namespace
}  // namespace vortex
