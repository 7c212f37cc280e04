// `vortex decode` end to end through the built binary: generate -> decode with synthetic decoders (streams,
// frame count, sample rate; the PNG frames equal the in-process decode that the MP4 encoder received), the
// diffusers fixture VAE folders through the CLI (frames within 1/255 of diffusers' uint8), and bad input:
// exit 2 with a clear message and nothing written; runtime failures exit 1.
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/backend.h"
#include "cli/cli_test_util.h"
#include "io/safetensors.h"
#include "media/mp4_writer.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"

namespace vortex_cli_test {
namespace {

using vortex::DType;
using vortex::Tensor;

std::string fixtures() { return VORTEX_VAE_FIXTURES; }

// 8-bit RGB PNG -> bytes [H, W, 3].
std::vector<uint8_t> read_png(const std::string& path, int& w, int& h) {
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  std::vector<uint8_t> px;
  if (!png_image_begin_read_from_file(&img, path.c_str())) return px;
  img.format = PNG_FORMAT_RGB;
  px.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, px.data(), 0, nullptr)) px.clear();
  w = static_cast<int>(img.width);
  h = static_cast<int>(img.height);
  return px;
}

Tensor read_tensor(const std::string& file, const std::string& name) {
  auto f = vortex::SafetensorsFile::open(file);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  auto t = f->tensor(name);
  EXPECT_TRUE(t.ok());
  Tensor c = Tensor::empty(t->shape(), t->dtype());
  std::memcpy(c.raw_data(), t->raw_data(), c.nbytes());
  return c;
}

void write_latents(const std::string& dir, const Tensor& video, const Tensor& audio) {
  fs::create_directories(dir);
  ASSERT_TRUE(vortex::write_safetensors(dir + "/video_latents.safetensors", {{"video_latents", video}}).ok());
  ASSERT_TRUE(vortex::write_safetensors(dir + "/audio_latents.safetensors", {{"audio_latents", audio}}).ok());
}

TEST(CliDecode, GenerateThenDecodeWithSyntheticDecoders) {
  ScratchDir tmp;
  RunResult g = run_vortex(
      "generate --config h3-tiny --synthetic --synthetic-text 8 --width 448 --height 256 "
      "--frames 22 --steps 1 --seed 3 --backend cpu --quiet --out " +
      tmp.str("gen"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  RunResult d = run_vortex("decode " + tmp.str("gen") + " --synthetic-vae tiny --out " + tmp.str("dec") +
                           " --frames-dir " + tmp.str("frames"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("video tile 2/2"), std::string::npos) << d.output;
  auto info = vortex::probe_media(tmp.str("dec/video.mp4"));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->streams, 2);
  EXPECT_EQ(info->video_codec, "h264");
  EXPECT_EQ(info->pixel_format, "yuv420p");
  EXPECT_EQ(info->width, 448);
  EXPECT_EQ(info->height, 256);
  EXPECT_EQ(info->video_frames, 22);
  EXPECT_EQ(info->audio_codec, "aac");
  EXPECT_EQ(info->sample_rate, 32000);
  EXPECT_EQ(info->channels, 2);
  EXPECT_NEAR(info->duration_s, 22.0 / 24.0, 0.1);
  const Tensor audio_latents = read_tensor(tmp.str("gen/audio_latents.safetensors"), "audio_latents");
  EXPECT_EQ(fs::file_size(tmp.str("dec/audio.wav")), 56u + static_cast<uint64_t>(audio_latents.dim(2)) * 800 * 8);
  auto manifest = nlohmann::json::parse(read_file(tmp.str("dec/decode.json")));
  EXPECT_EQ(manifest["schema"], "vortex.decode/1");
  EXPECT_EQ(manifest["video"]["crf"], 18);
  // The PNG frames are exactly what the encoder received: the same decode run in process.
  auto backend = vortex::make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto vae = vortex::VideoVae::synthetic(vortex::VideoVaeConfig::tiny(), **backend, 0);
  ASSERT_TRUE(vae.ok());
  auto dec = (*vae)->decode(read_tensor(tmp.str("gen/video_latents.safetensors"), "video_latents"));
  ASSERT_TRUE(dec.ok()) << dec.status().to_string();
  auto rgb = vortex::video_to_rgb8(*dec);
  ASSERT_TRUE(rgb.ok());
  int count = 0;
  for (const auto& e : fs::directory_iterator(tmp.str("frames"))) count += e.path().extension() == ".png";
  EXPECT_EQ(count, 22);
  for (int f : {0, 21}) {
    char name[64];
    std::snprintf(name, sizeof(name), "frames/frame_%05d.png", f);
    int w = 0, h = 0;
    const std::vector<uint8_t> px = read_png(tmp.str(name), w, h);
    ASSERT_EQ(w, 448);
    ASSERT_EQ(h, 256);
    EXPECT_EQ(std::memcmp(px.data(), rgb->data<uint8_t>() + static_cast<size_t>(f) * 448 * 256 * 3, px.size()), 0) << f;
  }
  // A second decode into the same folder needs --overwrite, which replaces only our own outputs.
  RunResult again = run_vortex("decode " + tmp.str("gen") + " --synthetic-vae tiny --quiet --out " + tmp.str("dec"));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  RunResult over =
      run_vortex("decode " + tmp.str("gen") + " --synthetic-vae tiny --quiet --overwrite --out " + tmp.str("dec"));
  EXPECT_EQ(over.exit_code, 0) << over.output;
}

TEST(CliDecode, DiffusersFixtureFoldersThroughTheCli) {
  ScratchDir tmp;
  const Tensor video = read_tensor(fixtures() + "/video_cases.safetensors", "odd_single_tile.latents");
  const Tensor want = read_tensor(fixtures() + "/video_cases.safetensors", "odd_single_tile.u8");  // [3, F, H, W]
  write_latents(tmp.str("lat"), video, read_tensor(fixtures() + "/audio_cases.safetensors", "short.latents"));
  RunResult d =
      run_vortex("decode " + tmp.str("lat") + " --vae " + fixtures() + "/video_vae --audio-vae " + fixtures() +
                 "/audio_vae --quiet --out " + tmp.str("dec") + " --frames-dir " + tmp.str("frames"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const int64_t f = want.dim(1), h = want.dim(2), w = want.dim(3);
  int64_t within = 0, total = 0;
  for (int64_t fi = 0; fi < f; ++fi) {
    char name[64];
    std::snprintf(name, sizeof(name), "frames/frame_%05lld.png", static_cast<long long>(fi));
    int pw = 0, ph = 0;
    const std::vector<uint8_t> px = read_png(tmp.str(name), pw, ph);
    ASSERT_EQ(pw, w);
    ASSERT_EQ(ph, h);
    for (int64_t i = 0; i < h * w; ++i)
      for (int c = 0; c < 3; ++c) {
        within += std::abs(px[i * 3 + c] - want.data<uint8_t>()[(c * f + fi) * h * w + i]) <= 1;
        ++total;
      }
  }
  EXPECT_EQ(within, total);
  auto info = vortex::probe_media(tmp.str("dec/video.mp4"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->video_frames, f);
  // The official original layout of the same weights: the same frames and WAV, byte for byte.
  RunResult o = run_vortex("decode " + tmp.str("lat") + " --vae " + fixtures() + "/original/video_vae --audio-vae " +
                           fixtures() + "/original/audio_vae --quiet --out " + tmp.str("dec_orig") + " --frames-dir " +
                           tmp.str("frames_orig"));
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(read_file(tmp.str("dec_orig/audio.wav")), read_file(tmp.str("dec/audio.wav")));
  for (int64_t fi = 0; fi < f; ++fi) {
    char name[64];
    std::snprintf(name, sizeof(name), "/frame_%05lld.png", static_cast<long long>(fi));
    EXPECT_EQ(read_file(tmp.str("frames_orig") + name), read_file(tmp.str("frames") + name)) << name;
  }
}

// FFmpeg is loaded at run time: where it cannot be, decode says what to install before decoding anything
// and writes nothing.
TEST(CliDecode, MissingFfmpegModuleFailsBeforeDecoding) {
  ScratchDir tmp;
  RunResult g = run_vortex(
      "generate --config h3-tiny --synthetic --synthetic-text 8 --width 448 --height 256 "
      "--frames 22 --steps 1 --seed 3 --backend cpu --quiet --out " +
      tmp.str("gen"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  RunResult d = run_shell("VORTEX_FFMPEG_PLUGIN=" + tmp.str("no/libvortex_ffmpeg.so") + " '" + vortex_cli_path() +
                          "' decode " + tmp.str("gen") + " --synthetic-vae tiny --out " + tmp.str("dec") + " 2>&1");
  EXPECT_NE(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("MP4 output needs FFmpeg's shared libraries"), std::string::npos) << d.output;
  EXPECT_NE(d.output.find(tmp.str("no/libvortex_ffmpeg.so")), std::string::npos) << d.output;
  EXPECT_EQ(d.output.find("video tile"), std::string::npos) << d.output;
  EXPECT_FALSE(fs::exists(tmp.str("dec")));
}

TEST(CliDecode, BadInputExitsTwoAndWritesNothing) {
  ScratchDir tmp;
  auto make = [&](const std::string& name, Tensor v, Tensor a) { write_latents(tmp.str(name), v, a); };
  Tensor good_a = Tensor::zeros({2, 32, 8}, DType::kF32);
  Tensor nan_v = Tensor::zeros({24, 7, 2, 2}, DType::kF32);
  nan_v.data<float>()[9] = NAN;
  make("nan", nan_v, good_a);
  make("channels", Tensor::zeros({16, 7, 2, 2}, DType::kF32), good_a);
  make("frames", Tensor::zeros({24, 2, 2, 2}, DType::kF32), good_a);
  make("audio", Tensor::zeros({24, 7, 2, 2}, DType::kF32), Tensor::zeros({2, 8, 8}, DType::kF32));
  Tensor inf_a = Tensor::zeros({2, 32, 8}, DType::kF32);
  inf_a.data<float>()[5] = -INFINITY;
  make("inf", Tensor::zeros({24, 7, 2, 2}, DType::kF32), inf_a);
  make("rank", Tensor::zeros({24, 7, 4}, DType::kF32), good_a);
  make("dtype", Tensor::zeros({24, 7, 2, 2}, DType::kBF16), good_a);
  for (const char* c : {"nan", "channels", "frames", "audio", "inf", "rank", "dtype"}) {
    RunResult r =
        run_vortex("decode " + tmp.str(c) + " --synthetic-vae tiny --quiet --out " + tmp.str(std::string("out_") + c));
    EXPECT_EQ(r.exit_code, 2) << c << ": " << r.output;
    EXPECT_FALSE(fs::exists(tmp.str(std::string("out_") + c))) << c;
    for (const auto& e : fs::directory_iterator(tmp.path()))
      EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
  }
  EXPECT_NE(
      run_vortex("decode " + tmp.str("nan") + " --synthetic-vae tiny --out " + tmp.str("o")).output.find("non-finite"),
      std::string::npos);
  // Missing decoders, a missing folder, a foreign --out.
  EXPECT_EQ(run_vortex("decode " + tmp.str("audio") + " --out " + tmp.str("o")).exit_code, 2);
  EXPECT_EQ(run_vortex("decode " + tmp.str("nope") + " --synthetic-vae tiny --out " + tmp.str("o")).exit_code, 2);
  make("ok", Tensor::zeros({24, 7, 2, 2}, DType::kF32), good_a);
  fs::create_directories(tmp.str("foreign"));
  { std::ofstream(tmp.str("foreign/notes.txt")) << "keep"; }
  RunResult r =
      run_vortex("decode " + tmp.str("ok") + " --synthetic-vae tiny --quiet --overwrite --out " + tmp.str("foreign"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(read_file(tmp.str("foreign/notes.txt")), "keep");
  // The current directory is refused even when it holds only files decode writes.
  fs::create_directories(tmp.str("cwd"));
  { std::ofstream(tmp.str("cwd/frame_00000.png")) << "mine?"; }
  RunResult here =
      run_vortex_in(tmp.str("cwd"), "decode " + tmp.str("ok") + " --synthetic-vae tiny --quiet --overwrite --out .");
  EXPECT_EQ(here.exit_code, 2) << here.output;
  EXPECT_NE(here.output.find("is the current directory"), std::string::npos) << here.output;
  EXPECT_EQ(read_file(tmp.str("cwd/frame_00000.png")), "mine?");
}

// --video-encoder picks the H.264 encoder; decode.json names the one that ran and the streamed decode's timings
// (video.mp4 is encoded while the video decodes: src/engine/stream_mux.h). h264_nvenc where NVENC is absent (this
// machine without a GPU) fails with FFmpeg's reason and writes nothing; auto then falls back to libx264 and says why.
TEST(CliDecode, VideoEncoderChoiceAndStreamedTimings) {
  ScratchDir tmp;
  write_latents(tmp.str("lat"), Tensor::zeros({24, 7, 2, 2}, DType::kF32), Tensor::zeros({2, 32, 8}, DType::kF32));
  auto decode_with = [&](const std::string& enc, const std::string& out) {
    return run_vortex("decode " + tmp.str("lat") + " --synthetic-vae tiny --quiet --video-encoder " + enc + " --out " +
                      tmp.str(out));
  };
  RunResult x264 = decode_with("libx264", "x264");
  ASSERT_EQ(x264.exit_code, 0) << x264.output;
  auto m = nlohmann::json::parse(read_file(tmp.str("x264/decode.json")));
  EXPECT_EQ(m["video"]["encoder"], "libx264");
  EXPECT_FALSE(m["video"].contains("encoder_fallback"));
  const nlohmann::json& t = m["timings_s"];
  for (const char* k : {"audio_decode", "video_decode", "mux_tail", "decode_to_mp4"})
    ASSERT_TRUE(t.contains(k) && t[k].is_number() && t[k].get<double>() >= 0.0) << k << ": " << t.dump();
  EXPECT_GE(t["decode_to_mp4"].get<double>(),
            t["audio_decode"].get<double>() + t["video_decode"].get<double>() + t["mux_tail"].get<double>() - 1e-3);
  auto info = vortex::probe_media(tmp.str("x264/video.mp4"));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->video_frames, 22);  // 7 latent frames decode to 22 (the VAE's clip layout)
  // The default x264 preset and the encoder's settings are recorded; --x264-preset picks another, and a name
  // libx264 does not know is refused (exit 2) before any output.
  EXPECT_EQ(m["video"]["preset"], "veryfast");
  EXPECT_EQ(m["video"]["x264_rc_lookahead"], 10);
  EXPECT_GE(m["video"]["x264_threads"].get<int>(), 1);
  EXPECT_NE(m["video"]["encoder_settings"].get<std::string>().find("preset veryfast"), std::string::npos);
  RunResult medium = run_vortex("decode " + tmp.str("lat") +
                                " --synthetic-vae tiny --quiet --video-encoder libx264 --x264-preset medium --out " +
                                tmp.str("medium"));
  ASSERT_EQ(medium.exit_code, 0) << medium.output;
  auto mm = nlohmann::json::parse(read_file(tmp.str("medium/decode.json")));
  EXPECT_EQ(mm["video"]["preset"], "medium");
  EXPECT_NE(mm["video"]["encoder_settings"].get<std::string>().find("preset medium"), std::string::npos);
  RunResult bad = run_vortex("decode " + tmp.str("lat") + " --synthetic-vae tiny --quiet --x264-preset turbo --out " +
                             tmp.str("bad"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_FALSE(fs::exists(tmp.str("bad")));

  RunResult nvenc = decode_with("h264_nvenc", "nvenc");
  if (nvenc.exit_code == 0) {  // a machine whose driver offers NVENC
    EXPECT_EQ(nlohmann::json::parse(read_file(tmp.str("nvenc/decode.json")))["video"]["encoder"], "h264_nvenc");
  } else {
    EXPECT_NE(nvenc.output.find("h264_nvenc"), std::string::npos) << nvenc.output;
    EXPECT_FALSE(fs::exists(tmp.str("nvenc")));
    for (const auto& e : fs::directory_iterator(tmp.path()))
      EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
  }
  RunResult automatic = decode_with("auto", "auto");
  ASSERT_EQ(automatic.exit_code, 0) << automatic.output;
  auto ma = nlohmann::json::parse(read_file(tmp.str("auto/decode.json")));
  if (nvenc.exit_code == 0) {
    EXPECT_EQ(ma["video"]["encoder"], "h264_nvenc");
  } else {
    EXPECT_EQ(ma["video"]["encoder"], "libx264");
    EXPECT_FALSE(ma["video"].value("encoder_fallback", std::string()).empty()) << ma.dump(2);
    EXPECT_NE(automatic.output.find("h264_nvenc unavailable"), std::string::npos) << automatic.output;
  }
  RunResult bogus = decode_with("x265", "bogus");
  EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
  EXPECT_FALSE(fs::exists(tmp.str("bogus")));
}

// ---- generate --vae / --audio-vae: decoding at the end of the run ----

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// generate takes `vortex decode`'s encoder choice: --video-encoder and --x264-preset reach video.mp4 and run.json
// records them; a preset or encoder libx264/FFmpeg does not know is refused (exit 2), writing nothing.
TEST(CliGenerateDecode, EncoderChoiceReachesTheMp4) {
  ScratchDir tmp;
  const std::string args =
      "generate --config h3-tiny --synthetic --synthetic-text 8 --width 448 --height 256 "
      "--frames 22 --steps 1 --seed 3 --backend cpu --synthetic-vae tiny --quiet ";
  RunResult g = run_vortex(args + "--video-encoder libx264 --x264-preset ultrafast --out " + tmp.str("gen"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  auto run = nlohmann::json::parse(read_file(tmp.str("gen/run.json")));
  const auto& mp4 = run["outputs"]["video.mp4"];
  EXPECT_EQ(mp4["encoder"], "libx264");
  EXPECT_EQ(mp4["preset"], "ultrafast");
  EXPECT_NE(mp4["encoder_settings"].get<std::string>().find("preset ultrafast"), std::string::npos) << mp4.dump();
  for (const std::string bad : {"--x264-preset turbo", "--video-encoder vp9"}) {
    RunResult b = run_vortex(args + bad + " --out " + tmp.str("bad"));
    EXPECT_EQ(b.exit_code, 2) << bad << ": " << b.output;
    EXPECT_NE(b.output.find(bad.substr(0, bad.find(' '))), std::string::npos) << b.output;
    EXPECT_FALSE(fs::exists(tmp.str("bad")));
  }
}

TEST(CliGenerateDecode, MediaBesideTheLatentsAsVortexDecodeWritesThem) {
  ScratchDir tmp;
  const std::string args =
      "generate --config h3-tiny --synthetic --synthetic-text 8 --width 448 --height 256 "
      "--frames 22 --steps 1 --seed 3 --backend cpu --synthetic-vae tiny ";
  RunResult g = run_vortex(args + "--out " + tmp.str("gen") + " --frames-dir " + tmp.str("frames"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  // Progress: tiles done with an ETA (plain lines off a terminal), after sampling.
  EXPECT_NE(g.output.find("video tile 2/2"), std::string::npos) << g.output;
  EXPECT_NE(g.output.find("eta"), std::string::npos) << g.output;
  EXPECT_LT(g.output.find("vortex generate: sampling"), g.output.find("video tile"));
  EXPECT_EQ(names_in(tmp.str("gen")), (std::vector<std::string>{"audio.wav", "audio_latents.safetensors", "preview.png",
                                                                "run.json", "video.mp4", "video_latents.safetensors"}));
  auto info = vortex::probe_media(tmp.str("gen/video.mp4"));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->streams, 2);
  EXPECT_EQ(info->video_frames, 22);
  EXPECT_EQ(info->width, 448);
  auto run = nlohmann::json::parse(read_file(tmp.str("gen/run.json")));
  const auto& dec = run["decode"];
  EXPECT_EQ(dec["vae"], "synthetic-tiny");
  EXPECT_EQ(dec["backend"], "cpu");
  EXPECT_EQ(dec["tiling"]["tile"], 256);
  EXPECT_EQ(dec["tile_forwards"], 2);
  EXPECT_TRUE(dec["program"].is_string());
  for (const char* k : {"load_decoders_seconds", "video_decode_seconds", "audio_decode_seconds", "write_media_seconds"})
    EXPECT_TRUE(dec["timing"][k].is_number()) << k;
  EXPECT_TRUE(run["timing"]["decode_seconds"].is_number());
  EXPECT_EQ(run["outputs"]["video.mp4"]["codec"], "h264");
  EXPECT_EQ(run["outputs"]["audio.wav"]["sample_rate"], 32000);
  EXPECT_EQ(run["outputs"]["video.mp4"]["sha256"].get<std::string>().size(), 64u);
  // The same latents through `vortex decode` give the same frames and WAV.
  RunResult d = run_vortex("decode " + tmp.str("gen") + " --synthetic-vae tiny --quiet --out " + tmp.str("dec") +
                           " --frames-dir " + tmp.str("frames2"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(read_file(tmp.str("dec/audio.wav")), read_file(tmp.str("gen/audio.wav")));
  EXPECT_EQ(names_in(tmp.str("frames")).size(), 22u);
  for (const std::string& n : names_in(tmp.str("frames")))
    EXPECT_EQ(read_file(tmp.str("frames/" + n)), read_file(tmp.str("frames2/" + n))) << n;
  // run.json lists the media, so --overwrite recognises the folder as a Vortex run and replaces it.
  RunResult again = run_vortex(args + "--quiet --overwrite --out " + tmp.str("gen"));
  EXPECT_EQ(again.exit_code, 0) << again.output;
  // Latents only: no decoder flags, no media.
  RunResult plain =
      run_vortex("generate --config h3-tiny --synthetic --frames 22 --steps 1 --quiet --out " + tmp.str("plain"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_FALSE(fs::exists(tmp.str("plain/video.mp4")));
  EXPECT_TRUE(nlohmann::json::parse(read_file(tmp.str("plain/run.json")))["decode"].is_null());
}

TEST(CliGenerateDecode, OriginalLayoutFoldersThroughGenerate) {
  ScratchDir tmp;
  // The fixture audio VAE is a tiny 8-channel one, h3-tiny makes 32-channel audio latents: refused at load,
  // before the transformer loads or anything samples, and nothing is written.
  RunResult r =
      run_vortex("generate --config h3-tiny --synthetic --frames 22 --steps 1 --vae " + fixtures() +
                 "/original/video_vae --audio-vae " + fixtures() + "/original/audio_vae --out " + tmp.str("g"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("8-channel latents"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("synthesizing weights"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("vortex generate: sampling"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp.str("g")));
  for (const auto& e : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
}

TEST(CliGenerateDecode, BadDecoderInputFailsBeforeSampling) {
  ScratchDir tmp;
  const std::string base = "generate --config h3-tiny --synthetic --steps 1 --backend cpu ";
  struct Case {
    std::string name, flags, message;
  };
  fs::create_directories(tmp.str("empty_vae"));
  const std::vector<Case> cases = {
      {"only_vae", "--frames 22 --vae " + fixtures() + "/video_vae", "--audio-vae"},
      {"missing_dir", "--frames 22 --vae " + tmp.str("nope") + " --audio-vae " + tmp.str("nope"), "is not a directory"},
      {"no_config", "--frames 22 --vae " + tmp.str("empty_vae") + " --audio-vae " + fixtures() + "/audio_vae",
       "config.json"},
      {"both_kinds", "--frames 22 --synthetic-vae tiny --vae " + fixtures() + "/video_vae", "one or the other"},
      {"bad_name", "--frames 22 --synthetic-vae huge", "tiny"},
      {"too_few_frames", "--frames 5 --synthetic-vae tiny", "at least 22 frames"},
      {"frames_dir_alone", "--frames 22 --frames-dir " + tmp.str("fr"), "--frames-dir needs the decoders"},
      {"bad_crf", "--frames 22 --synthetic-vae tiny --crf 99", "--crf"},
  };
  for (const Case& c : cases) {
    RunResult r = run_vortex(base + c.flags + " --out " + tmp.str("out_" + c.name));
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.name << ": " << r.output;
    EXPECT_EQ(r.output.find("vortex generate: sampling"), std::string::npos) << c.name << ": " << r.output;
    EXPECT_FALSE(fs::exists(tmp.str("out_" + c.name))) << c.name;
  }
  EXPECT_FALSE(fs::exists(tmp.str("fr")));
}

}  // namespace
}  // namespace vortex_cli_test
