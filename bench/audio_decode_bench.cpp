// audio_decode_bench: the canonical request's audio decode on the CUDA backend with deterministic synthetic weights of
// the released shapes (AudioVae::synthetic, ~65M parameters): latents [2, 32, 207] (124 video frames), timed end to
// end (host latents in, host FP32 samples out) over --reps runs after one warm-up. Then one decode with the level-1
// CUDA-event regions of src/vae/audio_vae.cpp (device time per op family, the convolutions' TFLOP/s), and the
// decoder's convolution shapes op by op: conv1d_fp32 with the register tile it picks and with every tile forced
// (the same bytes; the fastest per layer is reported beside the pick). Appends evidence rows to
// OUT/<date>-<gpu>-audio-decode.jsonl (workload vae_decode_audio, impl vortex-cuda: bench/audio_decode_diffusers.py
// reads it for the ratio) and prints a table.
//   audio_decode_bench OUT_DIR [--reps N] [--frames T] [--no-ops] [--seed S]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/synthetic.h"
#include "cuda/ops/audio_decoder_ops.h"
#include "profiling/evidence.h"
#include "ref/vae_ops.h"
#include "vae/audio_vae.h"

namespace {

using namespace vortex;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int fail(const Status& s, const char* what) {
  std::fprintf(stderr, "audio_decode_bench: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

// One convolution layer of the decoder (per stereo pair: batch 2).
struct ConvShape {
  std::string name;
  int64_t cin, cout, l, k;
  int dilation, padding;
  double flops() const {
    const int64_t lout = ref::conv1d_out_length(l, k, dilation, padding);
    return 2.0 * 2.0 * static_cast<double>(cin) * static_cast<double>(cout) * static_cast<double>(k) *
           static_cast<double>(lout);
  }
};

// Every conv1d of AudioVae::decode for `ta` latent frames, in call order.
std::vector<ConvShape> decoder_convs(const AudioVaeConfig& c, int64_t ta) {
  std::vector<ConvShape> v;
  v.push_back({"dec_in_proj", c.latent_channels, c.latent_dim, ta, 1, 1, 0});
  v.push_back({"conv_pre", c.latent_dim, c.decoder_dim, ta, 7, 1, 3});
  int64_t ch = c.decoder_dim, l = ta;
  for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
    ch /= 2;
    l *= c.decoder_rates[i];
    for (size_t j = 0; j < c.resblock_kernel_sizes.size(); ++j) {
      const int k = c.resblock_kernel_sizes[j];
      for (int d : c.resblock_dilation_sizes[j]) {
        const std::string n = "stage" + std::to_string(i) + " K" + std::to_string(k);
        v.push_back({n + " d" + std::to_string(d), ch, ch, l, k, d, (k * d - d) / 2});
        v.push_back({n + " d1", ch, ch, l, k, 1, (k - 1) / 2});
      }
    }
  }
  v.push_back({"conv_post", ch, 1, l, 7, 1, 3});
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: audio_decode_bench OUT_DIR [--reps N] [--frames T] [--no-ops] [--seed S]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  int reps = 20;
  int64_t frames = 124;  // video frames of the canonical request (37 latent frames)
  bool ops = true;
  uint64_t seed = 7;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "audio_decode_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--reps") reps = std::atoi(next());
    else if (a == "--frames") frames = std::atoll(next());
    else if (a == "--seed") seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--no-ops") ops = false;
    else {
      std::fprintf(stderr, "audio_decode_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (reps < 1 || frames < 1) {
    std::fprintf(stderr, "audio_decode_bench: --reps and --frames must be >= 1\n");
    return 2;
  }
  auto backend = make_backend("cuda", 0);
  if (!backend.ok()) return fail(backend.status(), "CUDA backend");
  Backend& be = **backend;
  const Backend::DeviceInfo dev = be.device_info();
  RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);
  const std::string path = evidence_path(out_dir, env, "audio-decode");
  Status record_status = Status::Ok();
  auto record = [&](nlohmann::json row) {
    if (Status s = append_jsonl(path, {std::move(row)}); !s.ok() && record_status.ok()) record_status = s;
  };

  auto avae = AudioVae::synthetic(AudioVaeConfig::full(), be, seed);
  if (!avae.ok()) return fail(avae.status(), "synthetic audio VAE");
  const AudioVaeConfig& cfg = (*avae)->config();
  const int64_t ta = (5 * frames + 1) / 3;  // 40 audio latent frames per 24 video frames
  Tensor alat = Tensor::empty({2, cfg.latent_channels, ta}, DType::kF32);
  if (Status s = fill_synthetic_host(alat, seed + 3, 1.0f, 0.0f); !s.ok()) return fail(s, "audio latents");
  const std::vector<ConvShape> convs = decoder_convs(cfg, ta);
  double conv_flops = 0.0;
  for (const ConvShape& c : convs) conv_flops += c.flops();
  std::printf(
      "synthetic audio VAE: %.1fM parameters; latents %s -> %lld samples per channel; %zu conv1d layers, %.1f "
      "GFLOP\n",
      static_cast<double>((*avae)->parameter_count()) / 1e6, alat.describe().c_str(),
      static_cast<long long>(ta * cfg.hop()), convs.size(), conv_flops / 1e9);

  std::vector<std::pair<std::string, Percentiles>> table;
  {
    auto a = (*avae)->decode(alat);  // warm-up
    if (!a.ok()) return fail(a.status(), "audio decode (warm-up)");
  }
  std::vector<double> ms;
  Tensor audio;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    auto a = (*avae)->decode(alat);
    if (!a.ok()) return fail(a.status(), "audio decode");
    ms.push_back(seconds_since(t0) * 1e3);
    if (r == 0) refresh_clocks(env);
    audio = *a;
  }
  double peak_abs = 0.0;
  for (int64_t i = 0; i < audio.numel(); ++i) peak_abs = std::max(peak_abs, std::fabs(double(audio.data<float>()[i])));
  const Percentiles pa = percentiles(ms);
  record(evidence_row(env, "vae_decode_audio", "vortex-cuda", shape_to_string(alat.shape()), pa, {},
                      {{"latents", shape_to_string(alat.shape())},
                       {"program",
                        "both stereo channels in one pass; FP32 convolutions with FP32 FMA-chain accumulation "
                        "(conv1d_fp32), FP32 FMA-chain transposed convolutions (phase convolutions on conv1d_fp32's "
                        "kernel), FP64-chain resamplers, SnakeBeta FP32 with sinf"},
                       {"samples", audio.dim(1)},
                       {"max_abs_sample", peak_abs},
                       {"weights", "synthetic (released shapes)"},
                       {"peak_device_bytes", be.memory_peak()},
                       {"conv_gflop", conv_flops / 1e9},
                       {"target_ms", 30.0},
                       {"reps", reps}}));
  table.push_back({"audio decode (stereo batched, FP32 convolutions)", pa});

  // One decode with CUDA-event regions around each op family.
  be.set_region_level(1);
  auto t0 = Clock::now();
  auto ar = (*avae)->decode(alat);
  const double wall_ms = seconds_since(t0) * 1e3;
  be.set_region_level(-1);
  if (!ar.ok()) return fail(ar.status(), "audio decode (breakdown)");
  auto regions = be.take_regions();
  if (!regions.ok()) return fail(regions.status(), "regions");
  std::vector<std::pair<std::string, double>> sums;
  double device_ms = 0.0;
  for (const auto& [name, rms] : *regions) {
    auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& e) { return e.first == name; });
    if (it == sums.end()) sums.push_back({name, rms});
    else it->second += rms;
    device_ms += rms;
  }
  nlohmann::json parts = nlohmann::json::object();
  std::printf("\n| audio decode op family (one decode, device time) | ms | share of wall |\n|---|---|---|\n");
  for (const auto& [name, rms] : sums) {
    parts[name] = rms;
    std::printf("| %s | %.2f | %.1f%% |\n", name.c_str(), rms, 100.0 * rms / wall_ms);
  }
  std::printf("| sum of regions | %.2f | %.1f%% |\n| wall (regions on) | %.2f | |\n", device_ms,
              100.0 * device_ms / wall_ms, wall_ms);
  Percentiles one;
  one.p10 = one.p50 = one.p90 = wall_ms;
  record(evidence_row(env, "vae_decode_audio_breakdown", "vortex-cuda", shape_to_string(alat.shape()), one, {},
                      {{"device_ms_by_op", parts},
                       {"device_ms_sum", device_ms},
                       {"wall_ms", wall_ms},
                       {"region_count", regions->size()},
                       {"note",
                        "one decode with CUDA-event regions around each op family; audio.conv1d excludes "
                        "dec_in_proj / conv_pre (audio.conv_in); wall - sum = host time the stream was idle"}}));

  if (ops) {
    // The decoder's convolution shapes op by op: conv1d_fp32 with the tile it picks (kAuto) and with every register
    // tile forced (the same bytes; speed only), same inputs.
    std::printf(
        "\n| conv1d layer (B 2) | GFLOP | auto tile | auto ms | auto TFLOP/s | best tile | best ms |\n"
        "|---|---|---|---|---|---|---|\n");
    const std::vector<cuda_ops::Conv1dTile> tiles = {cuda_ops::Conv1dTile::k128x128, cuda_ops::Conv1dTile::k128x64,
                                                     cuda_ops::Conv1dTile::k64x128,  cuda_ops::Conv1dTile::k64x64,
                                                     cuda_ops::Conv1dTile::k32x256,  cuda_ops::Conv1dTile::k16x256,
                                                     cuda_ops::Conv1dTile::k8x512,   cuda_ops::Conv1dTile::k1x1024};
    const cudaStream_t stream = be.device_stream();
    std::vector<std::string> seen;
    double sum_auto = 0.0, sum_best = 0.0;
    nlohmann::json layers = nlohmann::json::array();
    for (const ConvShape& c : convs) {
      const std::string key = std::to_string(c.cin) + "/" + std::to_string(c.cout) + "/" + std::to_string(c.l) + "/" +
                              std::to_string(c.k) + "/" + std::to_string(c.dilation);
      const bool first = std::find(seen.begin(), seen.end(), key) == seen.end();
      if (!first) continue;
      seen.push_back(key);
      const int64_t lout = ref::conv1d_out_length(c.l, c.k, c.dilation, c.padding);
      Tensor xh = Tensor::empty({2, c.cin, c.l}, DType::kF32), wh = Tensor::empty({c.cout, c.cin, c.k}, DType::kF32),
             bh = Tensor::empty({c.cout}, DType::kF32);
      if (Status s = fill_synthetic_host(xh, seed + 11, 1.0f, 0.0f); !s.ok()) return fail(s, "x");
      if (Status s = fill_synthetic_host(wh, seed + 12, 0.05f, 0.0f); !s.ok()) return fail(s, "w");
      if (Status s = fill_synthetic_host(bh, seed + 13, 0.05f, 0.0f); !s.ok()) return fail(s, "b");
      auto x = be.upload(xh);
      auto w = be.upload(wh);
      auto b = be.upload(bh);
      auto o = be.alloc({2, c.cout, lout}, DType::kF32);
      for (const Result<Tensor>* t : {&x, &w, &b, &o})
        if (!t->ok()) return fail(t->status(), "conv1d operands");
      auto time_tile = [&](cuda_ops::Conv1dTile tile) -> Result<double> {
        constexpr int kReps = 10;
        for (int r = 0; r <= kReps; ++r) {
          if (r == 1) {
            VORTEX_RETURN_IF_ERROR(be.synchronize());
            t0 = Clock::now();
          }
          VORTEX_RETURN_IF_ERROR(cuda_ops::conv1d_fp32(*x, *w, &*b, c.dilation, c.padding, *o, stream, tile));
        }
        VORTEX_RETURN_IF_ERROR(be.synchronize());
        return seconds_since(t0) * 1e3 / kReps;
      };
      auto m_auto = time_tile(cuda_ops::Conv1dTile::kAuto);
      if (!m_auto.ok()) return fail(m_auto.status(), "conv1d_fp32");
      double best = 1e30;
      cuda_ops::Conv1dTile best_tile = cuda_ops::Conv1dTile::kAuto;
      nlohmann::json per_tile = nlohmann::json::object();
      for (cuda_ops::Conv1dTile tile : tiles) {
        auto m = time_tile(tile);
        if (!m.ok()) continue;  // a tile whose staging does not fit this kernel size (reported as absent)
        per_tile[cuda_ops::conv1d_tile_name(tile)] = *m;
        if (*m < best) best = *m, best_tile = tile;
      }
      const int64_t uses = std::count_if(convs.begin(), convs.end(), [&](const ConvShape& d) {
        return d.cin == c.cin && d.cout == c.cout && d.l == c.l && d.k == c.k && d.dilation == c.dilation;
      });
      sum_auto += *m_auto * static_cast<double>(uses);
      sum_best += best * static_cast<double>(uses);
      std::printf("| %s (cin %lld, L %lld) x%lld | %.2f | %s | %.3f | %.1f | %s | %.3f |\n", c.name.c_str(),
                  static_cast<long long>(c.cin), static_cast<long long>(c.l), static_cast<long long>(uses),
                  c.flops() / 1e9, cuda_ops::conv1d_tile_name(cuda_ops::conv1d_auto_tile(2, c.cout, lout)), *m_auto,
                  c.flops() / (*m_auto * 1e9), cuda_ops::conv1d_tile_name(best_tile), best);
      layers.push_back({{"layer", c.name},
                        {"cin", c.cin},
                        {"cout", c.cout},
                        {"l", c.l},
                        {"k", c.k},
                        {"dilation", c.dilation},
                        {"uses", uses},
                        {"auto_ms", *m_auto},
                        {"ms_by_tile", per_tile}});
    }
    std::printf("| all conv1d layers of one decode (sum over uses) | %.1f | | %.2f | %.1f | | %.2f |\n",
                conv_flops / 1e9, sum_auto, conv_flops / (sum_auto * 1e9), sum_best);
    Percentiles pc;
    pc.p10 = pc.p50 = pc.p90 = sum_auto;
    record(evidence_row(env, "audio_decoder_conv1d_layers", "vortex-cuda-conv1d_fp32", shape_to_string(alat.shape()),
                        pc, {"conv1d_fp32 with the fastest tile per layer (same program)", sum_best, 0.0},
                        {{"gflop", conv_flops / 1e9},
                         {"tflops", conv_flops / (sum_auto * 1e9)},
                         {"layers", layers},
                         {"note",
                          "sum over the decoder's conv1d layers of each shape's mean time over 10 back-to-back "
                          "launches (batch 2), times its uses per decode; auto = the tile conv1d_fp32 picks"}}));
  }
  if (Status s = record_status; !s.ok()) return fail(s, "evidence");
  std::printf("\n| what | p10 ms | p50 ms | p90 ms |\n|---|---|---|---|\n");
  for (const auto& [what, p] : table) std::printf("| %s | %.2f | %.2f | %.2f |\n", what.c_str(), p.p10, p.p50, p.p90);
  std::printf("peak device memory %.2f GiB; SM clock %d MHz; evidence %s\n",
              static_cast<double>(be.memory_peak()) / (1 << 30), env.clock_sm_mhz, path.c_str());
  return 0;
}
