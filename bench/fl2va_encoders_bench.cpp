// fl2va_encoders_bench: the fl2va keyframe encoders on the CUDA backend with deterministic synthetic weights of the
// released shapes: the Qwen3-VL vision tower (VisionTower, the release's text_encoder/config.json vision_config) on two
// 1344x768 keyframes (the processor passes the canvas through: a 48 x 84 patch grid, 4032 patches, 1008 vision tokens
// each; u8 keyframes whose rows the GPU builds, both in one tower call with the fused GEMM epilogues and without them,
// one call per keyframe, the conditioner's host outputs, and the host-built FP32 rows; one extra run of each program
// prints per-region device times); the hand-off to the text encoder (synthetic released-shape weights, --te-layers
// decoder layers): the tower plus TextEncoder::encode through hidden_states[--te-layers] with the vision rows as FP32
// host tensors and as BF16 tensors left on the GPU, byte-compared; and the video VAE encoder (VideoVaeEncoder, the
// release's vae/config.json, tiling as released) on two 1344x768 keyframes through encode_condition (u8 pixels in,
// normalized FP32 host latents out). Timed after a warm-up over --reps runs; the vision tower both as forward_device
// (outputs left on the GPU, as transformers leaves them) and forward (FP32 host outputs); and the tower's attention
// alone (one batched call: cuDNN SDPA at head_dim 72, 64 and 128, the owned sm_90a kernel at 72 and 128). Appends
// evidence rows to OUT_DIR/<date>-<gpu>-fl2va-encoders.jsonl; the peers of the same run are
// bench/fl2va_encoders_peer.py.
//   fl2va_encoders_bench OUT_DIR --text-encoder-config PATH --vae-config PATH [--reps N] [--seed S] [--te-layers N]
//                        [--skip-attention] [--skip-vae]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/config_json.h"
#include "core/synthetic.h"
#include "cuda/attention/bf16_attention.h"
#include "cuda/cuda_backend.h"
#include "profiling/evidence.h"
#include "text_encoder/text_encoder.h"
#include "vae/vae_checkpoint.h"
#include "vae/video_vae_encoder.h"
#include "vision/keyframe_presentation.h"
#include "vision/vision_tower.h"

namespace {

using namespace vortex;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int fail(const Status& s, const char* what) {
  std::fprintf(stderr, "fl2va_encoders_bench: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

// Weight scales of a trained-like network: norm weights near 1, biases small, matrices and kernels 1/sqrt(fan_in).
std::pair<float, float> synthetic_init(const std::string& name, const Shape& shape) {
  const bool norm = name.find("norm") != std::string::npos;
  const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  if (norm) return bias ? std::pair{0.02f, 0.0f} : std::pair{0.1f, 1.0f};
  if (bias) return {0.02f, 0.0f};
  if (name.find("pos_embed") != std::string::npos) return {0.02f, 0.0f};
  int64_t fan_in = 1;
  for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
  return {static_cast<float>(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)))), 0.0f};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: fl2va_encoders_bench OUT_DIR --text-encoder-config PATH --vae-config PATH [--reps N] "
                 "[--seed S] [--te-layers N] [--skip-attention] [--skip-vae]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  std::string te_path, vae_path;
  int reps = 10, te_layers = 1;
  uint64_t seed = 1;
  bool skip_attention = false, skip_vae = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--skip-attention" || a == "--skip-vae") {
      (a == "--skip-vae" ? skip_vae : skip_attention) = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "fl2va_encoders_bench: %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--text-encoder-config") te_path = v;
    else if (a == "--vae-config") vae_path = v;
    else if (a == "--reps") reps = std::atoi(v);
    else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
    else if (a == "--te-layers") te_layers = std::atoi(v);
    else {
      std::fprintf(stderr, "fl2va_encoders_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (te_path.empty() || vae_path.empty() || reps < 1 || te_layers < 1) {
    std::fprintf(stderr,
                 "fl2va_encoders_bench: --text-encoder-config and --vae-config are required, --reps and --te-layers "
                 ">= 1\n");
    return 2;
  }
  auto backend = CudaBackend::create(0);
  if (!backend.ok()) return fail(backend.status(), "CUDA backend");
  Backend& be = **backend;
  const Backend::DeviceInfo dev = be.device_info();
  RunEnvironment env = collect_environment(dev.name, dev.sm, dev.runtime);
  std::vector<nlohmann::json> rows;

  // ---- vision tower: two 1344x768 keyframes ----
  {
    auto te = ConfigJson::read_file(te_path);
    if (!te.ok()) return fail(te.status(), "text encoder config");
    auto cfg = VisionConfig::from_json(*te);
    if (!cfg.ok()) return fail(cfg.status(), "vision config");
    const VisionProcessorConfig proc;
    auto size = smart_resize(768, 1344, proc);
    if (!size.ok()) return fail(size.status(), "smart_resize");
    const int gh = size->first / proc.patch, gw = size->second / proc.patch;
    std::printf("processor: 1344x768 -> %dx%d pixels, grid %d x %d = %d patches, %d vision tokens per keyframe\n",
                size->second, size->first, gh, gw, gh * gw, gh * gw / 4);
    auto t0 = Clock::now();
    auto tower = VisionTower::from_source(*cfg, synthetic_tensor_source(seed, synthetic_init), &be);
    if (!tower.ok()) return fail(tower.status(), "vision tower");
    std::printf("vision tower built and uploaded in %.1f s\n", ms_since(t0) / 1e3);
    // Two random u8 keyframes as the engine hands them to the tower (image_input: the processor's rows are built on
    // the GPU), and the same keyframes as the processor's FP32 rows built on the host (preprocess_image).
    std::vector<VisionInput> frames, frames_f32;
    for (int k = 0; k < 2; ++k) {
      RgbImage img{size->second, size->first,
                   std::vector<uint8_t>(static_cast<size_t>(size->first) * size->second * 3)};
      uint64_t state = seed + 10 + static_cast<uint64_t>(k);
      for (uint8_t& v : img.rgb) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        v = static_cast<uint8_t>(state >> 56);
      }
      auto u8 = image_input(img, proc);
      auto f32 = preprocess_image(img, proc);
      if (!u8.ok()) return fail(u8.status(), "image_input");
      if (!f32.ok()) return fail(f32.status(), "preprocess_image");
      frames.push_back(std::move(*u8));
      frames_f32.push_back(std::move(*f32));
    }
    // batched: both keyframes in one tower call (as the engine and transformers run them) with the opt-in fused GEMM
    // epilogues (VisionTower::set_fused_epilogues); unfused: the same call in the default program, whose separate GELU
    // and residual passes every later mode runs too; per_image: one call each; host: forward() without last_hidden,
    // what the engine's conditioner calls (src/engine/conditioning.cpp).
    enum class Mode { kBatchedDevice, kBatchedDeviceUnfused, kPerImageDevice, kBatchedHost, kBatchedDeviceF32Rows };
    for (Mode mode : {Mode::kBatchedDevice, Mode::kBatchedDeviceUnfused, Mode::kPerImageDevice, Mode::kBatchedHost,
                      Mode::kBatchedDeviceF32Rows}) {
      tower->set_fused_epilogues(mode == Mode::kBatchedDevice);
      auto run = [&]() -> Status {
        if (mode == Mode::kPerImageDevice) {
          for (const VisionInput& in : frames) {
            auto o = tower->forward_device(in);
            if (!o.ok()) return o.status();
          }
        } else if (mode == Mode::kBatchedHost) {
          auto o = tower->forward(frames, /*with_last_hidden=*/false);
          if (!o.ok()) return o.status();
        } else {
          auto o = tower->forward_device(mode == Mode::kBatchedDeviceF32Rows ? frames_f32 : frames);
          if (!o.ok()) return o.status();
        }
        return be.synchronize();
      };
      for (int w = 0; w < 2; ++w)
        if (Status s = run(); !s.ok()) return fail(s, "vision warm-up");
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r) {
        const auto t = Clock::now();
        if (Status s = run(); !s.ok()) return fail(s, "vision");
        ms.push_back(ms_since(t));
        if (r == 0) refresh_clocks(env);
      }
      const Percentiles p = percentiles(ms);
      const char* impl = mode == Mode::kBatchedDevice ? "vortex-cuda forward_device, both u8 keyframes in one call "
                                                        "(rows built on the GPU, bf16 outputs on the GPU; GELU and "
                                                        "residual adds in the GEMM epilogues, opt-in)"
                         : mode == Mode::kBatchedDeviceUnfused
                             ? "vortex-cuda forward_device, both u8 keyframes in one call, separate GELU and residual "
                               "passes (the default program)"
                         : mode == Mode::kPerImageDevice ? "vortex-cuda forward_device, one call per u8 keyframe "
                                                           "(bf16 outputs on the GPU)"
                         : mode == Mode::kBatchedHost    ? "vortex-cuda forward, both u8 keyframes in one call "
                                                           "(fp32 host merged + deepstack, the conditioner's call)"
                                                         : "vortex-cuda forward_device, both keyframes as host fp32 "
                                                           "processor rows (bf16 outputs on the GPU)";
      std::printf("vision tower, 2 keyframes, %s: p10 %.2f p50 %.2f p90 %.2f ms\n", impl, p.p10, p.p50, p.p90);
      nlohmann::json extra = {{"ms", ms}, {"peak_device_bytes", be.memory_peak()}};
      if (mode == Mode::kBatchedDevice || mode == Mode::kBatchedDeviceUnfused) {
        // One more run with the tower's regions timed on the device (CUDA events), summed per region name.
        be.set_region_level(1);
        Status s = run();
        be.set_region_level(-1);
        if (!s.ok()) return fail(s, "vision profiled run");
        auto regions = be.take_regions();
        if (!regions.ok()) return fail(regions.status(), "vision regions");
        std::map<std::string, double> sum;
        for (const auto& [name, t] : *regions) sum[name] += t;
        nlohmann::json by_region = nlohmann::json::object();
        for (const auto& [name, t] : sum) {
          std::printf("  region %-24s %8.2f ms\n", name.c_str(), t);
          by_region[name] = t;
        }
        extra["regions_ms"] = by_region;
      }
      rows.push_back(evidence_row(env, "vision_tower_2_keyframes_1344x768", impl,
                                  "grid 48x84 x2, released vision_config", p, {}, extra));
    }
    // A/B of the two programs inside one process, alternating fused and unfused (the project's gate method):
    // per-pair ratios unfused / fused and their median.
    {
      std::vector<double> fused_ms, unfused_ms, ratio;
      for (int r = 0; r < reps; ++r) {
        double pair[2] = {0, 0};
        for (int f = 0; f < 2; ++f) {
          tower->set_fused_epilogues(f == 0);
          const auto t = Clock::now();
          auto o = tower->forward_device(frames);
          if (!o.ok()) return fail(o.status(), "vision A/B");
          if (Status st = be.synchronize(); !st.ok()) return fail(st, "vision A/B");
          pair[f] = ms_since(t);
        }
        fused_ms.push_back(pair[0]);
        unfused_ms.push_back(pair[1]);
        ratio.push_back(pair[1] / pair[0]);
      }
      const Percentiles p = percentiles(fused_ms), pu = percentiles(unfused_ms), pr = percentiles(ratio);
      std::printf(
          "vision tower A/B, %d alternating pairs: fused p50 %.2f ms, unfused p50 %.2f ms, per-pair "
          "unfused / fused median %.4f (p10 %.4f, p90 %.4f)\n",
          reps, p.p50, pu.p50, pr.p50, pr.p10, pr.p90);
      rows.push_back(evidence_row(env, "vision_tower_2_keyframes_1344x768_epilogue_ab",
                                  "vortex-cuda forward_device, fused GEMM epilogues (A) against separate GELU and "
                                  "residual passes (B), alternating in one process",
                                  "grid 48x84 x2, released vision_config", p, {},
                                  {{"ms", fused_ms},
                                   {"unfused_ms", unfused_ms},
                                   {"unfused_ms_p50", pu.p50},
                                   {"pair_ratio_unfused_over_fused", ratio},
                                   {"pair_ratio_p50", pr.p50}}));
    }
    tower->set_fused_epilogues(false);  // the default program (src/vision/vision_tower.h)

    // ---- the hand-off to the text encoder: tower + encode, vision rows as FP32 host tensors or BF16 on the GPU ----
    // The presentation's shape for two keyframes: a label, a vision block of 1008 image-pad tokens per keyframe, then
    // the prompt (synthetic ids); M-RoPE positions as the conditioner computes them.
    auto te_cfg = TextEncoderConfig::from_file(te_path);
    if (!te_cfg.ok()) return fail(te_cfg.status(), "text encoder config");
    t0 = Clock::now();
    auto text_enc = TextEncoder::synthesize(*te_cfg, be, seed + 40, te_layers);
    if (!text_enc.ok()) return fail(text_enc.status(), "synthetic text encoder");
    std::printf("text encoder (%d of %d layers, synthetic) built in %.1f s\n", te_layers, te_cfg->num_layers,
                ms_since(t0) / 1e3);
    int32_t image_pad = 151655;  // the release's image_token_id
    if (auto root = ConfigJson::read_file(te_path); root.ok()) {
      if (auto id = root->get_int({"image_token_id"}, image_pad); id.ok()) image_pad = *id;
    }
    std::vector<int32_t> ids;
    VisionEmbeddings host_v, dev_v;
    uint64_t state = seed + 50;
    auto text = [&](int count) {
      for (int i = 0; i < count; ++i) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        ids.push_back(static_cast<int32_t>((state >> 33) % 150000));
      }
    };
    for (const VisionInput& in : frames) {
      text(8);
      for (int64_t r = 0; r < in.rows() / 4; ++r) {
        host_v.rows.push_back(static_cast<int64_t>(ids.size()));
        ids.push_back(image_pad);
      }
      text(2);
    }
    text(96);
    dev_v.rows = host_v.rows;
    auto positions = mrope_positions_with_images(ids, image_pad, {{gh, gw}, {gh, gw}}, cfg->merge);
    if (!positions.ok()) return fail(positions.status(), "M-RoPE positions");
    Tensor host_out, dev_out;
    for (const bool device : {false, true}) {
      auto run = [&]() -> Status {
        VisionEmbeddings& v = device ? dev_v : host_v;
        auto o = device ? tower->forward_device(frames) : tower->forward(frames, /*with_last_hidden=*/false);
        VORTEX_RETURN_IF_ERROR(o.status());
        v.tokens = o->merged;
        v.deepstack = o->deepstack;
        Tensor& states = device ? dev_out : host_out;  // [rows, hidden] bf16 host
        VORTEX_ASSIGN_OR_RETURN(states, (*text_enc)->encode(ids, *positions, te_layers, &v));
        return be.synchronize();
      };
      for (int w = 0; w < 2; ++w)
        if (Status s = run(); !s.ok()) return fail(s, "hand-off warm-up");
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r) {
        const auto t = Clock::now();
        if (Status s = run(); !s.ok()) return fail(s, "hand-off");
        ms.push_back(ms_since(t));
      }
      const Percentiles p = percentiles(ms);
      const std::string impl =
          std::string("vortex-cuda forward") + (device ? "_device" : "") + " + TextEncoder::encode to hidden_states[" +
          std::to_string(te_layers) + "], vision rows " +
          (device ? "bf16 left on the GPU (the conditioner's hand-off)" : "as fp32 host tensors (the host path)");
      std::printf("tower + text encoder (%zu rows, %d layers), %s: p10 %.2f p50 %.2f p90 %.2f ms\n", ids.size(),
                  te_layers, impl.c_str(), p.p10, p.p50, p.p90);
      nlohmann::json extra = {{"ms", ms}, {"peak_device_bytes", be.memory_peak()}, {"text_rows", ids.size()}};
      if (device) {
        const bool same = host_out.nbytes() == dev_out.nbytes() &&
                          std::memcmp(host_out.raw_data(), dev_out.raw_data(), host_out.nbytes()) == 0;
        std::printf("hand-off check: hidden_states[%d] %s between the host and device hand-offs\n", te_layers,
                    same ? "byte-identical" : "DIFFER");
        extra["check"] = same ? "hidden states byte-identical to the host hand-off" : "hidden states DIFFER";
        if (!same) return fail(internal_error("the device hand-off changed the hidden states"), "hand-off check");
      }
      rows.push_back(evidence_row(env, "vision_handoff_2_keyframes_1344x768", impl,
                                  "released configs, " + std::to_string(ids.size()) + " text rows", p, {}, extra));
    }
  }

  // ---- the tower's attention alone: 2 images x 4032 rows, 16 heads, head_dim 72 (the tower's) against 64 and 128 ----
  // One batched SDPA call (as forward_device makes it) on random q/k/v views of one [2 * 4032, 3 * 16 * D] buffer;
  // TFLOP/s counts 4 * S^2 * heads * D per image. Says how much of the tower's attention time is the head size.
  for (int head_dim : {72, 64, 128}) {
    if (skip_attention) break;
    const int64_t s = 4032, heads = 16, width = heads * head_dim;
    auto qkv = be.alloc({2 * s, 3 * width}, DType::kBF16);  // [2S, 3 heads D]
    auto out = be.alloc({2 * s, width}, DType::kBF16);
    // A head size cuDNN refuses is reported and skipped: the VAE timings below still run.
    auto skip = [&](const Status& st, const char* what) {
      std::printf("attention head_dim %d: %s: %s (skipped)\n", head_dim, what, st.to_string().c_str());
    };
    if (!qkv.ok() || !out.ok()) {
      skip(qkv.ok() ? out.status() : qkv.status(), "buffers");
      continue;
    }
    if (Status st = be.fill_synthetic(*qkv, seed + 30 + head_dim, 1.0f, 0.0f); !st.ok()) {
      skip(st, "fill");
      continue;
    }
    auto q = qkv->narrow(1, 0, width), k = qkv->narrow(1, width, width), v = qkv->narrow(1, 2 * width, width);
    if (!q.ok() || !k.ok() || !v.ok()) {
      skip(q.status(), "views");
      continue;
    }
    // cuDNN SDPA, and the owned sm_90a kernel at the head sizes it has (128, and 72: the tower's).
    // variant 0: cuDNN SDPA; 1: the owned kernel through the backend (P V over the head's columns); 2 (head_dim 72):
    // the owned kernel with P V over the whole 128-column tile (Bf16PvWidth::kFullTile).
    for (int variant = 0; variant < 3; ++variant) {
      if ((variant >= 1 && head_dim == 64) || (variant == 2 && head_dim != 72)) continue;
      const bool owned = variant >= 1;
      ExecOptions opts;
      opts.attention = owned ? AttentionKind::kBf16Owned : AttentionKind::kSdpa;
      auto run = [&]() -> Status {
        if (variant == 2) {
          VORTEX_RETURN_IF_ERROR(bf16_attention_batched(*q, *k, *v, 2, static_cast<int>(heads), head_dim, *out,
                                                        be.device_stream(), Bf16PvWidth::kFullTile));
        } else {
          VORTEX_RETURN_IF_ERROR(be.attention_batched(*q, *k, *v, 2, static_cast<int>(heads), head_dim, *out, opts));
        }
        return be.synchronize();
      };
      if (Status st = run(); !st.ok()) {
        skip(st, "warm-up");
        continue;
      }
      (void)run();
      std::vector<double> ms;
      Status timed = Status::Ok();
      for (int r = 0; r < reps && timed.ok(); ++r) {
        const auto t = Clock::now();
        timed = run();
        ms.push_back(ms_since(t));
      }
      if (!timed.ok()) {
        skip(timed, "timed run");
        continue;
      }
      const Percentiles p = percentiles(ms);
      const double tflops = 2.0 * 4.0 * static_cast<double>(s) * s * heads * head_dim / (p.p50 * 1e-3) / 1e12;
      const char* name = variant == 2   ? "the owned sm_90a kernel, P V over the 128-column tile"
                         : variant == 1 ? "the owned sm_90a kernel (bf16-owned)"
                                        : "cuDNN SDPA";
      std::printf("attention, 2 x %lld rows, 16 heads, head_dim %d, one batched call, %s: p50 %.3f ms, %.0f TFLOP/s\n",
                  static_cast<long long>(s), head_dim, name, p.p50, tflops);
      rows.push_back(evidence_row(env,
                                  "vision_attention_2x4032_h16_d" + std::to_string(head_dim) +
                                      (variant == 2 ? "_owned_fulltile"
                                       : owned      ? "_owned"
                                                    : ""),
                                  std::string("vortex-cuda attention_batched (") + name + ")", "B=2 S=4032 heads=16", p,
                                  {}, {{"ms", ms}, {"tflops_p50", tflops}}));
    }
  }

  // ---- video VAE encoder: two 1344x768 keyframes through encode_condition ----
  if (!skip_vae) {
    auto vc = ConfigJson::read_file(vae_path);
    if (!vc.ok()) return fail(vc.status(), "vae config");
    auto cfg = VideoVaeEncoderConfig::from_json(*vc);
    if (!cfg.ok()) return fail(cfg.status(), "vae encoder config");
    auto t0 = Clock::now();
    auto enc = VideoVaeEncoder::from_source(*cfg, synthetic_tensor_source(seed + 1, synthetic_init), &be);
    if (!enc.ok()) return fail(enc.status(), "vae encoder");
    std::printf("VAE encoder built and uploaded in %.1f s\n", ms_since(t0) / 1e3);
    std::vector<Tensor> frames;
    for (int k = 0; k < 2; ++k) {
      Tensor f32 = Tensor::empty({3, 1, 768, 1344}, DType::kF32);
      if (Status s = fill_synthetic_host(f32, seed + 20 + k, 0.5f, 0.5f); !s.ok()) return fail(s, "pixels");
      Tensor u8 = Tensor::empty({3, 1, 768, 1344}, DType::kU8);
      for (int64_t i = 0; i < u8.numel(); ++i)
        u8.data<uint8_t>()[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, f32.data<float>()[i] * 255.0f)));
      frames.push_back(std::move(u8));
    }
    Tensor latent;
    auto run = [&]() -> Status {
      for (const Tensor& f : frames) {
        auto l = enc->encode_condition(f, 42);
        if (!l.ok()) return l.status();
        latent = std::move(*l);
      }
      return Status::Ok();
    };
    if (Status s = run(); !s.ok()) return fail(s, "vae warm-up");
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      const auto t = Clock::now();
      if (Status s = run(); !s.ok()) return fail(s, "vae encode");
      ms.push_back(ms_since(t));
      if (r == 0) refresh_clocks(env);
    }
    const Percentiles p = percentiles(ms);
    std::printf("VAE encode, 2 keyframes, latents %s each: p10 %.2f p50 %.2f p90 %.2f ms\n", latent.describe().c_str(),
                p.p10, p.p50, p.p90);
    rows.push_back(evidence_row(
        env, "vae_encode_2_keyframes_1344x768", "vortex-cuda encode_condition (tf32 conv3d)",
        "released vae config, tiling 256/64", p, {},
        {{"ms", ms}, {"latent_shape", shape_to_string(latent.shape())}, {"peak_device_bytes", be.memory_peak()}}));
  }
  const std::string path = evidence_path(out_dir, env, "fl2va-encoders");
  if (Status s = append_jsonl(path, rows); !s.ok()) return fail(s, "evidence");
  std::printf("evidence %s\n", path.c_str());
  return 0;
}
