// VideoVae::decode writes every pixel once (each clip's tiles stitched and cross-faded by Backend::video_stitch_clip
// while the next clip runs). This test recomposes the same decode literally as diffusers does — per-tile forwards
// (VideoVae::decode_tile), then _stitch_tiles (blend each tile with the ORIGINAL tile above and to the left, crop,
// concatenate), the per-clip chunks with the 5-frame cross-fade, the concatenation and the final crop of padded
// frames, each step materialized — and requires the two outputs to be bit-identical on the fixture VAE (a
// single odd tile; 3x2 tiles x 2 clips; the same latents untiled).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "vae/video_vae.h"

#ifndef VORTEX_VAE_FIXTURES
#error "VORTEX_VAE_FIXTURES must name tests/vae/fixtures"
#endif

namespace vortex {
namespace {

struct Video {
  int c = 0, f = 0, h = 0, w = 0;
  std::vector<float> v;
  Video() = default;
  Video(int c_, int f_, int h_, int w_) : c(c_), f(f_), h(h_), w(w_), v(static_cast<size_t>(c_) * f_ * h_ * w_) {}
  float& at(int ci, int fi, int y, int x) { return v[((static_cast<size_t>(ci) * f + fi) * h + y) * w + x]; }
  float at(int ci, int fi, int y, int x) const { return v[((static_cast<size_t>(ci) * f + fi) * h + y) * w + x]; }
  int len(int axis) const { return axis == 0 ? f : axis == 1 ? h : w; }
};

Video from_tensor(const Tensor& t) {
  Video out(static_cast<int>(t.dim(0)), static_cast<int>(t.dim(1)), static_cast<int>(t.dim(2)),
            static_cast<int>(t.dim(3)));
  std::memcpy(out.v.data(), t.raw_data(), out.v.size() * sizeof(float));
  return out;
}

Video crop(const Video& a, int f0, int nf, int y0, int nh, int x0, int nw) {
  Video out(a.c, nf, nh, nw);
  for (int ci = 0; ci < a.c; ++ci)
    for (int fi = 0; fi < nf; ++fi)
      for (int y = 0; y < nh; ++y)
        for (int x = 0; x < nw; ++x) out.at(ci, fi, y, x) = a.at(ci, f0 + fi, y0 + y, x0 + x);
  return out;
}

// diffusers _blend(a, b, extent, dim): b's first e = min(|a|, |b|, extent) entries along `axis` become
// a[-e + i] * (1 - i/e) + b[i] * (i/e) in FP32.
Video blend(const Video& a, const Video& b, int extent, int axis) {
  const int e = std::min({a.len(axis), b.len(axis), extent});
  Video out = b;
  for (int i = 0; i < e; ++i) {
    const float p = static_cast<float>(i) / static_cast<float>(e);
    for (int ci = 0; ci < b.c; ++ci)
      for (int fi = 0; fi < (axis == 0 ? 1 : b.f); ++fi)
        for (int y = 0; y < (axis == 1 ? 1 : b.h); ++y)
          for (int x = 0; x < (axis == 2 ? 1 : b.w); ++x) {
            const int bf = axis == 0 ? i : fi, by = axis == 1 ? i : y, bx = axis == 2 ? i : x;
            const int af = axis == 0 ? a.f - e + i : fi, ay = axis == 1 ? a.h - e + i : y,
                      ax = axis == 2 ? a.w - e + i : x;
            volatile float ta = a.at(ci, af, ay, ax) * (1.0f - p);
            volatile float tb = b.at(ci, bf, by, bx) * p;
            out.at(ci, bf, by, bx) = ta + tb;
          }
  }
  return out;
}

Video concat(const std::vector<Video>& parts, int axis) {
  int total = 0;
  for (const Video& p : parts) total += p.len(axis);
  const Video& f = parts.front();
  Video out(f.c, axis == 0 ? total : f.f, axis == 1 ? total : f.h, axis == 2 ? total : f.w);
  int off = 0;
  for (const Video& p : parts) {
    for (int ci = 0; ci < p.c; ++ci)
      for (int fi = 0; fi < p.f; ++fi)
        for (int y = 0; y < p.h; ++y)
          for (int x = 0; x < p.w; ++x)
            out.at(ci, fi + (axis == 0 ? off : 0), y + (axis == 1 ? off : 0), x + (axis == 2 ? off : 0)) =
                p.at(ci, fi, y, x);
    off += p.len(axis);
  }
  return out;
}

Tensor block(const Tensor& z, int64_t t0, int64_t nt, int64_t y0, int64_t nh, int64_t x0, int64_t nw) {
  const int64_t c = z.dim(0), t = z.dim(1), h = z.dim(2), w = z.dim(3);
  Tensor out = Tensor::empty({c, nt, nh, nw}, DType::kF32);
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t ti = 0; ti < nt; ++ti)
      for (int64_t y = 0; y < nh; ++y)
        for (int64_t x = 0; x < nw; ++x)
          out.data<float>()[((ci * nt + ti) * nh + y) * nw + x] =
              z.data<float>()[((ci * t + t0 + ti) * h + y0 + y) * w + x0 + x];
  return out;
}

// diffusers' decode, step by step, with the tile forwards from VideoVae::decode_tile.
Video literal_decode(VideoVae& vae, const Tensor& latents) {
  const VideoVaeConfig& cfg = vae.config();
  const int64_t c = latents.dim(0), t = latents.dim(1), h = latents.dim(2), w = latents.dim(3);
  const int64_t tcs = cfg.tokens_chunk_size(), drop = cfg.token_drop, ratio = cfg.patch_t;
  const int64_t chunk_frames = tcs * ratio, pre = cfg.frame_pre_padding();
  const int64_t pad = ((-(t + drop)) % tcs + tcs) % tcs;
  const int64_t chunks = (t + drop + pad) / tcs - (drop > 0 ? 1 : 0);
  Tensor z = Tensor::empty({c, t + pad, h, w}, DType::kF32);
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t ti = 0; ti < t + pad; ++ti)
      for (int64_t i = 0; i < h * w; ++i) {
        volatile float sv = latents.data<float>()[(ci * t + std::min(ti, t - 1)) * h * w + i] * cfg.latents_std[ci];
        z.data<float>()[(ci * (t + pad) + ti) * h * w + i] = sv + cfg.latents_mean[ci];
      }
  auto decode_clip = [&](const Tensor& zc) -> Video {
    if (!cfg.tiling) return from_tensor(*vae.decode_tile(zc));
    const int r = cfg.patch;
    const TileSplit ys = split_tiles(static_cast<int>(zc.dim(2)) * r, cfg.tile, cfg.tile_overlap, r);
    const TileSplit xs = split_tiles(static_cast<int>(zc.dim(3)) * r, cfg.tile, cfg.tile_overlap, r);
    std::vector<std::vector<Video>> tiles;
    for (size_t i = 0; i < ys.starts.size(); ++i) {
      tiles.emplace_back();
      for (size_t j = 0; j < xs.starts.size(); ++j) {
        auto dec = vae.decode_tile(
            block(zc, 0, zc.dim(1), ys.starts[i] / r, ys.lengths[i] / r, xs.starts[j] / r, xs.lengths[j] / r));
        EXPECT_TRUE(dec.ok()) << dec.status().to_string();
        tiles.back().push_back(from_tensor(*dec));
      }
    }
    std::vector<Video> rows;
    for (size_t i = 0; i < tiles.size(); ++i) {
      std::vector<Video> parts;
      for (size_t j = 0; j < tiles[i].size(); ++j) {
        Video tile = tiles[i][j];
        if (i > 0) tile = blend(tiles[i - 1][j], tile, ys.overlaps[i - 1], 1);
        if (j > 0) tile = blend(tiles[i][j - 1], tile, xs.overlaps[j - 1], 2);
        const int th = tile.h - (i + 1 < tiles.size() ? ys.overlaps[i] : 0);
        const int tw = tile.w - (j + 1 < tiles[i].size() ? xs.overlaps[j] : 0);
        parts.push_back(crop(tile, 0, tile.f, 0, th, 0, tw));
      }
      rows.push_back(concat(parts, 2));
    }
    return concat(rows, 1);
  };
  std::vector<Video> out;
  Video overlap;
  bool have_overlap = false;
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t start = i * tcs, len = std::min<int64_t>(tcs + cfg.token_overlap(), t + pad - start);
    const Video clip = decode_clip(block(z, start, len, 0, h, 0, w));
    for (int64_t j = 0; j < (drop > 0 ? 2 : 1); ++j) {
      const int64_t fs = j * chunk_frames, fe = std::min<int64_t>(clip.f, fs + chunk_frames);
      const int64_t f0 = std::min<int64_t>(fe, fs + pre);
      Video chunk = crop(clip, static_cast<int>(f0), static_cast<int>(fe - f0), 0, clip.h, 0, clip.w);
      if (j == 0) {
        if (have_overlap) chunk = blend(overlap, chunk, cfg.frame_overlap(), 0);
        out.push_back(std::move(chunk));
      } else {
        overlap = std::move(chunk);
        have_overlap = true;
      }
    }
  }
  if (have_overlap) out.push_back(overlap);
  Video dec = concat(out, 0);
  int64_t pad_frames = 0;
  const int64_t tail = cfg.clip_length % ratio;
  for (int64_t k = 0; k < pad; ++k) pad_frames += (tail && (t + k) % tcs == 0) ? tail : ratio;
  return crop(dec, 0, static_cast<int>(dec.f - pad_frames), 0, dec.h, 0, dec.w);
}

struct StitchCase {
  const char* name;
  int tile, overlap;
  bool tiling;
};

class VideoStitch : public ::testing::TestWithParam<StitchCase> {};

TEST_P(VideoStitch, OnePassEqualsLiteralComposition) {
  const StitchCase sc = GetParam();
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto vae = VideoVae::load(std::string(VORTEX_VAE_FIXTURES) + "/video_vae", **backend);
  ASSERT_TRUE(vae.ok()) << vae.status().to_string();
  (*vae)->mutable_config().tile = sc.tile;
  (*vae)->mutable_config().tile_overlap = sc.overlap;
  (*vae)->mutable_config().tiling = sc.tiling;
  auto cases = SafetensorsFile::open(std::string(VORTEX_VAE_FIXTURES) + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok());
  auto latents = cases->tensor(std::string(sc.name) + ".latents");
  ASSERT_TRUE(latents.ok());
  auto got = (*vae)->decode(*latents);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const Video want = literal_decode(**vae, *latents);
  ASSERT_EQ(got->shape(), (Shape{want.c, want.f, want.h, want.w}));
  int64_t differ = 0;
  for (size_t i = 0; i < want.v.size(); ++i)
    differ += std::memcmp(&want.v[i], got->data<float>() + i, sizeof(float)) != 0;
  EXPECT_EQ(differ, 0) << "of " << want.v.size() << " values";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VideoStitch,
                         ::testing::Values(StitchCase{"odd_single_tile", 256, 64, true},
                                           StitchCase{"tiled_two_clips", 16, 4, true},
                                           StitchCase{"tiled_two_clips", 256, 64, false}),
                         [](const auto& info) {
                           return std::string(info.param.name) + (info.param.tiling ? "_tiled" : "_untiled");
                         });

// Batched tile forwards (VideoVae::Batching): a clip's tiles run as one forward of B * S rows. On the CPU backend
// every row-wise op and the per-sequence attention give the same bytes for any batching, so each setting must
// reproduce the one-tile-per-forward decode exactly (the literal composition above is per tile too).
TEST(VideoBatching, EverySettingGivesTheSameBytes) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto vae = VideoVae::load(std::string(VORTEX_VAE_FIXTURES) + "/video_vae", **backend);
  ASSERT_TRUE(vae.ok()) << vae.status().to_string();
  (*vae)->mutable_config().tile = 16;
  (*vae)->mutable_config().tile_overlap = 4;
  auto cases = SafetensorsFile::open(std::string(VORTEX_VAE_FIXTURES) + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok());
  auto latents = cases->tensor("tiled_two_clips.latents");
  ASSERT_TRUE(latents.ok());
  VideoVae::Batching one;
  one.max_batch_tiles = 1;
  ASSERT_TRUE((*vae)->set_batching(one).ok());
  auto want = (*vae)->decode(*latents);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  const int64_t per_tile_bytes = (*vae)->workspace_bytes();
  VideoVae::Batching all, two, looped, small_rows;
  two.max_batch_tiles = 2;
  looped.batched_attention = false;
  small_rows.max_batch_rows = 1;  // below one tile: every batch still takes one tile
  int index = 0;
  for (const VideoVae::Batching& b : {all, two, looped, small_rows}) {
    ASSERT_TRUE((*vae)->set_batching(b).ok());
    auto got = (*vae)->decode(*latents);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->shape(), want->shape());
    EXPECT_EQ(std::memcmp(got->raw_data(), want->raw_data(), want->nbytes()), 0) << "setting " << index;
    ++index;
  }
  // The unlimited setting really batched: its workspace holds more rows than a single tile's.
  ASSERT_TRUE((*vae)->set_batching(all).ok());
  auto vae2 = VideoVae::load(std::string(VORTEX_VAE_FIXTURES) + "/video_vae", **backend);
  ASSERT_TRUE(vae2.ok());
  (*vae2)->mutable_config().tile = 16;
  (*vae2)->mutable_config().tile_overlap = 4;
  ASSERT_TRUE((*vae2)->decode(*latents).ok());
  EXPECT_GT((*vae2)->workspace_bytes(), per_tile_bytes);
}

TEST(VideoBatching, RejectsBadLimits) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto vae = VideoVae::load(std::string(VORTEX_VAE_FIXTURES) + "/video_vae", **backend);
  ASSERT_TRUE(vae.ok());
  VideoVae::Batching b;
  b.max_batch_tiles = -1;
  EXPECT_EQ((*vae)->set_batching(b).code(), ErrorCode::kInvalidArgument);
  b.max_batch_tiles = 0;
  b.max_batch_rows = 0;
  EXPECT_EQ((*vae)->set_batching(b).code(), ErrorCode::kInvalidArgument);
}

// Backend::attention_batched's default (one attention() per row block) against attention() on each block.
TEST(VideoBatching, AttentionBatchedIsPerSequenceAttention) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  Backend& be = **backend;
  const int64_t batch = 3, len = 7, heads = 2, hd = 16, width = heads * hd;
  Tensor qkv = Tensor::empty({batch * len, 3 * width}, DType::kBF16);  // [B * L, 3I]
  uint64_t state = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed());
  for (int64_t i = 0; i < qkv.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    qkv.data<uint16_t>()[i] =
        bf16_bits_from_f32(static_cast<float>(static_cast<int64_t>(state >> 40) % 2001 - 1000) / 500.0f);
  }
  auto q = qkv.as_strided({batch * len, width}, {3 * width, 1}, 0);
  auto k = qkv.as_strided({batch * len, width}, {3 * width, 1}, width);
  auto v = qkv.as_strided({batch * len, width}, {3 * width, 1}, 2 * width);
  ASSERT_TRUE(q.ok() && k.ok() && v.ok());
  Tensor got = Tensor::empty({batch * len, width}, DType::kBF16);
  std::memset(got.raw_data(), 0xff, got.nbytes());  // poison
  ASSERT_TRUE(be.attention_batched(*q, *k, *v, batch, heads, hd, got, ExecOptions{}).ok());
  for (int64_t b = 0; b < batch; ++b) {
    Tensor want = Tensor::empty({len, width}, DType::kBF16);
    auto qb = q->narrow(0, b * len, len), kb = k->narrow(0, b * len, len), vb = v->narrow(0, b * len, len);
    ASSERT_TRUE(be.attention(*qb, *kb, *vb, heads, hd, want, ExecOptions{}).ok());
    EXPECT_EQ(std::memcmp(want.raw_data(), got.data<uint16_t>() + b * len * width, want.nbytes()), 0) << "block " << b;
  }
  // Against whole-sequence attention the blocks must differ (the batch really is independent sequences).
  Tensor whole = Tensor::empty({batch * len, width}, DType::kBF16);
  ASSERT_TRUE(be.attention(*q, *k, *v, heads, hd, whole, ExecOptions{}).ok());
  EXPECT_NE(std::memcmp(whole.raw_data(), got.raw_data(), got.nbytes()), 0);
  EXPECT_EQ(be.attention_batched(*q, *k, *v, 2, heads, hd, got, ExecOptions{}).code(), ErrorCode::kInvalidArgument);
}

// Backend::video_stitch_clip on the CPU backend: a 1 x 2 tile clip with a column blend and a cross-fade against values
// worked out by hand, and operands the op must reject before writing anything.
TEST(VideoStitchOp, HandWorkedClipAndRejects) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  Backend& be = **backend;
  VideoStitchClip g;  // 1 channel, 1 x 1 pixel patches, tiles of 1 frame x 1 row x 2 columns, one blended column
  g.channels = 1, g.patch = 1, g.patch_t = 1, g.tile_t = 1, g.tile_h = 1, g.tile_w = 2, g.rows_per_tile = 3;
  g.ny = 1, g.nx = 2, g.y_off[1] = 1, g.x_off[1] = 1, g.x_off[2] = 3, g.blend_x[1] = 1;
  g.f00 = 0, g.fe0 = 1, g.cross_fade = 1;
  Tensor y = Tensor::empty({6, 1}, DType::kBF16);  // tile 0: 1, 3 (row 2 unread); tile 1: 5, 7
  const float vals[6] = {1.0f, 3.0f, 99.0f, 5.0f, 7.0f, 99.0f};
  for (int i = 0; i < 6; ++i) y.data<uint16_t>()[i] = bf16_bits_from_f32(vals[i]);
  Tensor prev = Tensor::empty({1, 2, 1, 3}, DType::kF32);  // cross-fade frame = prev frame 1
  for (int i = 0; i < 6; ++i) prev.data<float>()[i] = static_cast<float>(10 * i);
  Tensor out = Tensor::empty({1, 1, 1, 3}, DType::kF32), none;
  for (int i = 0; i < 3; ++i) out.data<float>()[i] = std::nanf("");  // poison
  ASSERT_TRUE(be.video_stitch_clip(y, g, prev, out, none).ok());
  // Cross-fade with e = 1 at i = 0 keeps the prev value (weight 1 - 0 / 1); the column blend at i = 0 keeps the left
  // tile's value 3 (then the cross-fade replaces it with prev).
  EXPECT_EQ(out.data<float>()[0], 30.0f);
  EXPECT_EQ(out.data<float>()[1], 40.0f);
  EXPECT_EQ(out.data<float>()[2], 50.0f);
  g.cross_fade = 0;
  ASSERT_TRUE(be.video_stitch_clip(y, g, prev, out, none).ok());
  EXPECT_EQ(out.data<float>()[0], 1.0f);  // tile 0 column 0
  EXPECT_EQ(out.data<float>()[1], 3.0f);  // tile 1 column 0 blended at i = 0: all weight on the left tile's column 1
  EXPECT_EQ(out.data<float>()[2], 7.0f);  // tile 1 column 1
  Tensor wrong = Tensor::empty({1, 1, 1, 2}, DType::kF32);
  EXPECT_EQ(be.video_stitch_clip(y, g, prev, wrong, none).code(), ErrorCode::kInvalidArgument);
  VideoStitchClip bad = g;
  bad.cross_fade = 1;
  EXPECT_EQ(be.video_stitch_clip(y, bad, none, out, none).code(), ErrorCode::kInvalidArgument);  // no prev
  bad = g;
  bad.fe1 = 1;  // [f01, fe1) = [0, 1) overlaps [f00, fe0)
  EXPECT_EQ(be.video_stitch_clip(y, bad, none, out, none).code(), ErrorCode::kInvalidArgument);
  bad = g;
  bad.rows_per_tile = 1;  // below the tile's voxel count
  EXPECT_EQ(be.video_stitch_clip(y, bad, none, out, none).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
