// Tests for src/model/packing.cpp, rope.cpp and segments.cpp: the canonical h3 request (1344x768, 124 frames,
// 100 text rows -> 37,810 rows), frame snapping and size errors, positions at known rows (research §2.7, §7.2),
// segment tables, RoPE tables vs an independent computation and golden BF16 bits from numpy + ml_dtypes,
// and (un)patchify round trips with an index-formula check. Random data is seeded from std::random_device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "model/packing.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

PackedLayout canonical_layout() {
  auto geo = make_geometry(ModelConfig::h3(), 1344, 768, 124, 100);
  EXPECT_TRUE(geo.ok()) << geo.status().to_string();
  auto layout = pack_request(ModelConfig::h3(), *geo);
  EXPECT_TRUE(layout.ok()) << layout.status().to_string();
  return *layout;
}

TEST(Geometry, CanonicalRequest) {
  auto geo = make_geometry(ModelConfig::h3(), 1344, 768, 124, 100);
  ASSERT_TRUE(geo.ok()) << geo.status().to_string();
  EXPECT_EQ(geo->frames, 124);
  EXPECT_EQ(geo->latent_frames, 37);
  EXPECT_EQ(geo->latent_h, 48);
  EXPECT_EQ(geo->latent_w, 84);
  EXPECT_EQ(geo->audio_latents, 207);
  EXPECT_EQ(geo->text_rows, 100);
  EXPECT_EQ(geo->audio_rows, 414);
  EXPECT_EQ(geo->video_rows, 37296);
  EXPECT_EQ(geo->total_rows(), 37810);
  EXPECT_EQ(geo->audio_start(), 100);
  EXPECT_EQ(geo->video_start(), 514);
}

TEST(Geometry, FrameSnapping) {
  const ModelConfig cfg = ModelConfig::h3();
  // Up to the next 17n + 5, as diffusers' align_num_frames: 96 -> 107 and 130 -> 141 (the nearest would
  // give 90 and 124). tests/parity checks every count 1..199 against diffusers' own table.
  const std::pair<int, int> cases[] = {{1, 5},   {4, 5},    {5, 5},     {6, 22},    {13, 22},   {22, 22},
                                       {23, 39}, {96, 107}, {120, 124}, {124, 124}, {125, 141}, {130, 141}};
  for (auto [in, want] : cases) {
    auto g = make_geometry(cfg, 1344, 768, in, 10);
    ASSERT_TRUE(g.ok()) << in;
    EXPECT_EQ(g->frames, want) << "frames " << in;
    EXPECT_EQ(g->frames_requested, in);
    EXPECT_EQ((g->frames - 5) % 17, 0);
    EXPECT_EQ(g->latent_frames, 5 * ((g->frames - 5) / 17) + 2);
    // Audio latents = round(frames / 24 * 40), compared against the FP64 formula.
    EXPECT_EQ(g->audio_latents, static_cast<int>(std::lround(g->frames / 24.0 * 40.0))) << in;
  }
}

TEST(Geometry, FramesForSeconds) {
  EXPECT_EQ(*frames_for_seconds(5.0), 124);   // 120 frames -> 124
  EXPECT_EQ(*frames_for_seconds(5.2), 141);   // 124.8 -> 125 -> 141
  EXPECT_EQ(*frames_for_seconds(0.01), 5);    // one frame -> 5
  EXPECT_EQ(*frames_for_seconds(15.0), 362);  // 360 -> 362
  EXPECT_FALSE(frames_for_seconds(0.0).ok());
  EXPECT_FALSE(frames_for_seconds(-1.0).ok());
  EXPECT_FALSE(frames_for_seconds(std::nan("")).ok());
  EXPECT_FALSE(frames_for_seconds(1e9).ok());
}

TEST(Geometry, Errors) {
  const ModelConfig h3 = ModelConfig::h3();
  EXPECT_FALSE(make_geometry(h3, 1344, 760, 124, 100).ok());  // not a multiple of 32
  EXPECT_FALSE(make_geometry(h3, 1336, 768, 124, 100).ok());
  EXPECT_FALSE(make_geometry(h3, 0, 768, 124, 100).ok());
  EXPECT_FALSE(make_geometry(h3, -32, 768, 124, 100).ok());
  EXPECT_FALSE(make_geometry(h3, 1344, 768, 0, 100).ok());
  EXPECT_FALSE(make_geometry(h3, 1344, 768, 124, -1).ok());
  auto cap = make_geometry(h3, 1344, 800, 124, 100);  // above the 768*1344 area cap
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.status().message().find("768*1344"), std::string::npos) << cap.status().message();
  EXPECT_TRUE(make_geometry(h3, 768, 1344, 124, 100).ok());  // portrait at the cap
  // h3-tiny has no area cap.
  EXPECT_TRUE(make_geometry(ModelConfig::h3_tiny(), 1344, 800, 22, 8).ok());
}

TEST(Geometry, TinyDemo) {
  auto geo = make_geometry(ModelConfig::h3_tiny(), 448, 256, 22, 16);
  ASSERT_TRUE(geo.ok()) << geo.status().to_string();
  EXPECT_EQ(geo->latent_frames, 7);
  EXPECT_EQ(geo->latent_h, 16);
  EXPECT_EQ(geo->latent_w, 28);
  EXPECT_EQ(geo->video_rows, 7 * 8 * 14);
  EXPECT_EQ(geo->audio_latents, 37);
  EXPECT_EQ(geo->total_rows(), 16 + 74 + 784);
  auto layout = pack_request(ModelConfig::h3_tiny(), *geo);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->positions.size(), 874u);
}

TEST(Packing, CanonicalModalitiesAndPositions) {
  const PackedLayout l = canonical_layout();
  ASSERT_EQ(l.positions.size(), 37810u);
  ASSERT_EQ(l.modality.size(), 37810u);
  for (size_t r = 0; r < l.modality.size(); ++r) {
    const Modality want = r < 100 ? Modality::kText : (r < 514 ? Modality::kAudio : Modality::kVideo);
    ASSERT_EQ(l.modality[r], want) << "row " << r;
  }
  // Text rows (i, 0, 0).
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(l.positions[static_cast<size_t>(i)][0], i);
    EXPECT_EQ(l.positions[static_cast<size_t>(i)][1], 0.0);
    EXPECT_EQ(l.positions[static_cast<size_t>(i)][2], 0.0);
  }
  // Audio: rows 100..306 left (t 100..306, w = -5.166), 307..513 right (w = 36.158), h = 0.
  for (int j = 0; j < 207; ++j) {
    const auto& left = l.positions[static_cast<size_t>(100 + j)];
    const auto& right = l.positions[static_cast<size_t>(307 + j)];
    EXPECT_EQ(left[0], 100.0 + j);
    EXPECT_EQ(right[0], 100.0 + j);
    EXPECT_EQ(left[1], 0.0);
    EXPECT_EQ(right[1], 0.0);
    EXPECT_NEAR(left[2], -5.166, 1e-3);
    EXPECT_NEAR(right[2], 36.158, 1e-3);
  }
  // First video row.
  EXPECT_EQ(l.positions[514][0], 100.0);
  EXPECT_NEAR(l.positions[514][1], 3.905, 1e-3);
  EXPECT_NEAR(l.positions[514][2], -5.166, 1e-3);
  // Audio w equals the video w grid's extremes exactly.
  EXPECT_EQ(l.positions[100][2], l.positions[514][2]);
  EXPECT_EQ(l.positions[307][2], l.positions[514 + 41][2]);
  // Frame times: frame k at L + (5/3) pixel_start(k), pixel_start = 17 (k div 5) + [0,1,5,9,13][k mod 5].
  const int offsets[5] = {0, 1, 5, 9, 13};
  for (int k = 0; k < 37; ++k) {
    const double want = 100.0 + (5.0 / 3.0) * (17 * (k / 5) + offsets[k % 5]);
    const auto& p = l.positions[static_cast<size_t>(514 + k * 1008)];
    EXPECT_NEAR(p[0], want, 1e-12) << "frame " << k;
    // The FP32 cast the RoPE tables use agrees with the closed form.
    EXPECT_EQ(static_cast<float>(p[0]), static_cast<float>(want)) << "frame " << k;
  }
  EXPECT_NEAR(l.positions[514 + 1008][0], 100.0 + 5.0 / 3.0, 1e-12);
  EXPECT_NEAR(l.positions[514 + 36 * 1008][0], 300.0, 1e-12);
  EXPECT_NEAR(l.positions[37809][0], 300.0, 1e-12);
  // Spatial grids: h 3.905..27.087 (24 points), w -5.166..36.158 (42 points), spacing 1.00790.
  EXPECT_NEAR(l.positions[514 + 23 * 42][1], 27.087, 1e-3);
  EXPECT_NEAR(l.positions[514 + 41][2], 36.158, 1e-3);
  for (int i = 1; i < 42; ++i) {
    EXPECT_NEAR(l.positions[static_cast<size_t>(514 + i)][2] - l.positions[static_cast<size_t>(514 + i - 1)][2],
                1.00790, 1e-5);
  }
  for (int i = 1; i < 24; ++i) {
    EXPECT_NEAR(
        l.positions[static_cast<size_t>(514 + i * 42)][1] - l.positions[static_cast<size_t>(514 + (i - 1) * 42)][1],
        1.00790, 1e-5);
  }
  // Row-major (h, w) inside a frame: row 514 + f*1008 + hi*42 + wi.
  const auto& p = l.positions[static_cast<size_t>(514 + 7 * 1008 + 5 * 42 + 9)];
  EXPECT_EQ(p[1], l.positions[static_cast<size_t>(514 + 5 * 42)][1]);
  EXPECT_EQ(p[2], l.positions[static_cast<size_t>(514 + 9)][2]);
}

TEST(Packing, RandomGeometriesProperties) {
  // For random sizes: row counts add up, audio/video positions follow the closed forms, and the spatial
  // grids share the spacing 64/A and are centred so that first + last = 32 - 64/A on both axes.
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  const ModelConfig cfg = ModelConfig::h3_tiny();
  std::uniform_int_distribution<int> d32(1, 40), dframes(1, 200), dtext(0, 300);
  const int offsets[5] = {0, 1, 5, 9, 13};
  for (int it = 0; it < 30; ++it) {
    const int w = 32 * d32(rng), h = 32 * d32(rng), frames = dframes(rng), text = dtext(rng);
    auto geo = make_geometry(cfg, w, h, frames, text);
    ASSERT_TRUE(geo.ok()) << geo.status().to_string();
    auto l = pack_request(cfg, *geo);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    const std::string ctx = "seed " + std::to_string(seed) + " " + std::to_string(w) + "x" + std::to_string(h) +
                            " frames " + std::to_string(frames) + " text " + std::to_string(text);
    ASSERT_EQ(static_cast<int64_t>(l->positions.size()), text + geo->audio_rows + geo->video_rows) << ctx;
    const double A = std::sqrt(static_cast<double>(geo->latent_h) * geo->latent_w);
    const int64_t v0 = geo->video_start(), Ta = geo->audio_latents;
    const int nh = geo->latent_h / 2, nw = geo->latent_w / 2;
    const auto& first = l->positions[static_cast<size_t>(v0)];
    const auto& last_in_frame = l->positions[static_cast<size_t>(v0 + nh * nw - 1)];
    EXPECT_NEAR(first[1] + last_in_frame[1], 32.0 - 64.0 / A, 1e-9) << ctx;
    EXPECT_NEAR(first[2] + last_in_frame[2], 32.0 - 64.0 / A, 1e-9) << ctx;
    if (nw > 1) {
      EXPECT_NEAR(l->positions[static_cast<size_t>(v0 + 1)][2] - first[2], 64.0 / A, 1e-9) << ctx;
    }
    if (nh > 1) {
      EXPECT_NEAR(l->positions[static_cast<size_t>(v0 + nw)][1] - first[1], 64.0 / A, 1e-9) << ctx;
    }
    EXPECT_EQ(l->positions[static_cast<size_t>(text)][2], first[2]) << ctx;
    EXPECT_EQ(l->positions[static_cast<size_t>(text + Ta)][2], last_in_frame[2]) << ctx;
    EXPECT_EQ(l->positions[static_cast<size_t>(text + 2 * Ta - 1)][0], text + Ta - 1.0) << ctx;
    const int k = geo->latent_frames - 1;
    const double want_t = text + (5.0 / 3.0) * (17 * (k / 5) + offsets[k % 5]);
    EXPECT_NEAR(l->positions.back()[0], want_t, 1e-9) << ctx;
    // The last latent frame's pixel span ends exactly at the snapped frame count.
    EXPECT_EQ(17 * (k / 5) + offsets[k % 5] + (k % 5 == 0 ? 1 : 4), geo->frames) << ctx;
  }
  // Inconsistent geometry is rejected.
  auto geo = make_geometry(cfg, 448, 256, 22, 16);
  ASSERT_TRUE(geo.ok());
  RequestGeometry bad = *geo;
  bad.video_rows += 1;
  EXPECT_FALSE(pack_request(cfg, bad).ok());
  bad = *geo;
  bad.latent_h = 15;
  EXPECT_FALSE(pack_request(cfg, bad).ok());
}

TEST(Packing, SegmentTables) {
  const PackedLayout l = canonical_layout();
  // Step 0: both timesteps share slot 0.
  SegmentTable s00 = l.block_segments(0, 0);
  ASSERT_TRUE(s00.validate(3).ok()) << s00.validate(3).to_string();
  ASSERT_EQ(s00.segments.size(), 3u);
  EXPECT_EQ(s00.rows, 37810);
  EXPECT_EQ(s00.segments[0].start, 0);
  EXPECT_EQ(s00.segments[0].stop, 100);
  EXPECT_EQ(s00.segments[0].table_row, 1);  // text tag
  EXPECT_EQ(s00.segments[1].start, 100);
  EXPECT_EQ(s00.segments[1].stop, 514);
  EXPECT_EQ(s00.segments[1].table_row, 2);  // audio tag
  EXPECT_EQ(s00.segments[2].start, 514);
  EXPECT_EQ(s00.segments[2].stop, 37810);
  EXPECT_EQ(s00.segments[2].table_row, 0);  // video tag
  // Later steps: video slot 0, audio slot 1.
  SegmentTable s01 = l.block_segments(0, 1);
  ASSERT_TRUE(s01.validate(6).ok());
  EXPECT_FALSE(s01.validate(5).ok());  // row 5 needs 6 table rows
  EXPECT_EQ(s01.row_of(0), 1);
  EXPECT_EQ(s01.row_of(99), 1);
  EXPECT_EQ(s01.row_of(100), 5);
  EXPECT_EQ(s01.row_of(513), 5);
  EXPECT_EQ(s01.row_of(514), 0);
  EXPECT_EQ(s01.row_of(37809), 0);
  // Final-layer tables: row = slot; text uses the video slot.
  SegmentTable f01 = l.final_segments(0, 1);
  ASSERT_TRUE(f01.validate(2).ok());
  EXPECT_EQ(f01.row_of(50), 0);
  EXPECT_EQ(f01.row_of(200), 1);
  EXPECT_EQ(f01.row_of(600), 0);
  SegmentTable f00 = l.final_segments(0, 0);
  ASSERT_TRUE(f00.validate(1).ok());
  EXPECT_EQ(f00.segments.size(), 1u);  // merged: every row reads slot 0
  // validate() rejects gaps and overlaps.
  SegmentTable bad = s00;
  bad.segments[1].start = 101;
  EXPECT_FALSE(bad.validate(3).ok());
  bad = s00;
  bad.rows = 37811;
  EXPECT_FALSE(bad.validate(3).ok());
}

// Independent RoPE value: the FP32 product of two floats is exact in double, so fp32(a*b) == (float)(a*b in
// double); cos in long double; BF16 by explicit round-to-nearest-even on the FP32 bits.
uint16_t independent_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16);
}

TEST(Rope, MatchesIndependentComputation) {
  const ModelConfig cfg = ModelConfig::h3();
  const PackedLayout l = canonical_layout();
  auto t = make_rope_tables(cfg, l, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->cos.dtype(), DType::kBF16);
  ASSERT_EQ(t->cos.shape(), (Shape{37810, 48}));
  ASSERT_EQ(t->sin.shape(), (Shape{37810, 48}));
  EXPECT_EQ(t->rope_dims, 96);
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, 37809);
  std::vector<int64_t> rows = {0, 57, 99, 100, 306, 307, 513, 514, 1522, 37809};
  for (int i = 0; i < 40; ++i) rows.push_back(pick(rng));
  const uint16_t* c = t->cos.data<uint16_t>();
  const uint16_t* s = t->sin.data<uint16_t>();
  for (int64_t r : rows) {
    for (int col = 0; col < 48; ++col) {
      const int axis = col / 16, k = col % 16;
      const long double inv_ld = powl(10000.0L, -static_cast<long double>(k) / 16.0L);
      const float inv = static_cast<float>(static_cast<double>(inv_ld));
      const float pos = static_cast<float>(l.positions[static_cast<size_t>(r)][static_cast<size_t>(axis)]);
      const float freq = static_cast<float>(static_cast<double>(pos) * static_cast<double>(inv));
      const uint16_t want_c = independent_bf16(static_cast<float>(cosl(static_cast<long double>(freq))));
      const uint16_t want_s = independent_bf16(static_cast<float>(sinl(static_cast<long double>(freq))));
      ASSERT_EQ(c[r * 48 + col], want_c) << "cos row " << r << " col " << col << " seed " << seed;
      ASSERT_EQ(s[r * 48 + col], want_s) << "sin row " << r << " col " << col << " seed " << seed;
    }
  }
}

TEST(Rope, GoldenBitsFromNumpy) {
  // Computed with numpy float32/float64 + ml_dtypes.bfloat16 (same recipe), columns 0,1,5,15,16,17,31,32,40,47.
  const PackedLayout l = canonical_layout();
  auto t = make_rope_tables(ModelConfig::h3(), l, nullptr);
  ASSERT_TRUE(t.ok());
  const int cols[10] = {0, 1, 5, 15, 16, 17, 31, 32, 40, 47};
  struct Golden {
    int64_t row;
    uint16_t cos[10], sin[10];
  };
  const Golden golden[] = {
      {514,
       {0x3f5d, 0x3f73, 0x3f4a, 0x3f80, 0xbf39, 0xbf16, 0x3f80, 0x3ee0, 0x3f80, 0x3f80},
       {0xbf02, 0xbe9e, 0xbf1d, 0x3c92, 0xbf31, 0x3f50, 0x3a36, 0x3f66, 0xbd54, 0xba71}},
      {37809,
       {0xbcb5, 0x3f16, 0xbecb, 0x3f80, 0xbec0, 0xbf64, 0x3f80, 0x3cf4, 0x3f6f, 0x3f80},
       {0xbf80, 0xbf4f, 0xbf6b, 0x3d5a, 0x3f6d, 0x3eeb, 0x3b9e, 0xbf80, 0x3eb5, 0x3bd3}},
      {513,
       {0xbe9a, 0xbf42, 0xbd92, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3cf4, 0x3f6f, 0x3f80},
       {0xbf74, 0x3f27, 0xbf7f, 0x3d5f, 0x0, 0x0, 0x0, 0xbf80, 0x3eb5, 0x3bd3}},
      {57,
       {0x3f66, 0x3f4e, 0xbf7f, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80},
       {0x3edf, 0x3f18, 0xbd82, 0x3c26, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0}},
  };
  for (const Golden& g : golden) {
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(t->cos.data<uint16_t>()[g.row * 48 + cols[i]], g.cos[i]) << "cos row " << g.row << " col " << cols[i];
      EXPECT_EQ(t->sin.data<uint16_t>()[g.row * 48 + cols[i]], g.sin[i]) << "sin row " << g.row << " col " << cols[i];
    }
  }
}

TEST(Rope, CheckpointInvFreqIsUsedAndValidated) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  auto geo = make_geometry(cfg, 448, 256, 22, 16);
  ASSERT_TRUE(geo.ok());
  auto l = pack_request(cfg, *geo);
  ASSERT_TRUE(l.ok());
  const int L = cfg.rope_inv_freq_len;
  Tensor inv = Tensor::empty({L}, DType::kF32);
  for (int k = 0; k < L; ++k) inv.data<float>()[k] = 0.5f / static_cast<float>(k + 1);  // not theta-based
  auto t = make_rope_tables(cfg, *l, &inv);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->cos.shape(), (Shape{874, 3 * L}));
  const int64_t r = 700;
  const float pos_w = static_cast<float>(l->positions[r][2]);
  const float freq = pos_w * (0.5f / 3.0f);  // axis w, k = 2
  EXPECT_EQ(t->sin.data<uint16_t>()[r * 3 * L + 2 * L + 2],
            bf16_bits_from_f32(static_cast<float>(std::sin(static_cast<double>(freq)))));
  Tensor wrong = Tensor::empty({L + 1}, DType::kF32);
  EXPECT_FALSE(make_rope_tables(cfg, *l, &wrong).ok());
  Tensor wrong_dtype = Tensor::empty({L}, DType::kBF16);
  EXPECT_FALSE(make_rope_tables(cfg, *l, &wrong_dtype).ok());
}

TEST(Rope, TwoRoundingsFp64ToFp32ToBf16) {
  // docs/numerics.md: cos = R(fp32_rn(cos_fp64(freq))). Find a frequency where rounding the FP64 cosine
  // to FP32 lands exactly on a BF16 tie that round-to-even resolves against the true value, so one direct
  // FP64 -> BF16 rounding would differ; feed it through a checkpoint inv_freq and text row 1 (t = 1).
  float f = 0.5f;
  uint16_t two = 0, one = 0;
  bool found = false;
  for (int it = 0; it < 50000000 && !found; ++it) {
    f = std::nextafter(f, 2.0f);
    const double c = std::cos(static_cast<double>(f));
    const float c32 = static_cast<float>(c);
    uint32_t u;
    std::memcpy(&u, &c32, 4);
    if ((u & 0xFFFFu) != 0x8000u) continue;
    two = independent_bf16(c32);
    one = bf16_bits_from_f64(c);
    found = two != one;
  }
  ASSERT_TRUE(found) << "no double-rounding witness found";
  const ModelConfig cfg = ModelConfig::h3_tiny();
  auto geo = make_geometry(cfg, 448, 256, 22, 4);
  ASSERT_TRUE(geo.ok());
  auto l = pack_request(cfg, *geo);
  ASSERT_TRUE(l.ok());
  Tensor inv = Tensor::empty({cfg.rope_inv_freq_len}, DType::kF32);
  for (int k = 0; k < cfg.rope_inv_freq_len; ++k) inv.data<float>()[k] = f;
  auto t = make_rope_tables(cfg, *l, &inv);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->cos.data<uint16_t>()[1 * 3 * cfg.rope_inv_freq_len + 0], two) << "freq " << f;
  EXPECT_NE(t->cos.data<uint16_t>()[1 * 3 * cfg.rope_inv_freq_len + 0], one) << "freq " << f;
}

Tensor random_tensor(std::mt19937& rng, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

TEST(Patchify, VideoRoundTripAndIndexFormula) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  const ModelConfig cfg = ModelConfig::h3_tiny();
  auto geo = make_geometry(cfg, 448, 256, 22, 16);
  ASSERT_TRUE(geo.ok());
  const int64_t C = cfg.in_channels, T = geo->latent_frames, H = geo->latent_h, W = geo->latent_w;
  Tensor lat = random_tensor(rng, {C, T, H, W});
  auto rows = patchify_video(cfg, lat);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  ASSERT_EQ(rows->shape(), (Shape{T * (H / 2) * (W / 2), C * 4}));
  // Index formula: row (t, hi, wi), feature c*4 + ph*2 + pw <- latent [c, t, 2hi+ph, 2wi+pw].
  std::uniform_int_distribution<int64_t> dc(0, C - 1), dt(0, T - 1), dh(0, H / 2 - 1), dw(0, W / 2 - 1), dp(0, 1);
  for (int i = 0; i < 200; ++i) {
    const int64_t c = dc(rng), t = dt(rng), hi = dh(rng), wi = dw(rng), ph = dp(rng), pw = dp(rng);
    const int64_t row = (t * (H / 2) + hi) * (W / 2) + wi;
    EXPECT_EQ(rows->data<float>()[row * C * 4 + c * 4 + ph * 2 + pw],
              lat.data<float>()[((c * T + t) * H + 2 * hi + ph) * W + 2 * wi + pw])
        << "seed " << seed;
  }
  auto back = unpatchify_video(cfg, *geo, *rows);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->shape(), lat.shape());
  EXPECT_EQ(std::memcmp(back->raw_data(), lat.raw_data(), lat.nbytes()), 0) << "seed " << seed;
  // Errors.
  Tensor odd = random_tensor(rng, {C, T, H + 1, W});
  EXPECT_FALSE(patchify_video(cfg, odd).ok());
  Tensor wrong_c = random_tensor(rng, {C + 1, T, H, W});
  EXPECT_FALSE(patchify_video(cfg, wrong_c).ok());
  Tensor short_rows = random_tensor(rng, {10, C * 4});
  EXPECT_FALSE(unpatchify_video(cfg, *geo, short_rows).ok());
}

TEST(Patchify, AudioRoundTripChannelMajor) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  const ModelConfig cfg = ModelConfig::h3_tiny();
  auto geo = make_geometry(cfg, 448, 256, 22, 16);
  ASSERT_TRUE(geo.ok());
  const int64_t C = cfg.audio_in_channels, Ta = geo->audio_latents;
  Tensor lat = random_tensor(rng, {2, C, Ta});
  auto rows = audio_to_rows(lat);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->shape(), (Shape{2 * Ta, C}));
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t j = 0; j < Ta; j += 5)
      for (int64_t c = 0; c < C; c += 3)
        EXPECT_EQ(rows->data<float>()[(ch * Ta + j) * C + c], lat.data<float>()[(ch * C + c) * Ta + j]);
  auto back = rows_to_audio(cfg, *geo, *rows);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::memcmp(back->raw_data(), lat.raw_data(), lat.nbytes()), 0) << "seed " << seed;
  Tensor mono = random_tensor(rng, {1, C, Ta});
  EXPECT_FALSE(audio_to_rows(mono).ok());
  EXPECT_FALSE(rows_to_audio(cfg, *geo, mono).ok());
}

}  // namespace
}  // namespace vortex
